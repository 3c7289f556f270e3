"""The Lark engine on a toy vocabulary, held against Lark itself.

Exactness oracle: a token is allowed iff `lark.Lark(...).parse` accepts prefix + token + some
continuation made of vocabulary tokens (searched up to a small depth; the toy grammars' strings
complete within that depth), and every allowed token can still reach an accepting state.
"""

from __future__ import annotations

import itertools
import random

import lark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constrained_spec.grammar.lark_engine import compile_lark
from constrained_spec.grammar.protocol import GrammarError, GrammarMatcher
from constrained_spec.grammar.vocabulary import Vocabulary

from lark_helpers import allowed_ids, completion_exists, lark_accepts, mask_tensor

LIST_GRAMMAR = r"""
start: "[" [item ("," item)*] "]"
item: NAME | NUMBER | "{" "}"
NAME: /[a-z]+/
NUMBER: /[0-9]+/
%ignore " "
"""
# Tokens that span several terminals ("},{", "1,", "],"), split terminals ("ab" + "c") and
# glue a keyword-like run to a name.
TOKENS = ["<eos>", "[", "]", ",", " ", "a", "b", "ab", "1", "12", "1,", "{", "}", "},{", "}]", "[{", ", ", "x]", "0"]
EOS = 0


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.from_tokens(TOKENS, eos_token_id=EOS)


@pytest.fixture(scope="module")
def grammar(vocab):
    return compile_lark(LIST_GRAMMAR, vocab)


@pytest.fixture(scope="module")
def parser() -> lark.Lark:
    return lark.Lark(LIST_GRAMMAR, parser="lalr")


def _text(ids) -> str:
    return "".join(TOKENS[i] for i in ids if i != EOS)


def _oracle_allowed(parser, prefix: str, depth: int = 3) -> set[int]:
    """Tokens t such that Lark parses prefix + t + s for some s of <= depth-1 tokens."""
    pieces = [t for t in TOKENS[1:]]
    suffixes = [""] + ["".join(c) for n in range(1, depth) for c in itertools.product(pieces, repeat=n)]
    out = set()
    for i, tok in enumerate(TOKENS):
        if i == EOS:
            if lark_accepts(parser, prefix):
                out.add(EOS)
            continue
        if any(lark_accepts(parser, prefix + tok + s) for s in suffixes):
            out.add(i)
    return out


def test_matcher_implements_protocol(grammar) -> None:
    assert isinstance(grammar.matcher(), GrammarMatcher)
    assert grammar.vocab_size == len(TOKENS)


@pytest.mark.parametrize("prefix", [[], [1], [1, 8], [1, 5], [1, 11], [1, 11, 12, 3], [1, 7, 16]])
def test_mask_equals_lark_oracle(grammar, parser, prefix) -> None:
    m = grammar.matcher()
    for tok in prefix:
        m.accept_token(tok)
    assert set(allowed_ids(m)) == _oracle_allowed(parser, _text(prefix))


def test_tokens_spanning_terminals_and_split_terminals(grammar, parser) -> None:
    m = grammar.matcher()
    path = ["[{", "},{", "}", ",", " ", "a", "b", "ab", ", ", "1", "12", "1,", "x]"]
    for piece in path:
        m.accept_token(TOKENS.index(piece))
    assert m.is_accepting() and lark_accepts(parser, "".join(path))
    m.accept_token(EOS)
    assert m.is_terminated() and allowed_ids(m) == []


def test_maximal_munch_no_split_inside_a_terminal(grammar) -> None:
    """`a` then `b` continues one NAME: `[ab]` parses, so the state after `[a` + `b` must be
    mid-NAME (and `1`+`2` one NUMBER); a NAME directly followed by a NUMBER is one lexeme error."""
    m = grammar.matcher()
    for piece in ["[", "a", "b"]:
        m.accept_token(TOKENS.index(piece))
    assert TOKENS.index("1") not in allowed_ids(m)  # NAME then NUMBER with no separator


def test_forbidden_token_raises_and_keeps_state(grammar) -> None:
    m = grammar.matcher()
    before = mask_tensor(m)
    with pytest.raises(GrammarError, match="not allowed"):
        m.accept_token(TOKENS.index("]"))
    assert (mask_tensor(m) == before).all()
    with pytest.raises(GrammarError, match="not allowed"):
        m.accept_token(EOS)


def test_rollback_past_start_raises(grammar) -> None:
    m = grammar.matcher()
    m.accept_token(1)
    with pytest.raises(GrammarError, match="cannot roll back 2 tokens"):
        m.rollback(2)


