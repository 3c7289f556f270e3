"""A runner over a static, position-indexed KV cache with one slot per request (Llama family).

Same contract as `runners.HFRunner` (start / score / rollback / release, prefix reuse), built the
way gpt-fast and vLLM build theirs:
- Each request owns a slot of a preallocated cache (`static_llama.StaticLlama`) and a length.
  Rollback subtracts from the length; nothing is copied or cropped. The next forward overwrites
  the positions it rolled back.
- A batch is one forward over a contiguous range of slots with per-row positions; slots in the
  range that are not in the batch ride along as dummy rows that write only beyond their own
  length (garbage by definition) and whose outputs are dropped. Nothing is re-padded.
- Feeds longer than the largest draft bucket (prompts) run first, together, in one eager forward
  at their own width; the draft-sized feeds then run in one forward (a CUDA graph or compiled where enabled).
- Prefix cache: the keys/values of the last `prefix_cache_size` prompts are kept; a request whose
  prompt shares >= `min_prefix` leading tokens copies them into its slot once.
- Fixed shapes: on CUDA the draft-sized forward is replayed from CUDA graphs (`cuda_graphs.py`,
  the default there): the feed width is padded to a draft-length bucket (`buckets`), the slot
  range to a power of two, the attention window to a power of two (>= MIN_WINDOW); one graph per
  shape, captured on first use (the draft buckets at one slot when the runner is built: the
  warm-up, logged). `compile=True` instead runs the same shapes through `torch.compile` (mode
  "reduce-overhead" on CUDA), window fixed at the whole capacity.

The cache grows (doubling) when a request needs more positions or slots than allocated; graphs
are then captured again (a compiled forward recompiles, logged), so fixed-shape runners
preallocate 16 slots of min(max_position_embeddings, 4096) positions; eager ones start at 1 x 512.
"""

from __future__ import annotations

import os
import sys
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .cuda_graphs import GraphedForward
from .runner_check import check_model_runner
from .static_llama import StaticLlama, unsupported_reason

__all__ = ["StaticRunner", "unsupported_reason", "DRAFT_BUCKETS", "MIN_WINDOW", "default_cuda_graphs"]

DRAFT_BUCKETS = (1, 2, 4, 8, 16)  # feed widths (last token + drafts) with a fixed shape
MIN_WINDOW = 256  # smallest attention window of a graphed forward (windows are powers of two)


def default_cuda_graphs(device: torch.device) -> bool:
    """CUDA graphs on CUDA; on CPU there are none, and eager is faster than torch.compile there
    (README: the CPU benchmark measured it, at a long warm-up)."""
    return device.type == "cuda"


@dataclass
class _Slot:
    index: int
    length: int = 0  # tokens whose keys/values are in the slot
    pending: tuple[int, ...] = ()  # prompt tokens not yet run (scored with the first `score`)
    prompt: tuple[int, ...] = ()  # kept until its keys/values are saved for reuse


