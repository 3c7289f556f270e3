"""No dead end where an object admits finitely many keys (grammar/finite_keys.py).

The unique-keys wrapper removes the tokens that close a used key; where an object's keys are a
finite set (patterned keys in a closed object, `propertyNames` with an enum, and the closed
objects json_key_order hands llguidance with their keys as patterns) a key prefix can lead only
to used keys (`{"ab":1,"ab` with keys ab, b), and a `,` can come when every key is used. CI's
pydantic sampling at T = 1 hit the first. Checked: the masks at such prefixes (one byte a token),
and seeded random walks (N = 60 a schema, uniform over the allowed tokens, one token in two the
shortest) on the byte vocabulary and on SmolLM2's: never a state without an allowed token, and
every finished text valid per jsonschema."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
from pydantic import BaseModel, Field

from constrained_spec.bitmask import new_bitmask, unpack_bitmask
from constrained_spec.grammar import compile_json_schema
from constrained_spec.grammar.vocabulary import Vocabulary

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], 256)
PATTERNED = {"type": "object", "patternProperties": {"^(?:ab|b|abc)$": {"type": "integer"}}, "additionalProperties": False}
NAMED = {"type": "object", "propertyNames": {"enum": ["x", "xy"]}, "additionalProperties": {"type": "boolean"}}


class Address(BaseModel):
    street: str = Field(max_length=6)
    city: str = Field(max_length=6)


class Person(BaseModel):  # the model CI's sampling dead-ended on (closed, every key required)
    name: str = Field(max_length=6)
    age: int = Field(ge=0, le=120)
    address: Address


class Tagged(BaseModel):  # closed, optional keys after the required one
    id: int
    tag: str = Field(default="", max_length=4)
    tags: list[int] = Field(default=[], max_length=2)
    note: str | None = None


def _allowed(compiled, vocab, text: bytes) -> set[bytes]:
    matcher = compiled.matcher()
    for byte in text:
        matcher.accept_token(byte)
    mask = new_bitmask(1, vocab.size)
    matcher.fill_bitmask(mask)
    return {bytes([i]) for i in unpack_bitmask(mask, vocab.size)[0].nonzero().flatten().tolist() if i < 256}


def test_a_prefix_of_used_keys_only_is_masked():
    compiled = compile_json_schema(PATTERNED, BYTES)
    assert _allowed(compiled, BYTES, b'{"ab":1,"') == {b"a", b"b"}  # abc and b are left
    assert _allowed(compiled, BYTES, b'{"ab":1,"abc":2,"') == {b"b"}  # `a` leads to used keys only
    assert _allowed(compiled, BYTES, b'{"b":1,"a') == {b"b"}
    assert b"," not in _allowed(compiled, BYTES, b'{"ab":1,"abc":2,"b":3')  # every key used: no `,`
    assert b"," in _allowed(compiled, BYTES, b'{"ab":1,"abc":2')
    named = compile_json_schema(NAMED, BYTES)
    assert _allowed(named, BYTES, b'{"xy":true,"x') == {b'"'} and b"," not in _allowed(named, BYTES, b'{"xy":true,"x":false')


def _walk(compiled, vocab, decode, rng: random.Random, limit: int) -> tuple[list[int], bool]:
    """A random walk: tokens and whether it finished (EOS accepted); fails on a dead end."""
    matcher, tokens = compiled.matcher(), []
    mask = new_bitmask(1, vocab.size)
    while len(tokens) < limit:
        matcher.fill_bitmask(mask)
        allowed = unpack_bitmask(mask, vocab.size)[0].nonzero().flatten().tolist()
        assert allowed, f"dead end after {decode(tokens)!r}"
        if rng.random() < 0.5:
            token = rng.choice(allowed)
        else:  # short tokens reach the ends of keys, where the dead ends were
            token = min(allowed, key=lambda t: (len(vocab.token_bytes[t] or b"x"), rng.random()))
        if token == vocab.eos_token_id:
            return tokens, True
        matcher.accept_token(token)
        tokens.append(token)
    return tokens, False


@pytest.mark.parametrize("schema", [PATTERNED, NAMED], ids=["patterned", "property-names"])
def test_random_walks_on_bytes_never_dead_end(schema):
    compiled = compile_json_schema(schema, BYTES)
    rng = random.Random(7)
    decode = lambda tokens: bytes(tokens)  # noqa: E731
    finished = 0
    for _ in range(60):
        tokens, done = _walk(compiled, BYTES, decode, rng, 200)
        if done:
            finished += 1
            jsonschema.validate(json.loads(decode(tokens)), schema)
    assert finished >= 30


@pytest.mark.parametrize("model", [Person, Tagged])
def test_random_walks_on_the_model_vocabulary_never_dead_end(model, smollm2_tokenizer, smollm2_vocab):
    schema = model.model_json_schema()
    compiled = compile_json_schema(schema, smollm2_vocab, closed_objects=True)
    rng = random.Random(11)
    decode = lambda tokens: smollm2_tokenizer.decode(tokens)  # noqa: E731
    finished = 0
    for _ in range(60):
        tokens, done = _walk(compiled, smollm2_vocab, decode, rng, 150)
        if done:
            finished += 1
            model.model_validate_json(decode(tokens))
    assert finished >= 30
