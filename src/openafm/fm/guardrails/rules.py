"""Rules: the built-in rule table — word lists, the rules built from them, and the allow-listed phrases.

Why a Python table and not a data file (YAML): a rule is not a flat string but a composition in the
pattern language of ``patterns`` (``intent(near(verb list, object list, 3))``, word lists shared by
several rules, ``cue=METHOD_CUE`` for self-harm). A data file would need its own reference syntax and
a loader that rebuilds the same compositions, which is a second interpreter to test and a new
dependency, for no gain: the rules are code that ships with the package and is reviewed as code. So
this module is plain data in Python: no logic beyond calling the pattern builders.

Rule names are ``<category>.<rule>``; ``RuleSet.allow(rules=[...])`` switches them off by name. The
word lists and rules were written for openafm; why they look like this, what they let through and
what they miss is in docs/guardrails.md. In brief: objects are specific ("kill" needs a person, so
"kill a python process" passes; "bomb" is neutralized in "bath bomb", "bomb shelter", "photobomb"
by ``BUILTIN_ALLOW_PHRASES``), and the minors co-occurrence rule first blanks out reporting and
prevention phrases ("sex education", "sexual abuse", "sexual assault").
"""

from __future__ import annotations

from openafm.fm.guardrails.patterns import FILLER, METHOD_CUE, L, R, Rule, RuleKind, any_of, cooccur, intent, near, rule

# Word lists (written for openafm). Verbs carry their -ing forms where requests use them.
_MAKE = any_of("make", "making", "build", "building", "create", "creating", "assemble", "assembling",
             "construct", "constructing", r"synthesi[sz]e", r"synthesi[sz]ing", "synthesis", "produce",
             "producing", "production", "manufacture", "manufacturing", "cook", "cooking", "brew",
             "brewing", "mix", "mixing", "prepare", "preparing", "extract", "extracting", "purify",
             "purifying", "refine", "refining")
_RECIPE = any_of(r"recipes? (?:for|of)", r"synthesis (?:route|routes|of|for)", r"instructions (?:for|on)",
               r"ingredients (?:for|of)", r"formulas? (?:for|of)", r"blueprints? (?:for|of)")   # + the object itself
_CBRNE_VERB = any_of(_MAKE, r"weaponi[sz]e", r"weaponi[sz]ing", r"aerosoli[sz]e", r"aerosoli[sz]ing", "culture",
                   "culturing", "cultivate", "enrich", "enriching", "obtain", "acquire", "buy", "detonate",
                   "detonating", "deploy", "deploying", "release", "releasing", "disperse", "dispersing", "smuggle",
                   "rig", "plant", "planting", "set off")
_CBRNE_OBJECT = any_of(
    "sarin", "soman", "tabun", "cyclosarin", "vx", "novichok", r"nerve (?:agent|gas)s?", "mustard gas",
    "sulfur mustard", "phosgene", "chlorine gas", "hydrogen cyanide", "ricin", "abrin", r"botulinum(?: toxin)?",
    "anthrax", "smallpox", r"bioweapons?", r"biological weapons?", r"chemical weapons?",
    r"nuclear (?:bomb|weapon|warhead|device)s?", r"atomic bombs?", r"atom bombs?", r"dirty bombs?",
    r"radiological (?:weapon|dispersal device)s?", r"(?:weapons? grade|highly enriched) (?:uranium|plutonium)",
    r"(?:(?:pipe|car|nail|pressure cooker|letter) )?bombs?", "explosives", "an explosive",
    r"explosive (?:device|charge|vest|belt|mixture|compound)s?", r"improvised explosive devices?", r"ieds?",
    "tatp", "acetone peroxide", "hmtd", "nitroglycerin", "semtex", "c 4", r"molotov(?: cocktail)?s?",
    "napalm", r"detonators?", r"blasting caps?", r"grenades?", r"landmines?",
)
_PATHOGEN = any_of(r"virus(?:es)?", r"pathogens?", "bacteria", "bacterium", "flu", "influenza", r"strains?",
                 r"germs?", "h5n1", "ebola", "smallpox", "anthrax", "plague", "yersinia pestis", "bacillus anthracis",
                 r"toxins?", r"spores?")