def test_bad_grammar_raises_with_lark_message(vocab) -> None:
    with pytest.raises(GrammarError, match="invalid Lark grammar"):
        compile_lark("start: undefined_rule", vocab)
    with pytest.raises(GrammarError, match="lazy quantifiers"):
        compile_lark('start: A\nA: /a+?/', vocab)
    with pytest.raises(GrammarError, match="lexer must be"):
        compile_lark(LIST_GRAMMAR, vocab, lexer="dynamic")


def test_eos_and_is_accepting(grammar) -> None:
    m = grammar.matcher()
    assert not m.is_accepting() and EOS not in allowed_ids(m)
    m.accept_token(1)
    m.accept_token(2)
    assert m.is_accepting() and EOS in allowed_ids(m)
    m.accept_token(EOS)
    assert m.is_terminated() and not m.is_accepting()
    with pytest.raises(GrammarError, match="terminated"):
        m.accept_token(1)
    m.rollback(1)
    assert m.is_accepting() and not m.is_terminated()


def test_forced_bytes(vocab) -> None:
    g = compile_lark('start: "hello" " world" NAME\nNAME: /[a-z]+/\n%ignore " "', vocab)
    m = g.matcher()
    assert m.forced_bytes() == b"hello world"  # ignored whitespace read as absent
    assert m.forced_bytes(3) == b"hel"


def _random_walk(grammar, rng: random.Random, steps: int) -> list[int]:
    m = grammar.matcher()
    path = []
    for _ in range(steps):
        ids = allowed_ids(m)
        if not ids:
            break
        tok = rng.choice(ids)
        m.accept_token(tok)
        path.append(tok)
        if tok == EOS:
            break
    return path


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10**6), steps=st.integers(1, 10), back=st.integers(0, 10))
def test_advance_then_rollback_restores_mask(grammar, seed, steps, back) -> None:
    rng = random.Random(seed)
    prefix = _random_walk(grammar, rng, rng.randint(0, 4))
    m = grammar.matcher()
    for tok in prefix:
        m.accept_token(tok)
    extra = _random_walk_from(m.fork(), rng, steps)
    assert m.validate_tokens(extra) == len(extra)
    masks = [mask_tensor(m)]  # masks[i]: after prefix + extra[:i]
    for tok in extra:
        m.accept_token(tok)
        masks.append(mask_tensor(m))
    k = min(back, len(extra))
    m.rollback(k)  # partially: back to prefix + extra[:len(extra) - k]
    assert m.num_accepted == len(prefix) + len(extra) - k
    assert (mask_tensor(m) == masks[len(extra) - k]).all()
    m.rollback(len(extra) - k)  # the rest
    assert m.num_accepted == len(prefix) and (mask_tensor(m) == masks[0]).all()


def _random_walk_from(m, rng, steps) -> list[int]:
    path = []
    for _ in range(steps):
        ids = allowed_ids(m)
        if not ids:
            break
        tok = rng.choice(ids)
        m.accept_token(tok)
        path.append(tok)
        if tok == EOS:
            break
    return path


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, len(TOKENS) - 1), max_size=8))
def test_validate_tokens_agrees_with_stepwise(grammar, tokens) -> None:
    m = grammar.matcher()
    n = m.validate_tokens(tokens)
    step = grammar.matcher()
    count = 0
    for tok in tokens:
        try:
            step.accept_token(tok)
        except GrammarError:
            break
        count += 1
    assert n == count
    assert m.num_accepted == 0  # validate_tokens leaves the state unchanged


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10**6))
def test_no_dead_ends(grammar, seed) -> None:
    """Every allowed token at a few points along a random walk can still be completed."""
    rng = random.Random(seed)
    m = grammar.matcher()
    for _ in range(rng.randint(0, 5)):
        ids = [t for t in allowed_ids(m) if t != EOS]
        if not ids:
            break
        m.accept_token(rng.choice(ids))
    for tok in allowed_ids(m):
        if tok == EOS:
            assert m.is_accepting()
            continue
        child = m.fork()
        child.accept_token(tok)
        assert completion_exists(child, EOS, depth=4), (TOKENS[tok],)


def test_random_walks_parse_with_lark(grammar, parser) -> None:
    """Seeded walks (N=60) over allowed tokens end in texts Lark parses."""
    rng = random.Random(0)
    finished = 0
    for _ in range(60):
        m = grammar.matcher()
        path = []
        for _ in range(30):
            ids = allowed_ids(m)
            # Prefer finishing late in the walk so texts are not all trivially short.
            tok = EOS if EOS in ids and len(path) > 6 else rng.choice([t for t in ids if t != EOS] or ids)
            m.accept_token(tok)
            path.append(tok)
            if tok == EOS:
                break
        if path[-1] == EOS:
            finished += 1
            assert lark_accepts(parser, _text(path)), _text(path)
    assert finished >= 30


