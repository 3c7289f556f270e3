"""The `verify` self-check: its chi-square test, its exact distribution, and the command."""

import random

import pytest
import torch
from scipy import stats

from constrained_spec.cli import main
from constrained_spec.sampling import SamplingParams
from constrained_spec.selfcheck import _toy_grammar, chi_square, exact_distribution
from constrained_spec.testing import ToyLM


def test_chi_square_matches_scipy():
    counts, probs = [30, 48, 20, 2], [0.3, 0.45, 0.2, 0.05]
    statistic, dof, p_value = chi_square(counts, probs, min_expected=0)
    ref = stats.chisquare(counts, [100 * p for p in probs])
    assert dof == 3
    assert statistic == pytest.approx(ref.statistic)
    assert p_value == pytest.approx(ref.pvalue, rel=1e-6)


def test_chi_square_detects_a_wrong_distribution():
    """N = 5000 seeded draws from q compared against p != q must give p-value < 1e-6."""
    rng = random.Random(0)
    p, q = [0.4, 0.3, 0.2, 0.1], [0.3, 0.3, 0.25, 0.15]
    draws = rng.choices(range(4), weights=q, k=5000)
    counts = [draws.count(i) for i in range(4)]
    assert chi_square(counts, p)[2] < 1e-6
    assert chi_square(counts, q)[2] > 0.001


def test_exact_distribution_sums_to_one_and_respects_the_grammar():
    model = ToyLM(seed=0, scale=0.8)
    grammar = _toy_grammar(model.vocab_size, eos=0)
    params = SamplingParams(temperature=0.9, top_k=6, top_p=0.95, repetition_penalty=1.2)
    exact = exact_distribution(model, grammar, [1, 6, 2], params, max_tokens=4)
    assert sum(exact.values()) == pytest.approx(1.0, abs=1e-5)
    assert all(seq[-1] == 0 for seq in exact)
    assert set(exact) == set(grammar.complete_sequences(4))


def test_verify_command_prints_statistic_and_p_value(capsys):
    """2000 seeded samples through the speculative engine at alpha = 0.001 (the full default is 20k)."""
    torch.manual_seed(0)
    code = main(["verify", "--samples", "2000", "--seed", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("PASS: chi-square = ")
    assert "p-value = " in out and "degrees of freedom" in out
