"""Tool calling: which tools a request may call, the constraint that makes every call valid, the
prompt that shows the tools to the model, and parsing the output back into OpenAI `tool_calls`.

The wire format the model writes is a JSON array of calls, `[{"name": ..., "arguments": {...}}]`:
- `tool_choice="required"` or a named function: the whole output is that array, constrained by a
  JSON schema (an `anyOf` over the allowed tools, each `arguments` following the tool's schema);
- `tool_choice="auto"`: the output is either plain text (not starting with `<`), or
  `<tool_call>` + the array + `</tool_call>`: one regular expression.
`parallel_tool_calls=false` limits the array to one call. Chat templates without tool support
(SmolLM2's) get the tools and this format in the system prompt, and earlier calls and tool results
in the history are rendered as text in the same format.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .protocol import ApiError, ChatMessage, NamedToolChoice, Tool

__all__ = [
    "TOOL_CALL_OPEN",
    "TOOL_CALL_CLOSE",
    "CALL_START",
    "ToolPlan",
    "plan_tools",
    "calls_schema",
    "text_or_calls_regex",
    "render_messages",
    "parse_calls",
    "split_auto_output",
]

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
CALL_START = TOOL_CALL_OPEN[0]  # in "auto" mode a call starts with it and plain text never does
_EMPTY_OBJECT = {"type": "object", "properties": {}, "additionalProperties": False}


@dataclass(frozen=True)
class ToolPlan:
    """How one request uses tools. mode "none": answer in text (tools may still appear in the
    prompt). `schema` is the calls-array schema; `regex` the text-or-call constraint for "auto"."""

    mode: Literal["none", "auto", "required"]
    tools: tuple[Tool, ...]
    parallel: bool
    schema: dict[str, Any] | None
    regex: str | None
    system_prompt: str | None


def _arguments_schema(tool: Tool) -> dict[str, Any]:
    params = tool.function.parameters
    if params is None or params == {}:
        return dict(_EMPTY_OBJECT)
    if params.get("type", "object") != "object":
        raise ApiError(400, f"tool '{tool.function.name}': parameters must be a JSON schema of type 'object'",
                       param="tools")
    return params


def calls_schema(tools: Sequence[Tool], parallel: bool) -> dict[str, Any]:
    """JSON schema of the calls array: each item is one allowed tool's name and its arguments."""
    variants = [
        {"type": "object",
         "properties": {"name": {"const": t.function.name}, "arguments": _arguments_schema(t)},
         "required": ["name", "arguments"], "additionalProperties": False}
        for t in tools
    ]
    item = variants[0] if len(variants) == 1 else {"anyOf": variants}
    schema: dict[str, Any] = {"type": "array", "items": item, "minItems": 1}
    if not parallel:
        schema["maxItems"] = 1
    return schema


# Plain text in "auto" mode may not start with "<": then the first character decides between
# text and a call. (Excluding only the full marker needs a regex whose token-level DFA takes
# minutes to build on a 49k vocabulary; this one builds in a few seconds.)
_TEXT_BRANCH = rf"(?:[^{CALL_START}][\s\S]*)?"  # "<" needs no escape in a class


def text_or_calls_regex(schema: dict[str, Any]) -> str:
    """The "auto" constraint: plain text not starting with "<", or one marked call array."""
    from outlines_core.json_schema import build_regex_from_schema

    try:
        calls = build_regex_from_schema(json.dumps(schema))
    except Exception as exc:  # outlines-core raises its own ValueError subclasses for unsupported schemas
        raise ApiError(400, f"unsupported tool parameters schema: {exc}", param="tools") from None
    from ..grammar.regex_backend import regex_escape

    return f"{_TEXT_BRANCH}|{regex_escape(TOOL_CALL_OPEN)}(?:{calls}){regex_escape(TOOL_CALL_CLOSE)}"


