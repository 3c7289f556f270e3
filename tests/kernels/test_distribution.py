"""The kernel path samples exactly p: chi-square on the first emitted token.

N = 20000 identical requests in one kernel call (each with its own slice of one seeded
generator's numbers), alpha = 0.001. The first token is the accepted draft or the recovered
token, so this checks min(p, q) + max(0, p - q) = p through the kernel's accept test and its
exponential-race residual draw.
"""

import pytest
import torch
from scipy.stats import chisquare

from constrained_spec.bitmask import pack_allowed
from constrained_spec.kernels import rejection_sample_logits
from constrained_spec.rejection import draw_randomness

N = 20_000
ALPHA = 1e-3
VOCAB = 12


@pytest.mark.parametrize("dense", [True, False])
def test_first_token_follows_masked_tempered_target(dense, device):
    g = torch.Generator().manual_seed(1234)
    temperature = 0.8
    logits = torch.randn(2, VOCAB, generator=g) * 2  # draft row, bonus row
    allowed = torch.ones(2, VOCAB, dtype=torch.bool)
    allowed[:, [3, 7, 8]] = False  # grammar forbids three tokens
    p = torch.softmax(logits[0].masked_fill(~allowed[0], float("-inf")) / temperature, dim=-1)
    if dense:  # a draft distribution that disagrees with p, including mass p lacks
        q = torch.softmax(torch.randn(VOCAB, generator=g), dim=-1)
        drafts = torch.multinomial(q, N, replacement=True, generator=g)  # [N]
        draft_probs = q.expand(N, VOCAB).contiguous()
    else:  # one-hot proposer that always guesses token 5
        drafts = torch.full((N,), 5, dtype=torch.long)
        draft_probs = None
    gen = torch.Generator().manual_seed(99)
    randomness = draw_randomness([gen] * N, [1] * N, VOCAB, device=device)
    out, _ = rejection_sample_logits(
        logits.repeat(N, 1).to(device), pack_allowed(allowed).repeat(N, 1).to(device), torch.full((N,), temperature, device=device),
        drafts.to(device), torch.arange(N + 1, device=device), None if draft_probs is None else draft_probs.to(device), randomness,
        kernel="triton",
    )
    counts = torch.bincount(out[:, 0].cpu(), minlength=VOCAB).double()
    assert counts[[3, 7, 8]].sum() == 0, "a forbidden token was emitted"
    keep = p > 0
    expected = p[keep].double() * N
    result = chisquare(counts[keep].numpy(), (expected * counts[keep].sum() / expected.sum()).numpy())
    assert result.pvalue > ALPHA, f"first-token frequencies differ from p (p-value {result.pvalue:.2e})"
