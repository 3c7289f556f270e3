"""The server's side of the engine's `Scheduler`: routes each request's outputs to the asyncio
queue of the handler that waits for it.

The scheduler (one per loaded model, shared with the Python API) steps the engine for every
request in flight together, so concurrent clients are decoded in one batch. If a step raises,
each request in flight gets an `EngineFailure` (its handler answers a 500 instead of hanging).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

__all__ = ["EngineWorker", "EngineFailure"]


class EngineFailure(RuntimeError):
    """The engine raised while stepping; the request it was serving cannot finish."""


class EngineWorker:
    """`submit` registers a request with an asyncio queue (several requests may share one); the
    queue receives `(request_id, item)` pairs, where item is the engine's RequestOutput (the last
    one has `finished=True`) or one EngineFailure. After `abort` nothing more is delivered."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self._live: set[str] = set()  # this server's requests that may still deliver
        self._lock = threading.Lock()
        self._closed = False

    @property
    def in_flight(self) -> int:
        return self.scheduler.in_flight

    @property
    def peak_batch(self) -> int:
        return self.scheduler.peak_batch

    def submit(self, prompt_ids: list[int], params: Any, grammar: Any, loop: asyncio.AbstractEventLoop,
               queue: asyncio.Queue, logprobs: int | None = None) -> str:
        if self._closed:
            raise EngineFailure("the server is shutting down")

        def deliver(request_id: str, item: Any) -> None:  # on the stepping thread
            with self._lock:
                if request_id not in self._live:  # aborted by its handler: drop the rest
                    return
                if isinstance(item, BaseException):
                    item = EngineFailure(f"generation failed: {type(item).__name__}")
                if isinstance(item, EngineFailure) or item.finished:
                    self._live.discard(request_id)
            try:
                loop.call_soon_threadsafe(queue.put_nowait, (request_id, item))
            except RuntimeError:  # the handler's event loop is closed
                pass

        with self._lock:  # live before the scheduler can deliver for it
            request_id = self.scheduler.submit(prompt_ids, params, grammar, deliver, logprobs=logprobs)
            self._live.add(request_id)
        return request_id

    def abort(self, request_id: str) -> None:
        """Free a request's slot (client gone, or a stop string only this server knows). Requests
        the engine already finished are left alone."""
        with self._lock:
            if request_id not in self._live:
                return
            self._live.discard(request_id)
        self.scheduler.abort(request_id)

    def close(self) -> None:
        """Abort this server's requests; the scheduler belongs to the Generator and lives on."""
        self._closed = True
        with self._lock:
            live = list(self._live)
        for request_id in live:
            self.abort(request_id)
