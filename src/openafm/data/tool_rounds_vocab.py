"""The vocabulary of the tool-round data (data/tool_rounds.py): the 24 tool families (each a tool's arguments, how a
call is drawn, what it returns, its question and answer templates), the small tables and arithmetic they answer from,
and the templates of no-call questions and follow-ups. Everything here is plain data and the lookups over it; all
randomness comes from the caller's `random.Random`.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import random
from collections.abc import Callable

TODAY = datetime.date(2025, 3, 14)                                  # days_until counts from here
NOW_UTC = datetime.datetime(2025, 3, 14, 15, 30)                   # get_local_time's clock


@dataclasses.dataclass(frozen=True, eq=False)
class Family:
    """One tool: its arguments (name, type, description, guide keywords), how a call is drawn and answered."""
    name: str
    description: str
    args: tuple[tuple[str, type, str, dict], ...]
    draw: Callable[[random.Random], dict]     # the arguments of one call, in `args` order
    run: Callable[[dict], dict]               # arguments -> result values (ValueError on an unknown value)
    questions: tuple[str, ...]                # .format_map(arguments | result); each starts with a plain word
    answer: str                               # .format_map(arguments | result)
    brief: str                                # the key value alone, for "just the short version"
    keys: tuple[str, ...]                     # the result values every answer must contain, as written there
    compare: tuple[str, str] | None = None    # (numeric result key, unit) for "is that more than x?" follow-ups
    topic: str | None = None                  # families of one topic are never offered together (made families)


# ---- tables ------------------------------------------------------------------------------------------------------

WEATHER = {"Paris": (18, "sunny"), "London": (12, "rainy"), "Berlin": (9, "cloudy"), "Madrid": (24, "sunny"),
           "Rome": (21, "partly cloudy"), "Oslo": (-3, "snowing"), "Stockholm": (2, "overcast"), "Dublin": (11,
           "drizzly"), "Lisbon": (19, "windy"), "Athens": (23, "sunny"), "Vienna": (7, "foggy"), "Prague": (6,
           "cloudy"), "Warsaw": (4, "overcast"), "Istanbul": (15, "windy"), "Cairo": (29, "sunny"), "Nairobi": (22,
           "partly cloudy"), "Lagos": (31, "humid"), "Mumbai": (33, "humid"), "Delhi": (27, "hazy"), "Bangkok": (34,
           "stormy"), "Singapore": (30, "thundery"), "Tokyo": (14, "clear"), "Seoul": (10, "clear"), "Beijing": (8,
           "hazy"), "Sydney": (26, "sunny"), "Toronto": (-1, "snowing"), "Chicago": (3, "windy"), "Lima": (20,
           "overcast"), "Mexico City": (17, "clear"), "Helsinki": (-5, "snowing")}
COORDS = {"Paris": (48.8566, 2.3522), "London": (51.5074, -0.1278), "Berlin": (52.52, 13.405), "Madrid": (40.4168,
          -3.7038), "Rome": (41.9028, 12.4964), "New York": (40.7128, -74.006), "Los Angeles": (34.0522, -118.2437),
          "Chicago": (41.8781, -87.6298), "Tokyo": (35.6762, 139.6503), "Sydney": (-33.8688, 151.2093), "Cairo":
          (30.0444, 31.2357), "Mumbai": (19.076, 72.8777), "Beijing": (39.9042, 116.4074), "Moscow": (55.7558,
          37.6173), "Toronto": (43.6532, -79.3832), "São Paulo": (-23.5505, -46.6333), "Mexico City": (19.4326,
          -99.1332), "Nairobi": (-1.2921, 36.8219), "Singapore": (1.3521, 103.8198), "Dubai": (25.2048, 55.2708)}
UTC_OFFSET_MIN = {"Tokyo": 540, "London": 0, "Paris": 60, "New York": -240, "Los Angeles": -420, "Chicago": -300,
                  "Sydney": 660, "Mumbai": 330, "Dubai": 240, "Singapore": 480, "Moscow": 180, "São Paulo": -180,
                  "Kathmandu": 345, "Auckland": 780, "Honolulu": -600, "Cairo": 120, "Beijing": 480, "Reykjavik": 0}
PER_USD = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 149.5, "CHF": 0.88, "CAD": 1.36, "AUD": 1.52, "INR": 83.2,
           "CNY": 7.19, "MXN": 17.05, "BRL": 4.97, "SEK": 10.4}
STOCKS = {"AAPL": (189.84, -0.42), "MSFT": (415.5, 1.13), "GOOGL": (141.8, 0.57), "AMZN": (178.15, -1.2), "NVDA":
          (875.28, 2.64), "TSLA": (171.05, -3.11), "META": (496.09, 0.88), "NFLX": (612.4, -0.35), "IBM": (191.22,
          0.14), "INTC": (42.73, -0.91), "AMD": (178.6, 1.77), "ORCL": (125.33, 0.49), "KO": (60.12, 0.08)}
GLOSSARY = {"ephemeral": "lasting for a very short time", "ubiquitous": "present or found everywhere", "laconic":
            "using very few words", "gregarious": "fond of the company of others", "meticulous": "showing great "
            "attention to detail", "serendipity": "finding good things by chance", "candid": "truthful and "
            "straightforward", "obsolete": "no longer produced or used", "pragmatic": "dealing with things in a "
            "practical way", "verbose": "using more words than needed", "resilient": "able to recover quickly from "
            "difficulties", "arid": "having little or no rain", "frugal": "careful not to waste money or food",
            "lucid": "clear and easy to understand", "nocturnal": "active at night", "zenith": "the highest point"}
POPULATION_M = {"China": 1410.7, "India": 1428.6, "United States": 334.9, "Indonesia": 277.5, "Brazil": 216.4,
                "Nigeria": 223.8, "Japan": 124.5, "Germany": 84.5, "France": 68.2, "United Kingdom": 68.4, "Italy":
                58.9, "Canada": 40.1, "Australia": 26.6, "Kenya": 55.1, "Egypt": 112.7, "Mexico": 128.5, "Spain": 48.4}
CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Canada": "Ottawa", "Australia": "Canberra",
            "Brazil": "Brasília", "Egypt": "Cairo", "Germany": "Berlin", "India": "New Delhi", "Norway": "Oslo",
            "Peru": "Lima", "Portugal": "Lisbon", "South Korea": "Seoul", "Turkey": "Ankara", "Vietnam": "Hanoi",
            "Argentina": "Buenos Aires", "Nigeria": "Abuja", "New Zealand": "Wellington", "Switzerland": "Bern",
            "Morocco": "Rabat", "Poland": "Warsaw", "Chile": "Santiago"}
LANGUAGES = ("Spanish", "French", "German", "Italian", "Portuguese")
WORDS = {"water": ("agua", "eau", "Wasser", "acqua", "água"), "bread": ("pan", "pain", "Brot", "pane", "pão"),
         "house": ("casa", "maison", "Haus", "casa", "casa"), "cat": ("gato", "chat", "Katze", "gatto", "gato"),
         "dog": ("perro", "chien", "Hund", "cane", "cão"), "book": ("libro", "livre", "Buch", "libro", "livro"),
         "friend": ("amigo", "ami", "Freund", "amico", "amigo"), "apple": ("manzana", "pomme", "Apfel", "mela",
         "maçã"), "sun": ("sol", "soleil", "Sonne", "sole", "sol"), "moon": ("luna", "lune", "Mond", "luna", "lua"),
         "thank you": ("gracias", "merci", "danke", "grazie", "obrigado"), "good night": ("buenas noches",
         "bonne nuit", "gute Nacht", "buona notte", "boa noite")}
BOOKS = {"Dune": ("Frank Herbert", 1965), "Pride and Prejudice": ("Jane Austen", 1813), "Nineteen Eighty-Four":
         ("George Orwell", 1949), "To Kill a Mockingbird": ("Harper Lee", 1960), "The Hobbit": ("J. R. R. Tolkien",
         1937), "Moby-Dick": ("Herman Melville", 1851), "Frankenstein": ("Mary Shelley", 1818), "Beloved": ("Toni "
         "Morrison", 1987), "Things Fall Apart": ("Chinua Achebe", 1958), "Brave New World": ("Aldous Huxley", 1932),
         "Jane Eyre": ("Charlotte Brontë", 1847), "The Road": ("Cormac McCarthy", 2006), "Never Let Me Go":
         ("Kazuo Ishiguro", 2005), "Don Quixote": ("Miguel de Cervantes", 1605)}
MOVIES = {"Jaws": (1975, "Steven Spielberg"), "Alien": (1979, "Ridley Scott"), "Spirited Away": (2001, "Hayao "
          "Miyazaki"), "Parasite": (2019, "Bong Joon-ho"), "Casablanca": (1942, "Michael Curtiz"), "Inception":
          (2010, "Christopher Nolan"), "Titanic": (1997, "James Cameron"), "The Godfather": (1972, "Francis Ford "
          "Coppola"), "Psycho": (1960, "Alfred Hitchcock"), "Pulp Fiction": (1994, "Quentin Tarantino"), "Arrival":
          (2016, "Denis Villeneuve"), "Get Out": (2017, "Jordan Peele"), "Metropolis": (1927, "Fritz Lang")}
FLIGHTS = {"BA117": ("on time", "18:45", "B32"), "LH400": ("delayed", "21:10", "Z25"), "AF22": ("boarding", "14:05",
           "K40"), "UA901": ("delayed", "13:20", "F9"), "DL44": ("on time", "09:30", "A12"), "EK203": ("on time",
           "22:35", "C7"), "QF1": ("delayed", "17:50", "D3"), "SQ25": ("boarding", "11:15", "B18"), "KL605":
           ("on time", "07:40", "E2"), "JL43": ("delayed", "12:55", "G61")}
CALORIES = {"lasagna": 610, "pad thai": 520, "caesar salad": 360, "chicken curry": 450, "pancakes": 230,
            "guacamole": 180, "beef stew": 490, "tomato soup": 160, "fried rice": 410, "falafel wrap": 540,
            "mushroom risotto": 430, "greek salad": 210, "chocolate cake": 420}
MOUNTAINS = {"Mount Everest": (8849, "Nepal and China"), "K2": (8611, "Pakistan and China"), "Denali": (6190,
             "the United States"), "Kilimanjaro": (5895, "Tanzania"), "Mont Blanc": (4806, "France and Italy"),
             "Aconcagua": (6961, "Argentina"), "Mount Fuji": (3776, "Japan"), "Matterhorn": (4478, "Switzerland "
             "and Italy"), "Mount Elbrus": (5642, "Russia"), "Mount Kenya": (5199, "Kenya"), "Ben Nevis": (1345,
             "the United Kingdom"), "Mount Olympus": (2918, "Greece")}
PACKAGES = {"4829105736": ("in transit", "Memphis", "2025-03-17"), "7310948265": ("out for delivery", "Leeds",
            "2025-03-14"), "5062839147": ("delivered", "Lyon", "2025-03-12"), "9184736502": ("in transit", "Leipzig",
            "2025-03-18"), "2657391840": ("held at customs", "Rotterdam", "2025-03-21"), "8403165927": ("in transit",
            "Osaka", "2025-03-19"), "3928471056": ("out for delivery", "Denver", "2025-03-14")}
AQI = {"Paris": 38, "Delhi": 182, "Beijing": 121, "Los Angeles": 74, "London": 45, "Mexico City": 96, "Cairo": 137,
       "Oslo": 18, "Jakarta": 158, "Sydney": 27, "Lahore": 196, "Toronto": 33, "Seoul": 88, "Lima": 61}
ELEMENTS = {"Hydrogen": ("H", 1), "Helium": ("He", 2), "Carbon": ("C", 6), "Nitrogen": ("N", 7), "Oxygen": ("O", 8),
            "Sodium": ("Na", 11), "Silicon": ("Si", 14), "Potassium": ("K", 19), "Calcium": ("Ca", 20), "Iron":
            ("Fe", 26), "Copper": ("Cu", 29), "Silver": ("Ag", 47), "Tin": ("Sn", 50), "Gold": ("Au", 79),
            "Mercury": ("Hg", 80), "Lead": ("Pb", 82)}
STAFF = {"Maria Lopez": ("4417", "Finance"), "Kenji Sato": ("2201", "Engineering"), "Amara Okafor": ("3308",
         "Legal"), "Lukas Weber": ("1154", "Sales"), "Priya Nair": ("5562", "Research"), "Tom Becker": ("6720",
         "Facilities"), "Sofia Rossi": ("2749", "Design"), "Omar Haddad": ("3891", "Support"), "Ingrid Olsen":
         ("4036", "Marketing"), "Diego Ramos": ("5173", "Security")}
UNITS = {"km": ("length", 1000.0, 0.0, "kilometers"), "mi": ("length", 1609.344, 0.0, "miles"), "m": ("length", 1.0,
         0.0, "meters"), "ft": ("length", 0.3048, 0.0, "feet"), "kg": ("mass", 1.0, 0.0, "kilograms"), "lb":
         ("mass", 0.45359237, 0.0, "pounds"), "C": ("temperature", 1.0, 0.0, "degrees Celsius"), "F":
         ("temperature", 5 / 9, -160 / 9, "degrees Fahrenheit"), "L": ("volume", 1.0, 0.0, "liters"), "gal":
         ("volume", 3.785411784, 0.0, "US gallons")}
TEXTS = ("The quick brown fox jumps over the lazy dog", "Small steps every day add up", "Please send the report by "
         "Friday afternoon", "Rain is expected later this evening", "Our team meets every Monday at nine",
         "Reading before bed helps me sleep", "The museum opens at ten and closes at six", "Bring a jacket because "
         "the wind is cold")
NO_CALL_CHAT = (("Hi there!", "Hello! How can I help you today?"), ("Good morning!", "Good morning! What can I do "
                "for you?"), ("Thanks, that's all for now.", "You're welcome! Have a great day."), ("How many sides "
                "does a hexagon have?", "A hexagon has 6 sides."), ("How many legs does a spider have?", "A spider "
                "has 8 legs."), ("How many days are in a week?", "A week has 7 days."), ("What color do you get by "
                "mixing blue and yellow?", "Mixing blue and yellow gives green."), ("How many letters are in the "
                "English alphabet?", "The English alphabet has 26 letters."), ("How many minutes are in an hour?",
                "An hour has 60 minutes."), ("What is the plural of 'mouse'?", "The plural of 'mouse' is 'mice'."),
                ("What is the opposite of 'hot'?", "The opposite of 'hot' is 'cold'."), ("How many hours are in a "
                "day?", "A day has 24 hours."))
ARITHMETIC = (("What is {a} times {b}?", "{a} times {b} is {c}.", lambda a, b: a * b),
              ("What's {a} plus {b}?", "{a} plus {b} is {c}.", lambda a, b: a + b),
              ("What is {a} minus {b}?", "{a} minus {b} is {c}.", lambda a, b: a - b))
FOLLOW_UPS = (("Just the short version, please.", "{brief}."), ("Only the answer, no full sentence, please.",
              "{brief}."), ("Sorry, could you repeat that?", "Sure. {answer}"), ("What exactly did {tool} return?",
              "It returned {result}."))


# ---- tool implementations ----------------------------------------------------------------------------------------

def find_key(table: dict, value, what: str):
    """The table's key for `value` (case-insensitive); ValueError naming it and the known keys otherwise."""
    key = next((k for k in table if k.casefold() == str(value).strip().casefold()), None)
    if key is None:
        raise ValueError(f"no {what} {value!r}; known: {', '.join(table)}")
    return key


