"""Object and array bodies: comma-separated members, slot by slot, without trailing commas.

A body is a list of slots in writing order; each slot repeats one member node between `min`
and `max` times (declared properties: 0..1 or 1..1; undeclared keys: 0..n). The text is linear in
the number of slots when some slot is required (every member before it carries a trailing
comma, every member after it a leading one); when none is, it is built left to right in at most
32 nested steps (quadratic only inside a step's group of slots).
"""

from __future__ import annotations

from dataclasses import dataclass

from .json_ir import EMPTY, Alt, Chain, Node, Rep, alt, opt, regex_size, seq

__all__ = ["Slot", "members_body"]


@dataclass(frozen=True)
class Slot:
    node: Node
    min: int
    max: int | None  # None = unbounded


_MAX_STEPS = 32  # left-nested steps of an all-optional body (Rust regex's nesting limit is 250)


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
    # No slot is required. "Slots so far, at least one member written" is built left to right:
    # written(g) = written(before) + every member of group g after a comma | group g alone, first
    # member without a comma. Each member then appears twice in the regex, not once per earlier
    # slot (the plain alternation over "which member comes first" duplicated a slot at position j
    # j times in the DFA: a 12-property open object had 14,839 states, and outlines-core's token
    # index for it ~20 GB). Slots are grouped (quadratic inside a group) so that the left nesting,
    # one regex group per step, stays within the regex engine's nesting limit.
    size = -(-len(slots) // _MAX_STEPS)
    groups = [slots[i : i + size] for i in range(0, len(slots), size)]

    def alone(group: list[Slot]) -> Node:  # the group's members, at least one, nothing before
        return alt(*(seq(first(s), *(lead(t) for t in group[k + 1 :])) for k, s in enumerate(group)))

    body = alone(groups[0])
    sizes: dict[int, int] = {}
    for group in groups[1:]:
        if len(group) == 1 and regex_size(body, sizes) < regex_size(group[0].node, sizes):
            # the same language with the smaller side copied: (so far ",")? first | so far
            body = alt(seq(opt(seq(body, comma)), first(group[0])), body)
        else:
            body = alt(seq(body, *(lead(t) for t in group)), alone(group))
    if isinstance(body, Alt):  # the same members right-nested, for Lark where they recurse
        body = Alt(body.options, Chain(tuple(first(s) for s in slots), tuple(lead(s) for s in slots)))
    return body if nonempty else opt(body)
