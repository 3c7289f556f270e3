"""draw_randomness: greedy requests draw no V-wide noise; sampled requests get Exp(1) noise."""

import torch
from scipy import stats

from constrained_spec.rejection import draw_randomness


def test_greedy_rows_are_ones_and_consume_only_uniforms():
    gen_a, gen_b = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    r = draw_randomness([gen_a], [4], 1000, greedy=[True])
    assert torch.equal(r.exponentials, torch.ones(1, 1000))
    assert torch.equal(r.uniforms, torch.rand(4, generator=gen_b))
    assert torch.equal(gen_a.get_state(), gen_b.get_state())  # nothing else drawn


def test_batched_request_numbers_do_not_depend_on_neighbours():
    alone = draw_randomness([torch.Generator().manual_seed(5)], [2], 64)
    batch = draw_randomness([torch.Generator().manual_seed(9), torch.Generator().manual_seed(5)], [3, 2], 64, greedy=[True, False])
    assert torch.equal(batch.uniforms[3:], alone.uniforms)
    assert torch.equal(batch.exponentials[1], alone.exponentials[0])


def test_exponentials_follow_exp1():
    """N = 200_000 draws, KS test against Exp(1) at alpha = 1e-3 (seeded, so deterministic)."""
    r = draw_randomness([torch.Generator().manual_seed(11)], [0], 200_000, greedy=[False])
    e = r.exponentials[0].double().numpy()
    assert e.min() >= 0
    assert stats.kstest(e, "expon").pvalue > 1e-3


def test_greedy_flags_must_match_the_batch():
    import pytest

    with pytest.raises(ValueError, match="one flag per request"):
        draw_randomness([None, None], [1, 1], 8, greedy=[True])