def _row(table: dict, arg: str, *columns: str) -> Callable[[dict], dict]:
    """run() of a one-argument lookup: {arg: the table's key, column: value, ...}."""
    def run(a: dict) -> dict:
        key = find_key(table, a[arg], arg.replace("_", " "))
        row = table[key] if isinstance(table[key], tuple) else (table[key],)
        return {arg: key, **dict(zip(columns, row, strict=True))}
    return run


def _pick(arg: str, table) -> Callable[[random.Random], dict]:
    return lambda r: {arg: r.choice(list(table))}


def _short(x: float) -> float | int:
    """2 decimals (3 significant digits below 1); a whole number without ".0"."""
    x = round(x, 2) if abs(x) >= 1 else float(f"{x:.3g}")
    return int(x) if x.is_integer() else x


def _convert(a: dict) -> dict:
    (da, fa, oa, na), (db, fb, ob, nb) = (UNITS[find_key(UNITS, a[k], "unit")] for k in ("from_unit", "to_unit"))
    if da != db:
        raise ValueError(f"cannot convert {na} ({da}) to {nb} ({db})")
    return {"value": a["value"], "from": na, "to": nb, "result": _short((a["value"] * fa + oa - ob) / fb)}


def _draw_convert(r: random.Random) -> dict:
    dim = r.choice(sorted({u[0] for u in UNITS.values()}))
    a, b = r.sample([k for k, u in UNITS.items() if u[0] == dim], 2)
    return {"value": r.randint(1, 300), "from_unit": a, "to_unit": b}


