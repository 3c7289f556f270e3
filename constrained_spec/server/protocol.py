"""The OpenAI chat-completions wire format: validated requests and the response / chunk / error
bodies the server sends back.

Requests are parsed strictly (a string where a number belongs is a 400, never silently coerced);
unknown extra fields are ignored as OpenAI does, so agent frameworks that send `user` or
`metadata` keep working. Responses are built as plain dicts, shaped exactly as the `openai`
client expects them.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = [
    "ChatMessage",
    "ChatRequest",
    "FunctionDef",
    "Tool",
    "NamedToolChoice",
    "ResponseFormat",
    "ApiError",
    "error_body",
    "describe_validation_errors",
    "parse_request",
    "completion_body",
    "chunk_body",
    "usage_body",
    "new_id",
]

_STRICT = ConfigDict(strict=True, extra="ignore", populate_by_name=True)


class ApiError(Exception):
    """An error answered to the client in OpenAI's format, e.g. `ApiError(400, "...", param="n")`."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type or ("invalid_request_error" if status < 500 else "server_error")


def error_body(message: str, type: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class _Base(BaseModel):
    model_config = _STRICT


class TextPart(_Base):
    type: Literal["text"]
    text: str


class FunctionCall(_Base):
    name: str
    arguments: str


class ToolCall(_Base):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Base):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    @property
    def text(self) -> str:
        """The content as one string (text parts joined; None -> "")."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class FunctionDef(_Base):
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(_Base):
    type: Literal["function"]
    function: FunctionDef


class _FunctionName(_Base):
    name: str


class NamedToolChoice(_Base):
    type: Literal["function"]
    function: _FunctionName


class JsonSchemaFormat(_Base):
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Base):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> "ResponseFormat":
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("response_format of type 'json_schema' needs a 'json_schema' object")
        return self


class StreamOptions(_Base):
    include_usage: bool = False


class ChatRequest(_Base):
    """POST /v1/chat/completions. `top_k` is an extension; everything else is OpenAI's."""

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=-1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = Field(default=None, ge=0)
    stop: str | list[str] | None = None
    n: int = Field(default=1, ge=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    response_format: ResponseFormat | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool = True
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    user: str | None = None

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, value: str | list[str] | None) -> str | list[str] | None:
        stops = [value] if isinstance(value, str) else value or []
        if len(stops) > 4 or not all(stops):
            raise ValueError("stop must be a non-empty string or a list of at most 4 non-empty strings")
        return value

    @property
    def stops(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    @property
    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none"}


def _param(loc: tuple[Any, ...]) -> str | None:
    """Field path of an error location, without pydantic's union-branch tags ("str", "list[str]")."""
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts.append(str(part))
        elif re.fullmatch(r"[a-z_][a-z0-9_]*", part) and part not in _TYPE_TAGS:
            parts.append(part)
        else:
            break
    return ".".join(parts) or None


def describe_validation_errors(errors: list[dict[str, Any]]) -> tuple[str, str | None]:
    """Pydantic errors -> (message, param) for the first bad field, in OpenAI's style."""
    first = errors[0]
    if first.get("type") == "json_invalid":
        return f"the request body is not valid JSON: {first.get('ctx', {}).get('error', first.get('msg'))}", None
    param = _param(first.get("loc", ()))
    if param is None:
        return "the request body must be a JSON object", None
    got = first.get("input")
    shown = repr(got) if not isinstance(got, (dict, list)) else f"a JSON {'object' if isinstance(got, dict) else 'array'}"
    if len(shown) > 80:
        shown = shown[:77] + "..."
    same_field = [e for e in errors if _param(e.get("loc", ())) == param]
    if len(same_field) > 1:  # every branch of a union failed
        return f"invalid value for '{param}': none of its accepted forms match (got {shown})", param
    return f"invalid value for '{param}': {first.get('msg')} (got {shown})", param


def parse_request(body: bytes) -> ChatRequest:
    """Raw body -> ChatRequest, or ApiError(400) naming the first bad field."""
    if not body.strip():
        raise ApiError(400, "the request body is empty: send a JSON object")
    try:
        return ChatRequest.model_validate_json(body)
    except ValidationError as exc:
        message, param = describe_validation_errors(exc.errors())
        raise ApiError(400, message, param=param) from None


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def usage_body(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion_body(completion_id: str, model: str, choices: list[dict[str, Any]], usage: dict[str, int],
                    extension: dict[str, Any] | None = None) -> dict[str, Any]:
    """A `chat.completion` object. `extension` (speculation stats) goes under `constrained_spec`."""
    body: dict[str, Any] = {"id": completion_id, "object": "chat.completion", "created": int(time.time()),
                            "model": model, "choices": choices, "usage": usage, "system_fingerprint": None}
    if extension is not None:
        body["constrained_spec"] = extension
    return body


def chunk_body(completion_id: str, model: str, created: int, choices: list[dict[str, Any]],
               usage: dict[str, int] | None = None, extension: dict[str, Any] | None = None) -> dict[str, Any]:
    """A `chat.completion.chunk` object (one SSE event)."""
    body: dict[str, Any] = {"id": completion_id, "object": "chat.completion.chunk", "created": created,
                            "model": model, "choices": choices, "system_fingerprint": None}
    if usage is not None:
        body["usage"] = usage
    if extension is not None:
        body["constrained_spec"] = extension
    return body
