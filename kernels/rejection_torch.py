"""Torch backend: mask + temperature + softmax in eager torch, then the reference sampler.

This is the unfused pipeline the Triton kernel replaces, and the oracle it is tested against.
"""

from __future__ import annotations

import torch

from constrained_spec.bitmask import apply_bitmask_
from constrained_spec.rejection import rejection_sample

from .inputs import VerifyBatch

__all__ = ["target_probs", "rejection_sample_logits_torch"]


def target_probs(
    logits: torch.Tensor, bitmask: torch.Tensor | None, temperature: torch.Tensor, cu_num_draft_tokens: torch.Tensor
) -> torch.Tensor:
    """p for every row, exactly as `sampling.process_logits` builds it: softmax(masked / T), or a
    one-hot row at the argmax of the masked logits for greedy (T = 0) requests. `[num_tokens, V]`."""
    masked = logits.float().clone()  # [num_tokens, V]
    if bitmask is not None:
        apply_bitmask_(masked, bitmask)
    rows_per_request = cu_num_draft_tokens[1:] - cu_num_draft_tokens[:-1] + 1  # [B]
    row_temp = temperature.float().repeat_interleave(rows_per_request, output_size=masked.shape[0])  # [num_tokens]
    greedy = row_temp == 0
    probs = torch.softmax(masked / torch.where(greedy, 1.0, row_temp).unsqueeze(1), dim=-1)
    one_hot = torch.nn.functional.one_hot(masked.argmax(dim=-1), masked.shape[1]).to(probs)
    return torch.where(greedy.unsqueeze(1), one_hot, probs)


def rejection_sample_logits_torch(batch: VerifyBatch) -> tuple[torch.Tensor, torch.Tensor]:
    probs = target_probs(batch.logits, batch.bitmask, batch.temperature, batch.cu_num_draft_tokens)
    return rejection_sample(probs, batch.draft_token_ids, batch.cu_num_draft_tokens, batch.draft_probs, batch.randomness, batch.temperature == 0)
