"""SamplingParams answers which requests share processing (`processing_key`) and which need the
token history (`needs_history`) from field marks; these tests hold the marks to what
`filtered_logits` / `process_logits` really read, so a new field cannot be added to one and not
the other (the engine would batch unlike requests together)."""

from dataclasses import fields

import pytest
import torch

from constrained_spec.sampling import SamplingParams, filtered_logits, process_logits

# A non-default value for every field, each one visible in the output when processing reads it.
ACTIVE = {
    "temperature": 0.7, "top_k": 3, "top_p": 0.6, "min_p": 0.2, "repetition_penalty": 1.8,
    "presence_penalty": 1.5, "frequency_penalty": 1.2, "logit_bias": {1: 3.0},
    "seed": 3, "max_tokens": 7, "stop": ("x",),
}
FIELDS = [f.name for f in fields(SamplingParams)]
PROCESSING = {f.name for f in fields(SamplingParams) if f.metadata.get("processing")}
HISTORY = dict(prompt_ids=[1, 2], output_ids=[2, 3, 3], draft_ids=[4])


class _Recording(SamplingParams):
    """SamplingParams that records which fields are read."""

    def __getattribute__(self, name):
        if name in FIELDS:
            object.__getattribute__(self, "__dict__").setdefault("_read", set()).add(name)
        return object.__getattribute__(self, name)


def _logits() -> torch.Tensor:
    return torch.randn(2, 8, generator=torch.Generator().manual_seed(0)) * 2  # [rows, V]


def _fields_read(**values) -> set[str]:
    params = _Recording(**values)
    params.__dict__.pop("_read", None)  # validation reads everything
    process_logits(_logits(), params, **HISTORY)
    return params.__dict__.get("_read", set())


def test_every_field_has_an_active_value_here():
    assert set(ACTIVE) == set(FIELDS), "a SamplingParams field was added or removed: give it a value in ACTIVE"


def test_processing_fields_are_exactly_the_fields_process_logits_reads():
    read = _fields_read(**ACTIVE) | _fields_read()
    for name, value in ACTIVE.items():  # each alone, so no branch hides another's read
        read |= _fields_read(**{name: value})
    assert read == PROCESSING


@pytest.mark.parametrize("name", FIELDS)
def test_a_field_changes_the_probabilities_iff_it_is_in_the_processing_key(name):
    base, changed = SamplingParams(), SamplingParams(**{name: ACTIVE[name]})
    differs = not torch.equal(process_logits(_logits(), base, **HISTORY), process_logits(_logits(), changed, **HISTORY))
    assert differs == (name in PROCESSING)
    assert (base.processing_key() != changed.processing_key()) == (name in PROCESSING)


@pytest.mark.parametrize("name", FIELDS)
def test_needs_history_iff_the_history_changes_the_output(name):
    params = SamplingParams(**{name: ACTIVE[name]})
    with_history = filtered_logits(_logits(), params, **HISTORY)
    without = filtered_logits(_logits(), params, draft_ids=HISTORY["draft_ids"])
    assert params.needs_history == (not torch.equal(with_history, without))


def test_processing_key_is_hashable_and_ignores_bias_order():
    a = SamplingParams(logit_bias={1: 1.0, 2: -1.0})
    b = SamplingParams(logit_bias={2: -1.0, 1: 1.0})
    assert hash(a.processing_key()) == hash(b.processing_key()) and a.processing_key() == b.processing_key()
