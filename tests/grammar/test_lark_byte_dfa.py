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
