"""The vocabulary of the guided-generation data (data/guided.py): word tables, the fields an object may have
(each a kind of value with its names, descriptions and a maker of realistic values) and the concepts (object
types) built from them. Everything here is plain data; all randomness comes from the caller's `random.Random`.

Written for this generator alone: no table, concept or pattern is taken from a benchmark's types.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

FIRST = ("Ada", "Bruno", "Chen", "Dara", "Elif", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kofi", "Lena", "Mateo",
         "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Vera", "Wes", "Xin", "Yara", "Zane",
         "Aiko", "Beatriz", "Cyrus", "Dmitri", "Esme", "Felix", "Greta", "Hugo", "Ingrid", "Jonas", "Kira", "Luca")
LAST = ("Abbott", "Baker", "Castillo", "Diaz", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito", "Jensen", "Kowalski",
        "Lopez", "Moreau", "Nakamura", "Okafor", "Petrov", "Quint", "Rossi", "Singh", "Tanaka", "Usman", "Varga",
        "Weber", "Young", "Zhang", "Novak", "Silva", "Mensah", "Larsen", "Costa")
CITIES = (("Lisbon", "Portugal"), ("Osaka", "Japan"), ("Lagos", "Nigeria"), ("Lyon", "France"), ("Denver", "USA"),
          ("Krakow", "Poland"), ("Porto", "Portugal"), ("Seoul", "South Korea"), ("Quito", "Ecuador"),
          ("Tallinn", "Estonia"), ("Perth", "Australia"), ("Nairobi", "Kenya"), ("Leeds", "UK"), ("Hanoi", "Vietnam"),
          ("Bergen", "Norway"), ("Austin", "USA"), ("Cusco", "Peru"), ("Graz", "Austria"), ("Pune", "India"),
          ("Halifax", "Canada"), ("Seville", "Spain"), ("Tbilisi", "Georgia"), ("Malmo", "Sweden"),
          ("Accra", "Ghana"), ("Turin", "Italy"), ("Busan", "South Korea"), ("Cork", "Ireland"))
STREETS = ("Maple Street", "Harbor Road", "Elm Avenue", "Station Lane", "Mill Road", "Rue Verte", "Hill Street",
           "Park Lane", "Canal Walk", "Cedar Court", "Bridge Street", "Orchard Way", "Market Square")
ADJ = ("Silent", "Golden", "Hidden", "Little", "Crimson", "Bright", "Last", "Wild", "Quiet", "Lost", "Northern",
       "Paper", "Electric", "Velvet", "Broken", "Distant", "Copper", "Salt", "Winter", "Hollow")
NOUN = ("River", "Garden", "Harbor", "Lantern", "Orchard", "Signal", "Mountain", "Compass", "Island", "Letter",
        "Forest", "Engine", "Mirror", "Bridge", "Meadow", "Clock", "Tide", "Window", "Anchor", "Canyon")
BRANDS = ("Nordwave", "Pixelfox", "Greenleaf", "Bluepeak", "Orbitek", "Sunbeam", "Ironbark", "Cloudnest", "Tidal",
          "Maplecore", "Brightline", "Stonefield")
PRODUCTS = ("desk lamp", "water bottle", "backpack", "wireless mouse", "rain jacket", "coffee grinder", "yoga mat",
            "travel mug", "bike helmet", "phone stand", "notebook", "tea kettle", "camping stove", "headphones")
FOODS = ("lentils", "basil", "tofu", "rice", "salmon", "chickpeas", "spinach", "mushrooms", "lemon", "garlic",
         "oats", "honey", "paprika", "yogurt", "tomatoes", "ginger", "noodles", "almonds")
SKILLS = ("welding", "public speaking", "python", "carpentry", "first aid", "negotiation", "photography", "baking",
          "spanish", "data analysis", "sailing", "illustration", "bookkeeping", "gardening")
HOBBIES = ("chess", "climbing", "pottery", "birdwatching", "running", "knitting", "surfing", "origami", "jazz",
           "board games", "cycling", "painting")
WORDS = ("quick", "cozy", "rare", "local", "modern", "classic", "seasonal", "budget", "premium", "handmade",
         "vintage", "family", "outdoor", "organic", "compact", "popular")
ANIMALS = ("otter", "falcon", "gecko", "badger", "heron", "lynx", "tortoise", "beagle", "parrot", "hamster")
PET_NAMES = ("Biscuit", "Pepper", "Luna", "Ziggy", "Mochi", "Olive", "Rocket", "Pickles", "Nova", "Tofu")
INSTRUMENTS = ("cello", "drums", "trumpet", "banjo", "piano", "violin", "bass guitar", "flute", "accordion")
MATERIALS = ("oak", "steel", "glass", "linen", "bamboo", "leather", "ceramic", "aluminium", "wool", "cork")
ROLES = ("designer", "nurse", "pilot", "chef", "engineer", "teacher", "librarian", "plumber", "analyst", "editor")
SENTENCES = ("Great for small spaces.", "Opens early on weekends.", "Needs a quick review.", "Bring a warm coat.",
             "Best enjoyed fresh.", "Booked months ahead.", "Runs on two batteries.", "Quiet and well lit.",
             "A local favourite.", "Ships within a week.", "Suitable for beginners.", "Closed on holidays.")


def person(r: random.Random) -> str:
    return f"{r.choice(FIRST)} {r.choice(LAST)}"


def title(r: random.Random) -> str:
    return r.choice((f"The {r.choice(ADJ)} {r.choice(NOUN)}", f"{r.choice(ADJ)} {r.choice(NOUN)}",
                     f"{r.choice(NOUN)} of {r.choice(CITIES)[0]}", f"A {r.choice(ADJ)} {r.choice(NOUN)}"))


def _digits(r: random.Random, n: int) -> str:
    return "".join(r.choice("0123456789") for _ in range(n))


def _letters(r: random.Random, n: int, alphabet: str = "ABCDEFGHJKLMNPRSTUVWXYZ") -> str:
    return "".join(r.choice(alphabet) for _ in range(n))


# ---- fields: kinds of value ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Text:
    """A free string; `plural` names the field when it is a list of such strings (empty: never a list)."""
    names: tuple[str, ...]
    descriptions: tuple[str, ...]
    make: Callable[[random.Random], str]
    plural: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Choice:
    """One of a closed set of strings: an anyOf guide, a generable enum type (`type_name`), or list items."""
    names: tuple[str, ...]
    descriptions: tuple[str, ...]
    values: tuple[str, ...]
    type_name: str
    plural: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Pattern:
    """A string guided by a regex; `make` writes a value the whole regex matches."""
    names: tuple[str, ...]
    descriptions: tuple[str, ...]
    regex: str
    make: Callable[[random.Random], str]
    plural: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Integer:
    names: tuple[str, ...]
    descriptions: tuple[str, ...]
    low: int
    high: int
    plural: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Number:
    names: tuple[str, ...]
    descriptions: tuple[str, ...]
    low: float
    high: float
    digits: int = 2


@dataclasses.dataclass(frozen=True)
class Flag:
    names: tuple[str, ...]
    descriptions: tuple[str, ...]


Field = Text | Choice | Pattern | Integer | Number | Flag

FIELDS: dict[str, Field] = {
    "person": Text(("name", "full_name", "owner", "contact_name"), ("Full name", "The person's name", "Who it is"),
                   person, ("members", "guests", "organizers", "speakers")),
    "first": Text(("first_name", "nickname", "given_name"), ("First name", "What friends call them"),
                  lambda r: r.choice(FIRST), ("first_names",)),
    "city": Text(("city", "hometown", "town"), ("City", "The city it is in"), lambda r: r.choice(CITIES)[0],
                 ("cities", "stops", "destinations")),
    "country": Text(("country", "nation"), ("Country", "Country name"), lambda r: r.choice(CITIES)[1],
                    ("countries",)),
    "street": Text(("street", "address_line"), ("Street and house number", "First address line"),
                   lambda r: f"{r.randint(1, 240)} {r.choice(STREETS)}"),
    "title": Text(("title", "name", "headline"), ("Title", "Its name", "A short title"), title, ("titles",)),
    "brand": Text(("brand", "maker", "manufacturer"), ("Brand name", "Who makes it"), lambda r: r.choice(BRANDS),
                  ("brands",)),
    "product": Text(("product", "item", "product_name"), ("What is sold", "Product name"),
                    lambda r: f"{r.choice(BRANDS)} {r.choice(PRODUCTS)}", ("products", "items")),
    "food": Text(("ingredient", "main_ingredient", "food"), ("An ingredient", "Main ingredient"),
                 lambda r: r.choice(FOODS), ("ingredients", "foods", "toppings")),
    "skill": Text(("skill", "specialty"), ("A skill", "Main specialty"), lambda r: r.choice(SKILLS),
                  ("skills", "specialties")),
    "hobby": Text(("hobby", "pastime"), ("A hobby", "Favourite pastime"), lambda r: r.choice(HOBBIES),
                  ("hobbies", "interests")),
    "tag": Text(("tag", "label", "keyword"), ("A short tag", "One keyword"), lambda r: r.choice(WORDS),
                ("tags", "labels", "keywords")),
    "animal": Text(("species", "animal"), ("Kind of animal", "Species"), lambda r: r.choice(ANIMALS),
                   ("animals", "species_seen")),
    "pet": Text(("pet_name", "name"), ("The pet's name", "Name"), lambda r: r.choice(PET_NAMES), ("pet_names",)),
    "instrument": Text(("instrument",), ("Instrument played", "Main instrument"), lambda r: r.choice(INSTRUMENTS),
                       ("instruments",)),
    "material": Text(("material",), ("Main material", "What it is made of"), lambda r: r.choice(MATERIALS),
                     ("materials",)),
    "role": Text(("role", "job", "occupation"), ("Job title", "What they do"), lambda r: r.choice(ROLES),
                 ("roles",)),
    "note": Text(("note", "summary", "comment", "remark"), ("A short note", "One-sentence summary"),
                 lambda r: r.choice(SENTENCES), ("notes", "highlights")),
    "status": Choice(("status", "state"), ("Current status", "Where it stands"),
                     ("draft", "active", "paused", "done", "archived", "pending"), "Status"),
    "priority": Choice(("priority", "urgency"), ("How urgent it is", "Priority"),
                       ("low", "medium", "high", "urgent"), "Priority"),
    "size": Choice(("size",), ("Size", "How big it is"), ("small", "medium", "large", "extra large"), "Size",
                   ("sizes",)),
    "level": Choice(("level", "difficulty"), ("Difficulty", "Skill level needed"),
                    ("beginner", "intermediate", "advanced", "expert"), "Level"),
    "season": Choice(("season",), ("Season", "Best season"), ("spring", "summer", "autumn", "winter"), "Season",
                     ("seasons",)),
    "weekday": Choice(("day", "weekday"), ("Day of the week", "Which day"),
                      ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"), "Weekday",
                      ("days", "open_days")),
    "color": Choice(("color", "colour"), ("Main colour", "Colour"),
                    ("red", "blue", "green", "black", "white", "yellow", "grey"), "Color", ("colors",)),
    "cuisine": Choice(("cuisine",), ("Kind of food", "Cuisine"),
                      ("italian", "thai", "mexican", "japanese", "ethiopian", "greek", "indian"), "Cuisine",
                      ("cuisines",)),
    "mood": Choice(("mood", "tone"), ("Overall mood", "Tone"), ("calm", "cheerful", "tense", "gloomy", "playful"),
                   "Mood"),
    "currency": Choice(("currency",), ("Currency code", "Currency"), ("EUR", "USD", "GBP", "JPY", "CHF"),
                       "Currency"),
    "format": Choice(("format", "medium"), ("Format", "In what form"),
                     ("paperback", "hardcover", "ebook", "audiobook"), "Format", ("formats",)),
    "transport": Choice(("transport", "travel_mode"), ("How to get there", "Means of travel"),
                        ("train", "bus", "car", "bike", "ferry", "on foot"), "Transport", ("transports",)),
    "date": Pattern(("date", "start_date", "due_date", "released"), ("Date as YYYY-MM-DD", "When, as an ISO date"),
                    r"\d{4}-\d{2}-\d{2}", lambda r: f"{r.randint(1990, 2030)}-{r.randint(1, 12):02d}-"
                                                    f"{r.randint(1, 28):02d}", ("dates",)),
    "clock": Pattern(("time", "opens_at", "starts_at"), ("Time as HH:MM", "24-hour time"), r"\d{2}:\d{2}",
                     lambda r: f"{r.randint(6, 22):02d}:{r.choice((0, 15, 30, 45)):02d}", ("times",)),
    "sku": Pattern(("sku", "code", "part_number"), ("Stock code", "Catalogue code"), r"[A-Z]{3}-\d{4}",
                   lambda r: f"{_letters(r, 3)}-{_digits(r, 4)}", ("codes",)),
    "postcode": Pattern(("postcode", "zip_code"), ("Five-digit postal code", "Postal code"), r"\d{5}",
                        lambda r: _digits(r, 5)),
    "hex": Pattern(("hex_color", "accent"), ("Colour as #rrggbb", "Hex colour"), r"#[0-9a-f]{6}",
                   lambda r: "#" + "".join(r.choice("0123456789abcdef") for _ in range(6)), ("palette",)),
    "version": Pattern(("version", "release"), ("Semantic version", "Version number"), r"\d+\.\d+\.\d+",
                       lambda r: f"{r.randint(0, 4)}.{r.randint(0, 12)}.{r.randint(0, 9)}", ("versions",)),
    "slug": Pattern(("slug", "handle_slug"), ("URL slug in lowercase words", "Lowercase words joined by dashes"),
                    r"[a-z]+(-[a-z]+)*", lambda r: "-".join(r.sample(WORDS, r.randint(1, 3))), ("slugs",)),
    "phone": Pattern(("phone", "phone_number"), ("Phone as 555-123-4567", "Phone number"), r"\d{3}-\d{3}-\d{4}",
                     lambda r: f"{_digits(r, 3)}-{_digits(r, 3)}-{_digits(r, 4)}", ("phones",)),
    "username": Pattern(("username", "handle"), ("Lowercase user name", "Handle"), r"[a-z][a-z0-9_]{2,11}",
                        lambda r: r.choice(FIRST).lower() + r.choice(("", "_", "")) + _digits(r, r.randint(0, 3)),
                        ("usernames",)),
    "email": Pattern(("email", "contact_email"), ("Email address", "Where to write"),
                     r"[a-z]+\.[a-z]+@[a-z]+\.(com|org|net)",
                     lambda r: f"{r.choice(FIRST).lower()}.{r.choice(LAST).lower()}@{r.choice(BRANDS).lower()}."
                               f"{r.choice(('com', 'org', 'net'))}", ("emails",)),
    "number_id": Pattern(("order_number", "ticket_number", "record_id"), ("Number made of digits", "Reference"),
                         r"\d+", lambda r: _digits(r, r.randint(3, 6))),
    "plate": Pattern(("plate", "registration"), ("Licence plate as ABC 123", "Registration"), r"[A-Z]{3} \d{3}",
                     lambda r: f"{_letters(r, 3)} {_digits(r, 3)}"),
    "initials": Pattern(("initials",), ("Initials such as J.K.", "Initials"), r"[A-Z]\.[A-Z]\.",
                        lambda r: f"{r.choice(FIRST)[0]}.{r.choice(LAST)[0]}."),
    "age": Integer(("age",), ("Age in years", "How old"), 1, 95, ("ages",)),
    "year": Integer(("year", "founded", "built"), ("Year", "Year it began"), 1850, 2025, ("years",)),
    "count": Integer(("quantity", "count", "amount"), ("How many", "Number of units"), 1, 24, ("quantities",)),
    "rating": Integer(("rating", "stars"), ("Rating from 1 to 5", "Stars"), 1, 5, ("ratings",)),
    "score": Integer(("score", "points"), ("Score out of 100", "Points"), 0, 100, ("scores",)),
    "minutes": Integer(("minutes", "duration_minutes", "prep_time"), ("Length in minutes", "Minutes needed"),
                       5, 240),
    "capacity": Integer(("capacity", "seats"), ("How many people fit", "Seats"), 8, 5000),
    "pages": Integer(("pages", "page_count"), ("Number of pages", "Length in pages"), 24, 900),
    "floor": Integer(("floor", "level_number"), ("Floor number", "Which floor"), 0, 40),
    "population": Integer(("population", "residents"), ("Number of residents", "Population"), 500, 4000000),
    "price": Number(("price", "cost"), ("Price", "What it costs"), 0.5, 480.0, 2),
    "weight": Number(("weight_kg", "weight"), ("Weight in kilograms", "Mass in kg"), 0.1, 90.0, 1),
    "height": Number(("height_m", "height"), ("Height in metres", "How tall, in metres"), 0.2, 3.0, 2),
    "temperature": Number(("temperature", "temp_c"), ("Temperature in Celsius", "Degrees C"), -15.0, 42.0, 1),
    "latitude": Number(("latitude", "lat"), ("Latitude", "Degrees north"), -60.0, 70.0, 4),
    "longitude": Number(("longitude", "lon"), ("Longitude", "Degrees east"), -170.0, 170.0, 4),
    "percent": Number(("percent", "share", "discount"), ("Percentage", "Share in percent"), 0.0, 100.0, 1),
    "distance": Number(("distance_km", "length_km"), ("Distance in kilometres", "Length in km"), 0.3, 250.0, 1),
    "score_f": Number(("average", "mean_score"), ("Average score", "Mean from 1 to 5"), 1.0, 5.0, 1),
    "available": Flag(("available", "in_stock"), ("Whether it can be had now", "In stock")),
    "open": Flag(("is_open", "open_now"), ("Open right now", "Whether it is open")),
    "veg": Flag(("vegetarian", "vegan"), ("Meat-free", "Whether it has no meat")),
    "verified": Flag(("verified", "confirmed"), ("Whether it was checked", "Confirmed")),
    "done": Flag(("completed", "finished"), ("Whether it is complete", "Finished")),
    "public": Flag(("public", "is_public"), ("Visible to everyone", "Public")),
    "indoor": Flag(("indoor", "covered"), ("Under a roof", "Indoors")),
    "paid": Flag(("paid", "is_paid"), ("Whether it was paid", "Paid")),
}


@dataclasses.dataclass(frozen=True)
class Concept:
    """An object type: its names, descriptions ("A ..."), the fields it may have (keys of FIELDS), the concepts
    that may nest inside it (keys of CONCEPTS) and, for a tree-like concept, the names of a list of itself."""
    names: tuple[str, ...]
    descriptions: tuple[str, ...]
    fields: tuple[str, ...]
    parts: tuple[str, ...] = ()
    children: tuple[str, ...] = ()


CONCEPTS: dict[str, Concept] = {
    "place": Concept(("Location", "Place"), ("A place on the map", "Where something is"),
                     ("street", "city", "country", "postcode", "latitude", "longitude")),
    "contact": Concept(("ContactCard", "ContactInfo"), ("How to reach someone", "Contact details"),
                       ("person", "email", "phone", "username", "city")),
    "money": Concept(("Price", "Amount"), ("A sum of money", "A price with its currency"), ("price", "currency")),
    "schedule": Concept(("OpeningHours", "Slot"), ("When it is open", "A time slot"), ("weekday", "clock", "minutes")),
    "review": Concept(("CustomerReview", "Rating"), ("A customer review", "What a visitor thought"),
                      ("person", "rating", "note", "date", "verified")),
    "pet": Concept(("Companion", "Animal"), ("A pet", "An animal in someone's care"),
                   ("pet", "animal", "age", "weight", "color")),
    "person": Concept(("Person", "Member", "Guest"), ("A person", "Someone taking part", "A member"),
                      ("person", "age", "role", "city", "email", "hobby", "skill"), ("contact", "pet", "place")),
    "product": Concept(("ShopItem", "Gadget"), ("A product in a shop", "An item for sale"),
                       ("product", "brand", "price", "sku", "color", "size", "available", "rating", "material",
                        "tag", "weight"), ("money", "review")),
    "event": Concept(("Event", "Meetup", "Workshop"), ("An event", "A meetup", "A workshop session"),
                     ("title", "date", "clock", "capacity", "level", "indoor", "public", "city", "tag"),
                     ("place", "schedule", "person", "contact")),
    "restaurant": Concept(("Restaurant", "Cafe"), ("A place to eat", "A small restaurant"),
                          ("title", "cuisine", "rating", "open", "veg", "phone", "price", "city"),
                          ("place", "schedule", "review", "contact")),
    "dish": Concept(("Dish", "MenuDish"), ("A dish on a menu", "Something to eat"),
                    ("title", "food", "price", "veg", "minutes", "cuisine", "rating"), ("money",)),
    "trip": Concept(("Trip", "Journey", "Itinerary"), ("A trip", "A journey with stops", "A travel plan"),
                    ("title", "city", "country", "date", "distance", "transport", "season", "count"),
                    ("place", "person", "money")),
    "novel": Concept(("Novel", "Publication"), ("A novel", "A published work"),
                     ("title", "person", "year", "pages", "format", "mood", "score_f", "tag"), ("review", "person")),
    "album": Concept(("Album", "Record"), ("A music album", "A record by a band"),
                     ("title", "person", "year", "minutes", "instrument", "mood", "rating"), ("person", "review")),
    "film": Concept(("Film", "Movie"), ("A film", "A movie to watch"),
                    ("title", "year", "minutes", "person", "mood", "score", "country"), ("person", "review")),
    "house": Concept(("Apartment", "House", "Listing"), ("A flat to rent", "A house for sale", "A property listing"),
                     ("street", "city", "floor", "price", "capacity", "available",
                      "date", "size"), ("place", "contact", "money")),
    "vehicle": Concept(("Vehicle", "Bicycle", "Car"), ("A vehicle", "A used bicycle", "A car for sale"),
                       ("brand", "year", "plate", "color", "price", "weight", "available"), ("contact", "money")),
    "city": Concept(("Town", "CityProfile"), ("A town", "A profile of a city"),
                    ("city", "country", "population", "latitude", "longitude", "temperature", "season"),
                    ("place", "person")),
    "order": Concept(("Order", "Purchase"), ("A customer order", "A purchase"),
                     ("number_id", "date", "status", "paid", "count", "email"), ("product", "contact", "money")),
    "ticket": Concept(("SupportTicket", "Issue"), ("A support ticket", "A reported problem"),
                      ("number_id", "title", "priority", "status", "date", "username", "note"), ("contact",)),
    "plant": Concept(("Plant", "Houseplant"), ("A plant", "A houseplant and its care"),
                     ("title", "height", "season", "temperature", "indoor", "size", "note")),
    "course": Concept(("Course", "Class"), ("A training course", "A class one can take"),
                      ("title", "level", "weekday", "clock", "minutes", "capacity", "price", "skill"),
                      ("person", "schedule", "place")),
    "package": Concept(("Library", "Plugin"), ("A software library", "A plugin for an app"),
                       ("slug", "version", "person", "date", "public", "tag", "score"), ("contact",)),
    "theme": Concept(("Theme", "ColorScheme"), ("A colour theme", "A design palette"),
                     ("title", "hex", "color", "mood", "public")),
    "athlete": Concept(("Athlete", "Runner"), ("An athlete", "A runner and their results"),
                       ("person", "age", "country", "score", "distance", "initials", "height"), ("contact",)),
}

# Tree-like concepts: the type holds a list of itself (field names in `children`) beside a few fields.
CONCEPTS.update({
    "part": Concept(("Part", "Assembly"), ("A machine part and its components", "An assembly of parts"),
                    ("title", "sku", "material", "weight", "count"), children=("components", "subparts")),
    "menu": Concept(("MenuEntry", "NavItem"), ("A menu entry and its submenu", "A navigation link with sub-links"),
                    ("title", "slug", "public"), children=("submenu", "children", "links")),
    "section": Concept(("Section", "Chapter"), ("A document section and its subsections", "A chapter outline"),
                       ("title", "pages", "note", "done"), children=("subsections", "sections")),
    "unit": Concept(("Department", "Unit"), ("A department and its units", "An organisational unit"),
                    ("title", "person", "capacity", "city"), children=("units", "divisions")),
    "taxon": Concept(("Taxon", "Clade"), ("A group of living things and its subgroups",
                                         "A branch of a family tree of species"),
                     ("title", "animal", "year", "population"), children=("subgroups", "branches")),
    "dependency": Concept(("Dependency", "Package"), ("A software package and the packages it needs",
                                                      "A dependency tree"),
                          ("slug", "version", "public", "date"), children=("requires", "dependencies")),
    "idea": Concept(("Idea", "MindMapNode"), ("An idea and the ideas branching from it", "A mind-map node"),
                    ("title", "tag", "priority", "note"), children=("branches", "children")),
    "question": Concept(("SurveyQuestion", "Prompt"), ("A survey question and its follow-up questions",
                                                       "A question tree"),
                        ("title", "level", "rating", "verified"), children=("follow_ups", "next_questions")),
    "trail": Concept(("Trail", "Path"), ("A hiking trail and its side trails", "A path and the paths off it"),
                     ("title", "distance", "level", "season", "open"), children=("side_trails", "spurs")),
    "account": Concept(("LedgerAccount", "Budget"), ("A ledger account and its sub-accounts",
                                                     "A budget and its parts"),
                       ("title", "price", "currency", "paid"), children=("sub_accounts", "lines")),
    "genre": Concept(("Genre", "Style"), ("A music genre and its subgenres", "A style and the styles it spawned"),
                     ("title", "year", "mood", "instrument"), children=("subgenres", "offshoots")),
    "module": Concept(("Module", "Component"), ("A code module and its submodules", "A software component tree"),
                      ("slug", "version", "person", "score"), children=("submodules", "components")),
})

# The field names of a nested concept: (one of it, a list of it).
PART_NAMES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "place": (("location", "where", "site"), ("locations", "stops", "sites")),
    "contact": (("contact", "support", "owner_contact"), ("contacts",)),
    "money": (("price_info", "fee", "total"), ("prices", "fees")),
    "schedule": (("hours", "slot", "timing"), ("opening_hours", "slots", "sessions")),
    "review": (("review", "top_review"), ("reviews",)),
    "pet": (("pet", "companion"), ("pets",)),
    "person": (("host", "organizer", "author", "captain", "guide", "lead"), ("attendees", "authors", "cast", "crew")),
    "product": (("product", "featured_item"), ("items", "products", "line_items")),
}

# Field names for an optional single reference of a tree concept to itself.
SELF_NAMES = ("parent", "based_on", "replaces", "follows")

PROMPTS = ("Invent an example: {d}.", "Describe {d}.", "Give me {d}.", "Create {d}.", "Make up {d}.",
           "Generate {d}.", "I need {d} for a demo.", "Write {d} as structured data.", "Come up with {d}.",
           "Please produce {d}.", "Fill in {d}.", "An example of {d}, please.", "Invent {d} for a story.",
           "Sketch out {d}.", "Show me {d}.", "Think up {d} for a test.")
TYPE_PROMPTS = ("Create {a} {t} object.", "Return one {t}.", "Generate {a} {t}.",
                "Fill in {a} {t} with example values.")
