"""Property tests of every matcher on toy vocabularies (hypothesis): rollback restores the exact
mask, `validate_tokens` agrees with step-by-step advance, and no allowed token is a dead end.

Dead ends: for the regex/JSON path the token-level automaton on a toy vocabulary is finite, so we
enumerate every reachable state and check exactly that each one can still reach acceptance. The
Lark path has unbounded stacks, so there we check by bounded search from every visited state.
"""

from __future__ import annotations

from collections import deque

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from constrained_spec.grammar import GrammarError, Vocabulary, compile_json_schema, compile_regex
from constrained_spec.grammar.lark_engine import compile_lark

from lark_helpers import allowed_ids, completion_exists, mask_tensor

# printable ASCII one char per token, plus tokens spanning several JSON pieces
TOKENS = ["<eos>"] + [chr(c) for c in range(0x20, 0x7F)] + ['{"', '":', '",', '"}', "true", "null", "12", "ab", "é", '\\"']
# lone bytes of the outlines-core sentinel (U+10FFFF): they must never lead into a dead state
SENTINEL_BYTES = [b"\xf4", b"\x8f", b"\xbf"]
EOS = 0
SCHEMAS = {
    "object": {"type": "object", "properties": {"a": {"type": "integer", "minimum": -5, "maximum": 30}, "b": {"type": "string", "maxLength": 3}}, "required": ["a"]},
    "enum_array": {"type": "array", "items": {"enum": ["ab", "x", 7]}, "maxItems": 3},
    "nullable": {"anyOf": [{"type": "null"}, {"type": "boolean"}, {"type": "string", "pattern": "^[a-c]{1,2}$"}]},
}
REGEXES = [r"[0-9]+(\.[0-9]+)?", r"(ab|a)*b?c", r'\{"k":(true|null|-?[0-9]{1,3})\}', r"é[a-c]{0,4}"]
LARK = r"""
start: value
value: "[" [value ("," value)*] "]" | NUMBER | "true"
NUMBER: /[0-9]+/
"""
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.from_tokens(TOKENS + SENTINEL_BYTES, EOS, size=len(TOKENS) + 8)


def _grammars(vocab):
    out = [compile_json_schema(s, vocab, backend="native") for s in SCHEMAS.values()]
    out += [compile_regex(r, vocab) for r in REGEXES]
    return out


def _walk(matcher, data, steps: int) -> list[int]:
    """Advance along random allowed tokens (never EOS); returns the accepted ids."""
    taken = []
    for _ in range(steps):
        choices = [t for t in allowed_ids(matcher) if t != EOS]
        if not choices:
            break
        token = data.draw(st.sampled_from(choices))
        matcher.accept_token(token)
        taken.append(token)
    return taken


def _check_rollback_and_validate(compiled, data) -> None:
    m = compiled.matcher()
    prefix = _walk(m, data, data.draw(st.integers(0, 6)))
    before = mask_tensor(m).clone()
    tail = _walk(m, data, data.draw(st.integers(1, 6)))
    m.rollback(len(tail))
    assert torch.equal(mask_tensor(m), before), "rollback did not restore the mask"
    # validate_tokens == how far step-by-step accept gets, for a random (possibly bad) sequence
    seq = tail + data.draw(st.lists(st.integers(0, len(TOKENS) + len(SENTINEL_BYTES) - 1), max_size=4))
    probe, count = m.fork(), 0
    for token in seq:
        try:
            probe.accept_token(token)
        except GrammarError:
            break
        count += 1
    assert m.validate_tokens(seq) == count
    assert torch.equal(mask_tensor(m), before), "validate_tokens changed the state"
    m.rollback(len(prefix))
    assert torch.equal(mask_tensor(m), mask_tensor(compiled.matcher()))


@pytest.mark.parametrize("which", range(len(SCHEMAS) + len(REGEXES)))
@SETTINGS
@given(data=st.data())
def test_regex_json_rollback_and_validate(vocab, which, data):
    _check_rollback_and_validate(_grammars(vocab)[which], data)


@SETTINGS
@given(data=st.data())
def test_lark_rollback_and_validate(vocab, data):
    _check_rollback_and_validate(compile_lark(LARK, vocab), data)


@pytest.mark.parametrize("which", range(len(SCHEMAS) + len(REGEXES)))
def test_regex_json_no_dead_ends_exhaustive(vocab, which):
    """Every state reachable through allowed tokens can still reach acceptance (exact: BFS over
    the whole finite token-level automaton)."""
    compiled = _grammars(vocab)[which]
    start = compiled.matcher()
    seen: dict[int, list[int]] = {start.state: []}  # state -> one path to it
    edges: dict[int, set[int]] = {}
    todo = deque([start.state])
    while todo:
        state = todo.popleft()
        m = compiled.matcher()
        for t in seen[state]:
            m.accept_token(t)
        edges[state] = set()
        for token in allowed_ids(m):
            if token == EOS:
                continue
            child = m.fork()
            child.accept_token(token)
            edges[state].add(child.state)
            if child.state not in seen:
                seen[child.state] = seen[state] + [token]
                todo.append(child.state)
    assert len(seen) > 2
    accepting = {s for s in seen if compiled.is_final(s)}
    alive, changed = set(accepting), True
    while changed:
        changed = False
        for s, nexts in edges.items():
            if s not in alive and nexts & alive:
                alive.add(s)
                changed = True
    assert alive == set(seen), f"dead-end states reachable: {sorted(set(seen) - alive)[:5]}"


_CLOSING_FIRST = [TOKENS.index(t) for t in ("]", "1", "true")]  # completion_exists tries these first


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_lark_no_dead_ends_bounded(vocab, data):
    """Along random walks, every allowed token leaves a state from which acceptance is reachable
    (bounded search: nesting depth + 3 tokens suffice for this grammar's shortest completions)."""
    m = compile_lark(LARK, vocab).matcher()
    taken = _walk(m, data, data.draw(st.integers(0, 5)))
    depth = 3 + sum(TOKENS[t].count("[") for t in taken)
    for token in allowed_ids(m):
        if token == EOS:
            assert m.is_accepting()
            continue
        child = m.fork()
        child.accept_token(token)
        assert completion_exists(child, EOS, depth, _CLOSING_FIRST), f"dead end after {[TOKENS[t] for t in taken + [token]]}"
