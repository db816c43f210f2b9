"""The vocabulary of the made-up tools (data/made_tools.py): the domains its lookups are drawn over (each an entity
noun, its argument, a name maker and the attributes an entity has), the formulas, and the few domains and formulas
kept for validation only. Plain data and the value makers over a caller's `random.Random`; no randomness of its own.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Attribute:
    key: str                                  # the result's key, e.g. "price_usd"
    phrase: str                               # "the price per night": "{phrase} is {value}{unit}" reads right
    value: Callable[[random.Random], object]  # one entity's value
    unit: str = ""


@dataclasses.dataclass(frozen=True)
class Count:
    """A count argument that a total scales by: total = count x the entity's `scales` attribute."""
    arg: str                  # "nights"
    description: str
    low: int
    high: int
    scales: str               # an attribute key
    total: Attribute          # its value is unused (computed); key, phrase and unit name the total
    asked: str                # appended to a question: " for {nights} nights"


@dataclasses.dataclass(frozen=True)
class Domain:
    noun: str                               # "hotel"
    arg: str                                # "hotel_name"
    arg_description: str
    name: Callable[[random.Random], str]    # a new entity's name
    attributes: tuple[Attribute, ...]
    count: Count | None = None


# ---- value and name makers ---------------------------------------------------------------------------------------

_SYLLABLES = ("ka", "lo", "ven", "mar", "ti", "sel", "dor", "ra", "bel", "quin", "os", "var", "lin", "thes", "mo",
              "ze", "run", "ca", "fel", "ar", "no", "wen", "pa", "gri", "sol", "e", "mir", "ta", "hal", "ost")
_PEOPLE = ("Ada Moreno", "Ben Okafor", "Chen Wei", "Dana Kowalski", "Elif Sahin", "Femi Adeyemi", "Greta Lind",
           "Hugo Martin", "Ines Duarte", "Jonas Berg", "Kira Novak", "Luis Ortega", "Maya Iyer", "Nils Holm")
_CITIES = ("Ghent", "Porto", "Bergen", "Turin", "Graz", "Malmo", "Leeds", "Lyon", "Basel", "Split", "Cork", "Riga")


def _word(r: random.Random) -> str:
    return "".join(r.choice(_SYLLABLES) for _ in range(r.randint(2, 3))).capitalize()


def _ints(low: int, high: int) -> Callable[[random.Random], int]:
    return lambda r: r.randint(low, high)


def _tenths(low: float, high: float) -> Callable[[random.Random], float]:
    return lambda r: round(r.uniform(low, high), 1)


def _clock(first: int, last: int) -> Callable[[random.Random], str]:
    return lambda r: f"{r.randint(first, last):02d}:{r.choice((0, 15, 30, 45)):02d}"


def _one_of(*options) -> Callable[[random.Random], object]:
    return lambda r: r.choice(options)


def _named(*patterns: str) -> Callable[[random.Random], str]:
    """Names from patterns over {w} (an invented word), {n} (a number), {c} (a capital letter)."""
    return lambda r: r.choice(patterns).format(w=_word(r), v=_word(r), n=r.randint(2, 899),
                                               c=r.choice("ABCDEFGHKLMNPRST"))


