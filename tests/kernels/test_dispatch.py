"""The dispatch: kernel choice, lazy Triton import, and clear errors for bad input."""

import subprocess
import sys

import pytest
import torch

from constrained_spec.kernels import rejection_sample_logits
from constrained_spec.kernels.rejection_torch import target_probs
from constrained_spec.rejection import SamplerRandomness
from constrained_spec.sampling import SamplingParams, process_logits


def test_importing_the_dispatch_does_not_import_triton():
    code = "import sys, constrained_spec, constrained_spec.kernels; assert 'triton' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_auto_equals_torch_and_triton(make_batch):
    """auto: Triton on CUDA tensors, torch on CPU ones; the tokens are the same either way."""
    batch = make_batch(0, 30, [2, 1])
    auto = rejection_sample_logits(**batch)
    for kernel in ("torch", "triton"):
        other = rejection_sample_logits(**batch, kernel=kernel)
        assert torch.equal(auto[0], other[0]) and torch.equal(auto[1], other[1]), kernel


def test_torch_backend_probs_are_process_logits(make_cpu_batch):
    batch = make_cpu_batch(4, 45, [3], greedy=[False])
    for t in (0.0, 0.7):
        params = SamplingParams(temperature=t)
        expected = process_logits(batch["logits"], params, draft_ids=batch["draft_token_ids"].tolist(), bitmask=batch["bitmask"])
        got = target_probs(batch["logits"], batch["bitmask"], torch.tensor([t]), batch["cu_num_draft_tokens"])
        assert torch.equal(got, expected)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(kernel="cuda"), "unknown kernel 'cuda'"),
        (dict(temperature=torch.ones(3)), r"temperature must be \[2\]"),
        (dict(logits=torch.zeros(4, 20)), r"logits need 5 rows"),
        (dict(bitmask=torch.zeros(5, 1, dtype=torch.int64)), "bitmask must be int32"),
        (dict(draft_probs=torch.ones(3, 19)), r"draft_probs must be \[3, 20\]"),
        (dict(randomness=SamplerRandomness(torch.zeros(2), torch.ones(2, 20))), "randomness does not match"),
        (dict(draft_token_ids=torch.tensor([0, 1, 20])), r"draft token ids must lie in \[0, 20\)"),
        (dict(bitmask=torch.zeros(5, 1, dtype=torch.int32)), "a row has no allowed token"),
        (dict(temperature=torch.tensor([1.0, -1.0])), "temperature must be finite and >= 0"),
        (dict(max_num_draft_tokens=1), "smaller than the longest draft"),
    ],
)
@pytest.mark.parametrize("kernel", ["torch", "triton"])
def test_bad_input_is_rejected_with_a_clear_message(make_cpu_batch, change, message, kernel):
    batch = make_cpu_batch(0, 20, [1, 2], greedy=[False, False], one_token_rows=0.0)
    kwargs = dict(batch, kernel=kernel)
    kwargs.update(change)
    with pytest.raises(ValueError, match=message):
        rejection_sample_logits(**kwargs)


@pytest.mark.parametrize("kernel", ["torch", "triton"])
def test_draft_with_zero_draft_probability_is_rejected(make_cpu_batch, kernel):
    batch = make_cpu_batch(0, 20, [1, 2], greedy=[False, False], dense=True)
    q = batch["draft_probs"].clone()
    q[0, batch["draft_token_ids"][0]] = 0.0
    with pytest.raises(ValueError, match=r"q\(x\) = 0"):
        rejection_sample_logits(**dict(batch, draft_probs=q), kernel=kernel)


def test_the_old_keyword_names_the_new_one(make_batch):
    batch = make_batch(0, 20, [1, 2], greedy=[False, False], one_token_rows=0.0)
    with pytest.raises(TypeError, match="backend= is now kernel="):
        rejection_sample_logits(**batch, backend="torch")
