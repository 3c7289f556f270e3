"""JSON-object mode never repeats a key in one object (issue 15 item 6): the mask, validate,
accept, rollback and fork of `grammar/unique_keys.py` over a toy vocabulary, and a seeded random
walk (N = 300 walks) whose every accepted text parses without duplicate keys."""

import json
import random

import pytest

from constrained_spec.bitmask import new_bitmask, unpack_bitmask
from constrained_spec.grammar import GrammarError, compile
from constrained_spec.testing import toy_vocabulary

TOKENS = ("<eos>", "a", "b", "{", "}", '"', ":", ",", '":', '"a"', "\\", "u", "0", "6", "1", "[", "]", "true")


@pytest.fixture(scope="module")
def setup():
    vocab = toy_vocabulary(TOKENS)
    return vocab, compile(json_object=True, vocab=vocab), {t: i for i, t in enumerate(TOKENS)}


def feed(matcher, ids, pieces):
    for piece in pieces:
        matcher.accept_token(ids[piece])


def allowed(matcher, vocab):
    mask = new_bitmask(1, vocab.size)
    matcher.fill_bitmask(mask)
    return set(unpack_bitmask(mask, vocab.size)[0].nonzero().flatten().tolist())


def test_a_repeated_key_cannot_be_closed(setup):
    vocab, grammar, ids = setup
    m = grammar.matcher()
    feed(m, ids, ["{", '"a"', ":", "{", "}", ",", '"', "a"])
    assert ids['"'] not in allowed(m, vocab) and ids['":'] not in allowed(m, vocab)
    with pytest.raises(GrammarError, match="repeat a key"):
        m.accept_token(ids['":'])
    m.accept_token(ids["b"])  # "ab" is a new key
    assert ids['":'] in allowed(m, vocab)
    other = grammar.matcher()
    feed(other, ids, ["{", '"a"', ":", "{", "}", ","])
    assert ids['"a"'] not in allowed(other, vocab)  # the whole key in one token
    assert other.validate_tokens([ids['"'], ids["a"], ids['":']]) == 2


def test_escaped_spelling_is_the_same_key_and_nested_objects_are_separate(setup):
    vocab, grammar, ids = setup
    m = grammar.matcher()
    feed(m, ids, ["{", '"a"', ":", "{", '"a"', ":", "[", "]", "}", ",", '"', "\\", "u", "0", "0", "6", "1"])
    assert ids['"'] not in allowed(m, vocab)  # "\u0061" is "a"
    fork = m.fork()
    m.rollback(5)  # back to after `,"` : key next
    assert ids["b"] in allowed(m, vocab)
    feed(fork, ids, ["0"])  # "\u00610" is a different key
    assert ids['"'] in allowed(fork, vocab)


def test_a_token_closing_a_key_after_an_escape_is_checked():
    """A token `\\u0062"` closes the key `a` + `\\u0062` = `ab`, used before: the fast path inside a
    key checks such tokens (a backslash before their first unescaped quote) and masks alike with
    the general path; `\\"` (an escaped quote) closes nothing and stays allowed."""
    from constrained_spec.grammar.unique_keys import UniqueKeysMatcher

    tokens = ("<eos>", "{", "}", '"', ":", ",", "1", "a", "b", '\\u0062"', '\\"')
    vocab = toy_vocabulary(tokens)
    ids = {t: i for i, t in enumerate(tokens)}
    m = compile(json_object=True, vocab=vocab).matcher()
    feed(m, ids, ["{", '"', "a", "b", '"', ":", "1", ",", '"', "a"])  # {"ab":1,"a
    fast = allowed(m, vocab)
    assert ids['\\u0062"'] not in fast  # would close the key ab again
    assert ids['\\"'] in fast and ids["a"] in fast  # the key goes on: a" or aa
    general = UniqueKeysMatcher._mask_key_ends
    try:
        UniqueKeysMatcher._mask_key_ends = lambda *args: False
        assert allowed(m, vocab) == fast
    finally:
        UniqueKeysMatcher._mask_key_ends = general


def test_random_walks_never_repeat_a_key(setup):
    vocab, grammar, _ = setup
    rng = random.Random(0)

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), pairs
        return dict(pairs)

    complete = 0
    for _ in range(300):
        m = grammar.matcher()
        pieces = []
        for _ in range(40):
            choices = sorted(allowed(m, vocab))
            if not choices:
                break
            token = rng.choice(choices)
            m.accept_token(token)
            if token == vocab.eos_token_id:
                text = "".join(pieces)
                json.loads(text, object_pairs_hook=no_duplicates)
                complete += 1
                break
            pieces.append(TOKENS[token])
    assert complete >= 30  # the walks do finish objects, so the check above ran


