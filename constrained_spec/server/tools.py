"""Tool calling: which tools a request may call, the grammar that makes every call valid, the
prompt that shows the tools to the model, and parsing the output back into OpenAI `tool_calls`.

The wire format the model writes is a JSON array of calls, `[{"name": ..., "arguments": {...}}]`
(compact JSON, properties in this order):
- `tool_choice="required"` or a named function: the whole output is that array;
- `tool_choice="auto"`: the output is either content or `<tool_call>` + the array + `</tool_call>`.
  Content is plain text not starting with `<`, or, with a `response_format`, JSON following it
  (JSON never starts with `<`): the first character decides between the branches.
`parallel_tool_calls=false` makes the array exactly one call. The array is one JSON schema
(`calls_schema`: each tool's parameters under `$defs`, their local `$ref`s moved with them),
compiled by the default JSON-schema backend like a `response_format` (llguidance first, our
compiler where it refuses); in "auto" mode framed by the markers and joined with the content's
grammar (`grammar.union`). Tools whose `$ref`s are not local JSON pointers (anchors, `$id`s) go
through the grammar layer's IR instead (`constraint_grammar`: each tool its own document).
Chat templates without tool support (SmolLM2's) get the tools and this format in the system
prompt; earlier calls and tool results in the history are rendered as text in the same format.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..grammar.json_ir import EMPTY, Grammar, Lit, Node, Rep, Rx, alt, opt, seq
from ..grammar.json_merge import rebased_refs
from ..grammar.json_schema import SchemaSet
from ..grammar.protocol import GrammarError
from .protocol import ApiError, ChatMessage, NamedToolChoice, Tool

__all__ = [
    "TOOL_CALL_OPEN",
    "TOOL_CALL_CLOSE",
    "CALL_START",
    "ContentFormat",
    "ToolPlan",
    "plan_tools",
    "constraint_grammar",
    "calls_schema",
    "tool_error_text",
    "AUTO_TEXT",
    "render_messages",
    "parse_calls",
    "split_auto_output",
]

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
CALL_START = TOOL_CALL_OPEN[0]  # in "auto" mode a call starts with it and content never does
_EMPTY_OBJECT = {"type": "object", "properties": {}, "additionalProperties": False}
# Plain text in "auto" mode may not start with "<": then the first character decides between
# text and a call. (Excluding only the full marker needs a regex whose token-level DFA takes
# minutes to build on a 49k vocabulary; this one builds in a few seconds.)
AUTO_TEXT = rf"(?:[^{CALL_START}][\s\S]*)?"
_TEXT = opt(Rx(rf"[^{CALL_START}][\s\S]*"))


@dataclass(frozen=True)
class ContentFormat:
    """What content (not tool calls) must look like: `response_format` resolved."""

    kind: Literal["text", "json_object", "json_schema"] = "text"
    schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolPlan:
    """How one request uses tools. mode "none": answer with content (tools may still appear in
    the prompt); "required": only the calls array; "auto": content or a marked calls array.
    `choice` is the request's tool_choice as the client wrote it, for messages."""

    mode: Literal["none", "auto", "required"]
    tools: tuple[Tool, ...]
    parallel: bool
    choice: str
    system_prompt: str | None


def _arguments_schema(tool: Tool) -> dict[str, Any]:
    params = tool.function.parameters
    if params is None or params == {}:
        return dict(_EMPTY_OBJECT)
    if params.get("type", "object") != "object":
        raise ApiError(400, f"tool '{tool.function.name}': parameters must be a JSON schema of type 'object'",
                       param="tools")
    return params