A = Attribute
DOMAINS: tuple[Domain, ...] = (
    Domain("hotel", "hotel_name", "Name of the hotel", _named("{w} Hotel", "Hotel {w}", "The {w} Inn"),
           (A("price_usd", "the price per night", _ints(60, 420), " USD"), A("rating", "the guest rating",
            _tenths(2.5, 5.0), " stars"), A("free_rooms", "the number of free rooms", _ints(0, 35)),
            A("check_in", "the check-in time", _clock(13, 16))),
           Count("nights", "Number of nights", 1, 10, "price_usd", A("total_usd", "the total", int, " USD"),
                 " for {nights} nights")),
    Domain("museum", "museum", "Name of the museum", _named("{w} Museum", "Museum of {w}"),
           (A("opens", "the opening time", _clock(8, 10)), A("closes", "the closing time", _clock(16, 21)),
            A("ticket_eur", "the ticket price", _ints(5, 30), " EUR"), A("exhibition", "the current exhibition",
            _one_of("Bronze Age Tools", "Light and Glass", "Maps of the North", "Early Flight",
                    "Masks of the Coast")))),
    Domain("train", "train_id", "Train number, e.g. IC 482", _named("IC {n}", "RE {n}", "EX {n}"),
           (A("departure", "the departure time", _clock(5, 22)), A("platform", "the platform", _ints(1, 18)),
            A("delay_minutes", "the delay", _ints(0, 40), " minutes"), A("destination", "the destination",
            _one_of(*_CITIES)))),
    Domain("bus line", "line", "Bus line, e.g. Line 12", _named("Line {n}", "Route {n}{c}"),
           (A("next_bus", "the next departure", _clock(6, 23)), A("stops", "the number of stops", _ints(8, 40)),
            A("fare_usd", "the fare", _tenths(1.5, 4.5), " USD"))),
    Domain("restaurant", "restaurant", "Name of the restaurant", _named("{w} Kitchen", "Cafe {w}", "{w} Grill"),
           (A("cuisine", "the cuisine", _one_of("Thai", "Lebanese", "Peruvian", "Korean", "Greek", "Ethiopian")),
            A("wait_minutes", "the wait for a table", _ints(0, 60), " minutes"), A("open_until", "the closing time",
            _clock(21, 23)))),
    Domain("laptop", "model", "Laptop model name", _named("{w} X{n}", "{w}Book {n}"),
           (A("battery_hours", "the battery life", _tenths(5, 20), " hours"), A("weight_kg", "the weight",
            _tenths(1.0, 2.8), " kg"), A("price_usd", "the price", _ints(400, 2600), " USD"), A("ram_gb",
            "the memory", _one_of(8, 16, 32, 64), " GB"))),
    Domain("phone plan", "plan", "Name of the plan", _named("{w} Basic", "{w} Max", "{w} Plus"),
           (A("monthly_usd", "the monthly fee", _ints(10, 80), " USD"), A("data_gb", "the data allowance",
            _ints(5, 100), " GB"), A("contract_months", "the contract length", _one_of(1, 12, 24), " months")),
           Count("months", "Number of months", 2, 24, "monthly_usd", A("total_usd", "the cost", int, " USD"),
                 " over {months} months")),
    Domain("course", "course_code", "Course code, e.g. CS 214", _named("CS {n}", "BIO {n}", "HIST {n}", "MATH {n}"),
           (A("instructor", "the instructor", _one_of(*_PEOPLE)), A("room", "the room", _named("{c}-{n}")),
            A("credits", "the credit count", _ints(2, 6)), A("seats_left", "the number of open seats", _ints(0, 40)))),
    Domain("parking garage", "garage", "Name of the garage", _named("{w} Garage", "{w} Park"),
           (A("free_spaces", "the number of free spaces", _ints(0, 300)), A("hourly_usd", "the hourly rate",
            _ints(1, 6), " USD"), A("closes", "the closing time", _clock(20, 23))),
           Count("hours", "Hours to park", 1, 12, "hourly_usd", A("total_usd", "the cost", int, " USD"),
                 " for {hours} hours")),
    Domain("ferry", "ferry", "Ferry route name", _named("{w} Ferry", "Harbor Line {n}"),
           (A("next_departure", "the next departure", _clock(6, 21)), A("crossing_minutes", "the crossing time",
            _ints(15, 120), " minutes"), A("fare_usd", "the fare", _ints(4, 40), " USD")),
           Count("passengers", "Number of passengers", 2, 8, "fare_usd", A("total_usd", "the total fare", int,
                 " USD"), " for {passengers} passengers")),
    Domain("server", "host", "Host name, e.g. web-07", _named("web-{n}", "db-{n}", "cache-{n}"),
           (A("cpu_percent", "the CPU load", _ints(1, 99), "%"), A("uptime_hours", "the uptime", _ints(1, 900),
            " hours"), A("status", "the status", _one_of("healthy", "degraded", "offline")))),
    Domain("repository", "repo", "Repository, owner/name", lambda r: f"{_word(r)}/{_word(r)}".lower(),
           (A("open_issues", "the number of open issues", _ints(0, 400)), A("stars", "the star count",
            _ints(3, 90000)), A("latest_release", "the latest release", _named("v{c}.{n}")))),
    Domain("concert", "concert", "Name of the concert", _named("{w} Live", "The {w} Tour"),
           (A("venue", "the venue", _named("{w} Hall", "{w} Arena")), A("start_time", "the start time",
            _clock(18, 21)), A("tickets_left", "the tickets left", _ints(0, 900)), A("price_usd", "the ticket price",
            _ints(20, 180), " USD")),
           Count("tickets", "Number of tickets", 2, 6, "price_usd", A("total_usd", "the total", int, " USD"),
                 " for {tickets} tickets")),
    Domain("zoo animal", "animal", "The animal's name at the zoo", _named("{w}"),
           (A("species", "the species", _one_of("red panda", "otter", "tapir", "snow leopard", "flamingo", "okapi")),
            A("enclosure", "the enclosure", _named("{c}{n}")), A("feeding_time", "the feeding time", _clock(9, 17)),
            A("keeper", "the keeper", _one_of(*_PEOPLE)))),
    Domain("bike station", "station", "Bike station name", _named("{w} Square", "{w} Bridge station"),
           (A("bikes", "the number of bikes", _ints(0, 30)), A("e_bikes", "the number of e-bikes", _ints(0, 12)),
            A("free_docks", "the number of free docks", _ints(0, 30)))),
    Domain("team", "team", "Team name", _named("{w} Falcons", "{w} Rovers", "FC {w}"),
           (A("wins", "the number of wins", _ints(0, 30)), A("losses", "the number of losses", _ints(0, 30)),
            A("next_opponent", "the next opponent", _named("{w} United", "{w} City")), A("position",
            "the league position", _ints(1, 20)))),
    Domain("podcast", "podcast", "Podcast title", _named("The {w} Show", "{w} Talks"),
           (A("episodes", "the episode count", _ints(3, 600)), A("host", "the host", _one_of(*_PEOPLE)),
            A("average_minutes", "the average episode length", _ints(12, 95), " minutes"))),
    Domain("satellite", "satellite", "Satellite name", _named("{w}-{n}"),
           (A("altitude_km", "the altitude", _ints(300, 36000), " km"), A("orbit_minutes", "the orbit period",
            _ints(88, 1440), " minutes"), A("launch_year", "the launch year", _ints(1990, 2024)))),
    Domain("meeting room", "room", "Room name, e.g. B12", _named("{c}{n}", "Room {w}"),
           (A("capacity", "the capacity", _ints(4, 40), " people"), A("floor", "the floor", _ints(1, 12)),
            A("free_from", "the time it is free from", _clock(8, 17)), A("projector", "the projector",
            _one_of("available", "not available")))),
    Domain("app", "app", "App name", _named("{w}ly", "{w} Notes", "{w}Pay"),
           (A("version", "the latest version", _named("{n}.{c}")), A("rating", "the store rating", _tenths(2.0, 4.9),
            " stars"), A("downloads_millions", "the downloads", _tenths(0.1, 90), " million"))),
    Domain("fitness class", "class_name", "Name of the class", _named("{w} Spin", "Morning {w}", "{w} Circuit"),
           (A("trainer", "the trainer", _one_of(*_PEOPLE)), A("start_time", "the start time", _clock(6, 20)),
            A("spots_left", "the spots left", _ints(0, 25)), A("length_minutes", "the length", _ints(30, 90),
            " minutes"))),
    Domain("hiking trail", "trail", "Trail name", _named("{w} Trail", "{w} Ridge Path"),
           (A("length_km", "the length", _tenths(2, 30), " km"), A("climb_m", "the climb", _ints(50, 1800), " m"),
            A("difficulty", "the difficulty", _one_of("easy", "moderate", "hard")))),
    Domain("exoplanet", "planet", "Planet name, e.g. Kepler-22 b", _named("{w}-{n} b", "{w} {c}"),
           (A("moons", "the number of moons", _ints(0, 14)), A("day_hours", "the length of a day",
              _tenths(6, 90), " hours"), A("gravity_g", "the surface gravity", _tenths(0.2, 3.5), " g"))),
)

