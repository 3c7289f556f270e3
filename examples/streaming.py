"""Streaming: text deltas as they are generated, then the validated value.

    python examples/streaming.py
"""

import sys
from typing import Annotated

from pydantic import BaseModel, Field

from constrained_spec import Generator


class Recipe(BaseModel):
    dish: str = Field(max_length=30)
    ingredients: list[Annotated[str, Field(max_length=20)]] = Field(max_length=3)


def main(generator: Generator | None = None) -> Recipe | None:
    generator = generator or Generator()
    stream = generator.stream("Give a short recipe for pancakes.", schema=Recipe, temperature=0, max_tokens=60)
    for delta in stream:
        sys.stdout.write(delta)
        sys.stdout.flush()
    print()
    result = stream.result  # available once the stream is exhausted
    print("value:", repr(result.value), "| finish:", result.finish_reason)
    return result.value


if __name__ == "__main__":
    main()
