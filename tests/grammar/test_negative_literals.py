"""Patterns with leading negative lookaheads of literal strings (real schemas: yap, Bukkit and
Paper plugins, MongoDB, ...) on the default backend, against Python's re (what jsonschema
uses) on random strings; and the complement regex on its own."""

from __future__ import annotations

import json
import random
import re

import pytest

from constrained_spec.grammar import Vocabulary, compile_json_schema
from constrained_spec.grammar.llguidance_backend import LLGuidanceGrammar
from constrained_spec.grammar.negative_literals import leading_lookaheads, literals_complement

from schema_oracle import engine_of

BYTES = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
PATTERNS = [
    r"^(?!\.)(?!\./).+",  # yap: a sub-directory not starting with '.'
    r"^(?!org\.bukkit\.)([a-zA-Z_$][a-zA-Z\d_$]*\.)*[a-zA-Z_$][a-zA-Z\d_$]*$",
    r"^(?!^lucene\.|builtin\.|mongodb\.).*",
    r"^(?!(?:meta|local)$).*$",
    r"^(?!ab|a$)(?!b)[a-c]{0,3}$",
]


def _accepts(compiled, text: str) -> bool:
    ids = list(json.dumps(text).encode()) + [256]
    return compiled.matcher().validate_tokens(ids) == len(ids)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_lookahead_patterns_match_like_re(pattern):
    compiled = compile_json_schema({"type": "string", "pattern": pattern}, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    rng = random.Random(pattern)
    alphabet = sorted(set(re.sub(r"\\.|[^a-z.]", "", pattern)) | {".", "/", "x", "A", "1", "$", " "})
    seen = {True: 0, False: 0}
    for n in range(400):  # 400 strings a pattern, biased toward the excluded words' letters
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 14)))
        if n % 4 == 0:
            text = rng.choice(["meta", "local", "org.bukkit.", "lucene.", "builtin.", "mongodb.", "./", ".", "ab", "a", "b"]) + text[: n % 3 if n % 8 else 0]
        expected = re.search(pattern, text) is not None
        assert _accepts(compiled, text) == expected, (pattern, text)
        seen[expected] += 1
    assert seen[True] >= 5 and seen[False] >= 5, seen  # both sides of every pattern walked


def test_complement_of_words_and_prefixes():
    pattern = re.compile(literals_complement([("meta", True), ("local", True), ("org.", False), ("or", True), ("x]y", True)]))
    for text, allowed in [("meta", False), ("metas", True), ("met", True), ("local", False), ("", True), ("org.x", False),
                          ("org.", False), ("org", True), ("or", False), ("o", True), ("x]y", False), ("x]", True), ("a\nb", True)]:
        assert (pattern.fullmatch(text) is not None) == allowed, text
    assert re.compile(literals_complement([("", False)])).fullmatch("") is None  # every string starts with ""


def test_other_lookarounds_stay_unsplit():
    for pattern in [r"^(?![ \t]*\(default)[\s\S]*", r"^(?!a)b(?=c)", r"^a(?!b)", r"(?!a)b", r"^(?!a+)b", r"^(?!(?i)a)b"]:
        assert leading_lookaheads(pattern) is None, pattern