class StaticRunner:
    """Runs an HF LlamaForCausalLM over a slot cache. See the module docstring."""

    def __init__(
        self, model: Any, *, cuda_graphs: bool | None = None, compile: bool = False, buckets: Sequence[int] = DRAFT_BUCKETS,
        slots: int | None = None, capacity: int | None = None, prefix_cache_size: int = 8, min_prefix: int = 8,
        compile_backend: str = "inductor", self_check: bool = True, graph_capture: Any = None,
    ) -> None:
        if prefix_cache_size < 0 or min_prefix < 1:
            raise ValueError(f"need prefix_cache_size >= 0 and min_prefix >= 1, got {prefix_cache_size}, {min_prefix}")
        if not buckets or sorted(set(buckets)) != list(buckets) or buckets[0] < 1:
            raise ValueError(f"buckets must be increasing positive widths, got {tuple(buckets)}")
        device = next(model.parameters()).device
        self.compiled = bool(compile)
        # graph_capture: tests replace the CUDA capture (cuda_graphs.GraphedForward) to run the same plumbing on CPU.
        wants_graphs = (default_cuda_graphs(device) or graph_capture is not None) if cuda_graphs is None else bool(cuda_graphs)
        self.graphed = wants_graphs and not self.compiled
        if self.graphed and device.type != "cuda" and graph_capture is None:
            raise ValueError(f"cuda_graphs=True needs the model on a CUDA device, not {device}")
        fixed = self.compiled or self.graphed
        # Fixed shapes include the cache's, and growing it captures/compiles them again: preallocate there.
        max_positions = int(getattr(model.config, "max_position_embeddings", 4096) or 4096)
        slots = slots or (16 if fixed else 1)
        capacity = capacity or (min(max_positions, 4096) if fixed else 512)
        self.net = StaticLlama(model, slots=max(slots, 1), capacity=max(capacity, 2 * buckets[-1]))
        self.device = device
        self.buckets = tuple(buckets)
        self._compiled_shapes: set[tuple[int, ...]] = set()
        self._vocab_size = int(self.net.lm_head.shape[0])
        self._slots: dict[str, _Slot] = {}
        self.prefix_cache_size, self.min_prefix = prefix_cache_size, min_prefix
        self._prefixes: OrderedDict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor]] = OrderedDict()  # prompt -> (K, V) [layers, Hkv, n, D], LRU
        self.prefix_hits = 0  # prompt tokens served from the prefix cache
        self.warmup_s = 0.0
        self._forward = self.net.forward
        self._graphs = GraphedForward(self.net.forward, capture=graph_capture) if self.graphed else None
        if self.graphed:
            self._warm_up()
        if self.compiled:
            # CUDA graphs need inductor; tests pass backend "eager" to trace the same fixed shapes fast.
            mode = "reduce-overhead" if self.device.type == "cuda" and compile_backend == "inductor" else None
            self._forward = torch.compile(self.net.forward, backend=compile_backend, mode=mode, dynamic=False)
            import torch._dynamo.config as dynamo_config

            # One graph per (width bucket, slot count, cache size): more than dynamo's default of 8,
            # past which it would silently run eager.
            dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, 16 * len(self.buckets))
            self._warm_up()
        if self_check:  # our forward vs transformers' on this model: once per model, device, dtype, mode
            check_model_runner(self, model, "StaticRunner", key="compiled" if self.compiled else "graphs" if self.graphed else None)

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    # ---- requests ----

    def start(self, request_id: str, prompt_ids: Sequence[int]) -> None:
        if request_id in self._slots:
            raise ValueError(f"request {request_id!r} already started")
        prompt = tuple(int(t) for t in prompt_ids)
        used = {s.index for s in self._slots.values()}
        index = next(i for i in range(len(used) + 1) if i not in used)  # lowest free: batches stay contiguous
        slot = _Slot(index=index, pending=prompt, prompt=prompt)
        shared, saved = self._longest_prefix(prompt)
        if shared:
            self._ensure(index + 1, shared)
            self.net.copy_prefix(index, saved[0][:, :, :shared], saved[1][:, :, :shared])
            slot.length, slot.pending = shared, prompt[shared:]
            self.prefix_hits += shared
        self._slots[request_id] = slot

    def rollback(self, request_id: str, num_tokens: int) -> None:
        slot = self._slots[request_id]
        if not 0 <= num_tokens <= slot.length:
            raise ValueError(f"request {request_id!r}: cannot roll back {num_tokens} of {slot.length} cached tokens")
        slot.length -= num_tokens

    def release(self, request_id: str) -> None:
        self._slots.pop(request_id, None)

    def cached_length(self, request_id: str) -> int:
        return self._slots[request_id].length

    # ---- scoring ----

    @torch.no_grad()
    def score(self, batch: Sequence[tuple[str, Sequence[int]]]) -> list[torch.Tensor]:
        feeds = []
        for request_id, new_ids in batch:
            if len(new_ids) == 0:
                raise ValueError(f"request {request_id!r}: score needs at least one new token")
            slot = self._slots[request_id]
            feeds.append((slot, list(slot.pending) + [int(t) for t in new_ids], len(new_ids)))
        hidden: list[torch.Tensor | None] = [None] * len(feeds)  # per request [len(new), E]
        short = [i for i, (_, feed, _) in enumerate(feeds) if len(feed) <= self.buckets[-1]]
        long = [i for i, (_, feed, _) in enumerate(feeds) if len(feed) > self.buckets[-1]]
        if long:  # prompts: one eager forward at their own width, before the draft-sized batch
            low = min(feeds[i][0].index for i in long)
            high = max(feeds[i][0].index for i in long) + 1
            out = self._run([(feeds[i][0], feeds[i][1]) for i in long], low, high, max(len(feeds[i][1]) for i in long), fixed=False)
            for i in long:
                slot, feed, new = feeds[i]
                hidden[i] = out[slot.index - low, len(feed) - new : len(feed)]
                self._advance(slot, len(feed))  # before the batch below, where this slot may ride along
        if short:
            slots = [feeds[i][0] for i in short]
            low, high = min(s.index for s in slots), max(s.index for s in slots) + 1
            width = max(len(feeds[i][1]) for i in short)
            fixed = self.compiled or self.graphed
            if fixed:  # fixed shapes: slots from 0 to a power of two, width to a bucket
                low, high, width = 0, _power_of_two(high), next(b for b in self.buckets if b >= width)
            out = self._run([(feeds[i][0], feeds[i][1]) for i in short], low, high, width, fixed=fixed)
            for i in short:
                slot, feed, new = feeds[i]
                hidden[i] = out[slot.index - low, len(feed) - new : len(feed)]
                self._advance(slot, len(feed))
        sizes = [h.shape[0] for h in hidden]
        return list(self.net.logits(torch.cat(hidden)).split(sizes))  # [len(new), V] each

    def _advance(self, slot: _Slot, count: int) -> None:
        """`count` fed tokens are now in the slot: move its length; keep a new prompt for reuse."""
        slot.length += count
        slot.pending = ()
        if slot.prompt:
            self._save_prefix(slot)

    def _run(self, items: list[tuple[_Slot, list[int]]], low: int, high: int, width: int, fixed: bool) -> torch.Tensor:
        """One forward over slots low..high-1 `[high - low, width]`; returns hidden `[rows, width, E]`.
        Rows of slots not in `items` write at their own length and beyond, which holds nothing."""
        lengths = [0] * (high - low)
        for slot in self._slots.values():
            if low <= slot.index < high:
                lengths[slot.index - low] = slot.length
        ids = torch.zeros(high - low, width, dtype=torch.long)  # [B, T]
        for slot, feed in items:
            ids[slot.index - low, : len(feed)] = torch.tensor(feed, dtype=torch.long)
        positions = torch.tensor(lengths, dtype=torch.long)[:, None] + torch.arange(width)  # [B, T]
        needed = int(positions.max()) + 1
        self._ensure(high, needed)
        if not fixed:
            return self.net.forward(ids.to(self.device), positions.to(self.device), low, needed)
        if self.graphed:  # low == 0 here
            return self._graphs(ids.to(self.device), positions.to(self.device), self.graph_window(needed), self.cache_key())
        shape = (high - low, width, self.net.slots, self.net.capacity)
        if shape not in self._compiled_shapes and self._compiled_shapes:  # after the warm-up
            _log(f"static runner: compiling a new shape (rows, width, slots, capacity) = {shape}")
        self._compiled_shapes.add(shape)
        if self.device.type == "cuda":  # a new CUDA-graph step: the previous outputs are consumed
            torch.compiler.cudagraph_mark_step_begin()
        return self._forward(ids.to(self.device), positions.to(self.device), low, self.net.capacity)

    def graph_window(self, needed: int) -> int:
        """The attention window of a graphed forward over `needed` positions: a power of two
        (>= MIN_WINDOW, at most the capacity), so few shapes are captured."""
        return min(self.net.capacity, max(MIN_WINDOW, _power_of_two(needed)))

    def cache_key(self) -> tuple[int, int, int, int]:
        """Where the KV cache lives now: graphs captured under another key are stale."""
        return (self.net.k_cache.data_ptr(), self.net.v_cache.data_ptr(), self.net.slots, self.net.capacity)

    def _ensure(self, slots: int, positions: int) -> None:
        """Grow the cache (doubling) to hold `slots` slots of `positions` positions."""
        if slots <= self.net.slots and positions <= self.net.capacity:
            return
        new_slots = self.net.slots if slots <= self.net.slots else _power_of_two(slots)
        new_capacity = self.net.capacity
        while new_capacity < positions:
            new_capacity *= 2
        self.net.resize(new_slots, new_capacity)

    # ---- prefix cache ----

    def _longest_prefix(self, prompt: tuple[int, ...]) -> tuple[int, tuple]:
        shared = {key: len(os.path.commonprefix([key, prompt])) for key in self._prefixes}
        best = max(shared, key=shared.get, default=None)
        if best is None or shared[best] < self.min_prefix:
            return 0, ()
        self._prefixes.move_to_end(best)
        return shared[best], self._prefixes[best]

    def _save_prefix(self, slot: _Slot) -> None:
        prompt, slot.prompt = slot.prompt, ()
        if not self.prefix_cache_size or len(prompt) < self.min_prefix or prompt in self._prefixes:
            return
        self._prefixes[prompt] = self.net.read_prefix(slot.index, len(prompt))
        while len(self._prefixes) > self.prefix_cache_size:
            self._prefixes.popitem(last=False)

    # ---- compilation ----

    @torch.no_grad()
    def _warm_up(self) -> None:
        """Capture (or compile) every draft bucket at one slot (more slots on first use). Runs at
        construction, before any request owns slot 0; logs the time once."""
        start = time.perf_counter()
        scratch = _Slot(index=0)
        saved, self._slots = self._slots, {"__warmup__": scratch}
        try:
            for width in self.buckets:
                self._run([(scratch, [0] * width)], 0, 1, width, fixed=True)
        finally:
            self._slots = saved
        self.warmup_s = time.perf_counter() - start
        how = "captured CUDA graphs of" if self.graphed else "compiled"
        _log(f"static runner: {how} {len(self.buckets)} draft buckets {self.buckets} on {self.device} in {self.warmup_s:.1f} s (once per runner)")


def _log(message: str) -> None:
    print(f"[constrained_spec] {message}", file=sys.stderr, flush=True)


def _power_of_two(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()
