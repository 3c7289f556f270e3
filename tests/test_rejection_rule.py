"""The single-step rule: the seed lesson's asserts, input validation, and the analytic identity
accept path + reject path == p, for random distributions and the edge cases."""

import itertools

import pytest
import torch

from constrained_spec.rejection import rejection_rule


def test_seed_lesson_asserts():
    alpha, residual = rejection_rule([0.7, 0.3], [0.4, 0.6], 1)
    assert abs(alpha - 0.5) < 1e-12
    assert residual == [1.0, 0.0]
    assert rejection_rule([0.7, 0.3], [0.4, 0.6], 0)[0] == 1.0


@pytest.mark.parametrize(
    "p,q,x,message",
    [
        ([0.5, 0.5], [1.0], 0, "shapes differ"),
        ([], [], 0, "shapes differ"),
        ([1.2, -0.2], [0.5, 0.5], 0, "negative"),
        ([0.6, 0.6], [0.5, 0.5], 0, "sum to one"),
        ([0.5, 0.5], [0.5, 0.4], 0, "sum to one"),
        ([0.5, 0.5], [1.0, 0.0], 1, "positive proposal mass"),
        ([0.5, 0.5], [0.5, 0.5], 2, "outside the vocabulary"),
    ],
)
def test_invalid_inputs(p, q, x, message):
    with pytest.raises(ValueError, match=message):
        rejection_rule(p, q, x)


def _output_distribution(p, q):
    """Exact distribution of the emitted token: sum over drafts x ~ q of accept/reject paths."""
    out = [0.0] * len(p)
    for x, qx in enumerate(q):
        if qx == 0:
            continue
        accept, residual = rejection_rule(p, q, x)
        out[x] += qx * accept
        for y, r in enumerate(residual):
            out[y] += qx * (1 - accept) * r
    return out


def _random_distribution(gen, size, support=None):
    weights = torch.rand(size, generator=gen, dtype=torch.float64)
    if support is not None:
        weights = weights * support
    weights = weights / weights.sum()
    values = weights.tolist()
    values[-1] = 1.0 - sum(values[:-1])  # exact sum for the 1e-9 check
    return [max(v, 0.0) for v in values]


@pytest.mark.parametrize("trial", range(20))
def test_accept_plus_residual_paths_equal_p(trial):
    gen = torch.Generator().manual_seed(trial)
    size = 2 + trial % 6
    p, q = _random_distribution(gen, size), _random_distribution(gen, size)
    assert _output_distribution(p, q) == pytest.approx(p, abs=1e-12)


def test_p_equal_q_always_accepts_and_residual_falls_back_to_p():
    p = [0.2, 0.3, 0.5]
    for x in range(3):
        accept, residual = rejection_rule(p, p, x)
        assert accept == 1.0 and residual == p
    assert _output_distribution(p, p) == pytest.approx(p, abs=1e-12)


def test_disjoint_supports_always_reject_and_sample_p():
    p, q = [0.0, 0.0, 0.4, 0.6], [0.5, 0.5, 0.0, 0.0]
    for x in (0, 1):
        accept, residual = rejection_rule(p, q, x)
        assert accept == 0.0 and residual == pytest.approx(p)
    assert _output_distribution(p, q) == pytest.approx(p, abs=1e-12)


def test_one_hot_draft():
    p = [0.1, 0.6, 0.3]
    for x in range(3):
        q = [1.0 if i == x else 0.0 for i in range(3)]
        accept, residual = rejection_rule(p, q, x)
        assert accept == pytest.approx(p[x])
        expected = [0.0 if i == x else p[i] / (1 - p[x]) for i in range(3)]
        assert residual == pytest.approx(expected)
        assert _output_distribution(p, q) == pytest.approx(p, abs=1e-12)


def test_masked_draft_token_is_never_accepted():
    # The grammar gave the drafted token p(x) = 0: reject with certainty, never divide by zero.
    p, q = [0.0, 0.5, 0.5], [0.8, 0.1, 0.1]
    accept, residual = rejection_rule(p, q, 0)
    assert accept == 0.0 and residual[0] == 0.0


@pytest.mark.parametrize("support", list(itertools.product([0, 1], repeat=4))[1:])
def test_partial_supports(support):
    gen = torch.Generator().manual_seed(sum(support))
    p = _random_distribution(gen, 4, torch.tensor(support, dtype=torch.float64))
    q = _random_distribution(gen, 4)
    assert _output_distribution(p, q) == pytest.approx(p, abs=1e-12)