_SEXUAL = any_of("have sex", "having sex", "had sex", "sex with", "talk dirty", "dirty talk",
               r"sex (?:scene|story|stories|act|acts|video|tape|chat)s?",
               r"sext(?:ing)? with", r"sexual(?:ly)? (?:content|act|acts|activity|roleplay|role play|story|fantasy"
               r"|images?|photos?|pictures?|videos?|relationship|touching|favou?rs?|explicit)", "sexy", r"nudes?",
               "naked", r"erotic(?:a)?", r"porn(?:o|ographic|ography)?", "intercourse", r"orgasms?", "lewd", "nsfw",
               r"explicit (?:story|content|images?|photos?|pics?|scene)s?", r"seduc(?:e|ing|tion)", "hentai",
               r"fetish(?:es)?", r"masturbat\w*", r"genitals?")
_MINOR = any_of(r"child(?:ren)?", r"kids?", "kiddie", r"minors?", "a minor", r"underage(?:d)?", r"pre ?teens?",
              r"tweens?", r"toddlers?", r"infants?", "baby", "babies", r"(?:little|young) (?:girl|boy)s?",
              r"school ?(?:girl|boy)s?", r"teens?", r"teenagers?", "teenage",
              r"(?:[1-9]|1[0-7]) ?(?:year|yr)s? ?old", r"aged? (?:[1-9]|1[0-7])",
              r"(?:youre|you are|she is|shes|he is|hes|im|i am) (?:[1-9]|1[0-7])"
              r"(?! (?:minutes|hours|feet|inches|kg|lbs|percent))", r"(?:elementary|middle) schoolers?")
_ABUSE_MATERIAL = any_of(r"child porn(?:ography)?", "kiddie porn", "csam", r"underage porn(?:ography)?",
                       r"child sexual abuse (?:material|images?|imagery|videos?|content)")

_SELF = r"(?:myself|my self)"
_PERSON = any_of("person", "people", "someone", "somebody", "anyone", "anybody", "him", "her", "them", "human",
               "humans", "man", "woman", "men", "women", "guy", "girl", "boy", "child", "children", "kid", "kids",
               "baby", "toddler", "wife", "husband", "spouse", "boyfriend", "girlfriend", "partner", "ex", "boss",
               "neighbor", "neighbour", "coworker", "colleague", "teacher", "classmate", "student", "mother",
               "father", "mom", "mum", "dad", "parents?", "brother", "sister", "son", "daughter", "family",
               "friend", "roommate", "stepdad", "stepmom", "president", "politician", "senator", "judge", "cop",
               "officer", "witness", "stranger", "landlord", "victim", r"pedestrians?", r"cyclists?")
_HARM_VERB = any_of("kill", "killing", "murder", "murdering", "poison", "poisoning", "strangle", "strangling",
                  "suffocate", "suffocating", "smother", "smothering", "stab", "stabbing", "shoot", "shooting",
                  "kidnap", "kidnapping", "abduct", "abducting", "assassinate", "assassinating", "torture",
                  "torturing", "maim", "drown", "drowning", "dismember", "hurt", "hurting", "harm", "harming",
                  "injure", "injuring", "attack", "attacking", "beat up", "run over", "choke", "choking")
_POISON = any_of(r"poisons?", r"toxins?", r"sedatives?", r"roofies", "rohypnol", "antifreeze", "cyanide", "arsenic",
               "thallium", "rat poison")
_DRINK = any_of(r"coffees?", r"teas?", r"drinks?", "food", r"meals?", "wine", "water", r"beers?", "soup", "dinner",
              "lunch")
_BODY = r"(?:corpse|corpses|dead body|dead bodies|bodies|body(?! (?:odou?r|fat|hair|acne|spray|lotion|wash|weight" \
        r"|butter|pain|image|language|shop|count|of water|temperature|mass)))"

_GROUP = any_of("jews", "jewish people", "muslims", "christians", "catholics", "hindus", "sikhs", "buddhists",
              "atheists", "blacks", "black people", "whites", "white people", "asians", "asian people", "arabs",
              "latinos", "latinas", "hispanics", "mexicans", "africans", "indians", "chinese people", "immigrants",
              "migrants", "refugees", "gays", "gay people", "lesbians", "bisexuals", "homosexuals", "trans people",
              "transgender people", "women", "men", "disabled people", "the disabled", "roma", "gypsies",
              "indigenous people")