def _rate(a: dict) -> dict:
    base, quote = (find_key(PER_USD, a[k], "currency") for k in ("base", "quote"))
    return {"base": base, "quote": quote, "rate": _short(PER_USD[quote] / PER_USD[base])}


def _local_time(a: dict) -> dict:
    city = find_key(UTC_OFFSET_MIN, a["city"], "city")
    offset = UTC_OFFSET_MIN[city]
    t = NOW_UTC + datetime.timedelta(minutes=offset)
    sign, hours, minutes = "+" if offset >= 0 else "-", abs(offset) // 60, abs(offset) % 60
    return {"city": city, "local_time": t.strftime("%H:%M"), "date": t.date().isoformat(),
            "utc_offset": f"{sign}{hours:02d}:{minutes:02d}"}


def _distance(a: dict) -> dict:
    ka, kb = (find_key(COORDS, a[c], "city") for c in ("city_a", "city_b"))
    (la, oa), (lb, ob) = COORDS[ka], COORDS[kb]
    la, oa, lb, ob = map(math.radians, (la, oa, lb, ob))
    h = math.sin((lb - la) / 2) ** 2 + math.cos(la) * math.cos(lb) * math.sin((ob - oa) / 2) ** 2
    return {"from": ka, "to": kb, "distance_km": round(2 * 6371 * math.asin(math.sqrt(h)))}


