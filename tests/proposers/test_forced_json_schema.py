"""The forced proposer on the real JSON-schema grammar backend (a small byte vocabulary, so no
model is needed): required keys, separators and enum values are proposed, and the drafts are
grammar-valid."""

import pytest

from constrained_spec.grammar import Vocabulary, compile_json_schema
from constrained_spec.proposers import ForcedProposer, ProposalContext
from constrained_spec.sampling import SamplingParams

MERGES = ['{"', '":', '",', '"}', "name", "age", "role", "admin", "user", '":"']
TOKENS = [None] + [chr(c) for c in range(32, 127)] + MERGES  # id 0: EOS
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "role": {"enum": ["admin", "user"]}, "age": {"type": "integer"}},
    "required": ["name", "role", "age"],
    "additionalProperties": False,  # closed: only then is the next key forced
}


def encode(text: str) -> list[int]:
    """Greedy longest match over TOKENS: this vocabulary's canonical encoding."""
    ids, pos = [], 0
    while pos < len(text):
        best = max((i for i in range(1, len(TOKENS)) if text.startswith(TOKENS[i], pos)), key=lambda i: len(TOKENS[i]))
        ids.append(best)
        pos += len(TOKENS[best])
    return ids


@pytest.fixture(scope="module")
def grammar():
    # closed_objects=True (the generation surfaces' mode): a closed object whose keys are all
    # required keeps them in schema order (by default they go in any order, none forced)
    return compile_json_schema(SCHEMA, Vocabulary.from_tokens(TOKENS, eos_token_id=0), closed_objects=True)


def propose_after(grammar, text: str):
    matcher = grammar.matcher()
    output = encode(text)
    for t in output:
        matcher.accept_token(t)
    draft = ForcedProposer(encode, token_bytes=[None] + [t.encode() for t in TOKENS[1:]]).propose(
        ProposalContext("r", [1], output, SamplingParams(), matcher), 16
    )
    assert matcher.validate_tokens(draft.token_ids) == len(draft)
    return "".join(TOKENS[t] for t in draft.token_ids)


def test_required_key_name_after_open_brace(grammar):
    assert propose_after(grammar, "{").startswith('"name":')


def test_next_key_after_a_string_value(grammar):
    assert propose_after(grammar, '{"name":"Ann"').startswith(',"role":')


def test_enum_value_completed_once_unambiguous(grammar):
    assert propose_after(grammar, '{"name":"Ann","role":"a').startswith('dmin"')
