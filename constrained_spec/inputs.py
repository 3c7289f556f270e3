"""Checks on what users send, done before (or without) the model: text is valid UTF-8, a
constraint compiles as far as it can without a tokenizer, a prompt fits the model's context.

Every failure is a ValueError subclass whose message names the field, so the CLI prints it as one
`error:` line (exit 2), the API raises it, and the server answers an OpenAI-format 400.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .grammar.protocol import GrammarError
from .grammar.regex_backend import regex_error_detail

__all__ = [
    "InvalidText", "PromptTooLong", "check_text", "read_stdin_text", "one_line", "check_constraint",
    "context_length", "longest_token_chars", "check_prompt_fits",
]  # fmt: skip


class InvalidText(ValueError):
    """A text field that is not valid Unicode / UTF-8 (bad bytes, lone surrogates)."""


class PromptTooLong(ValueError):
    """The prompt plus max_tokens does not fit the model's context."""


def check_text(text: Any, field: str) -> str:
    """`text` if it is a str encodable as UTF-8; InvalidText naming `field` otherwise.

    Python carries undecodable bytes from argv/stdin as U+DC80..U+DCFF (surrogateescape); those
    are reported as the byte they stand for, other surrogates as themselves."""
    if not isinstance(text, str):
        raise InvalidText(f"{field} must be a string, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        what = f"the byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"a lone surrogate U+{code:04X}"
        raise InvalidText(f"{field} is not valid UTF-8 text: {what} at character {exc.start}") from None
    return text


def read_stdin_text(field: str) -> str:
    """All of stdin, decoded as strict UTF-8 (InvalidText naming `field` and the bad byte)."""
    import sys

    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a replaced sys.stdin (tests, embedding): already text
        return check_text(sys.stdin.read(), field)
    data = stream.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidText(f"{field} is not valid UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}") from None


def one_line(message: Any) -> str:
    """A (possibly multi-line) error message as one line: whitespace runs become one space."""
    return " ".join(str(message).split())


# -- constraints without a tokenizer ----------------------------------------------------------


def check_constraint(
    *, schema: Any = None, regex: Any = None, grammar: Any = None, choices: Any = None, json_object: bool = False
) -> None:
    """Raise what compiling would raise, as far as it can be known without a vocabulary: the
    schema resolves and translates, the regex parses, the Lark grammar builds. Deep nesting that
    exhausts Python's recursion is reported as a GrammarError, never a RecursionError."""
    if schema is None and regex is None and grammar is None and choices is None and not json_object:
        return
    from .grammar.compiler import check_spec  # the grammar layer's rule: one constraint, its types

    check_spec(json_schema=schema, regex=regex, grammar=grammar, choices=choices, json_object=json_object)
    try:
        if schema is not None:
            _check_schema(schema)
        elif regex is not None:
            check_regex_syntax(check_text(regex, "regex"))
        elif grammar is not None:
            _check_lark(check_text(grammar, "grammar"))
        elif choices is not None:
            for i, choice in enumerate(choices):
                check_text(choice, f"choices[{i}]")
    except RecursionError:
        raise GrammarError("the constraint is nested too deeply to compile (Python's recursion limit)") from None


def _check_schema(schema: Any) -> None:
    """The real compile (the default backend: llguidance where it takes the schema, our compiler
    otherwise) over a one-token-per-byte vocabulary, with objects open and then closed: refused
    only where both refuse, so a schema the model's compile takes is never refused here."""
    from .grammar import compile_json_schema
    from .schemas import resolve_schema

    resolved = resolve_schema(schema)
    check_text(json.dumps(resolved.json_schema, ensure_ascii=False), "schema")
    try:
        compile_json_schema(resolved.json_schema, _byte_grammar_vocabulary(), closed_objects=False)
    except GrammarError:
        compile_json_schema(resolved.json_schema, _byte_grammar_vocabulary(), closed_objects=True)


@lru_cache(maxsize=1)
def _byte_grammar_vocabulary() -> Any:
    from .grammar import Vocabulary

    return Vocabulary([bytes([i]) for i in range(256)] + [None], 256)



def check_regex_syntax(pattern: str) -> None:
    """GrammarError (with the position where Python's parser can tell it) when outlines-core
    cannot read `pattern`. Indexing over a one-token-per-ASCII-byte vocabulary costs
    microseconds and reads the pattern exactly as the real compile does."""
    import outlines_core

    try:
        outlines_core.Index(pattern, _byte_vocabulary())
    except Exception as exc:  # outlines-core raises ValueError without a position
        raise GrammarError(f"invalid regex {pattern[:120]!r}: {regex_error_detail(pattern, exc)}") from None


def _byte_vocabulary() -> Any:
    import outlines_core

    global _BYTE_VOCAB
    if _BYTE_VOCAB is None:
        _BYTE_VOCAB = outlines_core.Vocabulary(0, {bytes([b]): [b + 1] for b in range(128)})
    return _BYTE_VOCAB


_BYTE_VOCAB = None


def _check_lark(text: str) -> None:
    """Build the LALR tables and every terminal's byte DFA, as compile_lark does before it needs
    the vocabulary. A bundled name (no newline, no ':') must exist."""
    import lark

    from .grammar.lark_parser import LALR_PLUGINS
    from .grammar.lexer import terminals_from_lark

    if "\n" not in text and ":" not in text:
        from .grammars import load_bundled_grammar

        text = load_bundled_grammar(text)
    try:
        parser = lark.Lark(text, parser="lalr", lexer="contextual", _plugins=LALR_PLUGINS)
    except Exception as exc:  # lark raises several exception types for bad grammars
        raise GrammarError(f"invalid Lark grammar: {one_line(exc)}") from None
    if parser.options.postlex is not None:
        raise GrammarError("Lark postlexers (e.g. Indenter) are not supported")
    terminals_from_lark(parser.terminals)


def schema_path_hint(text: str) -> str:
    """For a schema string that is not JSON: a hint when it looks like a file path."""
    stripped = text.strip()
    if stripped[:1] in "{[" or "\n" in stripped or len(stripped) > 4096:
        return ""
    if stripped.endswith(".json") or Path(stripped).expanduser().is_file():
        return (f" ({stripped!r} looks like a file path: schema= takes the schema itself; "
                "load the file with constrained_spec.schemas.load_schema_file(path))")
    return ""


# -- prompt length ------------------------------------------------------------------------------


def context_length(model: Any) -> int | None:
    """The model's context (max_position_embeddings), or None when it does not say."""
    config = getattr(model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def longest_token_chars(tokenizer: Any) -> int:
    """The most characters one token's string has (specials included). A token never covers
    more text characters than its string has (byte-level: one char per byte; SentencePiece: '▁'
    for a space), so len(text) / this is a lower bound on the token count."""
    cached = getattr(tokenizer, "_constrained_spec_longest", None)
    if cached is None:
        cached = max((len(t) for t in tokenizer.get_vocab()), default=1) or 1
        try:
            tokenizer._constrained_spec_longest = cached
        except Exception:  # a tokenizer object that refuses attributes: recompute next time
            pass
    return cached


def check_prompt_fits(*, prompt_chars: int | None = None, prompt_tokens: int | None = None, max_tokens: int,
                      context: int | None, longest_token: int = 1) -> None:
    """PromptTooLong when the prompt plus max_tokens cannot fit `context` tokens. With
    `prompt_chars` the check uses the lower bound ceil(chars / longest_token) (cheap, before
    tokenizing); with `prompt_tokens` it is exact."""
    if context is None:
        return
    if prompt_tokens is None:
        if prompt_chars is None:
            return
        at_least = math.ceil(prompt_chars / max(1, longest_token))
        if at_least + max_tokens > context:
            raise PromptTooLong(
                f"the prompt is too long: {prompt_chars} characters are at least {at_least} tokens, and with "
                f"max_tokens={max_tokens} that is more than the model's context of {context} tokens"
            )
        return
    if prompt_tokens + max_tokens > context:
        raise PromptTooLong(
            f"the prompt is too long: {prompt_tokens} tokens plus max_tokens={max_tokens} is more than the model's "
            f"context of {context} tokens; shorten the prompt or lower max_tokens"
        )


def message_chars(messages: Sequence[Mapping[str, Any]]) -> int:
    """Characters of message content (what any template renders at least once)."""
    return sum(len(m.get("content") or "") for m in messages)
