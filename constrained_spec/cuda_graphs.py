"""CUDA graphs of the static runner's eager forward: one captured graph per fixed shape.

Why not only torch.compile: a small model's decode step is ~450 kernel launches whose Python and
launch overhead, not arithmetic, sets its time (README, "The model runner"). Replaying a captured
graph removes that overhead with a capture of ~0.1 s per shape, where inductor spends tens of
seconds compiling each shape. The forward itself is the eager code path the tests check against
transformers; the graph replays exactly those kernels.

A graph reads its inputs from, and writes its output to, buffers fixed at capture: `__call__`
copies the new ids/positions in, replays, and returns the output buffer, which the next replay
overwrites (callers consume it first: the runner computes logits from it at once). The KV cache
is read and written in place at its capture-time address, so graphs are dropped whenever the
cache is reallocated (`cache_key` changes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["GraphedForward"]

Forward = Callable[[torch.Tensor, torch.Tensor, int, int], torch.Tensor]  # (ids, positions, first_slot, window) -> hidden


@dataclass
class _Captured:
    replay: Callable[[], None]
    ids: torch.Tensor  # [B, T] long, the graph's input
    positions: torch.Tensor  # [B, T] long, the graph's input
    out: torch.Tensor  # [B, T, E], the graph's output


class GraphedForward:
    """`forward(ids, positions, 0, window)` replayed from one captured graph per (ids shape,
    window). `capture(forward, ids, positions, window, pool)` -> (replay, out, pool) makes a graph;
    the default captures a CUDA graph (tests pass one that re-runs the forward on the same buffers)."""

    def __init__(self, forward: Forward, capture: Callable[..., tuple[Callable[[], None], torch.Tensor, Any]] | None = None) -> None:
        self.forward = forward
        self._capture = capture or capture_cuda_graph
        self._graphs: dict[tuple[int, int, int], _Captured] = {}
        self._pool: Any = None  # one memory pool shared by every graph (outputs are consumed at once)
        self._cache_key: Any = None
        self.captures = 0  # graphs captured so far (shapes x cache reallocations)

    def __call__(self, ids: torch.Tensor, positions: torch.Tensor, window: int, cache_key: Any) -> torch.Tensor:
        if cache_key != self._cache_key:  # the KV cache moved: graphs captured on the old one are stale
            self._graphs.clear()
            self._pool, self._cache_key = None, cache_key
        key = (ids.shape[0], ids.shape[1], window)
        graph = self._graphs.get(key)
        if graph is None:
            static_ids, static_positions = ids.clone(), positions.clone()
            replay, out, self._pool = self._capture(self.forward, static_ids, static_positions, window, self._pool)
            graph = self._graphs[key] = _Captured(replay, static_ids, static_positions, out)
            self.captures += 1
        graph.ids.copy_(ids)
        graph.positions.copy_(positions)
        graph.replay()
        return graph.out

    @property
    def shapes(self) -> list[tuple[int, int, int]]:
        """(rows, width, window) of the graphs held now."""
        return sorted(self._graphs)


def capture_cuda_graph(forward: Forward, ids: torch.Tensor, positions: torch.Tensor, window: int, pool: Any) -> tuple[Callable[[], None], torch.Tensor, Any]:
    """Capture `forward(ids, positions, 0, window)` as a CUDA graph. The warm-up runs on a side
    stream (as torch.cuda.graphs requires: lazy cuBLAS/attention workspaces are made outside the
    capture); it computes the same keys/values the replay writes, so it changes nothing."""
    stream = torch.cuda.Stream(device=ids.device)
    stream.wait_stream(torch.cuda.current_stream(ids.device))
    with torch.cuda.stream(stream):
        for _ in range(2):
            forward(ids, positions, 0, window)
    torch.cuda.current_stream(ids.device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = forward(ids, positions, 0, window)
    return graph.replay, out, graph.pool()