def calls_schema(plan: ToolPlan) -> dict[str, Any] | None:
    """The JSON schema of the calls array: `[` call (`,` call)* `]` (one call when not parallel),
    a call `{"name": <an allowed tool>, "arguments": <its parameters>}` in that key order. None
    where a tool's `$ref`s cannot move into one document (not local JSON pointers)."""
    defs: dict[str, Any] = {}
    calls = []
    for i, tool in enumerate(plan.tools):
        # its references resolve against its own root, which moves to $defs/tool<i>
        arguments = rebased_refs(_arguments_schema(tool), f"#/$defs/tool{i}")
        if arguments is None:
            return None
        if '"$ref"' in json.dumps(arguments):
            defs[f"tool{i}"], arguments = arguments, {"$ref": f"#/$defs/tool{i}"}
        calls.append({"type": "object", "properties": {"name": {"const": tool.function.name}, "arguments": arguments},
                      "required": ["name", "arguments"], "additionalProperties": False})
    schema: dict[str, Any] = {"type": "array", "items": calls[0] if len(calls) == 1 else {"anyOf": calls}, "minItems": 1}
    if not plan.parallel:
        schema["maxItems"] = 1
    if defs:
        schema["$defs"] = defs
    return schema


def tool_error_text(message: str, plan: ToolPlan) -> str:
    """A compile error about `calls_schema(plan)` with its pointers named as the request names them."""
    for i, tool in enumerate(plan.tools):
        message = message.replace(f"#/$defs/tool{i}", "#")  # a reference, as the tool's schema spells it
        message = message.replace(f"/$defs/tool{i}", f"tools[{i}] ('{tool.function.name}') parameters ")
    return message


def _calls_node(plan: ToolPlan, docs: SchemaSet) -> Node:
    """`[` call (`,` call)* `]` (one call when not parallel); a call is one allowed tool's
    name and arguments following that tool's parameters schema."""
    variants = []
    for i, tool in enumerate(plan.tools):
        args = docs.node(_arguments_schema(tool), f"tools[{i}] ('{tool.function.name}') parameters")
        variants.append(seq(Lit('{"name":' + json.dumps(tool.function.name) + ',"arguments":'), args, Lit("}")))
    call = alt(*variants)
    more = Rep(seq(Lit(","), call), 0, None) if plan.parallel else EMPTY
    return seq(Lit("["), call, more, Lit("]"))


def constraint_grammar(plan: ToolPlan, content: ContentFormat, closed_objects: bool = True) -> Grammar | None:
    """The grammar of the whole reply: calls for "required"; for "auto" the union of the calls
    branch and the content branch (text, or JSON following `content`); None for mode "none".
    closed_objects: objects get only their declared keys (see api.Generator)."""
    if plan.mode == "none":
        return None
    docs = SchemaSet(closed_objects=closed_objects)
    try:
        calls = _calls_node(plan, docs)
        if plan.mode == "required":
            return docs.grammar(calls)
        if content.kind == "json_schema":
            body = docs.node(content.schema, "response_format schema")
        elif content.kind == "json_object":
            body = docs.any_json_object()
        else:
            body = _TEXT
    except GrammarError as exc:
        param = "response_format" if "response_format" in str(exc) else "tools"
        raise ApiError(400, f"invalid or unsupported {'schema' if param == 'response_format' else 'tool schema'}: {exc}",
                       param=param) from None
    return docs.grammar(alt(body, seq(Lit(TOOL_CALL_OPEN), calls, Lit(TOOL_CALL_CLOSE))))


def _tools_prompt(tools: Sequence[Tool], mode: str, parallel: bool, content: ContentFormat) -> str:
    listing = "\n".join(
        json.dumps({"name": t.function.name, "description": t.function.description or "",
                    "parameters": _arguments_schema(t)}, separators=(",", ":"))
        for t in tools
    )
    call = '[{"name": <tool name>, "arguments": <arguments object>}]'
    how = ("Call exactly one tool" if not parallel else "Call one or more tools") + f" by answering with the JSON array {call}."
    if mode == "auto":
        otherwise = "in plain text" if content.kind == "text" else "with the JSON answer"
        how = f"To call tools, answer with {TOOL_CALL_OPEN}{call}{TOOL_CALL_CLOSE}; otherwise answer {otherwise}."
    return f"You can call these tools:\n<tools>\n{listing}\n</tools>\n{how}"


