"""A fictional world for `doc_multihop`: people, companies, products, cities, universities and
countries with invented names, one document each, relations stated in plain sentences, and hard
near-duplicate entities (one letter or suffix apart) whose documents point elsewhere."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

SYLLABLES = "ka lo mi ra ven tor sel dri an bel cor dun el fa gor hal ir jas kel lum mor nar ost pel quin ros sar tam ul vor wen yas zel".split()
SUFFIXES = {"company": ["Dynamics", "Foods", "Labs", "Works", "Systems", "Textiles", "Motors", "Analytics"]}
TYPES = ("product", "company", "person", "city", "university", "country")
SHARE = {"product": 0.25, "company": 0.2, "person": 0.33, "city": 0.1, "university": 0.06, "country": 0.06}
# relation -> (subject type, object type, phrase for the noun chain)
RELATIONS = {
    "maker": ("product", "company", "the maker of {}"),
    "founder": ("company", "person", "the founder of {}"),
    "hq": ("company", "city", "the headquarters city of {}"),
    "birthplace": ("person", "city", "the birthplace of {}"),
    "school": ("person", "university", "the university attended by {}"),
    "location": ("university", "city", "the city where {} is located"),
    "country": ("city", "country", "the country of {}"),
}
PATHS = (
    ("company", ["founder", "birthplace"]),
    ("product", ["maker", "hq"]),
    ("product", ["maker", "founder", "birthplace"]),
    ("company", ["founder", "birthplace", "country"]),
    ("product", ["maker", "founder", "birthplace", "country"]),
    ("company", ["founder", "school", "location", "country"]),
)
FILLER = [
    "In {year}, {x} hosted a meeting attended by delegates from {y}.",
    "{x} is sometimes mentioned alongside {y} in regional newspapers.",
    "Local historians note that {x} received a visit from {y} in {year}.",
    "A {year} survey listed {x} among the {n} most discussed names of the decade.",
    "Reports from {year} describe a dispute between {x} and {y} that was settled quietly.",
    "{x} appears in a {year} documentary about {y}.",
]


@dataclass
class Entity:
    name: str
    type: str
    relations: dict[str, str] = field(default_factory=dict)
    year: int = 2000
    near_duplicate_of: str | None = None


def _word(rng: random.Random, parts: int = 2) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()


def _name(rng: random.Random, kind: str) -> str:
    if kind == "person":
        return f"{_word(rng)} {_word(rng, 3)}"
    if kind == "company":
        return f"{_word(rng, 3)} {rng.choice(SUFFIXES['company'])}"
    if kind == "product":
        return f"{_word(rng)} {rng.randint(2, 99) * 10}"
    if kind == "university":
        return f"{_word(rng, 3)} Institute"
    if kind == "country":
        return _word(rng, 3) + rng.choice(["ia", "land", "stan", "ora"])
    return _word(rng, 3) + rng.choice(["vale", "ford", "port", "burg", "mouth", ""])


def near_name(name: str, rng: random.Random) -> str:
    """A name one small edit away: another suffix for companies, another model number for products,
    else one letter changed."""
    words = name.split(" ")
    if words[-1] in SUFFIXES["company"]:
        return " ".join([*words[:-1], rng.choice([s for s in SUFFIXES["company"] if s != words[-1]])])
    if words[-1].isdigit():
        return " ".join([*words[:-1], str(int(words[-1]) + 10)])
    target = words[-1]
    i = rng.randrange(1, len(target))
    letter = rng.choice([c for c in "aeiourln" if c != target[i]])
    return " ".join([*words[:-1], target[:i] + letter + target[i + 1 :]])


class World:
    def __init__(self, rng: random.Random, n_docs: int) -> None:
        self.rng = rng
        self.entities: dict[str, Entity] = {}
        self.names: list[str] = []  # every entity, in creation order
        self.by_type: dict[str, list[str]] = {t: [] for t in TYPES}  # originals only, not near-duplicates
        counts = {t: max(3, round(n_docs * SHARE[t])) for t in TYPES}
        for kind in TYPES:
            for _ in range(counts[kind]):
                self.add_original(kind)
        for entity in list(self.entities.values()):
            self.link(entity)

    def of_type(self, kind: str) -> list[str]:
        return self.by_type[kind]

    def add(self, kind: str, name: str | None = None) -> Entity:
        while name is None or name in self.entities:
            name = _name(self.rng, kind)
        entity = Entity(name, kind, year=self.rng.randint(1950, 2020))
        self.entities[name] = entity
        self.names.append(name)
        return entity

    def add_original(self, kind: str) -> None:
        self.by_type[kind].append(self.add(kind).name)

    def link(self, entity: Entity) -> None:
        for relation, (subject, obj, _) in RELATIONS.items():
            if subject == entity.type:
                entity.relations[relation] = self.rng.choice(self.of_type(obj))

    def chain(self, path_index: int) -> tuple[str, list[str], list[str]]:
        """(question phrase, chain of entity names from start to answer, relations) for a path."""
        start_type, relations = PATHS[path_index % len(PATHS)]
        names = [self.rng.choice(self.of_type(start_type))]
        for relation in relations:
            names.append(self.entities[names[-1]].relations[relation])
        phrase = names[0] if start_type != "product" else f"the {names[0]}"
        for relation in relations:
            phrase = RELATIONS[relation][2].format(phrase)
        return phrase, names, relations

    def add_near_duplicate(self, name: str) -> str:
        original = self.entities[name]
        new = name
        while new in self.entities:
            new = near_name(name, self.rng)
        twin = self.add(original.type, new)
        twin.near_duplicate_of = name
        self.link(twin)
        for relation, target in original.relations.items():  # make sure the twin points elsewhere
            if twin.relations[relation] == target:
                options = [n for n in self.of_type(RELATIONS[relation][1]) if n != target]
                twin.relations[relation] = self.rng.choice(options)
        return new

    def document(self, entity: Entity, filler_sentences: int) -> str:
        r, n, y = entity.relations, entity.name, entity.year
        core = {
            "product": f"The {n} is a consumer product made by {r.get('maker')}. It was first sold in {y}.",
            "company": f"{n} is a company founded by {r.get('founder')} in {y}. {n} is headquartered in {r.get('hq')}.",
            "person": f"{n} was born in {r.get('birthplace')} in {y}. {n} studied at {r.get('school')}.",
            "university": f"{n} is a university located in {r.get('location')}. It was established in {y}.",
            "city": f"{n} is a city in {r.get('country')}. Its population was {self.rng.randint(5, 900) * 1000:,} in {y}.",
            "country": f"{n} is a country whose national archive was founded in {y}.",
        }[entity.type]
        names = self.names
        extra = [
            self.rng.choice(FILLER).format(
                x=n, y=self.rng.choice(names), year=self.rng.randint(1950, 2024), n=self.rng.randint(5, 50)
            )
            for _ in range(filler_sentences)
        ]
        return " ".join([core, *extra])
