"""Kernel tests run on the device where Triton runs: compiled on CUDA when present, else in its
interpreter on the CPU (the root conftest sets TRITON_INTERPRET=1 only when there is no CUDA, and
`rejection_triton` sets it itself, only while it defines its kernels).

`device` names that device; `make_batch` builds its tensors there. Tests of input checks that
only run on CPU tensors (value checks cost a sync on CUDA) build CPU batches explicitly.
"""

import functools

import pytest
import torch

from constrained_spec.bitmask import pack_allowed
from constrained_spec.rejection import draw_randomness

KERNEL_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

import constrained_spec.kernels.rejection_triton  # noqa: E402,F401  (before anything else imports triton)


def _make_batch(
    seed: int,
    vocab: int,
    ks: list[int],
    *,
    greedy: list[bool] | None = None,
    dense: bool = True,
    q_equals_p: bool = False,
    density: float = 0.6,
    one_token_rows: float = 0.2,
    device: str = "cpu",
) -> dict:
    """A random ragged batch: logits `[D + B, V]`, a grammar mask with some one-token rows,
    temperatures (0 for greedy requests), drafts drawn from q (dense) or one-hot guesses."""
    g = torch.Generator().manual_seed(seed)
    batch, num_drafts = len(ks), sum(ks)
    rows = num_drafts + batch
    greedy = greedy if greedy is not None else [bool(v) for v in (torch.rand(batch, generator=g) < 0.3)]
    logits = torch.randn(rows, vocab, generator=g) * 3  # [rows, V]
    allowed = torch.rand(rows, vocab, generator=g) < density
    allowed[torch.arange(rows), torch.randint(vocab, (rows,), generator=g)] = True  # never empty
    for r in range(rows):
        if torch.rand(1, generator=g).item() < one_token_rows:
            allowed[r] = False
            allowed[r, torch.randint(vocab, (1,), generator=g)] = True
    temperature = torch.where(torch.tensor(greedy), 0.0, 0.5 + torch.rand(batch, generator=g))
    cu = torch.tensor([0] + ks).cumsum(0)
    masked = logits.masked_fill(~allowed, float("-inf"))
    drafts, q_rows = [], []
    for b in range(batch):
        t = float(temperature[b]) or 1.0
        for j in range(ks[b]):
            row = int(cu[b]) + b + j
            noise = 0.0 if q_equals_p else torch.randn(vocab, generator=g) * 1.5
            q = torch.softmax((masked[row] + noise) / t, dim=-1)
            if dense and not greedy[b]:
                x = int(torch.multinomial(q, 1, generator=g))
            else:  # one-hot proposer: half the time the target's argmax, else any allowed token
                pick = torch.rand(1, generator=g).item() < 0.5 or q_equals_p
                x = int(masked[row].argmax()) if pick else int(torch.multinomial(allowed[row].float(), 1, generator=g))
                q = torch.nn.functional.one_hot(torch.tensor(x), vocab).float()
            drafts.append(x)
            q_rows.append(q)
    gens = [torch.Generator().manual_seed(seed * 1000 + b) for b in range(batch)]
    return dict(
        logits=logits.to(device),
        bitmask=pack_allowed(allowed).to(device),
        temperature=temperature.to(device),
        draft_token_ids=torch.tensor(drafts, dtype=torch.long, device=device),
        cu_num_draft_tokens=cu.to(device),
        draft_probs=(torch.stack(q_rows) if q_rows else torch.empty(0, vocab)).to(device) if dense else None,
        randomness=draw_randomness(gens, ks, vocab, device=device),
    )


@pytest.fixture(params=[KERNEL_DEVICE])
def device(request) -> str:
    """The kernel tests' device: "cuda" (compiled Triton) when present, else "cpu" (interpreted)."""
    return request.param


@pytest.fixture
def make_batch(device):
    return functools.partial(_make_batch, device=device)


@pytest.fixture
def make_cpu_batch():
    return functools.partial(_make_batch, device="cpu")
