"""One choice's output: engine tokens -> text, stop strings, stream deltas, and the final
OpenAI message (content, or validated `tool_calls`).

Text comes from a `Detokenizer` (the engine's own: stop strings, EOS and unfinished UTF-8
characters handled once, in linear time). Tool-call output is never streamed piecemeal: each call
is sent whole, as soon as its arguments are complete and validated; a calls array cut by
max_tokens comes back in `tool_calls` (the cut call's arguments as the cut text), never as content. In "auto" mode the first character
decides: text never starts with "<", a call always does, and stop strings apply to text only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ..detokenizer import Detokenizer
from .protocol import ApiError
from .tools import CALL_START, TOOL_CALL_CLOSE, TOOL_CALL_OPEN, ToolPlan, parse_calls

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
        self._detokenizer = Detokenizer(decode, self.stops) if self.mode != "auto" else None
        self._first_char = ""
        self.token_ids: list[int] = []  # without EOS
        self._received = 0  # engine token ids taken so far
        self.finish_reason: str | None = None  # engine's: "stop" | "length" | "abort"
        self.stop_hit = False  # a stop string ended the output (the engine request may run on: abort it)
        self.stats: dict[str, Any] = {}
        self.logprobs: list[Any] = []  # the engine's TokenLogprob per token, when asked for
        self._logprobs_sent = 0
        self.calls_sent = 0  # tool calls already streamed
        self._issued: list[dict[str, Any]] = []  # whole calls seen while streaming, with their ids
        self._final: tuple[str | None, list[dict[str, Any]] | None, str] | None = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @property
    def text(self) -> str:
        return self._detokenizer.text if self._detokenizer is not None else ""

    def update(self, output: Any) -> None:
        """Take the engine's latest RequestOutput (or its final one)."""
        new = [int(t) for t in output.token_ids[self._received:]]  # this step's tokens only: linear time
        self._received += len(new)
        if new and new[-1] == self._eos:  # the engine leaves EOS out; be safe with outputs that do not
            new.pop()
        self.token_ids.extend(new)
        detokenizer = self._detokenizer
        if detokenizer is None:  # auto mode, undecided: the first character is a few tokens away at most
            self._first_char = self._decode(self.token_ids)[:1]
            if self._first_char or output.finished:
                stops = () if self._first_char == CALL_START else self.stops
                detokenizer = self._detokenizer = Detokenizer(self._decode, stops)
                new = self.token_ids
        hit = detokenizer is not None and detokenizer.push(new)  # True only for a stop string
        if getattr(output, "logprobs", None) is not None:
            self.logprobs = output.logprobs[: len(self.token_ids)]
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

    def logprobs_delta(self) -> list[Any]:
        """Token log-probs not sent yet (all of them once finished)."""
        fresh = self.logprobs[self._logprobs_sent:]
        self._logprobs_sent = len(self.logprobs)
        return fresh

    def _calls_text(self) -> str | None:
        """The calls array written so far, or None when the output is content."""
        if self.mode == "required":
            return self.text
        if self.mode == "auto" and self._is_call():
            body = self.text[len(TOOL_CALL_OPEN):] if len(self.text) >= len(TOOL_CALL_OPEN) else ""
            return body.removesuffix(TOOL_CALL_CLOSE) if self.finish_reason == "stop" else body
        return None

    def _parse(self, calls_json: str, complete: bool) -> list[dict[str, Any]]:
        try:
            return parse_calls(calls_json, self.plan, complete=complete)
        except Exception as exc:  # the grammar should make this impossible: report it, loudly
            raise ApiError(500, f"the generated tool call did not validate ({type(exc).__name__}); this is a bug",
                           type="server_error") from exc

    def calls_delta(self) -> list[dict[str, Any]]:
        """Tool calls completed since the last call (streaming sends each call once it is whole);
        after the choice finished, every remaining call, including one cut by max_tokens."""
        calls_json = self._calls_text()
        if calls_json is None:
            return []
        if self.finished:
            calls = self.final()[1] or []
        else:
            whole = [c for c in self._parse(calls_json, complete=False) if _is_whole(c)]  # not the one being written
            calls = self._issued = self._issued + whole[len(self._issued):]
        fresh = calls[self.calls_sent:]
        self.calls_sent = len(calls)
        return fresh

    def final(self) -> tuple[str | None, list[dict[str, Any]] | None, str]:
        """(content, tool_calls, finish_reason) once finished. A calls array cut by max_tokens
        comes back as finish_reason "length" with its complete calls and the cut one (arguments
        as the cut JSON text) in tool_calls, never as content."""
        assert self.finish_reason is not None, "final() before the choice finished"
        if self._final is None:
            self._final = self._compute_final()
        return self._final

    def _compute_final(self) -> tuple[str | None, list[dict[str, Any]] | None, str]:
        calls_json = self._calls_text()
        if calls_json is None:
            return self.text, None, "length" if self.finish_reason == "length" else "stop"
        complete = self.finish_reason == "stop"
        calls = self._parse(calls_json, complete=complete) if calls_json or complete else []
        calls[: len(self._issued)] = self._issued  # the same calls, with the ids already streamed
        return None, calls or None, "tool_calls" if complete else "length"


def _is_whole(call: dict[str, Any]) -> bool:
    try:
        json.loads(call["function"]["arguments"])
        return True
    except json.JSONDecodeError:
        return False


def logprobs_body(entries: Sequence[Any], token_bytes: Callable[[int], bytes]) -> dict[str, Any]:
    """OpenAI's `logprobs` object of a choice from the engine's TokenLogprob entries: each
    token's text, UTF-8 bytes, log p and its `top_logprobs`."""

    def one(token_id: int, logprob: float) -> dict[str, Any]:
        raw = token_bytes(token_id)
        return {"token": raw.decode("utf-8", errors="replace"), "bytes": list(raw), "logprob": logprob}

    content = [dict(one(e.token_id, e.logprob), top_logprobs=[one(t, lp) for t, lp in e.top]) for e in entries]
    return {"content": content, "refusal": None}
