"""One choice's output: engine tokens -> text, stop strings, stream deltas, and the final
OpenAI message (content, or validated `tool_calls`).

Text comes from a `Detokenizer` (the engine's own: stop strings, EOS and unfinished UTF-8
characters handled once, in linear time). Tool-call output is never streamed piecemeal: a call is
sent whole, once its arguments are complete and validated. In "auto" mode the first character
decides: text never starts with "<", a call always does, and stop strings apply to text only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..detokenizer import Detokenizer
from .protocol import ApiError
from .tools import CALL_START, ToolPlan, parse_calls, split_auto_output

__all__ = ["ChoiceOutput"]


class ChoiceOutput:
    """Accumulates one engine request. `mode`: "text" (plain / JSON content), "required" (the
    whole output is a calls array) or "auto" (text or a marked calls array)."""

    def __init__(self, index: int, decode: Callable[[list[int]], str], eos_token_id: int,
                 stops: Sequence[str], plan: ToolPlan) -> None:
        self.index = index
        self._decode = decode
        self._eos = eos_token_id
        self.plan = plan
        self.mode = {"none": "text", "required": "required", "auto": "auto"}[plan.mode]
        self.stops = tuple(stops) if self.mode != "required" else ()  # stop strings never cut a call
        # auto mode: made once the first character shows whether stop strings apply
        self._detokenizer = Detokenizer(decode, self.stops, eos_token_id) if self.mode != "auto" else None
        self._first_char = ""
        self.token_ids: list[int] = []
        self.finish_reason: str | None = None  # engine's: "stop" | "length" | "abort"
        self.stop_hit = False  # a stop string ended the output (the engine request may run on: abort it)
        self.stats: dict[str, Any] = {}

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @property
    def text(self) -> str:
        return self._detokenizer.text if self._detokenizer is not None else ""

    def update(self, output: Any) -> None:
        """Take the engine's latest RequestOutput (or its final one)."""
        ids = [int(t) for t in output.token_ids]
        new = ids[len(self.token_ids):]
        self.token_ids = ids[:-1] if ids and ids[-1] == self._eos else ids
        detokenizer = self._detokenizer
        if detokenizer is None:  # auto mode, undecided: the first character is a few tokens away at most
            self._first_char = self._decode(self.token_ids)[:1]
            if self._first_char or output.finished:
                stops = () if self._first_char == CALL_START else self.stops
                detokenizer = self._detokenizer = Detokenizer(self._decode, stops, self._eos)
                new = ids
        hit = detokenizer is not None and detokenizer.push(new)
        stats = getattr(output, "stats", None)
        if stats is not None:
            self.stats = stats.to_dict() if hasattr(stats, "to_dict") else dict(stats)
        if hit:  # the engine ends here too unless only this choice knows the stops (auto mode text)
            self.stop_hit = True
            self.finish_reason = "stop"
        elif output.finished:
            detokenizer.finish()
            self.finish_reason = output.finish_reason

    def _is_call(self) -> bool | None:
        """auto mode: True / False once known, None while the text could still become a call."""
        if not self._first_char:
            return None if not self.finished else False
        return self._first_char == CALL_START  # the auto grammar's text branch cannot start with it

    def content_delta(self) -> str:
        """New content text safe to stream now ("" if none)."""
        if self.mode == "required" or (self.mode == "auto" and self._is_call() is not False):
            return ""
        return self._detokenizer.delta()

    def final(self) -> tuple[str | None, list[dict[str, Any]] | None, str]:
        """(content, tool_calls, finish_reason) once finished. Tool calls are returned only when
        complete; an output cut by max_tokens is returned as content with finish_reason "length"."""
        assert self.finish_reason is not None, "final() before the choice finished"
        if self.finish_reason == "length":
            return self.text, None, "length"
        calls_json = None
        content: str | None = self.text
        if self.mode == "required":
            content, calls_json = None, self.text
        elif self.mode == "auto" and self._is_call():
            content, calls_json = split_auto_output(self.text)
        if calls_json is None:
            return content, None, "stop"
        try:
            return None, parse_calls(calls_json, self.plan), "tool_calls"
        except Exception as exc:  # the grammar should make this impossible: report it, loudly
            raise ApiError(500, f"the generated tool call did not validate ({type(exc).__name__}); this is a bug",
                           type="server_error") from exc
