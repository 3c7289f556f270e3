"""Pydantic extraction: text in, a validated `Person` out.

    python examples/extract_person.py
"""


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
    prompts = [f"Extract the person from: {text}" for text in TEXTS]
    # One batched call; each result's .value is a validated Person (None only if cut by max_tokens).
    results = generator.generate_batch(prompts, schema=Person, temperature=0, max_tokens=60)
    for result in results:
        print(repr(result.value), f"(mean accepted length {result.stats['mean_accepted_length']:.2f})")
    return [r.value for r in results]


if __name__ == "__main__":
    main()
