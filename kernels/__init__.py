"""Fused kernels, installed as `constrained_spec.kernels`.

One entry point: `rejection_sample_logits`, the whole verification step of speculative decoding
(grammar mask + temperature + softmax + exact rejection sampling) for a ragged batch. Kernels
(`kernel=`; "backend" is the grammar's word): "torch" (eager mask + softmax + the reference
`rejection.rejection_sample`), "triton" (the fused kernel in `rejection_triton.py`, imported only
when used) and "auto" (Triton for CUDA tensors when Triton is installed, torch otherwise). Both
take one `VerifyBatch`, consume the same `draw_randomness` numbers and return the same tokens.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import torch

from constrained_spec.rejection import SamplerRandomness

from .inputs import VerifyBatch

__all__ = ["rejection_sample_logits", "check_kernel", "KERNELS", "VerifyBatch"]

KERNELS = ("auto", "torch", "triton")


def check_kernel(kernel: object) -> None:
    """ValueError unless `kernel` names a rejection kernel."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}: choose one of {', '.join(KERNELS)}")


def _triton_available() -> bool:
    # find_spec, not import: on a CPU machine triton must first be imported after
    # TRITON_INTERPRET=1 is set, which rejection_triton.py does.
    return importlib.util.find_spec("triton") is not None


def rejection_sample_logits(
    logits: torch.Tensor,
    bitmask: torch.Tensor | None,
    temperature: torch.Tensor | Sequence[float],
    draft_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    randomness: SamplerRandomness,
    kernel: str = "auto",
    *,
    max_num_draft_tokens: int | None = None,
    backend: None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Verify a ragged batch of drafts against the target's logits in one step.

    logits: float `[D + B, V]`, the output of `sampling.filtered_logits` (penalties, logit bias,
        top-k / top-p / min-p applied; untempered; -inf = forbidden). Request b owns rows
        cu[b] + b .. cu[b+1] + b: one per draft position, then its bonus row.
    bitmask: int32 `[D + B, ceil(V/32)]` grammar mask of the same rows (`bitmask.py` layout), or
        None. Applied inside the kernel; applying it twice (also in `filtered_logits`) is harmless.
    temperature: float `[B]` per request; 0 = greedy (accept iff the draft is the argmax).
    draft_token_ids: long `[D]`, all requests' drafts flattened.
    cu_num_draft_tokens: long `[B + 1]`, cumulative draft counts starting at 0 (zero-length
        drafts allowed).
    draft_probs: `[D, V]` q for each draft position, or None when every draft is one-hot (n-gram,
        grammar-forced proposers).
    randomness: from `rejection.draw_randomness(generators, num_draft_tokens, V)`.
    kernel: "auto" | "torch" | "triton" (the old name `backend=` raises a TypeError saying so).
    max_num_draft_tokens: max_k, the output width minus one. Pass it on CUDA to avoid a device
        sync; computed from `cu_num_draft_tokens` when None.
    Returns (output_token_ids long `[B, max_k + 1]` padded with -1, num_accepted long `[B]`).
    Request b emits output_token_ids[b, :num_accepted[b] + 1].

    Bad shapes raise ValueError. On CPU tensors the values are checked too (draft ids in range,
    q(x) > 0, at least one allowed token per row); on CUDA that would cost a sync, so there the
    caller guarantees them (the kernel then rejects a draft with q(x) = 0 or an invalid id).
    """
    if backend is not None:
        raise TypeError("rejection_sample_logits: backend= is now kernel= (grammar backends are another thing)")
    check_kernel(kernel)
    if not isinstance(temperature, torch.Tensor):
        temperature = torch.tensor(list(temperature), dtype=torch.float32)
    temperature = temperature.to(logits.device, torch.float32)
    batch = VerifyBatch(logits, bitmask, temperature, draft_token_ids, cu_num_draft_tokens, draft_probs, randomness)
    batch.check_shapes()
    batch.check_values(max_num_draft_tokens)
    if kernel == "auto":
        kernel = "triton" if logits.is_cuda and _triton_available() else "torch"
    if kernel == "torch":
        from .rejection_torch import rejection_sample_logits_torch

        out, num_accepted = rejection_sample_logits_torch(batch)
        if max_num_draft_tokens is not None and max_num_draft_tokens + 1 > out.shape[1]:
            out = torch.nn.functional.pad(out, (0, max_num_draft_tokens + 1 - out.shape[1]), value=-1)
        return out, num_accepted
    if not _triton_available():
        raise ValueError("kernel='triton' needs the triton package: pip install 'constrained_spec[triton]'")
    from .rejection_triton import rejection_sample_logits_triton

    if max_num_draft_tokens is None:
        max_num_draft_tokens = int((cu_num_draft_tokens[1:] - cu_num_draft_tokens[:-1]).max())
    return rejection_sample_logits_triton(batch, max_num_draft_tokens)