_DEHUMANIZING = any_of("subhuman", "sub human", "vermin", "animals", "beasts", "parasites", "rats", "cockroaches",
                     "roaches", "insects", "a disease", "a plague", "a cancer", "a virus", "savages", "filth", "trash",
                     "garbage", "inferior", "not human", "less than human", "apes", "monkeys", "pigs", "dogs")
_EXTERMINATE = any_of("kill", "exterminate", "eradicate", "gas", "wipe out", "get rid of", "purge", "lynch", "hang",
                    "burn", "shoot", "slaughter", "massacre")

_DRUG = any_of("meth", "methamphetamine", "crystal meth", "crack cocaine", "cocaine", "heroin", "fentanyl",
             "carfentanil", "lsd", "mdma", "ghb", "pcp", "dmt", "krokodil", "desomorphine", "mephedrone",
             r"meth labs?")

_MALWARE_VERB = any_of("produce", "producing", "generate", "generating", "implement", "implementing", "craft",
                     "crafting", "write", "writing", "code", "coding", "create", "creating", "build", "building",
                     "make", "making", "develop", "developing", "program", "deploy", "deploying", "spread", "spreading",
                     "distribute", "distributing", "install", "installing", "launch", "launching", "sell",
                     "obfuscate", "set up")
_MALWARE = any_of("ransomware", r"key ?loggers?", r"botnets?", r"rootkits?", r"trojans?", r"trojan horses?",
                r"remote access trojans?", r"(?:computer|pc|windows|android|macro) virus(?:es)?",
                r"(?:computer|network|self propagating) worms?", "malware", "spyware", "stalkerware",
                r"info ?stealers?", r"(?:credential|password|cookie) stealers?", r"cryptojackers?", r"crypters?",
                r"exploit kits?", r"phishing (?:kit|page|site|website|email|emails|campaign|link)s?",
                r"zero day exploits?", r"polymorphic (?:code|malware|virus)")
_OTHERS = any_of("someones?", "somebodys?", "someone elses", "somebody elses", "his", "her", "their", "other peoples",
               "a strangers", r"(?:the|a|my) (?:school|company|companys|schools|government|governments|employers?)",
               r"my (?:ex|exs|ex \S+|wifes?|husbands?|girlfriends?|boyfriends?|partners?|boss|bosss|neighbou?rs?"
               r"|coworkers?|teachers?|friends?|sisters?|brothers?|moms?|dads?)")
_TARGET = any_of(r"accounts?", r"e ?mails?", "gmail", r"phones?", "iphone", "instagram", "facebook", "snapchat",
               "whatsapp", "tiktok", "wifi", "wi fi", "network", r"computers?", "laptop", r"servers?",
               r"databases?", "icloud", r"systems?", "webcam", "camera", "messages", "texts")
_SECRETS = any_of("passwords", "credentials", "credit card numbers", "card numbers", "cookies", "login details",
                "session tokens", "logins")