# Validation-only domains: never in made_families' pool (nor in any built-in family), for choosing settings on tools
# a run has never seen without touching the held-out families. "route" takes two stops of one list, as a from / to
# pair does.
VALIDATION_DOMAINS: tuple[Domain, ...] = (
    Domain("lighthouse", "lighthouse", "Name of the lighthouse", _named("{w} Light", "{w} Point Lighthouse"),
           (A("height_m", "the tower height", _ints(12, 70), " m"), A("built", "the year it was built",
            _ints(1750, 1960)), A("range_km", "the light's range", _ints(10, 45), " km"))),
    Domain("campsite", "campsite", "Name of the campsite", _named("{w} Camp", "{w} Meadows"),
           (A("free_pitches", "the number of free pitches", _ints(0, 60)), A("price_usd", "the nightly price",
            _ints(12, 60), " USD"), A("showers", "the showers", _one_of("open", "closed"))),
           Count("nights", "Number of nights", 1, 9, "price_usd", A("total_usd", "the total", int, " USD"),
                 " for {nights} nights")),
    Domain("ski lift", "lift", "Name of the lift", _named("{w} Express", "{w} Chair"),
           (A("status", "the status", _one_of("running", "on hold", "closed")), A("wait_minutes", "the wait",
            _ints(0, 30), " minutes"), A("top_m", "the top station's altitude", _ints(1400, 3300), " m"))),
    Domain("cinema", "cinema", "Name of the cinema", _named("{w} Pictures", "Cinema {w}"),
           (A("screens", "the number of screens", _ints(1, 14)), A("next_showing", "the next showing",
            _clock(12, 22)), A("ticket_usd", "the ticket price", _ints(6, 18), " USD"))),
)
_STOPS = ("North Gate", "Old Market", "Riverside", "Town Hall", "Harbor", "University", "Stadium", "Airport")


