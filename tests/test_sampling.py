"""SamplingParams validation and `process_logits`, checked against plain-Python re-derivations."""

import math

import pytest
import torch

from constrained_spec.bitmask import pack_allowed
from constrained_spec.sampling import SamplingParams, filtered_logits, process_logits


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("temperature", -0.1, "temperature"),
        ("temperature", float("nan"), "temperature"),
        ("top_k", 1.5, "top_k"),
        ("top_k", -2, "top_k"),
        ("top_p", 0.0, "top_p"),
        ("top_p", 1.5, "top_p"),
        ("min_p", 1.0, "min_p"),
        ("repetition_penalty", 0.0, "repetition_penalty"),
        ("presence_penalty", 3.0, "presence_penalty"),
        ("frequency_penalty", -2.5, "frequency_penalty"),
        ("seed", -1, "seed"),
        ("max_tokens", 0, "max_tokens"),
        ("logit_bias", {"x": 1.0}, "logit_bias"),
        ("logit_bias", {3: 1000.0}, "logit_bias"),
        ("stop", [""], "stop"),
        ("temperature", True, "temperature"),
    ],
)
def test_invalid_params_raise_value_error_naming_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams(**{field: value})


def test_params_normalize():
    params = SamplingParams(top_k=-1, stop="END", logit_bias={"5": 2})
    assert params.top_k == 0 and params.stop == ("END",) and dict(params.logit_bias) == {5: 2.0}
    assert SamplingParams(temperature=0).greedy and not params.greedy
    assert params.replace(temperature=0.5).temperature == 0.5


def _softmax(values):
    finite = [v for v in values if v != -math.inf]
    top = max(finite)
    exps = [math.exp(v - top) if v != -math.inf else 0.0 for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def _reference(logits, params, prompt, output):
    """Plain-Python version of the documented order of operations, for one row."""
    values = list(logits)
    seen = set(prompt) | set(output)
    for t in range(len(values)):
        if params.repetition_penalty != 1.0 and t in seen:
            values[t] = values[t] / params.repetition_penalty if values[t] > 0 else values[t] * params.repetition_penalty
        count = output.count(t)
        values[t] -= params.frequency_penalty * count + params.presence_penalty * (count > 0)
        values[t] += params.logit_bias.get(t, 0.0)
    tempered = [v / params.temperature for v in values]
    order = sorted(range(len(values)), key=lambda t: -tempered[t])
    keep = set(order[: params.top_k] if params.top_k else order)
    probs = _softmax([tempered[t] if t in keep else -math.inf for t in range(len(values))])
    if params.top_p < 1:
        mass, kept = 0.0, set()
        for t in sorted(range(len(values)), key=lambda t: -probs[t]):
            if mass >= params.top_p:
                break
            kept.add(t)
            mass += probs[t]
        keep &= kept
    if params.min_p > 0:
        probs = _softmax([tempered[t] if t in keep else -math.inf for t in range(len(values))])
        keep = {t for t in keep if probs[t] >= params.min_p * max(probs)}
    return _softmax([tempered[t] if t in keep else -math.inf for t in range(len(values))])


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=1.0),
        SamplingParams(temperature=0.7, top_k=3),
        SamplingParams(temperature=1.5, top_p=0.8),
        SamplingParams(temperature=1.0, min_p=0.1),
        SamplingParams(temperature=0.7, top_k=4, top_p=0.9, min_p=0.05, repetition_penalty=1.3),
        SamplingParams(temperature=1.0, presence_penalty=0.5, frequency_penalty=0.7, logit_bias={1: 2.0, 4: -1.5}),
    ],
)
def test_process_logits_matches_plain_python(params):
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 7, generator=gen) * 2
    prompt, output, draft = [0, 1], [2, 2], [3, 5, 3]
    probs = process_logits(logits, params, prompt, output, draft)
    for j in range(4):
        expected = _reference(logits[j].tolist(), params, prompt, output + draft[:j])
        assert probs[j].tolist() == pytest.approx(expected, abs=1e-6)
        assert float(probs[j].sum()) == pytest.approx(1.0, abs=1e-6)


def test_penalties_see_the_draft_prefix():
    logits = torch.zeros(3, 4)
    params = SamplingParams(frequency_penalty=1.0)
    probs = process_logits(logits, params, output_ids=[], draft_ids=[1, 1])
    # Row 0 has no history, row 1 penalizes token 1 once, row 2 twice.
    assert probs[0, 1] == pytest.approx(0.25)
    assert probs[1, 1] < probs[0, 1] and probs[2, 1] < probs[1, 1]


def test_greedy_is_one_hot_at_the_processed_argmax():
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0]])
    params = SamplingParams(temperature=0, logit_bias={2: 5.0})
    assert process_logits(logits, params).tolist() == [[0.0, 0.0, 1.0, 0.0]]
    mask = pack_allowed(torch.tensor([[True, False, False, True]]))
    assert process_logits(logits, SamplingParams(temperature=0), bitmask=mask).tolist() == [[1.0, 0.0, 0.0, 0.0]]


def test_bitmask_and_vocab_limit_give_zero_probability():
    logits = torch.zeros(1, 6)
    mask = pack_allowed(torch.tensor([[True, True, False, True, True, True]]))
    probs = process_logits(logits, SamplingParams(), bitmask=mask, vocab_limit=4)
    assert probs.tolist() == [[pytest.approx(1 / 3)] * 2 + [0.0, pytest.approx(1 / 3), 0.0, 0.0]]


def test_a_row_with_no_allowed_token_is_an_error():
    mask = pack_allowed(torch.zeros(1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="no allowed token"):
        process_logits(torch.zeros(1, 4), SamplingParams(), bitmask=mask)


def test_filtered_logits_then_temperature_equals_process_logits():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 9, generator=gen)
    params = SamplingParams(temperature=0.8, top_k=5, top_p=0.9, repetition_penalty=1.2)
    filtered = filtered_logits(logits, params, [1], [2], [3, 4])
    assert torch.allclose(torch.softmax(filtered / 0.8, -1), process_logits(logits, params, [1], [2], [3, 4]))


def test_bad_shapes():
    with pytest.raises(ValueError, match=r"\[rows, V\]"):
        process_logits(torch.zeros(4), SamplingParams())
    with pytest.raises(ValueError, match="draft ids"):
        process_logits(torch.zeros(3, 4), SamplingParams(), draft_ids=[1])
    with pytest.raises(ValueError, match="beyond the vocabulary"):
        process_logits(torch.zeros(1, 4), SamplingParams(logit_bias={9: 1.0}))
