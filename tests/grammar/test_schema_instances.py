"""JSON schemas on the real SmolLM2 vocabulary: valid instances are accepted token by token (the
tokenizer's own tokenization and a one-token-per-character one) and end in an accepting state;
invalid instances are rejected at some token."""

from __future__ import annotations

import json

import pytest

from constrained_spec.grammar import compile_json_schema

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "role": {"enum": ["admin", "user"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 2},
    },
    "required": ["name", "age", "role"],
    "additionalProperties": False,
}
ORDER = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "owner": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "vip": {"type": "boolean"}}, "required": ["name", "vip"], "additionalProperties": False},
        "total": {"type": "number"},
        "note": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
    },
    "required": ["id", "owner", "total", "note"],
    "additionalProperties": False,
}
VALID = {
    "person": [
        {"name": "Ada", "age": 36, "role": "admin"},
        {"name": "Émile Z", "age": 0, "role": "user", "tags": ["x", "ab c"]},
        {"name": "", "age": 150, "role": "user", "tags": []},
    ],
    "order": [
        {"id": 7, "owner": {"name": "Bo", "vip": True}, "total": 12.5, "note": None},
        {"id": -120, "owner": {"name": "日本", "vip": False}, "total": -0.25e3, "note": "a \"q\""},
    ],
}
INVALID = {  # text, why
    "person": [
        ('{"name":"Ada","age":"36","role":"admin"}', "wrong type"),
        ('{"name":"Ada","role":"admin"}', "missing required key"),
        ('{"name":"Ada","age":3,"role":"admin","x":1}', "extra key"),
        ('{"name":"Ada","age":3,"role":"root"}', "bad enum"),
        ('{"name":"Adalberto!","age":3,"role":"user"}', "string too long"),
        ('{"name":"Ada","age":151,"role":"user"}', "integer above maximum"),
        ('{"name":"Ada","age":-1,"role":"user"}', "integer below minimum"),
        ('{"name":"Ada","age":3,"role":"user","tags":["a","b","c"]}', "too many items"),
    ],
    "order": [
        ('{"id":1.5,"owner":{"name":"Bo","vip":true},"total":1,"note":null}', "integer with a fraction"),
        ('{"id":1,"owner":{"name":"Bo"},"total":1,"note":null}', "nested missing key"),
        ('{"id":1,"owner":{"name":"Bo","vip":1},"total":1,"note":null}', "nested wrong type"),
        ('{"id":1,"owner":{"name":"Bo","vip":true},"total":1,"note":"toolong"}', "anyOf branch too long"),
    ],
}
SCHEMAS = {"person": PERSON, "order": ORDER}
pytestmark = pytest.mark.model  # the real SmolLM2 tokenizer


@pytest.fixture(scope="module")
def compiled(smollm2_vocab):
    return {name: compile_json_schema(schema, smollm2_vocab) for name, schema in SCHEMAS.items()}


def _per_char_ids(text: str, vocab) -> list[int]:
    """One token per character (the vocabulary has a token for every character used here, or
    for each of its UTF-8 bytes): a non-canonical tokenization the grammar must accept too."""
    by_bytes = {b: i for i, b in enumerate(vocab.token_bytes) if b is not None}
    out = []
    for ch in text:
        piece = ch.encode()
        out += [by_bytes[piece]] if piece in by_bytes else [by_bytes[bytes([b])] for b in piece]
    return out


def _tokenizations(text: str, tokenizer, vocab) -> list[list[int]]:
    return [tokenizer.encode(text), _per_char_ids(text, vocab)]


@pytest.mark.parametrize("name,index", [(n, i) for n, items in VALID.items() for i in range(len(items))])
def test_valid_instances_accepted_token_by_token(compiled, smollm2_tokenizer, smollm2_vocab, name, index):
    text = json.dumps(VALID[name][index], separators=(",", ":"), ensure_ascii=False)
    for ids in _tokenizations(text, smollm2_tokenizer, smollm2_vocab):
        assert smollm2_vocab.eos_token_id not in ids
        m = compiled[name].matcher()
        for position, token in enumerate(ids):
            m.accept_token(token)  # raises GrammarError naming the position if refused
            assert m.is_accepting() == (position == len(ids) - 1), f"accepting too early at {position} in {text!r}"
        m.accept_token(smollm2_vocab.eos_token_id)
        assert m.is_terminated()


@pytest.mark.parametrize("name,index", [(n, i) for n, items in INVALID.items() for i in range(len(items))])
def test_invalid_instances_rejected(compiled, smollm2_tokenizer, smollm2_vocab, name, index):
    text, why = INVALID[name][index]
    for ids in _tokenizations(text, smollm2_tokenizer, smollm2_vocab):
        full = ids + [smollm2_vocab.eos_token_id]
        assert compiled[name].matcher().validate_tokens(full) < len(full), f"{why}: {text!r} was accepted"
