"""Pydantic extraction: text in, a validated `Person` out.

    python examples/extract_person.py
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from constrained_spec import Generator


class Person(BaseModel):
    name: str = Field(max_length=40)
    age: int = Field(ge=0, le=130)
    occupation: str = Field(max_length=40)


TEXTS = [
    "Ada Lovelace was a 36 year old mathematician.",
    "Alan Turing, computer scientist, aged 41.",
]


def main(generator: Generator | None = None) -> list[Person]:
    generator = generator or Generator()
    people = []
    for text in TEXTS:
        result = generator.generate(f"Extract the person from: {text}", schema=Person, temperature=0, max_tokens=60)
        person = result.value  # a validated Person (None only if max_tokens cut it short)
        print(repr(person), f"(mean accepted length {result.stats['mean_accepted_length']:.2f})")
        people.append(person)
    return people


if __name__ == "__main__":
    main()