@pytest.mark.parametrize("wrapped", ["json-object", "llguidance"])
def test_key_ends_found_by_bytes_equal_the_general_path(smollm2_vocab, monkeypatch, wrapped):
    """Inside a key the wrapper finds the tokens that would close an earlier key by bisecting the
    sorted vocabulary; on the real vocabulary its masks equal the general path's (every allowed
    token with a quote advanced byte by byte), at every step of seeded walks (N = 30) through
    objects whose keys share prefixes, hold non-ASCII text or need escapes. Over llguidance
    (keys held to plain escapes) the short path traces no escaped closer that closes one key only."""
    from constrained_spec.grammar import compile_json_schema
    from constrained_spec.grammar.unique_keys import UniqueKeysGrammar, UniqueKeysMatcher

    vocab = smollm2_vocab
    if wrapped == "llguidance":
        grammar = compile_json_schema({"type": "object", "additionalProperties": {"type": "integer"}}, vocab)
        assert isinstance(grammar, UniqueKeysGrammar) and grammar.plain_escapes
    else:
        grammar = compile(json_object=True, vocab=vocab)
    keys = ["a", "ab", "abc", "name", "names", "näme", "x y", 'q"t', "c\\d", "id", "i"]
    rng = random.Random(3)
    general = UniqueKeysMatcher._mask_key_ends
    compared = 0
    for _ in range(30):
        chosen = rng.sample(keys, 6)
        # `\u00e4` spells a character needlessly: not a key over llguidance (plain escapes)
        text = "{" + ",".join(json.dumps(k, ensure_ascii=rng.random() < 0.2 and wrapped == "json-object") + ":1" for k in chosen) + "}"
        matcher = grammar.matcher()
        # half the walks split the text at random token boundaries: they stop inside keys at
        # an earlier key's prefix (`,"`+`a` before `b":`), where the tokens closing it are masked
        for token_id in _greedy_ids(vocab, text, rng if rng.random() < 0.5 else None):
            fast = new_bitmask(1, vocab.size)
            matcher.fill_bitmask(fast)
            monkeypatch.setattr(UniqueKeysMatcher, "_mask_key_ends", lambda *args: False)
            slow = new_bitmask(1, vocab.size)
            matcher.fill_bitmask(slow)
            monkeypatch.setattr(UniqueKeysMatcher, "_mask_key_ends", general)
            assert (fast == slow).all(), text
            compared += 1
            matcher.accept_token(token_id)
    assert compared > 500


def _greedy_ids(vocab, text: str, rng: random.Random | None = None) -> list[int]:
    """`text` as the longest-prefix tokenization on `vocab` (tokens that are whole bytes), or
    with `rng` a random one: each token drawn among those the text goes on with."""
    data, ids, by_bytes = text.encode(), [], {b: i for i, b in enumerate(vocab.token_bytes) if b}
    while data:
        sizes = [size for size in range(min(len(data), 16), 0, -1) if data[:size] in by_bytes]
        if not sizes:
            raise AssertionError(f"no token for {data[:4]!r}")
        size = sizes[0] if rng is None else rng.choice(sizes)
        ids.append(by_bytes[data[:size]])
        data = data[size:]
    return ids


