"""The engine through the kernel dispatch gives the same tokens as the torch reference path: both
consume the same per-request random numbers. Triton runs compiled with the toy target on CUDA when
present, else in its interpreter on the CPU (rejection_triton turns the interpreter on by itself,
only without CUDA, and leaves os.environ as it was).

Requests that only mask and scale go to the kernel as raw logits + the packed bitmask + the
temperature; requests with top-k / penalties take the filtered_logits path first: both are tested.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

pytest.importorskip("triton")

import constrained_spec.kernels.rejection_triton  # noqa: E402,F401  (before anything else imports triton)
from constrained_spec.runners import CallableRunner  # noqa: E402
from constrained_spec.sampling import SamplingParams  # noqa: E402
from constrained_spec.speculative import Engine  # noqa: E402
from constrained_spec.testing import ToyLM  # noqa: E402
from spec_toys import EOS, V, RandomOneHotProposer, ToyDraftModelProposer, small_grammar  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
PROMPTS = [[6, 7], [1, 2, 3], [8]]


def run_engine(target: ToyLM, params: list[SamplingParams], backend: str, dense: bool, device: str = DEVICE, **engine_kwargs) -> list[list[int]]:
    proposer = ToyDraftModelProposer(target.perturbed()) if dense else RandomOneHotProposer()
    engine = Engine(CallableRunner(target.to(device)), eos_token_id=EOS, proposer=proposer, max_draft_tokens=3, kernel=backend, **engine_kwargs)
    return [o.token_ids for o in engine.generate(PROMPTS, params, small_grammar())]


@pytest.mark.parametrize("processing", ["kernel-only", "filtered"])
@pytest.mark.parametrize("dense", [False, True])
def test_triton_backend_matches_torch_path(dense, processing):
    target = ToyLM(V, seed=4)
    extra = dict(top_k=5, repetition_penalty=1.2) if processing == "filtered" else {}
    params = [SamplingParams(temperature=t, max_tokens=6, seed=s, **extra) for s, t in enumerate([0.0, 0.8, 1.3])]
    assert run_engine(target, params, "triton", dense) == run_engine(target, params, "torch", dense)


def test_importing_the_kernel_module_leaves_the_environment_alone():
    import subprocess
    import sys

    code = (
        "import os; before = dict(os.environ); import constrained_spec.kernels.rejection_triton as k; "
        "assert dict(os.environ) == before, set(os.environ.items()) ^ set(before.items())"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


@needs_cuda
def test_greedy_outputs_on_cuda_equal_cpu_outputs_token_for_token():
    target = ToyLM(V, seed=5)
    params = [SamplingParams(temperature=0.0, max_tokens=8, top_k=4 * (s % 2)) for s in range(3)]
    for dense in (False, True):
        assert run_engine(target, params, "auto", dense, device="cuda") == run_engine(target, params, "torch", dense, device="cpu")


@needs_cuda
def test_at_most_one_host_sync_per_engine_step():
    """torch.cuda.set_sync_debug_mode("warn") warns on every synchronizing CUDA call."""
    target = ToyLM(V, seed=6).to("cuda")
    engine = Engine(CallableRunner(target), eos_token_id=EOS, proposer=RandomOneHotProposer(), max_draft_tokens=3, device="cuda")
    for s, t in enumerate([0.0, 0.9, 1.2]):
        engine.add_request(PROMPTS[s], SamplingParams(temperature=t, max_tokens=12, seed=s), small_grammar())
    engine.step()  # first step: prefill, allocations
    steps = 0
    torch.cuda.set_sync_debug_mode("warn")
    try:
        while engine.has_unfinished():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                engine.step()
            syncs = [w for w in caught if "synchroniz" in str(w.message)]
            assert len(syncs) <= 1, [str(w.message) for w in syncs]
            steps += 1
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert steps > 0


def test_vocabulary_limit_is_folded_into_the_kernel_bitmask():
    """No grammar, logits wider than the vocabulary: the kernel path gets an all-allowed bitmask
    with the tokens >= the limit cleared, and samples exactly what the torch path samples."""
    target = ToyLM(V, seed=7)
    params = [SamplingParams(temperature=t, max_tokens=8, seed=s) for s, t in enumerate([0.0, 1.0, 1.5])]

    def run(kernel):
        engine = Engine(CallableRunner(target.to(DEVICE)), eos_token_id=EOS, proposer=RandomOneHotProposer(), max_draft_tokens=3,
                        kernel=kernel, vocabulary_limit=V - 3)
        return [o.token_ids for o in engine.generate(PROMPTS, params)]

    fused = run("triton")
    assert fused == run("torch")
    assert all(t < V - 3 for out in fused for t in out) and any(fused)