def _choice_label(choice: str | NamedToolChoice) -> str:
    return f"'{choice}'" if isinstance(choice, str) else f"naming function '{choice.function.name}'"


def plan_tools(tools: Sequence[Tool] | None, tool_choice: str | NamedToolChoice | None, parallel: bool,
               content: ContentFormat = ContentFormat()) -> ToolPlan:
    """Resolve `tools` + `tool_choice` (OpenAI's defaults: "auto" with tools, "none" without)."""
    tools = tuple(tools or ())
    names = [t.function.name for t in tools]
    if len(set(names)) != len(names):
        raise ApiError(400, "tools: two tools have the same name", param="tools")
    choice = tool_choice if tool_choice is not None else ("auto" if tools else "none")
    label = _choice_label(choice)
    if choice != "none" and not tools:
        raise ApiError(400, f"tool_choice {label} needs a non-empty 'tools' list", param="tool_choice")
    if choice == "none":
        return ToolPlan("none", tools, parallel, label, None)
    if isinstance(choice, NamedToolChoice):
        chosen = tuple(t for t in tools if t.function.name == choice.function.name)
        if not chosen:
            raise ApiError(400, f"tool_choice names function '{choice.function.name}', which is not in tools "
                           f"({', '.join(names)})", param="tool_choice")
        return ToolPlan("required", chosen, parallel, label, _tools_prompt(chosen, "required", parallel, content))
    mode = "required" if choice == "required" else "auto"
    return ToolPlan(mode, tools, parallel, label, _tools_prompt(tools, mode, parallel, content))


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
                                for c in m.tool_calls], separators=(",", ":"))
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


_PARTIAL_CALL = re.compile(r'\{"name":("(?:[^"\\]|\\.)*"),"arguments":(.*)', re.DOTALL)


def _openai_call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function", "function": {"name": name, "arguments": arguments}}


def parse_calls(calls_json: str, plan: ToolPlan, complete: bool = True) -> list[dict[str, Any]]:
    """The generated calls array -> OpenAI `tool_calls` (arguments as JSON strings), each checked
    against its tool's parameters schema.

    complete=False reads an array cut by max_tokens: every complete call, then the call being
    written when it was cut (its name complete, `arguments` the cut JSON text), as OpenAI returns
    a call cut by the length limit. Raises ValueError if the text is not (a prefix of) a valid
    call array, which the grammar rules out."""
    import jsonschema

    schemas = {t.function.name: _arguments_schema(t) for t in plan.tools}
    decoder = json.JSONDecoder()
    calls: list[dict[str, Any]] = []
    if not calls_json.startswith("["):
        if complete or calls_json:
            raise ValueError("a tool-call array starts with '['")
        return calls
    pos = 1
    while pos < len(calls_json):
        try:
            call, end = decoder.raw_decode(calls_json, pos)
        except json.JSONDecodeError:
            if complete:
                raise
            partial = _PARTIAL_CALL.fullmatch(calls_json, pos)
            if partial is not None and json.loads(partial.group(1)) in schemas:
                calls.append(_openai_call(json.loads(partial.group(1)), partial.group(2)))
            return calls
        if set(call) != {"name", "arguments"} or call["name"] not in schemas:
            raise ValueError(f"not a call of an allowed tool: {call!r}")
        jsonschema.validate(call["arguments"], schemas[call["name"]])
        calls.append(_openai_call(call["name"], json.dumps(call["arguments"])))
        if calls_json[end:end + 1] not in (",", "]"):
            if complete or end < len(calls_json):
                raise ValueError(f"unexpected text after a call at {end}")
            return calls
        if calls_json[end] == "]":
            if end + 1 != len(calls_json):
                raise ValueError("text after the call array")
            return calls
        pos = end + 1
    if complete:
        raise ValueError("the call array is not closed")
    return calls
