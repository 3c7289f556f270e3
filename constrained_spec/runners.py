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

import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from .devices import upload
from .runner_check import cache_keyword, check_model_runner

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
    prompt: tuple[int, ...] = ()  # what start() registered, kept until its keys/values are saved


class HFRunner:
    """A Hugging Face causal LM with one KV cache per request.

    `batched=True` (default) runs one forward for the whole batch: caches of different lengths are
    left-padded into one cache (attention mask + explicit position ids) and cut back out
    afterwards; logits differ from batch-1 logits by float rounding only. Measured here (greedy,
    4 requests, 16 tokens): 2.35x faster than one forward per request (`batched=False`). Rollback crops the cache (`DynamicCache.crop(-n)` in transformers 5.x: a
    negative count removes that many).
    Only the logits of the new positions are computed (`logits_to_keep`).

    Prefix cache: the keys/values of the last `prefix_cache_size` prompts are kept, and a new
    request whose prompt shares at least `min_prefix` leading tokens with one of them starts from
    a copy of those instead of recomputing them (chat templates, system prompts and instructions
    repeat across requests). Keys/values depend only on the tokens before them, so the logits
    are those of a full prefill up to float rounding (the reused ones came from a forward of
    another length; ~3e-5 here, like batching), see tests/spec/test_model.py.
    """

    def __init__(self, model: Any, batched: bool = True, prefix_cache_size: int = 8, min_prefix: int = 8, self_check: bool = True) -> None:
        if prefix_cache_size < 0 or min_prefix < 1:
            raise ValueError(f"need prefix_cache_size >= 0 and min_prefix >= 1, got {prefix_cache_size}, {min_prefix}")
        self.model = model
        self.batched = batched
        parameter = next(model.parameters())
        self.device = parameter.device
        self._vocab_size = int(model.get_output_embeddings().weight.shape[0])
        # transformers renamed the forward's cache keyword in 5.24 and older versions silently
        # ignore unknown keywords: take the one this model's forward declares.
        self._cache_keyword = cache_keyword(model)
        self._states: dict[str, _HFState] = {}
        self.prefix_cache_size, self.min_prefix = prefix_cache_size, min_prefix
        self._prefixes: OrderedDict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]]] = OrderedDict()  # prompt -> per-layer (K, V) [1, H, L, D], LRU
        self.prefix_hits = 0  # prompt tokens served from the prefix cache
        if self_check:  # once per model, device, dtype and batching in this process (runner_check.py)
            check_model_runner(self, model, "HFRunner", key=batched)

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def start(self, request_id: str, prompt_ids: Sequence[int]) -> None:
        if request_id in self._states:
            raise ValueError(f"request {request_id!r} already started")
        prompt = tuple(int(t) for t in prompt_ids)
        state = _HFState(pending=list(prompt), prompt=prompt)
        shared, layers = self._longest_prefix(prompt)
        if shared:
            from transformers import DynamicCache

            state.cache = DynamicCache(ddp_cache_data=[(k[:, :, :shared], v[:, :, :shared]) for k, v in layers])
            state.length, state.pending = shared, list(prompt[shared:])
            self.prefix_hits += shared
        self._states[request_id] = state

    def _longest_prefix(self, prompt: tuple[int, ...]) -> tuple[int, list]:
        """(tokens shared with the best cached prompt, its layers), or (0, []) below min_prefix."""
        shared = {key: len(os.path.commonprefix([key, prompt])) for key in self._prefixes}
        best_key = max(shared, key=shared.get, default=None)
        if best_key is None or shared[best_key] < self.min_prefix:
            return 0, []
        self._prefixes.move_to_end(best_key)
        return shared[best_key], self._prefixes[best_key]

    def _save_prefix(self, state: _HFState) -> None:
        """After the first forward: keep the prompt's keys/values for later requests."""
        prompt, state.prompt = state.prompt, ()
        if not self.prefix_cache_size or len(prompt) < self.min_prefix or prompt in self._prefixes:
            return
        n = len(prompt)
        self._prefixes[prompt] = [(k[:, :, :n].clone(), v[:, :, :n].clone()) for k, v, *_ in state.cache]
        while len(self._prefixes) > self.prefix_cache_size:
            self._prefixes.popitem(last=False)

    def _forward(self, state: _HFState, new_ids: Sequence[int]) -> torch.Tensor:
        from transformers import DynamicCache

        if state.cache is None:
            state.cache = DynamicCache()
        feed = state.pending + [int(t) for t in new_ids]
        ids = upload(torch.tensor([feed], dtype=torch.long), self.device)  # [1, T]
        with torch.no_grad():
            out = self.model(input_ids=ids, use_cache=True, logits_to_keep=len(new_ids), **{self._cache_keyword: state.cache})
        state.length += len(feed)
        state.pending = []
        if state.prompt:
            self._save_prefix(state)
        return out.logits[0, -len(new_ids) :].float()  # [len(new), V]

    def score(self, batch: Sequence[tuple[str, Sequence[int]]]) -> list[torch.Tensor]:
        for request_id, new_ids in batch:
            _check_new(request_id, new_ids)
        if self.batched and len(batch) > 1:
            return self._forward_batch([(self._states[rid], new) for rid, new in batch])
        return [self._forward(self._states[rid], new) for rid, new in batch]

    def _forward_batch(self, items: list[tuple[_HFState, Sequence[int]]]) -> list[torch.Tensor]:
        """One forward for requests of different lengths: cached keys/values left-padded to the
        longest cache, new tokens right-padded, an attention mask over both, explicit positions.
        Afterwards each request's cache is cut back out of the batch."""
        from transformers import DynamicCache

        feeds = [state.pending + [int(t) for t in new] for state, new in items]
        past = max(state.length for state, _ in items)
        width = max(len(f) for f in feeds)
        batch = len(items)
        ids = torch.zeros(batch, width, dtype=torch.long)  # [B, T]
        mask = torch.zeros(batch, past + width, dtype=torch.long)  # [B, P + T]
        positions = torch.zeros(batch, width, dtype=torch.long)  # [B, T]
        for b, ((state, _), feed) in enumerate(zip(items, feeds)):
            ids[b, : len(feed)] = torch.tensor(feed)
            mask[b, past - state.length : past + len(feed)] = 1
            positions[b] = state.length + torch.arange(width)
        layers = []
        if past > 0:
            num_layers = max(len(state.cache.layers) for state, _ in items if state.cache is not None)
            for layer in range(num_layers):
                keys, values = [], []
                for state, _ in items:
                    k, v = _layer_kv(state, layer, self.model)  # [1, H, L, D]
                    pad = past - k.shape[2]
                    keys.append(torch.nn.functional.pad(k, (0, 0, pad, 0)))
                    values.append(torch.nn.functional.pad(v, (0, 0, pad, 0)))
                layers.append((torch.cat(keys), torch.cat(values)))  # [B, H, P, D]
        cache = DynamicCache(ddp_cache_data=layers) if layers else DynamicCache()
        dev = self.device
        with torch.no_grad():
            out = self.model(input_ids=upload(ids, dev), attention_mask=upload(mask, dev), position_ids=upload(positions, dev), use_cache=True, **{self._cache_keyword: cache})
        results = []
        for b, ((state, new), feed) in enumerate(zip(items, feeds)):
            start = past - state.length
            kept = [(k[b : b + 1, :, start : past + len(feed)], v[b : b + 1, :, start : past + len(feed)]) for k, v, *_ in cache]
            state.cache = DynamicCache(ddp_cache_data=kept)
            state.length += len(feed)
            state.pending = []
            if state.prompt:
                self._save_prefix(state)
            results.append(out.logits[b, len(feed) - len(new) : len(feed)].float())  # [len(new), V]
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


def _layer_kv(state: _HFState, layer: int, model: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A request's cached keys/values of one layer `[1, H, L, D]` (empty when nothing is cached)."""
    if state.cache is not None and state.length > 0:
        cached = state.cache.layers[layer]
        return cached.keys, cached.values
    config = model.config
    heads = getattr(config, "num_key_value_heads", config.num_attention_heads)
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    empty = torch.zeros(1, heads, 0, dim, dtype=model.dtype, device=next(model.parameters()).device)
    return empty, empty
