"""Object and array bodies: comma-separated members, slot by slot, without trailing commas.

A body is a list of slots in writing order; each slot repeats one member node between `min`
and `max` times (declared properties: 0..1 or 1..1; undeclared keys: 0..n). The text is linear in
the number of slots when some slot is required (every member before it carries a trailing
comma, every member after it a leading one) and quadratic otherwise (the first member written
decides where the leading commas start).
"""

from __future__ import annotations

from dataclasses import dataclass

from .json_ir import EMPTY, Node, Rep, alt, opt, seq

__all__ = ["Slot", "members_body"]


@dataclass(frozen=True)
class Slot:
    node: Node
    min: int
    max: int | None  # None = unbounded


def _rep(item: Node, lo: int, hi: int | None) -> Node:
    return EMPTY if hi == 0 else Rep(item, lo, hi)


def members_body(slots: list[Slot], comma: Node, nonempty: bool = False) -> Node:
    """Members of `slots` in order, separated by `comma`; `nonempty`: at least one member."""
    slots = [s for s in slots if s.max != 0]
    if not slots:
        return EMPTY

    def lead(s: Slot) -> Node:  # the slot's members, each after a comma
        return _rep(seq(comma, s.node), s.min, s.max)

    def first(s: Slot) -> Node:  # the slot written first: one member, then the rest of the slot
        return seq(s.node, _rep(seq(comma, s.node), max(0, s.min - 1), None if s.max is None else s.max - 1))

    required = next((i for i, s in enumerate(slots) if s.min > 0), None)
    if required is not None:
        before = [_rep(seq(s.node, comma), 0, s.max) for s in slots[:required]]
        return seq(*before, first(slots[required]), *(lead(s) for s in slots[required + 1 :]))
    options = [seq(first(s), *(lead(t) for t in slots[k + 1 :])) for k, s in enumerate(slots)]
    body = alt(*options)
    return body if nonempty else opt(body)
