"""The speedup model, the adaptive draft-length policy and SpecStats bookkeeping."""

from __future__ import annotations

import pytest

from constrained_spec.spec_stats import DraftLengthPolicy, SpecStats, interpolated_cost, speedup


def test_speedup_matches_textbook_formula_for_linear_cost():
    c = 0.2
    linear = lambda n: 1 + (n - 1) * c  # noqa: E731
    for a in (0.3, 0.8):
        for g in range(0, 6):
            assert speedup(g, a, linear) == pytest.approx((1 - a ** (g + 1)) / ((1 - a) * (g * c + 1)))
    assert speedup(4, 1.0, linear) == pytest.approx(5 / 1.8)


def test_interpolated_cost_passes_through_measurements():
    cost = interpolated_cost(((1, 1.0), (2, 1.15), (4, 1.45), (8, 1.8)))
    assert cost(1) == 1.0 and cost(4) == pytest.approx(1.45) and cost(3) == pytest.approx(1.3)
    assert cost(16) == pytest.approx(1.8 + 8 * 0.35 / 4)  # linear beyond the table


def test_policy_drafts_more_when_acceptance_is_high_and_nothing_when_low():
    high, low = DraftLengthPolicy(8), DraftLengthPolicy(8, draft_cost=0.3)
    for _ in range(30):
        high.observe(8, 8)
        low.observe(4, 0)
    assert high.acceptance > 0.95 and high.choose() == 8
    assert low.acceptance < 0.05
    choices = [low.choose() for _ in range(16)]
    assert choices.count(0) == 14 and choices.count(2) == 2  # falls back to none, probes every 8 steps


def test_policy_middle_acceptance_picks_interior_length():
    policy = DraftLengthPolicy(16, draft_cost=0.05)
    for _ in range(40):
        policy.observe(4, 2)  # a = 2/3
    g = policy.choose()
    assert 1 <= g < 16
    a = policy.acceptance
    assert all(speedup(g, a, policy.verify_cost, 0.05) >= speedup(h, a, policy.verify_cost, 0.05) for h in range(1, 17))


def test_spec_stats_per_position():
    stats = SpecStats()
    stats.record(num_drafted=3, num_accepted=1, num_forced=2, num_emitted=2)
    stats.record(num_drafted=1, num_accepted=1, num_forced=0, num_emitted=2)
    stats.record(num_drafted=0, num_accepted=0, num_forced=0, num_emitted=1)
    assert stats.drafted_per_position == [2, 1, 1] and stats.accepted_per_position == [2, 0, 0]
    assert stats.acceptance_rate == pytest.approx(2 / 4) and stats.acceptance_per_position == [1.0, 0.0, 0.0]
    assert stats.mean_accepted_length == pytest.approx(5 / 3) and stats.forced_tokens == 2
    stats.elapsed_s = 2.0
    assert stats.to_dict()["tokens_per_second"] == pytest.approx(2.5)


def test_policy_rejects_negative_length():
    with pytest.raises(ValueError, match="max_draft must be >= 0"):
        DraftLengthPolicy(-1)
