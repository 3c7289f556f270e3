"""number_range against exact decimal arithmetic: seeded bounds and numbers, every way round."""

from __future__ import annotations

import random
import re
from decimal import Decimal

import pytest

from constrained_spec.grammar.json_terminals import number_range

SAMPLES = 400  # numbers per interval


def _decimal_text(rng: random.Random, places: int) -> str:
    whole = rng.choice([0, 0, 1, 2, 9, 10, 99, 100, 2000, rng.randrange(10**6)])
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(places + 1)))
    sign = rng.choice(["", "-"])
    return f"{sign}{whole}" + (f".{digits}" if digits else "")


def _near(rng: random.Random, bound: Decimal) -> str:
    """A number text at or beside a bound (same digits, one more, trailing zeros, one ulp of 10^-k)."""
    step = Decimal(1).scaleb(-rng.randrange(0, 6))
    value = bound + rng.choice([-step, 0, 0, step])
    text = format(value, "f")
    return text + "0" * rng.randrange(1, 3) if "." in text and rng.random() < 0.5 else text


@pytest.mark.parametrize("seed", range(12))
def test_numbers_in_the_interval_are_exactly_the_matches(seed):
    """Per seed: 6 intervals (decimal or integer bounds, open or closed, one side missing, with
    or without a fraction-digit limit), each checked on SAMPLES random and boundary texts:
    fullmatch equals the decimal comparison (and the digit limit) for every text."""
    rng = random.Random(seed)
    for _ in range(6):
        lo = Decimal(_decimal_text(rng, 4)) if rng.random() < 0.8 else None
        hi = Decimal(_decimal_text(rng, 4)) if rng.random() < 0.8 else None
        if lo is not None and hi is not None and lo > hi:
            lo, hi = hi, lo
        lo_excl, hi_excl = rng.random() < 0.5, rng.random() < 0.5
        places = rng.choice([None, None, 1, 3])
        regex = number_range(lo, lo_excl, hi, hi_excl, places)
        texts = [_decimal_text(rng, 6) for _ in range(SAMPLES)]
        texts += [_near(rng, b) for b in (lo, hi) if b is not None for _ in range(SAMPLES // 4)]
        for text in texts:
            value = Decimal(text)
            fraction = text.partition(".")[2]
            inside = ((lo is None or (value > lo if lo_excl else value >= lo)) and (hi is None or (value < hi if hi_excl else value <= hi))
                      and (places is None or len(fraction.rstrip("0")) <= places))  # fmt: skip
            if text.startswith("-") and value == 0:
                continue  # -0 is written 0 (a narrowing the module states)
            matched = regex is not None and re.fullmatch(regex, text) is not None
            if places is not None and len(fraction) > places:
                assert not matched or inside, (regex, text)  # more digits than the limit: only never wrongly admitted
                continue
            assert matched == inside, (lo, lo_excl, hi, hi_excl, places, text)


def test_float_bounds_are_read_as_their_shortest_text():
    regex = number_range(0.1, False, 0.3, True)
    assert re.fullmatch(regex, "0.1") and re.fullmatch(regex, "0.29999") and not re.fullmatch(regex, "0.3")
    assert not re.fullmatch(regex, "0.09999999999999999")
