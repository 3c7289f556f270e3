"""Model runners: score new tokens for many requests, append them to each request's context, and
roll back rejected drafts cheaply.

Contract (both runners, and any user runner):
- `start(request_id, prompt_ids)` registers a request. Nothing runs yet: the prompt is scored
  lazily, together with the first `score` call (prefill and first step in one forward).
- `score([(request_id, new_ids), ...])` appends `new_ids` (at least one) to each request's
  context and returns, per request, logits `[len(new_ids), V]`: row i is the next-token
  distribution after `context + new_ids[:i + 1]`.
- `rollback(request_id, n)` removes the last n tokens from the context (rejected drafts).
- `release(request_id)` frees the request's state. `vocab_size` is the logits width V.

The speculative loop keeps the last committed token out of the runner and feeds it first, so one
`score` of `[last, x_1..x_k]` yields the k + 1 target rows verification needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

__all__ = ["Runner", "CallableRunner", "HFRunner"]


class Runner(Protocol):
    @property
    def vocab_size(self) -> int: ...

    def start(self, request_id: str, prompt_ids: Sequence[int]) -> None: ...

    def score(self, batch: Sequence[tuple[str, Sequence[int]]]) -> list[torch.Tensor]: ...

    def rollback(self, request_id: str, num_tokens: int) -> None: ...

    def release(self, request_id: str) -> None: ...


def _check_new(request_id: str, new_ids: Sequence[int]) -> None:
    if len(new_ids) == 0:
        raise ValueError(f"request {request_id!r}: score needs at least one new token")


class CallableRunner:
    """Runs a plain causal model `fn(input_ids [B, T]) -> logits [B, T, V]` with no cache: every
    `score` re-runs the whole context, right-padded into one batch. `fn` must be causal (row t
    depends only on tokens <= t), so padding never changes the rows we read."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], vocab_size: int | None = None, pad_token_id: int = 0) -> None:
        self.fn = fn
        self._vocab_size = vocab_size if vocab_size is not None else int(getattr(fn, "vocab_size", 0)) or None
        self.pad_token_id = pad_token_id
        self._tokens: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        if self._vocab_size is None:
            raise ValueError("vocab_size unknown: pass CallableRunner(fn, vocab_size=V)")
        return self._vocab_size

    def start(self, request_id: str, prompt_ids: Sequence[int]) -> None:
        if request_id in self._tokens:
            raise ValueError(f"request {request_id!r} already started")
        self._tokens[request_id] = [int(t) for t in prompt_ids]

    def score(self, batch: Sequence[tuple[str, Sequence[int]]]) -> list[torch.Tensor]:
        if not batch:
            return []
        seqs = []
        for request_id, new_ids in batch:
            _check_new(request_id, new_ids)
            self._tokens[request_id].extend(int(t) for t in new_ids)
            seqs.append(self._tokens[request_id])
        length = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), length), self.pad_token_id, dtype=torch.long)  # [B, T]
        for b, seq in enumerate(seqs):
            ids[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        with torch.no_grad():
            logits = self.fn(ids)  # [B, T, V]
        if logits.ndim != 3 or logits.shape[:2] != ids.shape:
            raise ValueError(f"model returned logits of shape {tuple(logits.shape)}, expected [{len(seqs)}, {length}, V]")
        if self._vocab_size is None:
            self._vocab_size = logits.shape[-1]
        return [logits[b, len(seq) - len(new) : len(seq)] for b, (seq, (_, new)) in enumerate(zip(seqs, batch))]

    def rollback(self, request_id: str, num_tokens: int) -> None:
        tokens = self._tokens[request_id]
        if not 0 <= num_tokens <= len(tokens):
            raise ValueError(f"request {request_id!r}: cannot roll back {num_tokens} of {len(tokens)} tokens")
        del tokens[len(tokens) - num_tokens :]

    def release(self, request_id: str) -> None:
        self._tokens.pop(request_id, None)

    def context(self, request_id: str) -> list[int]:
        """The tokens currently in the request's context (for tests and proposers)."""
        return list(self._tokens[request_id])


@dataclass
class _HFState:
    pending: list[int]  # tokens not yet in the cache (the prompt, before the first score)
    cache: Any = None  # transformers DynamicCache
    length: int = 0  # tokens in the cache
    extra: dict = field(default_factory=dict)


class HFRunner:
    """A Hugging Face causal LM with one KV cache per request.

    Each request runs its own forward (batch 1). Batching requests of different lengths would need
    their caches merged into one left-padded cache (with attention mask and position ids) every
    step; that is not done yet, so a batch of B requests costs B forwards. Rollback crops the
    cache (`DynamicCache.crop(-n)` in transformers 5.x: a negative count removes that many).
    Only the logits of the new positions are computed (`logits_to_keep`).
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self._vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self._states: dict[str, _HFState] = {}

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def start(self, request_id: str, prompt_ids: Sequence[int]) -> None:
        if request_id in self._states:
            raise ValueError(f"request {request_id!r} already started")
        self._states[request_id] = _HFState(pending=[int(t) for t in prompt_ids])

    def _forward(self, state: _HFState, new_ids: Sequence[int]) -> torch.Tensor:
        from transformers import DynamicCache

        if state.cache is None:
            state.cache = DynamicCache()
        feed = state.pending + [int(t) for t in new_ids]
        ids = torch.tensor([feed], dtype=torch.long, device=self.device)  # [1, T]
        with torch.no_grad():
            out = self.model(input_ids=ids, cache=state.cache, use_cache=True, logits_to_keep=len(new_ids))
        state.length += len(feed)
        state.pending = []
        return out.logits[0, -len(new_ids) :].float()  # [len(new), V]

    def score(self, batch: Sequence[tuple[str, Sequence[int]]]) -> list[torch.Tensor]:
        results = []
        for request_id, new_ids in batch:
            _check_new(request_id, new_ids)
            results.append(self._forward(self._states[request_id], new_ids))
        return results

    def rollback(self, request_id: str, num_tokens: int) -> None:
        state = self._states[request_id]
        if not 0 <= num_tokens <= state.length:
            raise ValueError(f"request {request_id!r}: cannot roll back {num_tokens} of {state.length} cached tokens")
        if num_tokens:
            state.cache.crop(-num_tokens)  # 5.x: negative = remove that many
            state.length -= num_tokens

    def release(self, request_id: str) -> None:
        self._states.pop(request_id, None)

    def cached_length(self, request_id: str) -> int:
        return self._states[request_id].length