def _days_until(a: dict) -> dict:
    try:
        day = datetime.date.fromisoformat(a["date"])
    except ValueError as e:
        raise ValueError(f"date {a['date']!r} is not YYYY-MM-DD") from e
    return {"today": TODAY.isoformat(), "date": day.isoformat(), "weekday": day.strftime("%A"),
            "days": (day - TODAY).days}


def _translate(a: dict) -> dict:
    word, language = find_key(WORDS, a["word"], "word"), find_key(dict.fromkeys(LANGUAGES), a["language"], "language")
    return {"word": word, "language": language, "translation": WORDS[word][LANGUAGES.index(language)]}


def _bmi(a: dict) -> dict:
    bmi = round(a["weight_kg"] / a["height_m"] ** 2, 1)
    category = next(c for limit, c in ((18.5, "underweight"), (25, "normal weight"), (30, "overweight"),
                                       (math.inf, "obese")) if bmi < limit)
    return {"bmi": bmi, "category": category}


def _interest(a: dict) -> dict:
    final = a["principal"] * (1 + a["rate_percent"] / 100) ** a["years"]
    return {"final_amount": f"{final:.2f}", "interest": f"{final - a['principal']:.2f}"}


def _air(a: dict) -> dict:
    city = find_key(AQI, a["city"], "city")
    level = next(lv for limit, lv in ((50, "good"), (100, "moderate"), (150, "unhealthy for sensitive groups"),
                                      (math.inf, "unhealthy")) if AQI[city] <= limit)
    return {"city": city, "aqi": AQI[city], "level": level}