# ---- formulas ----------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Formula:
    names: tuple[str, ...]                       # a made family takes one
    description: str
    args: tuple[tuple, ...]       # (name, int | float, description, low, high) or (name, str, description, choices)
    run: Callable[[dict], dict]
    questions: tuple[str, ...]                   # .format_map(arguments | result)
    answer: str
    keys: tuple[str, ...]
    compare: tuple[str, str] | None = None


def _money(x: float) -> str:
    return f"{x:.2f}"


def _gap(line: tuple[str, ...], a: str, b: str) -> int:
    """How many places apart a and b are on `line`; ValueError naming the places it knows."""
    for x in (a, b):
        if x not in line:
            raise ValueError(f"no place {x!r}; known: {', '.join(line)}")
    return abs(line.index(a) - line.index(b))


_STATIONS = ("Elm Park", "Canal Street", "Westbury", "Foundry Lane", "Kingsmead", "Ashford Road", "Millbrook")
_BUILDINGS = ("Library Annex", "Science Hall", "Student Union", "Gymnasium", "Arts Block", "Main Gate")
_LEVELS = ("Ground", "Mezzanine", "Level 1", "Level 2", "Level 3", "Level 4", "Sky Deck")


FORMULAS: tuple[Formula, ...] = (
    Formula(("rectangle_area", "area_of_rectangle", "calc_rectangle"), "Area and perimeter of a rectangle.",
            (("width_m", int, "Width in meters", 2, 60), ("length_m", int, "Length in meters", 2, 60)),
            lambda a: {"area_m2": a["width_m"] * a["length_m"], "perimeter_m": 2 * (a["width_m"] + a["length_m"])},
            ("What is the area of a {width_m} m by {length_m} m room?", "How big is a plot {width_m} m wide and "
             "{length_m} m long?"), "A {width_m} m by {length_m} m rectangle has an area of {area_m2} square meters "
            "and a perimeter of {perimeter_m} m.", ("area_m2", "perimeter_m"), ("area_m2", " square meters")),
    Formula(("average_speed", "speed_from_trip", "trip_speed"), "Average speed of a trip from distance and time.",
            (("distance_km", int, "Distance in km", 20, 900), ("hours", int, "Duration in hours", 1, 12)),
            lambda a: {"speed_kmh": round(a["distance_km"] / a["hours"], 1)},
            ("What was my average speed if I drove {distance_km} km in {hours} hours?", "How fast is a trip of "
             "{distance_km} km that takes {hours} hours?"), "Covering {distance_km} km in {hours} hours is an average "
            "of {speed_kmh} km/h.", ("speed_kmh",), ("speed_kmh", " km/h")),
    Formula(("split_bill", "bill_splitter", "cost_per_person"), "Split a bill evenly between people.",
            (("total_usd", int, "The bill in USD", 20, 600), ("people", int, "Number of people", 2, 12)),
            lambda a: {"per_person_usd": _money(a["total_usd"] / a["people"])},
            ("How much does each of {people} people pay on a {total_usd} USD bill?", "Split {total_usd} USD evenly "
             "between {people} friends."), "Split {people} ways, {total_usd} USD is {per_person_usd} USD each.",
            ("per_person_usd",)),
    Formula(("percent_of", "percentage_calculator", "calc_percent"), "A percentage of an amount.",
            (("percent", int, "The percentage", 1, 90), ("amount", int, "The amount", 10, 5000)),
            lambda a: {"result": round(a["percent"] * a["amount"] / 100, 2)},
            ("What is {percent}% of {amount}?", "Work out {percent} percent of {amount}."),
            "{percent}% of {amount} is {result}.", ("result",), ("result", "")),
    Formula(("fuel_cost", "trip_fuel", "fuel_estimate"), "Fuel used on a drive and what it costs.",
            (("distance_km", int, "Distance in km", 10, 1200), ("litres_per_100km", int, "Consumption in litres per "
             "100 km", 4, 12), ("price_per_litre", float, "Fuel price per litre in USD", 1, 3)),
            lambda a: {"litres": round(a["distance_km"] * a["litres_per_100km"] / 100, 1), "cost_usd":
                       _money(a["distance_km"] * a["litres_per_100km"] / 100 * a["price_per_litre"])},
            ("How much fuel do I need for {distance_km} km at {litres_per_100km} l/100 km, and what does it cost at "
             "{price_per_litre} USD a litre?", "What will {distance_km} km of driving cost in fuel at "
             "{litres_per_100km} litres per 100 km and {price_per_litre} USD per litre?"), "The drive uses {litres} "
            "litres, which costs {cost_usd} USD.", ("litres", "cost_usd"), ("litres", " litres")),
    Formula(("discount_price", "sale_price", "apply_discount"), "The price after a discount, and the saving.",
            (("price_usd", int, "Original price in USD", 10, 900), ("discount_percent", int, "Discount in percent",
             5, 70)), lambda a: {"sale_usd": _money(a["price_usd"] * (1 - a["discount_percent"] / 100)),
                                 "saving_usd": _money(a["price_usd"] * a["discount_percent"] / 100)},
            ("What does a {price_usd} USD item cost with {discount_percent}% off?", "How much do I save with a "
             "{discount_percent}% discount on {price_usd} USD?"), "With {discount_percent}% off, {price_usd} USD "
            "becomes {sale_usd} USD, a saving of {saving_usd} USD.", ("sale_usd", "saving_usd")),
    Formula(("circle_area", "circle_measures", "calc_circle"), "Area and circumference of a circle.",
            (("radius_cm", int, "Radius in cm", 1, 100),),
            lambda a: {"area_cm2": round(3.14159265 * a["radius_cm"] ** 2, 1),
                       "circumference_cm": round(2 * 3.14159265 * a["radius_cm"], 1)},
            ("What is the area of a circle with a radius of {radius_cm} cm?", "How big around is a circle of "
             "radius {radius_cm} cm, and what is its area?"), "A circle of radius {radius_cm} cm has an area of "
            "{area_cm2} square cm and a circumference of {circumference_cm} cm.", ("area_cm2", "circumference_cm"),
            ("area_cm2", " square cm")),
    Formula(("gross_pay", "wage_calculator", "pay_for_hours"), "Pay for hours worked at an hourly rate.",
            (("hours", int, "Hours worked", 1, 60), ("hourly_rate", int, "Rate per hour in USD", 10, 80)),
            lambda a: {"pay_usd": a["hours"] * a["hourly_rate"]},
            ("What do I earn for {hours} hours at {hourly_rate} USD an hour?", "How much is {hours} hours of work "
             "paid at {hourly_rate} USD per hour?"), "{hours} hours at {hourly_rate} USD an hour pays {pay_usd} USD.",
            ("pay_usd",), ("pay_usd", " USD")),
    Formula(("savings_plan", "months_to_goal", "saving_goal"), "How many months of saving reach a goal.",
            (("goal_usd", int, "The goal in USD", 500, 20000), ("monthly_usd", int, "Saved each month in USD", 50,
             1500)), lambda a: {"months": -(-a["goal_usd"] // a["monthly_usd"])},
            ("How many months to save {goal_usd} USD at {monthly_usd} USD a month?", "If I put away {monthly_usd} "
             "USD monthly, when do I reach {goal_usd} USD?"), "Saving {monthly_usd} USD a month reaches "
            "{goal_usd} USD in {months} months.", ("months",), ("months", " months")),
    Formula(("hypotenuse", "right_triangle", "triangle_side"), "The long side of a right triangle from its legs.",
            (("leg_a_cm", int, "First leg in cm", 1, 90), ("leg_b_cm", int, "Second leg in cm", 1, 90)),
            lambda a: {"hypotenuse_cm": round((a["leg_a_cm"] ** 2 + a["leg_b_cm"] ** 2) ** 0.5, 2)},
            ("How long is the hypotenuse of a right triangle with legs {leg_a_cm} cm and {leg_b_cm} cm?", "A right "
             "triangle has sides {leg_a_cm} and {leg_b_cm} cm: what is the third?"), "With legs of {leg_a_cm} cm "
            "and {leg_b_cm} cm, the hypotenuse is {hypotenuse_cm} cm.", ("hypotenuse_cm",), ("hypotenuse_cm", " cm")),
    Formula(("paint_needed", "paint_estimate", "wall_paint"), "Litres of paint for a wall area.",
            (("area_m2", int, "Wall area in square meters", 5, 200), ("coverage", int, "Square meters one litre "
             "covers", 6, 12)), lambda a: {"litres": round(a["area_m2"] / a["coverage"], 1)},
            ("How much paint do I need for {area_m2} square meters if a litre covers {coverage}?", "How many litres "
             "of paint cover {area_m2} m2 at {coverage} m2 per litre?"), "{area_m2} square meters at {coverage} per "
            "litre needs {litres} litres of paint.", ("litres",), ("litres", " litres")),
    Formula(("average_score", "score_average", "grade_average"), "The average of three scores.",
            (("score_a", int, "First score", 0, 100), ("score_b", int, "Second score", 0, 100), ("score_c", int,
             "Third score", 0, 100)), lambda a: {"average": round((a["score_a"] + a["score_b"] + a["score_c"]) / 3, 1)},
            ("What is the average of {score_a}, {score_b} and {score_c}?", "My scores were {score_a}, {score_b} and "
             "{score_c}: what is my average?"), "The average of {score_a}, {score_b} and {score_c} is {average}.",
            ("average",), ("average", "")),
    # two arguments drawn from one list (a from / to pair): the model must not copy the first into the second
    Formula(("train_fare", "fare_between", "rail_fare"), "The fare and zones between two stations of the rail line.",
            (("from_station", str, "Station to leave from", _STATIONS), ("to_station", str, "Station to go to",
             _STATIONS)), lambda a: {"zones": (z := _gap(_STATIONS, a["from_station"], a["to_station"])),
                                     "fare_usd": _money(2.5 + 1.5 * z)},
            ("What is the fare from {from_station} to {to_station}?", "How much is a ticket from {from_station} to "
             "{to_station}, and how many zones is that?"), "From {from_station} to {to_station} is {zones} zones, "
            "a fare of {fare_usd} USD.", ("zones", "fare_usd")),
    Formula(("walking_time", "campus_walk", "walk_between"), "Walking distance and time between two campus buildings.",
            (("from_building", str, "Building to start at", _BUILDINGS), ("to_building", str, "Building to walk to",
             _BUILDINGS)), lambda a: {"meters": 320 * (g := _gap(_BUILDINGS, a["from_building"], a["to_building"])),
                                      "minutes": 4 * g},
            ("How long is the walk from {from_building} to {to_building}?", "How far is {to_building} from "
             "{from_building} on foot?"), "From {from_building} to {to_building} is {meters} m, about {minutes} "
            "minutes on foot.", ("meters", "minutes"), ("minutes", " minutes")),
    Formula(("level_gap", "elevator_levels", "levels_between"), "Levels and lift time between two levels of a tower.",
            (("from_level", str, "Level to start on", _LEVELS), ("to_level", str, "Level to reach", _LEVELS)),
            lambda a: {"levels": (g := _gap(_LEVELS, a["from_level"], a["to_level"])), "seconds": 9 * g},
            ("How many levels is it from {from_level} to {to_level}?", "How long does the lift take from {from_level} "
             "to {to_level}?"), "From {from_level} to {to_level} is {levels} levels, {seconds} seconds in the lift.",
            ("levels", "seconds"), ("seconds", " seconds")),
)

VALIDATION_FORMULAS = (
    Formula(("tile_count", "tiles_needed"), "How many square tiles cover a floor.",
            (("area_m2", int, "Floor area in square meters", 2, 80), ("tile_cm", int, "Tile side in cm", 10, 60)),
            lambda a: {"tiles": -(-a["area_m2"] * 10000 // a["tile_cm"] ** 2)},
            ("How many {tile_cm} cm tiles do I need for {area_m2} square meters?", "Count the tiles of side "
             "{tile_cm} cm that cover a floor of {area_m2} m2."), "A floor of {area_m2} square meters takes {tiles} "
            "tiles of {tile_cm} cm.", ("tiles",), ("tiles", " tiles")),
    Formula(("route_length", "stops_between"), "Stops and minutes between two stops of the city line.",
            (("start", str, "Stop to start from", _STOPS), ("end", str, "Stop to go to", _STOPS)),
            lambda a: {"stops": (g := _gap(_STOPS, a["start"], a["end"])), "minutes": 3 * g},
            ("How many stops is it from {start} to {end}?", "How long does the ride from {start} to {end} take?"),
            "From {start} to {end} is {stops} stops, about {minutes} minutes.", ("stops", "minutes"),
            ("minutes", " minutes")),
)
