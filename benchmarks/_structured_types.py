"""The fixed set of @generable types `structured_finish.py` asks the default model for: 44 types in five kinds
(nested, recursive, bounded lists, regex, enums) that a 135M model tends not to finish. Hand-written here, apart
from the training data's own generator (openafm.data.guided), so the benchmark does not measure its own data."""

from __future__ import annotations

import openafm.fm as fm

# ---- nested --------------------------------------------------------------------------------------------------


@fm.generable("A postal address")
class Address:
    street: str = fm.guide("Street and number")
    city: str = fm.guide("City")
    country: str = fm.guide("Country")


@fm.generable("A person with an address")
class Resident:
    name: str = fm.guide("Full name")
    age: int = fm.guide("Age in years", range=(0, 110))
    address: Address


@fm.generable("An author")
class Author:
    name: str = fm.guide("Full name")
    born: int = fm.guide("Year of birth", range=(1500, 2010))


@fm.generable("A book and its author")
class Book:
    title: str = fm.guide("Title")
    author: Author
    pages: int = fm.guide("Number of pages", range=(10, 2000))


@fm.generable("Nutrition facts per serving")
class Nutrition:
    calories: int = fm.guide("Calories", range=(0, 2000))
    protein_grams: int = fm.guide("Protein in grams", range=(0, 200))


@fm.generable("A recipe with its nutrition facts")
class Recipe:
    name: str = fm.guide("Dish name")
    servings: int = fm.guide("Servings", range=(1, 12))
    nutrition: Nutrition


@fm.generable("A company and its chief executive")
class Company:
    name: str = fm.guide("Company name")
    ceo: Resident
    founded: int = fm.guide("Year founded", range=(1800, 2025))


@fm.generable("A venue")
class Venue:
    name: str = fm.guide("Venue name")
    address: Address
    capacity: int = fm.guide("Seats", range=(10, 100000))


@fm.generable("A concert at a venue")
class Concert:
    band: str = fm.guide("Band name")
    venue: Venue


@fm.generable("An airport")
class Airport:
    code: str = fm.guide("IATA code", regex=r"[A-Z]{3}")
    city: str = fm.guide("City")


@fm.generable("A flight between two airports")
class Flight:
    number: str = fm.guide("Flight number")
    origin: Airport
    destination: Airport


# ---- recursive -----------------------------------------------------------------------------------------------


@fm.generable("A person and their children")
class FamilyMember:
    name: str = fm.guide("First name")
    children: list[FamilyMember] = fm.guide("Their children")


@fm.generable("A forum comment and its replies")
class Comment:
    author: str = fm.guide("User name")
    text: str = fm.guide("The comment")
    replies: list[Comment] = fm.guide("Replies to it")


@fm.generable("A folder and what it contains")
class Folder:
    name: str = fm.guide("Folder name")
    subfolders: list[Folder] = fm.guide("Folders inside it")


@fm.generable("A product category and its subcategories")
class ProductCategory:
    title: str = fm.guide("Category name")
    subcategories: list[ProductCategory] = fm.guide("Subcategories", max_items=4)


@fm.generable("An employee and their direct reports")
class Employee:
    name: str = fm.guide("Full name")
    role: str = fm.guide("Job title")
    reports: list[Employee] = fm.guide("Direct reports")


@fm.generable("A task broken into subtasks")
class Task:
    title: str = fm.guide("What to do")
    done: bool = fm.guide("Whether it is done")
    subtasks: list[Task] = fm.guide("Smaller steps")


@fm.generable("A topic outline")
class Topic:
    heading: str = fm.guide("Heading")
    subtopics: list[Topic] = fm.guide("Subtopics", max_items=3)


@fm.generable("A region and the regions within it")
class Region:
    name: str = fm.guide("Region name")
    population: int = fm.guide("Population", range=(0, 2000000000))
    parts: list[Region] = fm.guide("Regions inside it")


# ---- bounded lists -------------------------------------------------------------------------------------------


@fm.generable("A shopping list")
class ShoppingList:
    items: list[str] = fm.guide("Things to buy", min_items=3, max_items=8)


@fm.generable("A sports team")
class Team:
    name: str = fm.guide("Team name")
    players: list[str] = fm.guide("Player names", min_items=5)


@fm.generable("A playlist")
class Playlist:
    title: str = fm.guide("Playlist title")
    songs: list[str] = fm.guide("Song titles", count=4)


@fm.generable("A weekly meal plan")
class MealPlan:
    dinners: list[str] = fm.guide("One dinner for each day of the week", count=7)


