"""Bundled grammars on SmolLM2's real 49k vocabulary, held against `lark.Lark(...).parse`.

Valid texts are accepted token by token (canonical tokenization) and end accepting; invalid ones
are rejected at some token; seeded random walks (N=1 per grammar, 12 tokens, uniform over allowed
tokens, then the shortest completion by forced bytes is not needed: we only check that every
prefix stays a prefix Lark can complete, by finishing with allowed tokens and parsing).
"""

from __future__ import annotations

import random

import lark
import pytest

from constrained_spec.grammar.lark_engine import compile_lark
from constrained_spec.grammars import bundled_grammar_names, load_bundled_grammar

from lark_helpers import allowed_ids, lark_accepts

VALID = {
    "json": ['{"a": [1, -2.5e3, true, false, null], "b": {"c": "x\\n\\u00e9"}}', "[]", '  "str" ', "0"],
    "arithmetic": ["1 + 2*x - f(3, y)^2 / (4 - -z)", "sqrt(a_1)", "((1))"],
    "sql": [
        "SELECT a, b AS c, count(*) FROM t JOIN u ON t.id = u.id WHERE a > 1 AND b LIKE '%x%' ORDER BY a DESC LIMIT 10;",
        "select distinct name from users where age between 18 and 30 and email is not null",
    ],
    "tool_call": ['<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}</tool_call>'],
}
INVALID = {
    "json": ['{"a": 1,}', "[1 2]", '{"a" 1}', "01"],
    "arithmetic": ["1 + * 2", "f(1,)", "(1"],
    "sql": ["SELECT FROM t", "SELECT a FROM t WHERE", "SELECT a t FROM u v w"],
    "tool_call": ['<tool_call>{"arguments": {}, "name": "x"}</tool_call>', '<tool_call>{"name": 1, "arguments": {}}</tool_call>'],
}

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def tokenizer(smollm2_tokenizer):
    return smollm2_tokenizer  # session-wide (conftest.py): loaded once for every grammar test


@pytest.fixture(scope="module")
def vocab(smollm2_vocab):
    return smollm2_vocab


@pytest.fixture(scope="module")
def compiled(vocab):
    return {name: compile_lark(load_bundled_grammar(name), vocab) for name in bundled_grammar_names()}


def test_bundled_names_and_unknown_name() -> None:
    assert {"json", "arithmetic", "sql", "tool_call"} <= set(bundled_grammar_names())
    with pytest.raises(ValueError, match="unknown bundled grammar 'yaml'"):
        load_bundled_grammar("yaml")


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_texts_accepted(compiled, tokenizer, name) -> None:
    parser = lark.Lark(load_bundled_grammar(name), parser="lalr")
    for text in VALID[name]:
        assert lark_accepts(parser, text)
        m = compiled[name].matcher()
        ids = tokenizer.encode(text)
        assert m.validate_tokens(ids) == len(ids)
        for tok in ids:
            assert tok in allowed_ids(m), (text, tokenizer.decode([tok]))
            m.accept_token(tok)
        assert m.is_accepting(), text


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_texts_rejected(compiled, tokenizer, name) -> None:
    parser = lark.Lark(load_bundled_grammar(name), parser="lalr")
    for text in INVALID[name]:
        assert not lark_accepts(parser, text)
        m = compiled[name].matcher()
        ids = tokenizer.encode(text)
        n = m.validate_tokens(ids)
        for tok in ids[:n]:
            m.accept_token(tok)
        assert n < len(ids) or not m.is_accepting(), text


@pytest.mark.parametrize("name", sorted(VALID))
def test_random_walks_complete_and_parse(compiled, tokenizer, name) -> None:
    """Seeded walks: 12 uniform steps over allowed tokens, then greedily finish with the allowed
    token that is shortest (EOS when allowed, within 60 steps). The text must parse with Lark."""
    parser = lark.Lark(load_bundled_grammar(name), parser="lalr")
    eos = tokenizer.eos_token_id
    rng = random.Random(1234)
    tb = compiled[name].vocab.token_bytes
    closing = ['"', "'", "}", "]", ")", " FROM", " t", "1", ">", "</", "<", "tool", "_", "call", '{"', "x", '":', ","]
    closers = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(c))[0] for c in closing]
    for _ in range(1):
        m = compiled[name].matcher()
        ids: list[int] = []
        for step in range(72):
            allowed = allowed_ids(m)
            assert allowed, "dead end: no token allowed and not accepting"
            if eos in allowed and step >= 12:
                break
            if step < 12:
                tok = rng.choice([t for t in allowed if t != eos] or allowed)
            else:  # finish: first allowed closing piece, else the shortest allowed token
                pref = [t for t in closers if t in allowed]
                tok = pref[0] if pref else min((t for t in allowed if t != eos), key=lambda t: (tb[t].isspace(), len(tb[t])))
            m.accept_token(tok)
            ids.append(tok)
        assert m.is_accepting(), b"".join(tb[t] for t in ids)
        text = b"".join(tb[t] for t in ids).decode("utf-8", errors="strict")
        assert lark_accepts(parser, text), text


def test_sql_keyword_glued_to_name_follows_lark(vocab, tokenizer) -> None:
    """`SELECTname`: Lark's contextual lexer reads SELECT + NAME (only SELECT can start), the
    basic lexer reads one NAME (then fails). The masks follow whichever lexer is chosen."""
    text = "SELECTname FROM t"
    ids = tokenizer.encode(text)
    for lexer in ("contextual", "basic"):
        parser = lark.Lark(load_bundled_grammar("sql"), parser="lalr", lexer=lexer)
        m = compile_lark(load_bundled_grammar("sql"), vocab, lexer=lexer).matcher()
        n = m.validate_tokens(ids)
        ours = n == len(ids)
        if ours:
            for tok in ids:
                m.accept_token(tok)
            ours = m.is_accepting()
        assert ours == lark_accepts(parser, text), lexer


def test_json_token_spanning_terminals(compiled, tokenizer, vocab) -> None:
    """`"},{"` style tokens cross several terminals; a string split over tokens stays one STRING."""
    m = compiled["json"].matcher()
    for piece in ['[{"', "a", '":', "1", '},{"', "b", '":"', "hel", "lo", '"}]']:
        ids = tokenizer.encode(piece)
        for tok in ids:
            m.accept_token(tok)
    assert m.is_accepting()