BUILTIN_RULES: tuple[Rule, ...] = (
    # weapons_mass_harm — BLOCK_ALWAYS
    rule("weapons_mass_harm.make_agent", RuleKind.INTENT, intent(any_of(
        near(_CBRNE_VERB, _CBRNE_OBJECT, 3), near(_RECIPE, _CBRNE_OBJECT, 2),
        near(any_of(r"weaponi[sz](?:e|ing)", r"aerosoli[sz](?:e|ing)"), _PATHOGEN, 3)))),
    rule("weapons_mass_harm.enhance_pathogen", RuleKind.INTENT, intent(any_of(
        near(any_of("make", "engineer", "modify", "mutate", "enhance", "evolve"), _PATHOGEN, 3)
        + r"(?: \S+){0,3} more (?:transmissible|lethal|contagious|virulent|deadly|infectious)",
        r"(?:increase|increasing|boost|boosting|enhance|enhancing) the (?:transmissibility|virulence|lethality)"
        r" of"))),
    # sexual_minors — BLOCK_ALWAYS
    rule("sexual_minors.sexual_with_minor", RuleKind.COOCCURRENCE, cooccur(_SEXUAL, _MINOR, 10), unless=(
        "sex education", "sex ed", "sexual health", r"sex(?:ual)? abuse", "sexually abused", "sexual exploitation",
        "sexual assault", "sexually assaulted", r"sex offenders?", "sex trafficking", "sexual harassment",
        "sexual orientation", "sexual development", "naked eye", r"naked mole rats?", r"nude (?:colou?r|shade)s?",
        _ABUSE_MATERIAL)),
    rule("sexual_minors.seek_abuse_material", RuleKind.INTENT, intent(near(any_of(
        "find", "finding", "download", "downloading", "get", "buy", "access", "share", "sharing", "trade",
        "view", "watch", "make", "making", "produce", "create", "sell", "distribute"), _ABUSE_MATERIAL, 2))),
    rule("sexual_minors.grooming", RuleKind.INTENT, intent(
        near(any_of("get", "convince", "persuade", "lure", "trick", "groom", "grooming"), _MINOR, 3)
        + r"(?: \S+){0,4} (?:meet (?:me|up)(?: \S+){0,2} (?:alone|in private|secretly)"
          r"|without (?:her|his|their) parents (?:knowing|finding out)|(?:not|never) tell (?:her|his|their) parents)")),
    # self_harm — BLOCK_ALWAYS
    rule("self_harm.method", RuleKind.INTENT, intent(any_of(
        any_of("kill", "killing", "hurt", "hurting", "harm", "harming", "cut", "cutting", "hang", "hanging",
             "poison", "poisoning", "drown", "drowning", "shoot", "shooting", "starve", "starving", "burn",
             "burning", "strangle", "suffocate", "overdose") + " " + _SELF,
        r"(?:commit|committing) suicide", r"(?:end|ending|take|taking) my (?:own )?life",
        r"overdose (?:on|intentionally|on purpose)", r"die (?:painlessly|quickly|without pain|in my sleep)"),
        cue=METHOD_CUE)),
    rule("self_harm.pills_to_die", RuleKind.PATTERN,
          r"\bhow many (?:\S+ ){0,3}(?:pills|tablets|capsules|mg|milligrams|grams)(?: \S+){0,6} "
          r"(?:to die|to kill myself|to end my life|to not wake up|(?:would|will) kill me)\b"),
    rule("self_harm.encouragement", RuleKind.PATTERN, any_of(
        r"\b(?:you should|u should|you need to|go|just|why dont you|pls|please|plz) (?:go )?(?:kill (?:yourself|"
        r"urself|your self)|hang yourself|end your (?:own )?life|off yourself|commit suicide|cut yourself)\b",
        r"\bkys\b",
        r"\b(?:nobody|no one) (?:would|will) (?:miss|care about) you if you (?:died|were dead|killed yourself)\b",
        r"\b(?:the world|everyone) (?:would|will) be better off (?:without you|if you (?:died|were dead))\b")),
    # violent_wrongdoing — BLOCK_BY_DEFAULT
    rule("violent_wrongdoing.harm_person", RuleKind.INTENT, intent(near(_HARM_VERB, _PERSON, 3)),
          unless=(r"hurt (?:his|her|their|your|my|someones|somebodys) feelings",)),
    rule("violent_wrongdoing.conceal_killing", RuleKind.INTENT, intent(any_of(
        near(any_of("hide", "hiding", "dispose of", "disposing of", "get rid of", "dissolve", "dissolving",
                   "bury", "burying"), _BODY, 2),
        r"get away with (?:murder|murdering|killing|poisoning)(?: \S+){0,2} " + _PERSON))),
    rule("violent_wrongdoing.threat", RuleKind.PATTERN,
          r"\b(?:i will|ill|i am going to|im going to|im gonna|i am gonna)(?: \S+){0,2} "
          r"(?:kill|murder|stab|shoot|strangle|hurt) (?:you|u|ya|your (?:family|kids|children|wife|husband))\b"),
    rule("violent_wrongdoing.covert_poisoning", RuleKind.PATTERN, any_of(
        rf"{L}{_POISON}(?: \S+){{0,8}} (?:in|into) (?:\S+ ){{0,2}}{_DRINK}{R}",
        rf"{L}spik(?:e|ing) (?:\S+ ){{0,2}}{_DRINK}{R}",
        rf"{L}(?:(?:untraceable|undetectable) {_POISON}|{_POISON} (?:that|which) (?:\S+ ){{0,2}}"
        rf"(?:be detected|show up|leave no trace|be traced)){R}")),
    rule("violent_wrongdoing.staged_death", RuleKind.PATTERN,
          r"\bmake (?:it|the death|his death|her death|their death|the murder|the killing) look like "
          r"(?:an accident|a suicide|suicide|natural causes)\b"),
    # hate_harassment — BLOCK_BY_DEFAULT
    rule("hate_harassment.dehumanize", RuleKind.PATTERN,
          rf"{L}{_GROUP} (?:are|r|is) (?:all |just |nothing but |no better than |literally )*{_DEHUMANIZING}{R}"),
    rule("hate_harassment.violence_call", RuleKind.PATTERN, any_of(
        rf"(?:{L}(?:we should|we must|we need to|lets|let us|you should|everyone should|someone should|"
        rf"somebody should|time to|i want to|we will|need to)(?: \S+)? |^(?:{FILLER} )*){_EXTERMINATE} "
        rf"(?:all )?(?:the |those |these |of the )?{_GROUP}{R}",
        rf"{L}death to (?:all )?(?:the )?{_GROUP}{R}",
        rf"{L}{_GROUP} (?:should|must|deserve to|need to|ought to) (?:all )?(?:die|be killed|be exterminated|"
        rf"be gassed|be wiped out|be eradicated|burn|hang|be lynched|be shot){R}")),
    # illegal_drug_manufacture — BLOCK_BY_DEFAULT
    rule("illegal_drug_manufacture.make_drug", RuleKind.INTENT, intent(any_of(
        near(any_of(_MAKE, "set up", "start", "run", "freebase"), _DRUG, 3), near(_RECIPE, _DRUG, 2),
        r"(?:convert|reduce|extract)(?: \S+){0,2} pseudoephedrine"))),
    # malware_cyberattack — BLOCK_BY_DEFAULT
    rule("malware_cyberattack.make_malware", RuleKind.INTENT, intent(near(_MALWARE_VERB, _MALWARE, 3))),
    rule("malware_cyberattack.break_in", RuleKind.INTENT, intent(
        any_of("hack", "hacking", "hack into", "hacking into", "break into", "breaking into", "get into",
             "getting into", "spy on", "spying on", "read", "reading", "monitor", "monitoring",
             "track", "tracking", "clone", "cloning", "access", "accessing", "log into", "hijack", "hijacking")
        + rf" {_OTHERS}(?: \S+){{0,2}} {_TARGET}")),
    rule("malware_cyberattack.steal_credentials", RuleKind.INTENT, intent(
        near(any_of("steal", "stealing", "harvest", "harvesting", "dump", "dumping", "grab", "grabbing", "sniff",
                   "sniffing", "phish", "phishing"), _SECRETS, 3))),
    rule("malware_cyberattack.evade_or_ddos", RuleKind.INTENT, intent(any_of(
        r"(?:bypass|bypassing|evade|evading)(?: \S+){0,2} (?:antivirus|anti virus|av|edr|windows defender|defender)",
        r"(?:ddos|d dos)(?: \S+){0,3} (?:\S+ )?(?:website|site|server|network|game server)s?"))),
)

BUILTIN_ALLOW_PHRASES: tuple[str, ...] = (   # benign compounds that contain a blocked word
    "bath bomb", "bath bombs", "photo bomb", "photobomb", "bomb shelter", "bomb shelters", "bomb calorimeter",
    "f bomb", "da bomb", "bomb squad", "bomb disposal", "bomb threat", "kill time", "killing time",
    "kill the lights", "kill switch", "kill a process", "kill the process", "kill command", "kill signal",
    "poison pill", "poison ivy", "poison oak", "child process", "child processes", "bomb ass",
)
