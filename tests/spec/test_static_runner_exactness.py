"""Exactness through the static-cache runner: the speculative engine over `StaticRunner` running a
tiny random Llama (the toy grammar's 12-token vocabulary) samples exactly like plain constrained
sampling from that model, whose distribution is enumerated with transformers' own forward.

The loop and the rejection rule are held to this in test_exactness.py with toy models; here the
runner is the new part: thousands of requests share one slot cache, drafts of random lengths
(including forbidden tokens) are cut and rolled back, prompts of two lengths make batches ragged,
and both prompts share a prefix (reused from the prefix cache).

N = 10,000 seeded requests (20,000 with CONSTRAINED_SPEC_FULL=1), Pearson chi-square over (prompt, outcome) cells, alpha = 0.001 (cells
expected < 5 pooled). Under exactness it fails with probability 0.001; the seeds fix every run.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
import torch

transformers = pytest.importorskip("transformers")

from constrained_spec.sampling import SamplingParams  # noqa: E402
from constrained_spec.selfcheck import chi_square  # noqa: E402
from constrained_spec.speculative import Engine  # noqa: E402
from constrained_spec.static_runner import StaticRunner  # noqa: E402
from exact import exact_outcomes  # noqa: E402
from spec_toys import EOS, V, RandomOneHotProposer, list_grammar  # noqa: E402

N, ALPHA = (20_000 if os.environ.get("CONSTRAINED_SPEC_FULL") else 10_000), 0.001
PROMPTS = [[6, 1, 7, 6, 2, 10, 11, 4, 7], [6, 1, 7, 6, 4, 7]]  # share 4 tokens; ragged


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_target() -> torch.nn.Module:
    torch.manual_seed(5)
    config = transformers.LlamaConfig(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, initializer_range=0.5,  # peaked distributions
    )
    return transformers.LlamaForCausalLM(config).eval()


def test_static_runner_engine_matches_exact_distribution():
    model = tiny_target()
    grammar = list_grammar()
    params = SamplingParams(temperature=1.0, top_k=6, top_p=0.95, repetition_penalty=1.3, max_tokens=6)
    runner = StaticRunner(model, min_prefix=4)
    engine = Engine(runner, eos_token_id=EOS, proposer=RandomOneHotProposer(), max_draft_tokens=3)
    counts: Counter = Counter()
    waves = 4
    per_wave = N // waves
    for wave in range(waves):
        prompts = [PROMPTS[i % 2] for i in range(per_wave)]
        seeded = [params.replace(seed=wave * per_wave + i) for i in range(per_wave)]
        for prompt, out in zip(prompts, engine.generate(prompts, seeded, grammar)):
            counts[(tuple(prompt), tuple(out.token_ids), out.finish_reason)] += 1
    assert runner.prefix_hits > 0

    def forward(ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return model(ids).logits  # [1, T, V]

    expected = {}
    for prompt in PROMPTS:
        for (tokens, reason), p in exact_outcomes(forward, grammar, prompt, params, EOS).items():
            expected[(tuple(prompt), tokens, reason)] = p * (N // 2)
    impossible = [key for key in counts if key not in expected]
    assert not impossible, f"outputs outside the grammar / support: {impossible[:5]}"
    assert any(reason == "length" for _, _, reason in counts), "test premise: some outputs hit max_tokens"
    keys = list(expected)
    total = sum(expected.values())
    stat, dof, p_value = chi_square([counts.get(k, 0) for k in keys], [expected[k] / total for k in keys])
    assert dof >= 10, f"too few cells ({dof + 1}) for a meaningful test"
    assert p_value >= ALPHA, f"chi-square {stat:.1f} on {dof} dof, p = {p_value:.2g} < {ALPHA}"
