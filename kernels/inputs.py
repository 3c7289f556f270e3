"""`VerifyBatch`: the one object every backend of `rejection_sample_logits` takes, with the
shape and value checks they share.

Shape checks read only tensor metadata. Value checks (draft ids in range, q(x) > 0, at least one
allowed token per row) read tensor contents, which on CUDA would cost a device sync per step, so
they run only for CPU tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from constrained_spec.bitmask import unpack_bitmask
from constrained_spec.rejection import SamplerRandomness

__all__ = ["VerifyBatch"]


@dataclass(frozen=True)
class VerifyBatch:
    """The inputs of one verification step for a ragged batch of B requests with D drafts in all
    (every backend takes this one object; `rejection_sample_logits` documents each field)."""

    logits: torch.Tensor  # float [D + B, V]
    bitmask: torch.Tensor | None  # int32 [D + B, ceil(V/32)]
    temperature: torch.Tensor  # float [B]
    draft_token_ids: torch.Tensor  # long [D]
    cu_num_draft_tokens: torch.Tensor  # long [B + 1]
    draft_probs: torch.Tensor | None  # [D, V]
    randomness: SamplerRandomness

    def check_shapes(self) -> None:
        """ValueError unless the shapes fit together (reads only tensor metadata)."""
        logits, bitmask, temperature, draft_probs, randomness = self.logits, self.bitmask, self.temperature, self.draft_probs, self.randomness
        draft_token_ids, cu_num_draft_tokens = self.draft_token_ids, self.cu_num_draft_tokens
        if logits.ndim != 2 or logits.shape[1] < 1:
            raise ValueError(f"logits must be [num_tokens, V] with V >= 1, got shape {tuple(logits.shape)}")
        if not logits.is_floating_point():
            raise ValueError(f"logits must be a floating point tensor, got {logits.dtype}")
        if draft_token_ids.ndim != 1 or cu_num_draft_tokens.ndim != 1 or cu_num_draft_tokens.numel() < 2:
            raise ValueError("draft_token_ids must be [D] and cu_num_draft_tokens [B + 1] with B >= 1")
        num_tokens, vocab = logits.shape
        batch, num_drafts = cu_num_draft_tokens.numel() - 1, draft_token_ids.numel()
        if num_tokens != num_drafts + batch:
            raise ValueError(f"logits need {num_drafts + batch} rows (one per draft + one bonus per request), got {num_tokens}")
        if temperature.shape != (batch,):
            raise ValueError(f"temperature must be [{batch}] (one per request), got shape {tuple(temperature.shape)}")
        if bitmask is not None and (bitmask.dtype != torch.int32 or bitmask.ndim != 2 or bitmask.shape[0] != num_tokens):
            raise ValueError(f"bitmask must be int32 [{num_tokens}, ceil(V/32)], got {bitmask.dtype} {tuple(bitmask.shape)}")
        if draft_probs is not None and draft_probs.shape != (num_drafts, vocab):
            raise ValueError(f"draft_probs must be [{num_drafts}, {vocab}], got {tuple(draft_probs.shape)}")
        if randomness.uniforms.shape != (num_drafts,) or randomness.exponentials.shape != (batch, vocab):
            raise ValueError(
                f"randomness does not match the batch: need uniforms [{num_drafts}] and exponentials [{batch}, {vocab}] "
                f"(see draw_randomness), got {tuple(randomness.uniforms.shape)} and {tuple(randomness.exponentials.shape)}"
            )

    def check_values(self, max_num_draft_tokens: int | None = None) -> None:
        """ValueError for bad values (CPU tensors only: on CUDA this would cost a sync)."""
        logits, bitmask, temperature = self.logits, self.bitmask, self.temperature
        draft_token_ids, draft_probs = self.draft_token_ids, self.draft_probs
        if logits.device.type != "cpu":
            return
        cu = self.cu_num_draft_tokens
        if int(cu[0]) != 0 or int(cu[-1]) != draft_token_ids.numel() or bool((cu[1:] < cu[:-1]).any()):
            raise ValueError("cu_num_draft_tokens must start at 0, never decrease and end at the number of draft tokens")
        if max_num_draft_tokens is not None and max_num_draft_tokens < int((cu[1:] - cu[:-1]).max()):
            raise ValueError(f"max_num_draft_tokens={max_num_draft_tokens} is smaller than the longest draft")
        if not bool(torch.isfinite(temperature).all()) or bool((temperature < 0).any()):
            raise ValueError("temperature must be finite and >= 0 (0 = greedy)")
        vocab = logits.shape[1]
        if draft_token_ids.numel() and (int(draft_token_ids.min()) < 0 or int(draft_token_ids.max()) >= vocab):
            raise ValueError(f"draft token ids must lie in [0, {vocab})")
        allowed = logits > float("-inf")  # [num_tokens, V]
        if bitmask is not None:
            covered = min(vocab, bitmask.shape[1] * 32)
            allowed[:, :covered] &= unpack_bitmask(bitmask, covered)
            allowed[:, covered:] = False
        if not bool(allowed.any(dim=-1).all()):
            raise ValueError("a row has no allowed token: the grammar mask (or -inf logits) forbids every token")
        if draft_probs is not None and draft_token_ids.numel():
            qx = draft_probs.gather(1, draft_token_ids.long().unsqueeze(1))  # [D, 1]
            if bool((qx <= 0).any()):
                raise ValueError("a draft token has q(x) = 0: it was not drawn from draft_probs")