@fm.generable("A blog post's tags")
class Tags:
    tags: list[str] = fm.guide("Tags", min_items=1)


@fm.generable("Instructions with steps")
class Instructions:
    goal: str = fm.guide("What the instructions achieve")
    steps: list[str] = fm.guide("The steps in order", min_items=3)


@fm.generable("A colour palette")
class Palette:
    colors: list[str] = fm.guide("Colour names", count=3)


@fm.generable("A quiz question")
class Question:
    question: str = fm.guide("The question")
    answer: str = fm.guide("The correct answer")


@fm.generable("A quiz")
class Quiz:
    topic: str = fm.guide("Quiz topic")
    questions: list[Question] = fm.guide("Questions", min_items=2)


@fm.generable("Lottery numbers")
class Lottery:
    numbers: list[int] = fm.guide("The numbers drawn", min_items=6, max_items=6)


# ---- regex ---------------------------------------------------------------------------------------------------


@fm.generable("A US mailing address")
class USAddress:
    street: str = fm.guide("Street")
    zip_code: str = fm.guide("ZIP code", regex=r"\d{5}")


@fm.generable("A phone contact")
class Contact:
    name: str = fm.guide("Name")
    phone: str = fm.guide("Phone number", regex=r"\d{3}-\d{4}")


@fm.generable("A web colour")
class WebColor:
    name: str = fm.guide("Colour name")
    hex: str = fm.guide("Hex code", regex=r"#[0-9a-f]{6}")


@fm.generable("A calendar date")
class Holiday:
    name: str = fm.guide("Holiday name")
    date: str = fm.guide("Date", regex=r"\d{4}-\d{2}-\d{2}")


@fm.generable("A product code")
class Product:
    name: str = fm.guide("Product name")
    sku: str = fm.guide("Stock code", regex=r"[A-Z]{3}\d{2}")


@fm.generable("A count of visitors")
class VisitorCount:
    place: str = fm.guide("Place")
    visitors: str = fm.guide("Visitors as digits", regex=r"\d+")


@fm.generable("A user account")
class Account:
    username: str = fm.guide("Lower-case user name", regex=r"[a-z]+")
    email: str = fm.guide("E-mail address", regex=r"[a-z]+@[a-z]+\.com")


@fm.generable("A licence plate")
class Plate:
    plate: str = fm.guide("Plate", regex=r"[A-Z]{2}\d{3}[A-Z]{2}")


# ---- enums ---------------------------------------------------------------------------------------------------


@fm.generable("A weather report")
class Weather:
    city: str = fm.guide("City")
    condition: str = fm.guide("Condition", anyOf=["sunny", "cloudy", "rainy", "snowy"])
    celsius: int = fm.guide("Temperature", range=(-40, 50))


@fm.generable("A pet")
class Pet:
    name: str = fm.guide("Pet name")
    species: str = fm.guide("Species", anyOf=["dog", "cat", "rabbit", "parrot"])


@fm.generable("A support ticket")
class Ticket:
    summary: str = fm.guide("One-line summary")
    priority: str = fm.guide("Priority", anyOf=["low", "medium", "high"])


@fm.generable("A T-shirt order")
class ShirtOrder:
    size: str = fm.guide("Size", anyOf=["S", "M", "L", "XL"])
    quantity: int = fm.guide("How many", range=(1, 10))


@fm.generable("A product review")
class Review:
    text: str = fm.guide("The review")
    sentiment: str = fm.guide("Sentiment", anyOf=["positive", "neutral", "negative"])


@fm.generable("Directions")
class Route:
    turns: list[str] = fm.guide("Each turn", element=fm.GenerationGuide.anyOf(["left", "right", "straight"]),
                                min_items=2)


@fm.generable("A planet fact")
class PlanetFact:
    planet: str = fm.guide("Planet", anyOf=["Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn"])
    fact: str = fm.guide("A fact about it")


@fm.generable("A traffic light state")
class Light:
    color: str = fm.guide("Colour", anyOf=["red", "amber", "green"])
    seconds: int = fm.guide("Seconds left", range=(0, 120))


TYPES = {
    "nested": [Resident, Book, Recipe, Company, Concert, Flight, Venue, Address],
    "recursive": [FamilyMember, Comment, Folder, ProductCategory, Employee, Task, Topic, Region],
    "bounded_lists": [ShoppingList, Team, Playlist, MealPlan, Tags, Instructions, Palette, Quiz, Lottery],
    "regex": [USAddress, Contact, WebColor, Holiday, Product, VisitorCount, Account, Plate],
    "enums": [Weather, Pet, Ticket, ShirtOrder, Review, Route, PlanetFact, Light],
}