def test_plain_key_escapes_over_llguidance(smollm2_vocab):
    """Over llguidance keys hold only the escapes JSON needs (issue 11, B6 in
    test_schema_differential): after a backslash in a key only `"`, `\\`, b, f, n, r, t, or the
    `\\u00XX` of a control character without a short escape may follow; `\\u0061` (the key `a`,
    an undeclared key to llguidance) cannot be written, in the mask or through accept_token; in
    a value string it still can."""
    from constrained_spec.grammar import compile_json_schema
    from constrained_spec.grammar.unique_keys import UniqueKeysGrammar

    vocab = smollm2_vocab
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    grammar = compile_json_schema(schema, vocab)
    assert isinstance(grammar, UniqueKeysGrammar) and grammar.plain_escapes
    by_bytes = {b: i for i, b in enumerate(vocab.token_bytes) if b is not None}
    m = grammar.matcher()
    for piece in (b"{", b'"', b"\\"):
        m.accept_token(by_bytes[piece])
    after_slash = allowed(m, vocab)
    assert after_slash, "some escape must stay writable"
    assert all(vocab.token_bytes[t][:1] in (b'"', b"\\", b"b", b"f", b"n", b"r", b"t", b"u") for t in after_slash)
    assert by_bytes[b"n"] in after_slash and by_bytes[b"u"] in after_slash  # \u: control characters only
    m.accept_token(by_bytes[b"u"])
    assert by_bytes[b"0"] in allowed(m, vocab) and by_bytes[b"6"] not in allowed(m, vocab)
    m.accept_token(by_bytes[b"0"])
    m.accept_token(by_bytes[b"0"])
    assert by_bytes[b"1"] in allowed(m, vocab) and by_bytes[b"6"] not in allowed(m, vocab)  # \u006.: a letter
    with pytest.raises(GrammarError):
        m.accept_token(by_bytes[b"6"])
    m.accept_token(by_bytes[b"1"])
    assert by_bytes[b"4"] in allowed(m, vocab)  # \u0014 (no short escape): needed
    m.rollback(4)
    # before the backslash: no token that spells a needless escape (`\u0061`, `\/`) is allowed
    m.rollback(1)
    before = allowed(m, vocab)
    assert by_bytes[b"\\"] in before
    assert not [t for t in before if b"\\/" in vocab.token_bytes[t] or b"\\u006" in vocab.token_bytes[t]]
    # a value string keeps every escape JSON has
    v = grammar.matcher()
    for piece in (b"{", b'"', b"b", b'":', b'"', b"\\"):
        v.accept_token(by_bytes[piece])
    assert by_bytes[b"u"] in allowed(v, vocab)


def test_needless_escape_tokens_are_cleared_inside_keys_invalid_ones_never_offered():
    """Inside a key over llguidance the tokens that write a needless but valid JSON escape
    (`\\/`, `\\u0061`) are cleared from the mask and refused by accept_token, while tokens
    that escape against JSON itself (`\\_`) are left to the wrapped grammar, which never offers
    them: the wrapper keeps only the first kind in its per-mask AND (SmolLM2 has none, so its
    keys' masks skip it). Mask checked token by token against the escapes' meaning."""
    from constrained_spec.grammar import compile_json_schema
    from constrained_spec.grammar.unique_keys import UniqueKeysGrammar, _escape_tables

    singles = [chr(c) for c in range(32, 127)]
    escapes = ["\\/", "\\u0061", "\\_", "\\n", 'a\\/', "\\u00"]
    tokens = ["<eos>"] + singles + escapes
    vocab = toy_vocabulary(tokens)
    ids = {t: i for i, t in enumerate(tokens)}
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    grammar = compile_json_schema(schema, vocab)
    assert isinstance(grammar, UniqueKeysGrammar) and grammar.plain_escapes
    plain = _escape_tables(vocab)[0]
    assert plain is not None
    cleared = {t for t in range(len(tokens)) if not (int(plain[t >> 5]) >> (t & 31)) & 1}
    assert cleared == {ids["\\/"], ids["\\u0061"], ids["a\\/"]}  # valid JSON, needless in a key
    m = grammar.matcher()
    for piece in ("{", '"', "b"):
        m.accept_token(ids[piece])
    inside = allowed(m, vocab)
    assert ids["\\n"] in inside and ids["\\u00"] in inside and ids["\\"] in inside  # escapes a key may need
    for needless in ("\\/", "\\u0061", "a\\/", "\\_"):
        assert ids[needless] not in inside
        with pytest.raises(GrammarError):
            m.accept_token(ids[needless])
    v = grammar.matcher()  # a value string keeps `\\u0061` (llguidance itself writes no `\\/`)
    for piece in ("{", '"', "b", '"', ":", '"'):
        v.accept_token(ids[piece])
    in_value = allowed(v, vocab)
    assert ids["\\u0061"] in in_value and ids["\\n"] in in_value and ids["\\_"] not in in_value


def test_smollm2_has_no_needless_escape_token(smollm2_vocab):
    """SmolLM2's only odd-escape tokens (`\\_`, `\\'`, `\\*`, ...) are invalid JSON: no AND per key mask."""
    from constrained_spec.grammar.unique_keys import _escape_tables

    assert _escape_tables(smollm2_vocab)[0] is None
