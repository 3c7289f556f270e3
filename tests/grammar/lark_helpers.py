"""Shared helpers for the Lark engine tests (not a test module)."""

from __future__ import annotations

from collections.abc import Sequence

import lark
import torch

from constrained_spec.bitmask import new_bitmask, unpack_bitmask


def allowed_ids(matcher) -> list[int]:
    mask = new_bitmask(1, matcher.vocab_size)
    matcher.fill_bitmask(mask)
    return unpack_bitmask(mask, matcher.vocab_size)[0].nonzero().flatten().tolist()


def lark_accepts(parser: lark.Lark, text: str) -> bool:
    try:
        parser.parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


def completion_exists(matcher, eos: int, depth: int, prefer: Sequence[int] = ()) -> bool:
    """Bounded search over allowed tokens for a path to an accepting state. Tokens in `prefer`
    are tried first, in that order (closing tokens find a completion on the first branch, so
    only a failing search walks the whole bounded tree)."""
    if matcher.is_accepting():
        return True
    if depth == 0:
        return False
    rank = {token: i for i, token in enumerate(prefer)}
    for tok in sorted(allowed_ids(matcher), key=lambda t: rank.get(t, len(rank))):
        if tok == eos:
            return True
        child = matcher.fork()
        child.accept_token(tok)
        if completion_exists(child, eos, depth - 1, prefer):
            return True
    return False


def mask_tensor(matcher) -> torch.Tensor:
    mask = new_bitmask(1, matcher.vocab_size)
    matcher.fill_bitmask(mask)
    return mask
