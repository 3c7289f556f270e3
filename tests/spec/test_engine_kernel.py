"""The engine through the kernel dispatch (Triton in its interpreter on CPU) gives the same tokens
as the torch reference path: both consume the same per-request random numbers."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton

pytest.importorskip("triton")

from constrained_spec.runners import CallableRunner  # noqa: E402
from constrained_spec.sampling import SamplingParams  # noqa: E402
from constrained_spec.speculative import Engine  # noqa: E402
from constrained_spec.testing import ToyLM  # noqa: E402
from spec_toys import EOS, V, RandomOneHotProposer, ToyDraftModelProposer, small_grammar  # noqa: E402


@pytest.mark.parametrize("dense", [False, True])
def test_triton_backend_matches_torch_path(dense):
    target = ToyLM(V, seed=4)
    prompts = [[6, 7], [1, 2, 3], [8]]
    params = [SamplingParams(temperature=t, top_k=5, repetition_penalty=1.2, max_tokens=6, seed=s) for s, t in enumerate([0.0, 0.8, 1.3])]

    def run(kernel):
        proposer = ToyDraftModelProposer(target.perturbed()) if dense else RandomOneHotProposer()
        engine = Engine(CallableRunner(target), eos_token_id=EOS, proposer=proposer, max_draft_tokens=3, kernel=kernel)
        return [o.token_ids for o in engine.generate(prompts, params, small_grammar())]

    assert run("triton") == run("torch")
