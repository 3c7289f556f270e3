"""One background thread that steps the speculative engine for every in-flight request together
(batched decoding) and routes each request's outputs to the asyncio queue of the handler that
waits for it.

The engine's `add_request` / `abort` are thread-safe; only this thread calls `step()`. If a step
raises, every request in flight gets the exception (so each handler answers a 500 instead of
hanging) and the thread keeps serving new requests.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

__all__ = ["EngineWorker", "EngineFailure"]

log = logging.getLogger("constrained_spec.server")


class EngineFailure(RuntimeError):
    """The engine raised while stepping; the request it was serving cannot finish."""


class EngineWorker:
    """Owns the stepping thread. `submit` registers a request with an asyncio queue (several
    requests may share one); the queue receives `(request_id, item)` pairs, where item is the
    engine's RequestOutput (the last one has `finished=True`) or one EngineFailure."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._routes: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self.peak_batch = 0  # most requests in flight at one step: > 1 shows requests are batched
        self._thread = threading.Thread(target=self._run, name="constrained-spec-engine", daemon=True)
        self._thread.start()

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._routes)

    def submit(self, prompt_ids: list[int], params: Any, grammar: Any, loop: asyncio.AbstractEventLoop,
               queue: asyncio.Queue) -> str:
        if self._closed:
            raise EngineFailure("the server is shutting down")
        with self._lock:  # registered before the engine can produce output for it
            request_id = self.engine.add_request(prompt_ids, params, grammar=grammar)
            self._routes[request_id] = (loop, queue)
        self._wake.set()
        return request_id

    def abort(self, request_id: str) -> None:
        """Free a request's slot (client gone). Safe to call for finished or unknown ids."""
        with self._lock:
            known = self._routes.pop(request_id, None) is not None
        if known:
            try:
                self.engine.abort(request_id)
            except Exception:  # already finished inside the engine: nothing to free
                log.debug("abort of %s ignored", request_id, exc_info=True)
            self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=10)

    def _deliver(self, request_id: str, item: Any, final: bool) -> None:
        with self._lock:
            route = self._routes.pop(request_id, None) if final else self._routes.get(request_id)
        if route is None:  # aborted by its handler; the engine's last output is dropped
            return
        loop, queue = route
        try:
            loop.call_soon_threadsafe(queue.put_nowait, (request_id, item))
        except RuntimeError:  # the handler's event loop is closed
            pass

    def _run(self) -> None:
        while not self._closed:
            if not self.engine.has_unfinished():
                self._wake.wait(timeout=0.5)
                self._wake.clear()
                continue
            with self._lock:
                self.peak_batch = max(self.peak_batch, len(self._routes))
            try:
                outputs = self.engine.step()
            except Exception as exc:  # never let one bad step kill the server
                log.exception("engine step failed")
                self._fail_all(exc)
                continue
            for out in outputs:
                self._deliver(out.request_id, out, bool(out.finished))

    def _fail_all(self, exc: Exception) -> None:
        with self._lock:
            ids = list(self._routes)
        for request_id in ids:
            try:
                self.engine.abort(request_id)
            except Exception:
                pass
            self._deliver(request_id, EngineFailure(f"generation failed: {type(exc).__name__}"), final=True)
        # Drain aborted requests so has_unfinished() does not spin on a broken state.
        try:
            for _ in range(1000):
                if not self.engine.has_unfinished():
                    break
                self.engine.step()
        except Exception:
            log.exception("engine could not drain after a failure")
