"""Prompt building: a plain string or chat messages -> prompt token ids.

Instruct models are trained on their chat template, so a prompt goes through it whenever the
tokenizer has one (SmolLM2 uses ChatML). Tokenizers without a template get the messages' text
joined by blank lines. The template is rendered to text and then encoded without extra special
tokens, so a BOS the template already writes is not doubled.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .inputs import check_text

__all__ = ["Messages", "normalize_messages", "render_prompt", "schema_instruction"]

Messages = list[dict[str, str]]
_ROLES = ("system", "user", "assistant", "tool")


def normalize_messages(prompt: str | Sequence[Mapping[str, Any]], system_prompt: str | None = None) -> Messages:
    """A prompt string or a list of `{"role", "content"}` messages -> validated messages.

    `system_prompt` is put first (replacing a system message already there). Raises ValueError
    with a clear message for an empty prompt or malformed messages.
    """
    if isinstance(prompt, str):
        if not check_text(prompt, "the prompt").strip():
            raise ValueError("the prompt is empty: give some text to respond to")
        messages: Messages = [{"role": "user", "content": prompt}]
    elif isinstance(prompt, Sequence) and not isinstance(prompt, (bytes, bytearray)):
        if len(prompt) == 0:
            raise ValueError("the prompt is empty: the message list has no messages")
        messages = []
        for i, message in enumerate(prompt):
            if not isinstance(message, Mapping) or "role" not in message or "content" not in message:
                raise ValueError(f"message {i} must be a mapping with 'role' and 'content', got {message!r}")
            role, content = message["role"], message["content"]
            if role not in _ROLES:
                raise ValueError(f"message {i} has role {role!r}; expected one of {', '.join(_ROLES)}")
            if not isinstance(content, str):
                raise ValueError(f"message {i} content must be a string, got {type(content).__name__}")
            check_text(content, f"message {i} content")
            messages.append({"role": role, "content": content})
        if not any(m["content"].strip() for m in messages if m["role"] != "system"):
            raise ValueError("the prompt is empty: every non-system message has empty content")
    else:
        raise ValueError(f"prompt must be a string or a list of messages, got {type(prompt).__name__}")
    if system_prompt is not None:
        if not isinstance(system_prompt, str):
            raise ValueError(f"system_prompt must be a string, got {type(system_prompt).__name__}")
        check_text(system_prompt, "the system prompt")
        messages = [{"role": "system", "content": system_prompt}] + [m for m in messages if m["role"] != "system"]
    return messages


def render_prompt(tokenizer: Any, messages: Messages, use_chat_template: bool = True) -> list[int]:
    """Messages -> prompt token ids, through the tokenizer's chat template when it has one
    (ending with the assistant turn's header, so the model answers next)."""
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    else:
        text = "\n\n".join(m["content"] for m in messages)
    ids = tokenizer.encode(text, add_special_tokens=False)
    return [int(t) for t in ids]


_HINT_MAX_KEYS = 24  # keys named in the hint; more are summarised by count
_HINT_MAX_CHARS = 1200  # the hint stays short whatever the schema's size (it costs prompt tokens)


def schema_instruction(schema: Mapping[str, Any]) -> str:
    """The sentence that tells the model which JSON to write, appended to the user's message.
    The grammar already guarantees a valid shape; naming the keys makes the content sensible
    (measured on SmolLM2-135M: a bare key list works better than the full schema, whose titles
    it copies into values). Other schemas are shown compactly, without titles. The hint is
    bounded (at most _HINT_MAX_KEYS keys, _HINT_MAX_CHARS characters): a 10,000-property schema
    must not become a 10,000-key prompt."""
    schema, self_ref = _root_object(schema)
    properties = schema.get("properties")
    if schema.get("type") == "object" and isinstance(properties, Mapping) and properties:
        keys = [str(k) for k in properties]
        shown: list[str] = []
        for key in keys[:_HINT_MAX_KEYS]:
            if sum(len(k) + 2 for k in shown) + len(key) > _HINT_MAX_CHARS:
                break
            shown.append(key)
        if not shown:
            return "Reply with a JSON object."
        rest = len(keys) - len(shown)
        if rest:
            listed = ", ".join(shown) + f" and {rest} more"
        else:
            listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
        hint = f"Reply with a JSON object with the key{'s' if len(keys) > 1 else ''} {listed}"
        # Recursive properties: without this the model tends to nest them until max_tokens
        # (measured on SmolLM2-135M, tests/grammar/test_pydantic_sampling.py's Category).
        recursive = [k for k in shown if _refers_to(properties[k], self_ref)]
        for key in recursive[:4]:
            hint += f"; {key} is {'null or ' if _allows_null(properties[key]) else ''}an object with the same keys"
        return hint + "."
    try:
        text = json.dumps(_without_titles(schema), separators=(",", ":"))
    except (RecursionError, ValueError, TypeError):  # too deep, or not plain JSON
        text = ""
    if not text or len(text) > _HINT_MAX_CHARS:
        kind = schema.get("type")
        return f"Reply with JSON ({kind})." if isinstance(kind, str) else "Reply with JSON."
    return "Reply with JSON that follows this JSON schema: " + text


def _root_object(schema: Mapping[str, Any]) -> tuple[Mapping[str, Any], set[str]]:
    """The root object schema (following a root "$ref" into "$defs", as pydantic writes a
    self-referencing model) and the refs that point back at it."""
    refs = {"#"}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = schema
        for part in ref[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, Mapping) else None
        if isinstance(target, Mapping):
            return target, refs | {ref}
    return schema, refs


def _branches(node: Any) -> list[Any]:
    if not isinstance(node, Mapping):
        return []
    options = [o for key in ("anyOf", "oneOf") if isinstance(node.get(key), list) for o in node[key]]
    return [node] + options


def _refers_to(node: Any, refs: set[str]) -> bool:
    return any(isinstance(b, Mapping) and b.get("$ref") in refs for b in _branches(node))


def _allows_null(node: Any) -> bool:
    for branch in _branches(node):
        kind = branch.get("type") if isinstance(branch, Mapping) else None
        if kind == "null" or (isinstance(kind, list) and "null" in kind):
            return True
    return False


def _without_titles(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {k: _without_titles(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_without_titles(v) for v in node]
    return node