def _tools_prompt(tools: Sequence[Tool], mode: str, parallel: bool) -> str:
    listing = "\n".join(
        json.dumps({"name": t.function.name, "description": t.function.description or "",
                    "parameters": _arguments_schema(t)}, separators=(",", ":"))
        for t in tools
    )
    call = '[{"name": <tool name>, "arguments": <arguments object>}]'
    how = ("Call exactly one tool" if not parallel else "Call one or more tools") + f" by answering with the JSON array {call}."
    if mode == "auto":
        how = f"To call tools, answer with {TOOL_CALL_OPEN}{call}{TOOL_CALL_CLOSE}; otherwise answer in plain text."
    return f"You can call these tools:\n<tools>\n{listing}\n</tools>\n{how}"


def plan_tools(tools: Sequence[Tool] | None, tool_choice: str | NamedToolChoice | None, parallel: bool) -> ToolPlan:
    """Resolve `tools` + `tool_choice` (OpenAI's defaults: "auto" with tools, "none" without)."""
    tools = tuple(tools or ())
    names = [t.function.name for t in tools]
    if len(set(names)) != len(names):
        raise ApiError(400, "tools: two tools have the same name", param="tools")
    choice = tool_choice if tool_choice is not None else ("auto" if tools else "none")
    if choice != "none" and not tools:
        raise ApiError(400, f"tool_choice {choice if isinstance(choice, str) else 'naming a function'} needs a non-empty 'tools' list",
                       param="tool_choice")
    if choice == "none":
        return ToolPlan("none", tools, parallel, None, None, None)
    if isinstance(choice, NamedToolChoice):
        chosen = [t for t in tools if t.function.name == choice.function.name]
        if not chosen:
            raise ApiError(400, f"tool_choice names function '{choice.function.name}', which is not in tools "
                           f"({', '.join(names)})", param="tool_choice")
        schema = calls_schema(chosen, parallel)
        return ToolPlan("required", tuple(chosen), parallel, schema, None, _tools_prompt(chosen, "required", parallel))
    schema = calls_schema(tools, parallel)
    if choice == "required":
        return ToolPlan("required", tools, parallel, schema, None, _tools_prompt(tools, "required", parallel))
    return ToolPlan("auto", tools, parallel, schema, text_or_calls_regex(schema), _tools_prompt(tools, "auto", parallel))


def render_messages(messages: Sequence[ChatMessage], plan: ToolPlan) -> list[dict[str, str]]:
    """OpenAI messages -> plain `{"role", "content"}` messages for the chat template: earlier
    tool calls become the call text, tool results a `tool` turn, `developer` becomes `system`, and
    the tools prompt joins the system message."""
    out: list[dict[str, str]] = []
    for m in messages:
        role = "system" if m.role == "developer" else m.role
        content = m.text
        if m.role == "assistant" and m.tool_calls:
            calls = json.dumps([{"name": c.function.name, "arguments": _loads_or_text(c.function.arguments)}
                                for c in m.tool_calls])
            content = (content + "\n" if content else "") + f"{TOOL_CALL_OPEN}{calls}{TOOL_CALL_CLOSE}"
        out.append({"role": role, "content": content})
    if plan.system_prompt:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + plan.system_prompt}
        else:
            out.insert(0, {"role": "system", "content": plan.system_prompt})
    return out


def _loads_or_text(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


def split_auto_output(text: str) -> tuple[str | None, str | None]:
    """An "auto" output -> (content, calls_json): exactly one of them is not None."""
    if text.startswith(TOOL_CALL_OPEN):
        body = text[len(TOOL_CALL_OPEN):]
        return None, body.removesuffix(TOOL_CALL_CLOSE)
    return text, None


def parse_calls(calls_json: str, plan: ToolPlan) -> list[dict[str, Any]]:
    """The generated calls array -> OpenAI `tool_calls` (arguments as JSON strings), checked
    against each tool's schema. Raises ValueError if the text is not a valid call array (which the
    grammar rules out for complete outputs)."""
    import jsonschema

    calls = json.loads(calls_json)
    jsonschema.validate(calls, plan.schema)
    return [
        {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
         "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
        for c in calls
    ]
