"""grammar.union (the union of compiled grammars) and JSON framed by literal text
(`compile_json_schema(frame=...)`), against oracles: every prefix of a small language enumerated,
and jsonschema on framed instances in the real tokenizer's and random tokenizations."""

import itertools
import json
import random
import re

import jsonschema
import pytest
import torch

from constrained_spec.bitmask import new_bitmask, unpack_bitmask
from constrained_spec.grammar import Vocabulary, compile
from constrained_spec.grammar.compiler import compile_json_schema
from constrained_spec.grammar.protocol import GrammarError
from constrained_spec.grammar.union import UnionGrammar

PIECES = [b"a", b"b", b"c", b"ab", b"bc", b"ca", b"abc", b"cc"]
VOCAB = Vocabulary.from_tokens([*PIECES, None], eos_token_id=len(PIECES))
EOS = len(PIECES)
BRANCHES = [r"(?:ab)+", r"a(?:bc)*c?", r"c{2,3}b?"]  # overlapping: "a" and "ab..." start two of them


def _language(max_len):
    texts = ("".join(p) for n in range(max_len + 1) for p in itertools.product("abc", repeat=n))
    return {t for t in texts if any(re.fullmatch(r, t) for r in BRANCHES)}


def _allowed(matcher):
    mask = new_bitmask(1, VOCAB.size)
    matcher.fill_bitmask(mask)
    return set(torch.nonzero(unpack_bitmask(mask, VOCAB.size)[0]).flatten().tolist())


def test_union_masks_and_eos_equal_the_enumerated_language():
    """Seeded: 300 random token walks. At every step the union's mask is exactly the tokens
    that keep the text a prefix of some branch's string (length <= 12), EOS exactly at a full
    match; validate_tokens, rollback and fork agree with the walk."""
    language = _language(12)
    prefixes = {t[:i] for t in language for i in range(len(t) + 1)}
    union = UnionGrammar([compile(regex=r, vocab=VOCAB, backend="native") for r in BRANCHES])
    rng = random.Random(0)
    for _ in range(300):
        matcher, text, walked = union.matcher(), "", []
        while len(text) < 8:
            allowed = _allowed(matcher)
            expected = {i for i, p in enumerate(PIECES) if text + p.decode() in prefixes}
            if text in language:
                expected.add(EOS)
            assert allowed == expected, (text, allowed, expected)
            assert matcher.is_accepting() == (text in language)
            choices = sorted(allowed - {EOS})
            if not choices:
                break
            token = rng.choice(choices)
            matcher.accept_token(token)
            walked.append(token)
            text += PIECES[token].decode()
        fork = matcher.fork()
        steps = rng.randint(0, len(walked))
        matcher.rollback(steps)
        assert matcher.validate_tokens(walked[len(walked) - steps:]) == steps
        assert _allowed(fork) == _allowed(fork.fork())
        if steps:
            with pytest.raises(GrammarError):
                matcher.rollback(len(walked) + 1)


def test_union_refuses_a_token_no_branch_allows_and_keeps_its_state():
    union = UnionGrammar([compile(regex=r, vocab=VOCAB, backend="native") for r in BRANCHES])
    matcher = union.matcher()
    matcher.accept_token(PIECES.index(b"ab"))
    before = _allowed(matcher)
    with pytest.raises(GrammarError):
        matcher.accept_token(PIECES.index(b"b"))  # "abb": no branch
    assert _allowed(matcher) == before and matcher.validate_tokens([PIECES.index(b"ab"), EOS]) == 2
    assert matcher.forced_bytes() == b"" or matcher.forced_bytes().startswith(b"ab")


def test_union_needs_one_vocabulary():
    other = Vocabulary.from_tokens([b"a", None], eos_token_id=1)
    with pytest.raises(GrammarError, match="one vocabulary"):
        UnionGrammar([compile(regex="a", vocab=VOCAB), compile(regex="a", vocab=other)])
    with pytest.raises(GrammarError):
        UnionGrammar([])


FRAME = ("<tool_call>", "</tool_call>")
FRAMED_SCHEMAS = [
    # open object (the unique-keys wrapper runs over the frame), an optional key that moves
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]},
    # unique items on top of the grammar
    {"type": "array", "items": {"enum": [1, 2, "x"]}, "uniqueItems": True, "maxItems": 3},
    # recursive
    {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"}, "k": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                     "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/n"},
]
FRAMED_VALUES = [
    [{"a": 1}, {"a": 1, "b": "x"}, {"b": "x", "a": 1}, {"a": "1"}, {}, {"a": 1, "c": [1]}],
    [[1, 2], [1, "x", 2], [1, 1], [], ["x", "x"], [3]],
    [{"v": 1}, {"v": 1, "k": [{"v": 2, "k": []}]}, {"v": 1, "k": [{"k": []}]}, {"v": "1"}],
]


@pytest.mark.parametrize("backend", ["default", "native", "llguidance"])
@pytest.mark.parametrize("case", range(len(FRAMED_SCHEMAS)))
def test_framed_json_accepts_what_jsonschema_accepts(smollm2_tokenizer, smollm2_vocab, backend, case):
    """A framed schema accepts `prefix + value + suffix` exactly where the unframed schema
    accepts the value (and never an invalid one: jsonschema), in the real tokenizer's split (a
    token can hold the end of the prefix and the value's first bytes: `>[`) and in 3 seeded random
    splits; the bare value and the value without its suffix are never complete."""
    schema = FRAMED_SCHEMAS[case]
    try:
        framed = compile_json_schema(schema, smollm2_vocab, backend=backend, frame=FRAME)
    except GrammarError:
        pytest.skip(f"{backend} refuses this schema")
    bare = compile_json_schema(schema, smollm2_vocab, backend=backend)
    rng = random.Random(case)
    verdicts = []
    for value in FRAMED_VALUES[case]:
        text = json.dumps(value, separators=(",", ":"))
        expected = _complete(bare, smollm2_tokenizer.encode(text), smollm2_vocab)
        verdicts.append(expected)
        if expected:
            jsonschema.validate(value, schema)
        whole = FRAME[0] + text + FRAME[1]
        splits = [smollm2_tokenizer.encode(whole)] + [_random_split(whole, smollm2_tokenizer, rng) for _ in range(3)]
        for ids in splits:
            assert _complete(framed, ids, smollm2_vocab) == expected, (backend, whole, ids)
        assert not _complete(framed, smollm2_tokenizer.encode(FRAME[0] + text), smollm2_vocab)
        assert not _complete(framed, smollm2_tokenizer.encode(text), smollm2_vocab)
    assert True in verdicts and False in verdicts, verdicts


def test_a_frame_with_json_punctuation_is_refused(smollm2_vocab):
    with pytest.raises(GrammarError, match="printable ASCII"):
        compile_json_schema({"type": "integer"}, smollm2_vocab, frame=("[", ""))


def _random_split(text, tokenizer, rng):
    """`text` tokenized piece by piece at random cut points (a valid, non-canonical tokenization)."""
    cuts = sorted(rng.sample(range(1, len(text)), k=min(6, len(text) - 1)))
    pieces = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)])]
    return [t for piece in pieces for t in tokenizer.encode(piece)]


def _complete(grammar, ids, vocab):
    matcher = grammar.matcher()
    if matcher.validate_tokens(ids) < len(ids):
        return False
    for token in ids:
        matcher.accept_token(token)
    return matcher.validate_tokens([vocab.eos_token_id]) == 1
