"""The OpenAI Responses API (`POST /v1/responses`), for the subset agent frameworks use, mapped
onto the chat-completions machinery: a Responses request becomes a `ChatRequest`, the same
constraint (tools, `text.format`) and engine run it, and the choice's output becomes `message` /
`function_call` output items, non-streamed or as the standard event sequence.

Supported: `input` (a string, or a list of message items with text content, `function_call`
and `function_call_output` items), `instructions`, `tools` (type "function"), `tool_choice`,
`parallel_tool_calls`, `text.format` (text / json_schema / json_object), `max_output_tokens`,
`temperature`, `top_p`, `stream`, and bookkeeping fields that change nothing here (`store`,
`metadata`, `user`, `include` empty, `truncation` "disabled", `reasoning` null, ...). Anything
else is a 400 naming the field. Nothing is stored: `previous_response_id` is refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .protocol import ApiError, ChatRequest, describe_validation_errors, new_id

__all__ = ["ResponsesRequest", "parse_responses_request", "to_chat_request", "response_body", "usage_of", "output_items", "stream_events"]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class _Loose(BaseModel):  # items whose extra fields (ids, statuses) carry nothing we use
    model_config = ConfigDict(strict=True, extra="ignore")


class TextContent(_Loose):
    type: Literal["input_text", "output_text", "text"]
    text: str


class MessageItem(_Loose):
    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[TextContent]

    @property
    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class FunctionCallItem(_Loose):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str


class FunctionCallOutputItem(_Loose):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[TextContent]


class FunctionTool(_Strict):
    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class NamedFunction(_Strict):
    type: Literal["function"]
    name: str


class TextFormat(_Strict):
    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    description: str | None = None
    strict: bool | None = None


class TextConfig(_Strict):
    format: TextFormat | None = None
    verbosity: Literal["medium"] | None = None


class ResponsesRequest(_Strict):
    model: str
    input: str | list[MessageItem | FunctionCallItem | FunctionCallOutputItem]
    instructions: str | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedFunction | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    stream: bool | None = None
    # bookkeeping that changes nothing here
    store: bool | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    service_tier: Literal["auto", "default"] | None = None
    include: list[str] | None = Field(default=None, max_length=0)
    truncation: Literal["disabled"] | None = None
    reasoning: None = None
    stream_options: dict[str, Any] | None = None
    top_logprobs: Literal[0] | None = None


def parse_responses_request(body: bytes) -> ResponsesRequest:
    """Raw body -> ResponsesRequest, or ApiError(400) naming the first bad or unsupported field."""
    if not body.strip():
        raise ApiError(400, "the request body is empty: send a JSON object")
    try:
        return ResponsesRequest.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors()
        extra = [e for e in errors if e.get("type") == "extra_forbidden"]
        if extra:
            field = ".".join(str(p) for p in extra[0]["loc"])
            raise ApiError(400, f"'{field}' is not supported by this server's /v1/responses", param=field) from None
        message, param = describe_validation_errors(errors)
        raise ApiError(400, message, param=param) from None


def _messages(req: ResponsesRequest) -> list[dict[str, Any]]:
    """instructions + input items -> chat messages (consecutive function calls: one assistant
    message with several tool_calls)."""
    messages: list[dict[str, Any]] = []
    if req.instructions:
        messages.append({"role": "system", "content": req.instructions})
    items = [MessageItem(role="user", content=req.input)] if isinstance(req.input, str) else req.input
    for item in items:
        if isinstance(item, MessageItem):
            messages.append({"role": item.role, "content": item.text})
        elif isinstance(item, FunctionCallItem):
            call = {"id": item.call_id, "type": "function", "function": {"name": item.name, "arguments": item.arguments}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls") is not None and not last["content"]:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            output = item.output if isinstance(item.output, str) else "".join(p.text for p in item.output)
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": output})
    if not messages:
        raise ApiError(400, "input is empty", param="input")
    return messages


def to_chat_request(req: ResponsesRequest) -> ChatRequest:
    """The equivalent chat-completions request (validated by the same model)."""
    body: dict[str, Any] = {"model": req.model, "messages": _messages(req), "n": 1}
    if req.tools:
        body["tools"] = [{"type": "function", "function": t.model_dump(exclude_none=True, exclude={"type"})} for t in req.tools]
    if req.tool_choice is not None:
        choice = req.tool_choice
        body["tool_choice"] = choice if isinstance(choice, str) else {"type": "function", "function": {"name": choice.name}}
    if req.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = req.parallel_tool_calls
    fmt = req.text.format if req.text is not None else None
    if fmt is not None and fmt.type == "json_schema":
        if fmt.schema_ is None or not fmt.name:
            raise ApiError(400, "text.format of type 'json_schema' needs 'name' and 'schema'", param="text.format")
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": fmt.name, "schema": fmt.schema_}}
    elif fmt is not None and fmt.type == "json_object":
        body["response_format"] = {"type": "json_object"}
    for src, dst in (("max_output_tokens", "max_tokens"), ("temperature", "temperature"), ("top_p", "top_p")):
        if getattr(req, src) is not None:
            body[dst] = getattr(req, src)
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as exc:
        message, param = describe_validation_errors(exc.errors())
        raise ApiError(400, message, param=param) from None


# ---- output ---------------------------------------------------------------------------------


def _message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if status != "in_progress" else []
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def _call_item(call: dict[str, Any], status: str, arguments: str | None = None) -> dict[str, Any]:
    fn = call["function"]
    return {"id": "fc_" + call["id"].removeprefix("call_"), "type": "function_call", "call_id": call["id"],
            "name": fn["name"], "arguments": fn["arguments"] if arguments is None else arguments, "status": status}


def response_body(response_id: str, created: float, model: str, req: ResponsesRequest, output: list[dict[str, Any]],
                  status: str, usage: dict[str, Any] | None, extension: dict[str, Any] | None = None) -> dict[str, Any]:
    """A `response` object. status: "in_progress", "completed" or "incomplete" (max_output_tokens)."""
    choice = req.tool_choice if req.tool_choice is not None else ("auto" if req.tools else "none")
    body: dict[str, Any] = {
        "id": response_id, "object": "response", "created_at": created, "model": model, "status": status,
        "output": output, "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": req.instructions, "metadata": req.metadata or {},
        "tools": [t.model_dump(exclude_none=True) for t in req.tools or []],
        "tool_choice": choice if isinstance(choice, str) else choice.model_dump(),
        "parallel_tool_calls": req.parallel_tool_calls is not False,
        "temperature": req.temperature, "top_p": req.top_p, "max_output_tokens": req.max_output_tokens,
        "text": {"format": req.text.format.model_dump(by_alias=True, exclude_none=True)}
        if req.text is not None and req.text.format is not None else {"format": {"type": "text"}},
        "usage": usage, "store": False,
    }
    if extension is not None:
        body["constrained_spec"] = extension
    return body


def usage_of(prompt_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt_tokens + output_tokens}


def output_items(content: str | None, calls: list[dict[str, Any]] | None, reason: str) -> list[dict[str, Any]]:
    """A finished choice -> output items: a message with the content, then one per call."""
    status = "incomplete" if reason == "length" else "completed"
    items = []
    if content:
        items.append(_message_item(new_id("msg"), content, status))
    for call in calls or []:
        whole = True
        try:
            json.loads(call["function"]["arguments"])
        except json.JSONDecodeError:
            whole = False
        items.append(_call_item(call, "completed" if whole else "incomplete"))
    return items


async def stream_events(updates: AsyncIterator[Any], req: ResponsesRequest, model: str, prompt_tokens: int) -> AsyncIterator[str]:
    """The standard event sequence: response.created, response.in_progress, then per output item
    output_item.added, (content_part.added, output_text.delta..., output_text.done,
    content_part.done) or (function_call_arguments.delta, .done), output_item.done, and finally
    response.completed (or response.incomplete). Errors become an `error` event."""
    response_id, created = new_id("resp"), time.time()
    sequence = 0

    def event(kind: str, **fields: Any) -> str:
        nonlocal sequence
        body = {"type": kind, "sequence_number": sequence, **fields}
        sequence += 1
        return f"event: {kind}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n"

    def snapshot(status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None = None, ext: Any = None) -> dict[str, Any]:
        return response_body(response_id, created, model, req, output, status, usage, ext)

    done: list[dict[str, Any]] = []
    message_id: str | None = None
    text = ""
    try:
        yield event("response.created", response=snapshot("in_progress", []))
        yield event("response.in_progress", response=snapshot("in_progress", []))
        choice = None
        async for choice in updates:
            delta = choice.content_delta()
            if delta:
                if message_id is None:
                    message_id = new_id("msg")
                    yield event("response.output_item.added", output_index=len(done), item=_message_item(message_id, "", "in_progress"))
                    yield event("response.content_part.added", item_id=message_id, output_index=len(done), content_index=0,
                                part={"type": "output_text", "text": "", "annotations": [], "logprobs": []})
                text += delta
                yield event("response.output_text.delta", item_id=message_id, output_index=len(done), content_index=0,
                            delta=delta, logprobs=[])
            if choice.finished and message_id is not None:
                status = "incomplete" if choice.final()[2] == "length" else "completed"
                yield event("response.output_text.done", item_id=message_id, output_index=len(done), content_index=0,
                            text=text, logprobs=[])
                part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
                yield event("response.content_part.done", item_id=message_id, output_index=len(done), content_index=0, part=part)
                item = _message_item(message_id, text, status)
                yield event("response.output_item.done", output_index=len(done), item=item)
                done.append(item)
            for call in choice.calls_delta():
                final = output_items(None, [call], "stop")[0]
                index = len(done)
                yield event("response.output_item.added", output_index=index, item=_call_item(call, "in_progress", ""))
                yield event("response.function_call_arguments.delta", item_id=final["id"], output_index=index,
                            delta=final["arguments"])
                yield event("response.function_call_arguments.done", item_id=final["id"], output_index=index,
                            arguments=final["arguments"], name=final["name"])
                yield event("response.output_item.done", output_index=index, item=final)
                done.append(final)
        reason = choice.final()[2] if choice is not None else "stop"
        usage = usage_of(prompt_tokens, len(choice.token_ids) if choice is not None else 0)
        ext = {"speculation": [choice.stats]} if choice is not None else None
        if reason == "length":
            yield event("response.incomplete", response=snapshot("incomplete", done, usage, ext))
        else:
            yield event("response.completed", response=snapshot("completed", done, usage, ext))
    except ApiError as exc:
        yield event("error", code=exc.code, message=exc.message, param=exc.param)
    except Exception:  # never leak a traceback; the log has it
        import logging

        logging.getLogger("constrained_spec.server").exception("responses stream failed")
        yield event("error", code="server_error", message="internal server error", param=None)
    finally:  # a client that hung up: abort its request now, not when the generator is collected
        aclose = getattr(updates, "aclose", None)
        if aclose is not None:
            await aclose()