# every_match (JSON schemas' grammars): a lexeme two terminals match is read as each, not as Lark's
# first, and where a terminal accepts while a longer one goes on (K = `"k"` beside KC = `"k":`),
# the lexeme may end there too. Quoted terminals end at their quote, so no other parse is lost and
# the language is the grammar's own: Earley with a lexer trying every match is the oracle.
OVERLAP_GRAMMAR = r"""
start: "[" [item ("," item)*] "]"
item: DIGITS ":" "1" | WORD ":" "2" | "{" AB "}" | "{" LETTERS ":" "}" | "{" K ":" "1" "}" | "{" KC "2" "}"
DIGITS: /"[0-9]{1,2}"/
WORD: /"[a-z0-9]*"/
AB: "\"ab\""
LETTERS: /"[ab]+"/
K: "\"k\""
KC: "\"k\":"
"""
OVERLAP_TOKENS = ["<eos>", "[", "]", ",", '"', "1", "2", "3", "12", "123", "a", "b", "ab", ":", '":', '"1', "{", "}", ":1", ":2", "k", '"k":', 'k":1', "}]"]


@pytest.mark.parametrize("vectorized", [False, True])
def test_every_match_reads_a_lexeme_as_each_terminal(vectorized, monkeypatch) -> None:
    """vectorized: every group of tokens resolved by the numpy walks (walk_rows_early), as with a
    real vocabulary, not token by token through `advance` (the toy vocabulary's groups are small)."""
    import constrained_spec.grammar.lark_engine as engine

    monkeypatch.setattr(engine, "_SMALL_GROUP", 0 if vectorized else engine._SMALL_GROUP)
    vocab = Vocabulary.from_tokens(OVERLAP_TOKENS, eos_token_id=EOS)
    grammar = compile_lark(OVERLAP_GRAMMAR, vocab, every_match=True)
    first = compile_lark(OVERLAP_GRAMMAR, vocab)
    oracle = lark.Lark(OVERLAP_GRAMMAR, parser="earley", lexer="dynamic_complete")
    texts = ['["12":1]', '["12":2]', '["1":2,"ab":2]', '[{"ab"}]', '[{"ab":}]', '[{"ba":}]', '["123":2]', '["123":1]',
             '[{"ab"]', '["":2,"1":1]', '[{"a":},{"ab"}]', '["ab":1]', '[{"k":1}]', '[{"k":2}]', '[{"k":3}]', '[{"k"}]']
    for text in texts:
        assert _accepts(grammar, text) == lark_accepts(oracle, text), text
    # Lark's rule keeps one terminal: "12" is DIGITS (or WORD), so one of these two is lost; and
    # the longest match: `"k":` is KC, so K's item is lost
    assert not (_accepts(first, '["12":1]') and _accepts(first, '["12":2]'))
    assert _accepts(grammar, '[{"k":1}]') and not _accepts(first, '[{"k":1}]')
    # masks, on random walks: every token the oracle completes within two more pieces is allowed,
    # and every allowed token leads to a text the oracle parses (no dead end, nothing invalid)
    rng = random.Random(7)
    pieces = OVERLAP_TOKENS[1:]
    fixed = [["[", "{", '"'], ["[", "{"], ["[", '"1'], ["[", '"', "12"]]  # before `k":1` (K ended early), `"12` (two terminals)
    for walk in range(len(fixed) + 12):
        m, text = grammar.matcher(), ""
        for piece in fixed[walk] if walk < len(fixed) else ():
            m.accept_token(OVERLAP_TOKENS.index(piece))
            text += piece
        for _ in range(rng.randint(0, 6) if walk >= len(fixed) else 0):
            ids = [i for i in allowed_ids(m) if i != EOS]
            if not ids:
                break
            tok = rng.choice(ids)
            m.accept_token(tok)
            text += OVERLAP_TOKENS[tok]
        allowed = set(allowed_ids(m))
        assert (EOS in allowed) == lark_accepts(oracle, text), text
        assert {i for i, tok in enumerate(OVERLAP_TOKENS) if i != EOS and _completes(oracle, text + tok, pieces, 1)} <= allowed, text
        for tok in allowed - {EOS}:
            child = m.fork()
            child.accept_token(tok)
            completion = _completion(child, 8)
            assert completion is not None and lark_accepts(oracle, text + OVERLAP_TOKENS[tok] + completion), (text, OVERLAP_TOKENS[tok])


