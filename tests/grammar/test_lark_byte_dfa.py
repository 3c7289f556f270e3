"""The regex -> byte DFA compiler agrees with Python's `re.fullmatch` on the UTF-8 bytes."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constrained_spec.grammar.byte_dfa import RegexUnsupported, compile_byte_dfa

PATTERNS = [
    r'"(?:[^"\\\n]|\\[^\n])*"',
    r"(?i:select)",
    r"[a-zA-Z_]\w*",
    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
    r"[^\d]+",
    r"(?:ab|a)c{1,3}",
    r"[é-ü]x|\s+",
    r"'(?:[^'\n]|'')*'",
]
ALPHABET = 'abcABCxz_019.-+eE"\\\n \'ÿéü€😀٣'


@pytest.mark.parametrize("pattern", PATTERNS)
def test_dfa_agrees_with_re(pattern: str) -> None:
    dfa = compile_byte_dfa(pattern)
    rx = re.compile(pattern)

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(st.text(alphabet=ALPHABET, max_size=8))
    def check(text: str) -> None:
        assert dfa.fullmatch(text.encode()) == (rx.fullmatch(text) is not None), text

    check()


def test_alive_means_completable() -> None:
    """States are trimmed: a non-dead run can always be completed to a match."""
    dfa = compile_byte_dfa(r"ab+c")
    assert dfa.run(b"ab") >= 0 and dfa.run(b"ac") == -1 and dfa.run(b"abbbc") in dfa.accepting


def test_utf8_partial_characters_stay_alive() -> None:
    dfa = compile_byte_dfa(r"[é€]+")
    euro = "€".encode()
    assert dfa.run(euro[:2]) >= 0 and dfa.run(euro[:2]) not in dfa.accepting
    assert dfa.fullmatch(euro + "é".encode())


@pytest.mark.parametrize(
    "pattern, message",
    [(r"a*?b", "lazy quantifiers"), (r"(?<!x)a", "lookarounds"), (r"^a", "anchors"), (r"(a)\1", "not supported")],
)
def test_unsupported_features_raise(pattern: str, message: str) -> None:
    with pytest.raises(RegexUnsupported, match=message):
        compile_byte_dfa(pattern)


# ---- generated regexes: agreement with `re`, and the DFA trimmed, minimal and BFS-numbered ----

_ATOMS = ["a", "b", "é", "€", r"\.", "[ab]", "[^a]", "[a-cé]", r"\d", "."]


def _regexes(depth: int = 3) -> st.SearchStrategy[str]:
    atom = st.sampled_from(_ATOMS)
    return st.recursive(
        atom,
        lambda inner: st.one_of(
            st.lists(inner, min_size=2, max_size=3).map("".join),
            st.lists(inner, min_size=2, max_size=3).map(lambda parts: "(?:" + "|".join(parts) + ")"),
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,2}"])).map(lambda p: f"(?:{p[0]}){p[1]}"),
        ),
        max_leaves=8,
    )


def _distinguishable_pairs(trans: tuple, accepting: frozenset) -> set[tuple[int, int]]:
    """Table filling (the textbook oracle, independent of our Moore refinement): pairs of states
    told apart by some byte string; the dead state is -1."""
    states = list(range(len(trans))) + [-1]
    step = lambda s, b: trans[s][b] if s >= 0 else -1  # noqa: E731
    apart = {(p, q) for p in states for q in states if (p in accepting) != (q in accepting)}
    changed = True
    while changed:
        changed = False
        for p in states:
            for q in states:
                if p != q and (p, q) not in apart and any((step(p, b), step(q, b)) in apart for b in range(256)):
                    apart.add((p, q))
                    changed = True
    return apart


@settings(max_examples=150, deadline=None, derandomize=True)
@given(_regexes(), st.lists(st.text(alphabet="abcé€.1", max_size=6), min_size=20, max_size=20))
def test_generated_regexes(pattern: str, texts: list[str]) -> None:
    dfa = compile_byte_dfa(pattern)
    rx = re.compile(pattern, re.DOTALL)
    for text in texts:
        assert dfa.fullmatch(text.encode()) == (rx.fullmatch(text) is not None), (pattern, text)
    n = len(dfa.trans)
    # trimmed: every state reaches acceptance (or the language is empty and state 0 is dead)
    if dfa.accepting:
        reach = set(dfa.accepting)
        while True:
            more = {s for s in range(n) if s not in reach and any(t in reach for t in dfa.trans[s])}
            if not more:
                break
            reach |= more
        assert reach == set(range(n)), pattern
    # numbered breadth-first from 0, bytes in order
    seen, queue = {0: 0}, [0]
    for s in queue:
        for t in dfa.trans[s]:
            if t >= 0 and t not in seen:
                seen[t] = len(seen)
                queue.append(t)
    assert all(s == i for s, i in seen.items()) and len(seen) == n, pattern
    # minimal: every two states (and each with the dead state) are told apart
    if n <= 12:
        apart = _distinguishable_pairs(dfa.trans, dfa.accepting)
        states = list(range(n)) + [-1]
        assert all((p, q) in apart for p in states for q in states if p != q), pattern