def _tip(a: dict) -> dict:
    tip = a["bill"] * a["percent"] / 100
    return {"tip": f"{tip:.2f}", "total": f"{a['bill'] + tip:.2f}"}


# ---- families ----------------------------------------------------------------------------------------------------

def _arg(name: str, kind: type, description: str, **guides) -> tuple[str, type, str, dict]:
    return name, kind, description, guides


F = Family
FAMILIES: tuple[Family, ...] = (
    F("get_weather", "Current weather in a city: temperature in °C and the sky condition.",
      (_arg("city", str, "City name, e.g. Paris"),), _pick("city", WEATHER), _row(WEATHER, "city", "temperature_c",
      "condition"), ("What's the weather like in {city} right now?", "How warm is it in {city} today?",
      "Can you check the weather in {city}?"), "It is {temperature_c}°C and {condition} in {city} right now.",
      "{temperature_c}°C and {condition}", ("temperature_c", "condition"), ("temperature_c", "°C")),
    F("convert_units", "Convert a quantity between units of length, mass, temperature or volume.",
      (_arg("value", float, "The quantity to convert"), _arg("from_unit", str, "Unit of the value", anyOf=list(UNITS)),
       _arg("to_unit", str, "Unit to convert to", anyOf=list(UNITS))), _draw_convert, _convert,
      ("How many {to} is {value} {from}?", "Convert {value} {from} to {to}.", "What is {value} {from} in {to}?"),
      "{value} {from} is {result} {to}.", "{result} {to}", ("result",), ("result", "")),
    F("get_exchange_rate", "The current exchange rate: how many units of the quote currency one unit of the base buys.",
      (_arg("base", str, "Currency to convert from", anyOf=list(PER_USD)), _arg("quote", str, "Currency to convert "
       "to", anyOf=list(PER_USD))), lambda r: dict(zip(("base", "quote"), r.sample(list(PER_USD), 2), strict=True)),
      _rate, ("What's the exchange rate from {base} to {quote}?", "How many {quote} do I get for one {base}?",
      "Look up the {base} to {quote} rate, please."), "One {base} buys {rate} {quote} right now.", "{rate} {quote}",
      ("rate",), ("rate", "")),
    F("get_stock_price", "The latest share price (USD) of a listed company and its change today in percent.",
      (_arg("ticker", str, "Stock ticker symbol, e.g. AAPL", regex=r"[A-Z]{1,5}"),), _pick("ticker", STOCKS),
      _row(STOCKS, "ticker", "price_usd", "change_pct"), ("What is {ticker} trading at?", "How is {ticker} stock "
      "doing today?", "Get me the share price of {ticker}."), "{ticker} is at {price_usd} USD, {change_pct}% today.",
      "{price_usd} USD", ("price_usd", "change_pct"), ("price_usd", " USD")),
    F("get_local_time", "The current local time and date in a city.", (_arg("city", str, "City name"),),
      _pick("city", UTC_OFFSET_MIN), _local_time, ("What time is it in {city}?", "Could you tell me the local time "
      "in {city}?", "What's the time in {city} right now?"),
      "In {city} it is {local_time} on {date} (UTC{utc_offset}).", "{local_time}", ("local_time", "date")),
    F("lookup_definition", "The meaning of an English word, from a small dictionary.",
      (_arg("word", str, "The word to define, in lower case"),), _pick("word", GLOSSARY), _row(GLOSSARY, "word",
      "definition"), ("What does {word} mean?", "Define the word {word}.", "Can you look up the meaning of "
      "{word}?"), '"{word}" means {definition}.', "{definition}", ("definition",)),
    F("get_population", "The population of a country in millions (2023 estimate).", (_arg("country", str, "Country "
      "name"),), _pick("country", POPULATION_M), _row(POPULATION_M, "country", "population_millions"),
      ("How many people live in {country}?", "What's the population of {country}?", "Roughly how big is the "
      "population of {country}?"), "{country} has about {population_millions} million people.",
      "{population_millions} million", ("population_millions",), ("population_millions", " million")),
    F("distance_between", "The great-circle distance in km between two cities.", (_arg("city_a", str, "First city"),
      _arg("city_b", str, "Second city")), lambda r: dict(zip(("city_a", "city_b"), r.sample(list(COORDS), 2),
      strict=True)), _distance, ("How far is {city_a} from {city_b}?", "What's the distance between {city_a} and "
      "{city_b}?", "How many kilometers separate {city_a} and {city_b}?"), "{from} and {to} are about {distance_km} "
      "km apart.", "{distance_km} km", ("distance_km",), ("distance_km", " km")),
    F("calculate_tip", "The tip and the total for a restaurant bill.", (_arg("bill", float, "Bill amount in dollars",
      minimum=0), _arg("percent", int, "Tip in percent", range=(0, 50))), lambda r: {"bill": r.randint(12, 240),
      "percent": r.choice([10, 12, 15, 18, 20, 25])}, _tip, ("What's a {percent}% tip on a ${bill} bill?", "How much "
      "should I tip at {percent}% on ${bill}?", "Work out a {percent} percent tip for a ${bill} check."),
      "A {percent}% tip on ${bill} is ${tip}, so the total is ${total}.", "${tip}", ("tip", "total")),
    F("days_until", "The number of days from today to a date.", (_arg("date", str, "The date, YYYY-MM-DD",
      regex=r"[0-9]{4}-[0-9]{2}-[0-9]{2}"),), lambda r: {"date": (TODAY + datetime.timedelta(r.randint(1, 400)))
      .isoformat()}, _days_until, ("How many days until {date}?", "How long is it until {date}, in days?",
      "Count the days from today to {date}."), "{date} is a {weekday}, {days} days from today.", "{days} days",
      ("days",), ("days", " days")),
    F("get_capital", "The capital city of a country.", (_arg("country", str, "Country name"),), _pick("country",
      CAPITALS), _row(CAPITALS, "country", "capital"), ("What is the capital of {country}?", "Which city is the "
      "capital of {country}?", "Tell me the capital of {country}."), "The capital of {country} is {capital}.",
      "{capital}", ("capital",)),
    F("translate_word", "Translate a common English word or phrase into another language.", (_arg("word", str,
      "English word or phrase"), _arg("language", str, "Target language", anyOf=list(LANGUAGES))), lambda r:
      {"word": r.choice(list(WORDS)), "language": r.choice(LANGUAGES)}, _translate, ("How do you say {word} in "
      "{language}?", "What is {word} in {language}?", "Translate {word} into {language}."),
      '"{word}" in {language} is "{translation}".', "{translation}", ("translation",)),
    F("book_author", "The author and first publication year of a book.", (_arg("title", str, "Book title"),),
      _pick("title", BOOKS), _row(BOOKS, "title", "author", "year"), ("Who wrote {title}?", "Who is the author of "
      "{title}?", "Which writer gave us {title}?"), "{title} was written by {author} and published in {year}.",
      "{author}", ("author",)),
    F("movie_info", "The release year and director of a film.", (_arg("title", str, "Film title"),), _pick("title",
      MOVIES), _row(MOVIES, "title", "year", "director"), ("When did {title} come out?", "What year was the film "
      "{title} released?", "Who directed {title}, and when?"), "{title} came out in {year}, directed by {director}.",
      "{year}", ("year", "director")),
    F("flight_status", "The status, departure time and gate of a flight today.", (_arg("flight_number", str,
      "Airline code and number, e.g. BA117", regex=r"[A-Z]{2}[0-9]{1,4}"),), _pick("flight_number", FLIGHTS),
      _row(FLIGHTS, "flight_number", "status", "departure", "gate"), ("Is flight {flight_number} on time?", "What's "
      "the status of {flight_number}?", "When does {flight_number} leave, and from which gate?"), "Flight "
      "{flight_number} is {status}, departing at {departure} from gate {gate}.", "{status}, {departure}, gate {gate}",
      ("status", "departure", "gate")),
    F("recipe_calories", "Calories in a number of servings of a dish.", (_arg("dish", str, "Name of the dish"),
      _arg("servings", int, "Number of servings", range=(1, 12))), lambda r: {"dish": r.choice(list(CALORIES)),
      "servings": r.randint(2, 6)}, lambda a: {"dish": (d := find_key(CALORIES, a["dish"], "dish")), "servings":
      a["servings"], "calories": CALORIES[d] * a["servings"]}, ("How many calories are in {servings} servings of "
      "{dish}?", "Count the calories for {servings} portions of {dish}.", "If I eat {servings} servings of {dish}, "
      "how many calories is that?"), "{servings} servings of {dish} have {calories} kcal.", "{calories} kcal",
      ("calories",), ("calories", " kcal")),
    F("bmi", "Body mass index from weight and height, with its category.", (_arg("weight_kg", float, "Weight in kg",
      range=(20, 300)), _arg("height_m", float, "Height in meters", range=(1.0, 2.5))), lambda r: {"weight_kg":
      r.randint(45, 120), "height_m": r.randint(150, 200) / 100}, _bmi, ("What's the BMI for {weight_kg} kg at "
      "{height_m} m?", "Compute my BMI: I weigh {weight_kg} kg and I'm {height_m} m tall.", "Work out the body mass "
      "index of someone {height_m} m tall weighing {weight_kg} kg."), "At {weight_kg} kg and {height_m} m the BMI is "
      "{bmi}, which counts as {category}.", "{bmi}", ("bmi", "category"), ("bmi", "")),
    F("compound_interest", "What a deposit grows to with interest compounded once a year.", (_arg("principal", float,
      "Starting amount", minimum=0), _arg("rate_percent", float, "Yearly interest rate in percent", range=(0, 30)),
      _arg("years", int, "Number of years", range=(1, 50))), lambda r: {"principal": 100 * r.randint(5, 200),
      "rate_percent": r.choice([1.5, 2, 2.5, 3, 3.5, 4, 5, 6]), "years": r.randint(1, 30)}, _interest,
      ("What will {principal} grow to at {rate_percent}% a year over {years} years?", "If I invest {principal} at "
      "{rate_percent}% compounded yearly, what do I have after {years} years?", "Calculate compound interest on "
      "{principal} at {rate_percent}% for {years} years."), "After {years} years, {principal} grows to "
      "{final_amount}, which is {interest} in interest.", "{final_amount}", ("final_amount", "interest")),
    F("word_count", "Count the words and characters in a text.", (_arg("text", str, "The text to count"),),
      _pick("text", TEXTS), lambda a: {"words": len(a["text"].split()), "characters": len(a["text"])},
      ("How many words are in this sentence: {text}", "Count the words in the following text: {text}", "Please "
      "give me the word count of: {text}"), '"{text}" has {words} words and {characters} characters.',
      "{words} words", ("words", "characters"), ("words", " words")),
    F("mountain_height", "The height in meters of a mountain and where it is.", (_arg("mountain", str, "Mountain "
      "name"),), _pick("mountain", MOUNTAINS), _row(MOUNTAINS, "mountain", "height_m", "location"), ("How tall is "
      "{mountain}?", "What is the height of {mountain}?", "How high does {mountain} rise?"), "{mountain} is "
      "{height_m} m high, in {location}.", "{height_m} m", ("height_m",), ("height_m", " m")),
    F("track_package", "Where a parcel is and when it is expected.", (_arg("tracking_id", str, "10-digit tracking "
      "number", regex=r"[0-9]{10}"),), _pick("tracking_id", PACKAGES), _row(PACKAGES, "tracking_id", "status",
      "location", "expected"), ("Where is my package {tracking_id}?", "Can you track parcel {tracking_id}?",
      "What's the status of shipment {tracking_id}?"), "Package {tracking_id} is {status} (last seen in "
      "{location}); expected on {expected}.", "{status}, expected {expected}", ("status", "location", "expected")),
    F("air_quality", "The current air quality index (AQI) of a city and its level.", (_arg("city", str, "City "
      "name"),), _pick("city", AQI), _air, ("How is the air quality in {city}?", "What's the AQI in {city} "
      "today?", "Is the air clean in {city} right now?"), "The AQI in {city} is {aqi}, which is {level}.", "{aqi}",
      ("aqi", "level"), ("aqi", "")),
    F("element_info", "The chemical symbol and atomic number of an element.", (_arg("element", str, "Element name, "
      "e.g. Iron"),), _pick("element", ELEMENTS), _row(ELEMENTS, "element", "symbol", "atomic_number"), ("What is the "
      "symbol for {element}?", "Look up the element {element}.", "What's the atomic number of {element}?"),
      "{element} has the symbol {symbol} and atomic number {atomic_number}.", "{symbol}", ("symbol", "atomic_number")),
    F("staff_directory", "The phone extension and department of a colleague.", (_arg("name", str, "Full name"),),
      _pick("name", STAFF), _row(STAFF, "name", "extension", "department"), ("What's the extension for {name}?",
      "How can I reach {name} by phone?", "Which department is {name} in, and what's their extension?"), "{name} "
      "works in {department} and is at extension {extension}.", "extension {extension}", ("extension", "department")),
)
FAMILY_BY_NAME = {f.name: f for f in FAMILIES}