def test_forced_bytes_through_a_lexeme_ending_early() -> None:
    """forced_bytes follows every parse, a lexeme ending early included: after `[{"k` the
    text goes on `":` (K then `:`, or KC), then `1` or `2`. At every prefix of these texts, over
    a vocabulary of single bytes, it equals the bytes the mask alone forces (one byte allowed,
    no EOS), checked byte by byte."""
    vocab = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
    grammar = compile_lark(OVERLAP_GRAMMAR, vocab, every_match=True)

    def forced_by_masks(matcher) -> bytes:
        out = b""
        while True:
            allowed = set(allowed_ids(matcher))
            if len(allowed) != 1 or 256 in allowed:
                return out
            (byte,) = allowed
            matcher.accept_token(byte)
            out += bytes([byte])

    seen = set()
    for text in ['[{"k":1}]', '[{"k":2}]', '["12":1]', '[{"ab":},{"ab"}]']:
        for end in range(len(text) + 1):
            matcher = grammar.matcher()
            for byte in text[:end].encode():
                matcher.accept_token(byte)
            forced = matcher.forced_bytes()
            assert forced == forced_by_masks(matcher.fork()), text[:end]
            seen.add(forced)
    assert b'":' in seen  # forced across the early end (K or KC)


def _accepts(grammar, text: str) -> bool:
    """Whether `text`, written greedily in OVERLAP_TOKENS' longest pieces, is a complete parse."""
    m, rest = grammar.matcher(), text
    while rest:
        tok = max((i for i, t in enumerate(OVERLAP_TOKENS) if i != EOS and rest.startswith(t)), key=lambda i: len(OVERLAP_TOKENS[i]))
        if m.validate_tokens([tok]) == 0:
            return False
        m.accept_token(tok)
        rest = rest[len(OVERLAP_TOKENS[tok]):]
    return m.is_accepting()


def _completes(oracle, text: str, pieces: list[str], depth: int) -> bool:
    if lark_accepts(oracle, text):
        return True
    return depth > 0 and any(_completes(oracle, text + p, pieces, depth - 1) for p in pieces)


def _completion(matcher, depth: int) -> str | None:
    """A text completing `matcher`'s, found through its masks (closing pieces first)."""
    if matcher.is_accepting():
        return ""
    closing = ["\"", ":1", "}", "]", "a"]
    for tok in sorted(allowed_ids(matcher), key=lambda i: closing.index(OVERLAP_TOKENS[i]) if OVERLAP_TOKENS[i] in closing else 9):
        if depth == 0 or tok == EOS:
            continue
        child = matcher.fork()
        child.accept_token(tok)
        rest = _completion(child, depth - 1)
        if rest is not None:
            return OVERLAP_TOKENS[tok] + rest
    return None


def test_masks_are_the_same_with_caches_cleared_at_every_step(vocab, monkeypatch) -> None:
    """A grammar's mask caches are cleared past _CACHE_BYTES (a long-lived server's grammar would
    otherwise keep a 49k-token row per state it met); cleared at every insert, masks are unchanged."""
    import constrained_spec.grammar.lark_engine as engine

    kept = compile_lark(LIST_GRAMMAR, vocab)
    monkeypatch.setattr(engine, "_CACHE_BYTES", 1)
    cleared = compile_lark(LIST_GRAMMAR, vocab)
    rng = random.Random(3)
    for _ in range(20):
        path = _random_walk(kept, rng, 8)
        a, b = kept.matcher(), cleared.matcher()
        for tok in path:
            assert allowed_ids(a) == allowed_ids(b) and a.forced_bytes() == b.forced_bytes()
            a.accept_token(tok)
            b.accept_token(tok)
    assert len(cleared._allowed) <= 1 and len(cleared._packed) <= 1


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.binary(min_size=1, max_size=4) | st.binary(max_size=3).map(lambda rest: b"a" + rest), min_size=1, max_size=40),
       st.data())
def test_rows_by_first_byte_are_the_rows_that_start_so(tokens: list[bytes], data) -> None:
    """The layout's first-byte index (a lexer state few bytes continue walks only the tokens
    starting with one of them) against a scan of every token's first byte, for byte sets drawn
    from the tokens' own first bytes (several bytes, rows from each: the slices merged in order)
    and their complements."""
    import numpy as np

    from constrained_spec.grammar.token_tables import TokenLayout

    layout = TokenLayout(tokens)
    first = data.draw(st.sets(st.sampled_from(sorted({t[0] for t in tokens})), max_size=8) | st.sets(st.integers(0, 255), max_size=12))
    for marked in (first, set(range(256)) - first):
        mask = np.zeros(256, dtype=bool)
        mask[list(marked)] = True
        expected = [k for k in range(layout.num_tokens) if int(layout.bytes[k, 0]) in marked]
        assert layout.rows_starting(mask).tolist() == expected
        assert layout.starting_count(mask) == len(expected)
