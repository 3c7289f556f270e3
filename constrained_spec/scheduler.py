"""The one owner of an `Engine`: a thread that steps it for every request in flight together.

Callers (the Python API, streams, the server) never step the engine themselves. They `submit` a
request with a `deliver(request_id, item)` callback and read what it is given: each step's
`RequestOutput` (the last one has `finished=True`), or the exception that stopped the engine. So
no caller waits for another caller's reader, only for the step in progress, and every request in
flight is decoded in one batch.

`deliver` runs on the stepping thread: it must only hand the item over (put it in a queue).
If a step raises, every request in flight gets the exception and is aborted; later requests are
served as usual. The thread runs only while requests are in flight (the next `submit` starts a
new one), so an idle Generator holds no thread and can be freed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .grammar.protocol import CompiledGrammar
from .sampling import SamplingParams
from .speculative import Engine

__all__ = ["Scheduler", "Deliver"]

log = logging.getLogger("constrained_spec")

Deliver = Callable[[str, Any], None]  # (request_id, RequestOutput or the exception a step raised)


class Scheduler:
    """Steps `engine` on a daemon thread while any request is in flight."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._routes: dict[str, Deliver] = {}
        self._lock = threading.Lock()  # guards _routes, _closed and _thread
        self._closed = False
        self._thread: threading.Thread | None = None
        self.peak_batch = 0  # most requests in flight at one step: > 1 shows they were batched

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._routes)

    def submit(
        self, prompt_ids: Sequence[int], params: SamplingParams, grammar: CompiledGrammar | None, deliver: Deliver,
        *, max_draft_tokens: int | None = None, logprobs: int | None = None,
    ) -> str:
        """Queue a request; returns its id. Errors in the request itself (ValueError) raise here.
        `logprobs`: see `Engine.add_request`."""
        with self._lock:  # routed before the engine can produce output for it
            if self._closed:
                raise RuntimeError("the engine's scheduler is closed (closed, or the engine broke: see the log)")
            request_id = self.engine.add_request(prompt_ids, params, grammar, max_draft_tokens=max_draft_tokens, logprobs=logprobs)
            self._routes[request_id] = deliver
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="constrained-spec-engine", daemon=True)
                self._thread.start()
        return request_id

    def abort(self, request_id: str) -> None:
        """Stop a request at the next step; its final output (finish_reason "abort") is still
        delivered. Requests that already finished, or unknown ids, are left alone."""
        with self._lock:
            if request_id in self._routes:
                self.engine.abort(request_id)

    def close(self) -> None:
        """Stop the thread after the step in progress; requests still in flight are dropped."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed or not self.engine.has_unfinished():
                    self._thread = None  # idle: the next submit starts a new thread
                    return
                self.peak_batch = max(self.peak_batch, len(self._routes))
            try:
                outputs = self.engine.step()
            except Exception as exc:  # noqa: BLE001 - one bad step must not stop the service
                log.exception("engine step failed")
                self._fail_all(exc)
                continue
            for out in outputs:
                self._deliver(out.request_id, out, final=out.finished)

    def _deliver(self, request_id: str, item: Any, final: bool) -> None:
        with self._lock:
            route = self._routes.pop(request_id, None) if final else self._routes.get(request_id)
        if route is not None:
            try:
                route(request_id, item)
            except Exception:  # noqa: BLE001 - a reader that went away must not stop the others
                log.exception("delivering to %s failed", request_id)

    def _fail_all(self, exc: Exception) -> None:
        """Abort every request in flight, drain the aborts, then hand each its exception. Under
        the lock, so no request submitted meanwhile is stepped (or lost) by the drain."""
        broken = False
        with self._lock:
            routes, self._routes = self._routes, {}
            for request_id in routes:
                self.engine.abort(request_id)
            try:
                for _ in range(1000):
                    if not self.engine.has_unfinished():
                        break
                    self.engine.step()  # only aborts are left: no proposer or model runs
                broken = self.engine.has_unfinished()
            except Exception:  # noqa: BLE001
                log.exception("the engine could not drain after a failure")
                broken = True
            if broken:  # stop rather than spin; new requests get an error
                self._closed = True
        for request_id, route in routes.items():
            try:
                route(request_id, exc)
            except Exception:  # noqa: BLE001
                log.exception("delivering to %s failed", request_id)
