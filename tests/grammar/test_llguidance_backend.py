"""The llguidance adapter meets the same protocol contract as our own backend."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("llguidance")

from constrained_spec.bitmask import new_bitmask, unpack_bitmask  # noqa: E402
from constrained_spec.grammar import GrammarError, GrammarMatcher, Vocabulary, compile  # noqa: E402

VOCAB = Vocabulary.from_tokens(["<eos>"] + [chr(c) for c in range(32, 127)] + ['{"', '":', "ab"], 0, size=128)


def allowed(m) -> set[int]:
    bm = new_bitmask(1, m.vocab_size)
    m.fill_bitmask(bm)
    return set(torch.nonzero(unpack_bitmask(bm[0], m.vocab_size)).flatten().tolist())


def ids(text: str) -> list[int]:
    return [VOCAB.token_bytes.index(ch.encode()) for ch in text]


@pytest.mark.parametrize("backend", ["default", "llguidance"])
def test_backends_agree_on_a_schema(backend):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}}, "required": ["a", "b"], "additionalProperties": False}
    m = compile(json_schema=schema, vocab=VOCAB, backend=backend).matcher()
    assert isinstance(m, GrammarMatcher)
    good, bad = ids('{"a":12,"b":"y"}'), ids('{"a":1,"b":"z"}')
    assert m.validate_tokens(good + [0]) == len(good) + 1
    assert m.validate_tokens(bad) == len(bad) - 3  # stops at "z"
    # every key required, closed: on the default backend in any order (either key may come first),
    # in schema order (forced text) under closed_objects=True and on llguidance alone
    assert m.forced_bytes() in ((b'{', b'{"') if backend == "default" else (b'{"a":',))
    strict = compile(json_schema=schema, vocab=VOCAB, backend=backend, closed_objects=True).matcher()
    assert strict.forced_bytes() == b'{"a":'
    for t in good[:5]:
        m.accept_token(t)
    f = m.fork()
    before = allowed(m)
    with pytest.raises(GrammarError, match="not allowed"):
        m.accept_token(ids("x")[0])
    assert allowed(m) == before  # a rejected token leaves the state unchanged
    for t in good[5:]:
        m.accept_token(t)
    assert m.is_accepting() and allowed(m) == {0}
    m.accept_token(0)
    assert m.is_terminated()
    m.rollback(len(good) - 5 + 1)
    assert allowed(m) == before == allowed(f)
    with pytest.raises(GrammarError, match="cannot roll back"):
        m.rollback(99)


def test_bitmask_rows_views_and_bad_layouts():
    """The bitmask's layout is checked once per tensor and reused: a row of a view into a wider
    tensor lands in that row (its row stride, not the width), a row outside it or a tensor of
    another shape raises instead of writing past its end."""
    m = compile(json_schema={"type": "integer"}, vocab=VOCAB, backend="llguidance").matcher()
    plain = new_bitmask(1, VOCAB.size)
    m.fill_bitmask(plain)
    wide = torch.zeros(3, plain.shape[1] + 5, dtype=torch.int32)
    view = wide[:, : plain.shape[1]]
    for _ in range(2):  # the second fill takes the checked path
        m.fill_bitmask(view, 1)
        assert torch.equal(view[1], plain[0]) and not view[0].any() and not view[2].any() and not wide[:, plain.shape[1]:].any()
    with pytest.raises(GrammarError, match="outside"):
        m.fill_bitmask(view, 3)
    with pytest.raises(GrammarError, match="int32"):
        m.fill_bitmask(torch.zeros(1, plain.shape[1] + 1, dtype=torch.int32))
    with pytest.raises(GrammarError, match="contiguous"):
        m.fill_bitmask(torch.zeros(1, 2 * plain.shape[1], dtype=torch.int32)[:, ::2])


def test_llguidance_bad_grammar_raises():
    with pytest.raises(GrammarError, match="llguidance"):
        compile(grammar="start: undefined_rule\n", vocab=VOCAB, backend="llguidance")


def test_llguidance_allows_the_models_own_tokenization(smollm2_tokenizer, smollm2_vocab):
    """Issue 11: after `{"dependency_type":"jsonpath_ready","` the adapter allowed only the
    longest-match `expression`, while SmolLM2 writes `exp` + `ressions`. Every tokenization of a
    valid text must be allowed by the mask, exactly where validate_tokens allows it."""
    import random

    schema = {"type": "object", "properties": {"dependency_type": {"const": "jsonpath_ready"}, "expressions": {"type": "array", "items": {"type": "string"}}},
              "required": ["dependency_type", "expressions"]}  # fmt: skip
    text = '{"dependency_type":"jsonpath_ready","expressions":["$.a","null"]}'
    vocab, eos = smollm2_vocab, smollm2_vocab.eos_token_id
    compiled = compile(json_schema=schema, vocab=vocab, backend="llguidance")
    bpe = smollm2_tokenizer.encode(text, add_special_tokens=False)
    assert [smollm2_tokenizer.decode([t]) for t in bpe[10:12]] == ["exp", "ressions"]
    rng = random.Random(0)
    splits = [bpe] + [smollm2_tokenizer.encode(text[:k], add_special_tokens=False) + smollm2_tokenizer.encode(text[k:], add_special_tokens=False)
                      for k in sorted(rng.sample(range(1, len(text)), 12))]  # fmt: skip
    for ids in splits:
        assert b"".join(vocab.token_bytes[t] for t in ids) == text.encode()
        m = compiled.matcher()
        for t in ids:
            mask = allowed(m)
            assert t in mask and eos not in mask
            m.accept_token(t)
        assert allowed(m) == {eos}


def test_general_escapes_option_is_probed_against_the_installed_llguidance():
    """json_allow_general_unicode_escapes exists from llguidance 1.8.0; an older llguidance
    refuses the unknown option and with it every schema, so it is only passed where it exists."""
    from importlib.metadata import version

    from constrained_spec.grammar.llguidance_backend import _general_escapes

    installed = tuple(int(part) for part in version("llguidance").split(".")[:2])
    assert _general_escapes() == (installed >= (1, 8))


@pytest.mark.parametrize("schema", [
    {"type": "string", "maxLength": 40},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "note": {"type": "string", "minLength": 3, "maxLength": 25}}},
    {"type": "string", "pattern": "[a-f0-9]{8}-[a-f0-9]{4}"},
    {"type": "array", "items": {"type": "string", "maxLength": 7}, "maxItems": 3},
])
def test_our_slices_change_how_masks_are_computed_not_the_masks(smollm2_vocab, schema):
    """llguidance's slicer is an optimization: with our finer string slices (`_SLICES`, used by
    every grammar) each mask equals the one its default slices give, along 6 seeded random walks
    of up to 60 tokens per schema through the allowed tokens (SmolLM2's vocabulary)."""
    import random

    import llguidance

    from constrained_spec.grammar.llguidance_backend import _SLICES, _GreedyTokenizer, _ll_tokenizer

    vocab = smollm2_vocab
    ours = _ll_tokenizer(vocab)
    default = llguidance.LLTokenizer(_GreedyTokenizer(vocab), n_vocab=vocab.size, slices=llguidance.LLTokenizer.general_slices())
    assert _SLICES != llguidance.LLTokenizer.general_slices()
    grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})
    width = (vocab.size + 31) // 32
    rng = random.Random(0)
    for _ in range(6):
        a, b = llguidance.LLMatcher(ours, grammar, log_level=0), llguidance.LLMatcher(default, grammar, log_level=0)
        for _ in range(60):
            if a.is_stopped():
                break
            mask_a, mask_b = torch.zeros(1, width, dtype=torch.int32), torch.zeros(1, width, dtype=torch.int32)
            a.unsafe_compute_mask_ptr(mask_a.data_ptr(), width * 4)
            b.unsafe_compute_mask_ptr(mask_b.data_ptr(), width * 4)
            assert torch.equal(mask_a, mask_b)
            choices = torch.nonzero(unpack_bitmask(mask_a[0], vocab.size)).flatten().tolist()
            token = rng.choice(choices)
            assert a.consume_token(token) and b.consume_token(token)
