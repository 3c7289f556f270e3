"""One entry point, `compile(...)`, over every constraint kind and backend, with a shared cache.

Compiled grammars are immutable, so one cache entry serves every request and thread. The key is
(constraint kind, canonical spec text, options, vocabulary fingerprint, backend).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import logging
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .json_dialects import in_declared_drafts, may_hold_older_forms
from .json_unevaluated import unevaluated_as_additional
from .json_ir import Grammar, GrammarTooLarge, Lit, RecursiveGrammar, seq
from .json_refs import bundle, without_unreachable_definitions
from .json_schema import deep_recursion, json_value_grammar, normalize_schema, schema_to_grammar
from .json_shapes import check_keyword_shapes
from .protocol import CompiledGrammar, GrammarError
from .regex_backend import CompiledRegex, regex_escape
from .vocabulary import Vocabulary

__all__ = [
    "compile", "compile_regex", "compile_json_schema", "compile_json_object", "compile_choices",
    "compile_grammar", "compile_ir", "clear_cache", "check_backend", "check_spec", "BACKENDS",
]  # fmt: skip

# "default": JSON schemas through llguidance when it is installed and accepts the schema (1-5 ms to
# compile, exact), else through our own compiler, whose refusal (naming keyword and pointer) is the
# one raised; every other constraint through our own compiler, a large regex (REGEX_INDEX_MAX_CHARS)
# on llguidance's lazy regex engine. "native": our compiler only
# (outlines-core regex path or our Lark engine). "llguidance": llguidance only.
BACKENDS = ("default", "native", "llguidance")
log = logging.getLogger(__name__)
schema_log = logging.getLogger("constrained_spec.grammar.json_schema")  # where our compiler lists ignored keywords
_CACHE_SIZE = 128
_CACHE_BYTES = 2 << 30  # and the regex path's grammars in it (approx_bytes: 8 bytes a move) at most this, the newest kept
_cache: OrderedDict[tuple, CompiledGrammar] = OrderedDict()
_cache_bytes = 0  # the cached grammars' weights (_weight), summed
_lock = threading.Lock()
_building: dict[tuple, threading.Lock] = {}


def clear_cache() -> None:
    global _cache_bytes
    with _lock:
        _cache.clear()
        _cache_bytes = 0


def _cached(key: tuple, build: Callable[[], CompiledGrammar]) -> CompiledGrammar:
    global _cache_bytes
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
        gate = _building.setdefault(key, threading.Lock())
    with gate:  # two threads asking for the same grammar build it once
        with _lock:
            if key in _cache:
                return _cache[key]
        with _collection_paused():
            compiled = build()
        with _lock:
            _cache[key] = compiled
            _cache_bytes += _weight(compiled)
            while len(_cache) > _CACHE_SIZE or (_cache_bytes > _CACHE_BYTES and len(_cache) > 1):
                _cache_bytes -= _weight(_cache.popitem(last=False)[1])
            _building.pop(key, None)
    return compiled


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a grammar is built: a build makes millions of
    small tuples and each full collection walks every live object (Lark's LALR table for
    clang-format's schema: 1.0 s with it, 0.44 s without). Reference counting still frees what
    is dropped; the collector is turned back on only where it was on (two builds in two threads:
    the second one's rest runs with it on once the first is done)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _weight(compiled: CompiledGrammar) -> int:
    """Bytes a cached grammar holds, where it says (the regex path's moves; under its wrappers)."""
    while hasattr(compiled, "inner"):
        compiled = compiled.inner
    return getattr(compiled, "approx_bytes", 0)


def check_backend(backend: object) -> None:
    """GrammarError (a ValueError) unless `backend` names a grammar backend."""
    if backend not in BACKENDS:
        raise GrammarError(f"unknown grammar backend {backend!r}; expected one of {', '.join(BACKENDS)}")


def check_spec(
    *, regex: Any = None, json_schema: Any = None, json_object: bool = False, choices: Any = None,
    grammar: Any = None, ir: Any = None,
) -> str:
    """The kind of the one constraint given, checked as far as it can be without a vocabulary
    or compiling: exactly one; regex and grammar non-empty text; choices a non-empty list of
    non-empty strings. GrammarError (a ValueError) otherwise."""
    given = [name for name, value in (("regex", regex), ("json_schema", json_schema), ("choices", choices), ("grammar", grammar), ("ir", ir)) if value is not None]
    if json_object:
        given.append("json_object")
    if len(given) != 1:
        raise GrammarError(f"give exactly one constraint (regex, json_schema, json_object, choices, grammar, ir), got {', '.join(given) or 'none'}")
    if regex is not None and (not isinstance(regex, str) or not regex):
        raise GrammarError(f"regex must be a non-empty string, got {regex!r:.80}")
    if grammar is not None and (not isinstance(grammar, str) or not grammar.strip()):
        raise GrammarError(f"grammar must be Lark text or the name of a bundled grammar, got {grammar!r:.80}")
    if choices is not None and (isinstance(choices, str) or not isinstance(choices, Sequence) or not choices
                                or not all(isinstance(c, str) and c for c in choices)):
        raise GrammarError(f"choices must be a non-empty list of non-empty strings, got {choices!r:.80}")
    return given[0]


def _check(vocab: Any, backend: str) -> None:
    if not isinstance(vocab, Vocabulary):
        raise GrammarError(f"vocab must be a constrained_spec Vocabulary, got {type(vocab).__name__}")
    check_backend(backend)


# outlines-core indexes a regex state by state over the whole vocabulary (~3 ms a state here), and
# a large schema's regex has thousands of states: catalog-info's 121,945 characters took over 150 s
# (14 s on the Lark engine, split). Past this size the grammar goes to our Lark engine, written
# part by part (`split_above`), whose terminals stay small: a free string is one shared terminal,
# not a copy per property. Lark's cost grows with the square of the optional members of one
# object (a 200-member object, 26,487 characters: 46 s as a regex, 79 s on Lark), hence a limit
# well above such objects.
REGEX_PATH_MAX_CHARS = 50_000
# Past this size (and below REGEX_PATH_MAX_CHARS) the default backend hands a regular grammar's
# regex to llguidance's lazy regex engine: ~1 ms to compile where outlines-core's index took 3-5 s
# (sp_209's 3,864 characters, 3,131 states; o67457's 12,470), masks a few us (first visits of a
# state more). Not where the regex counts a repetition of more than one character class past
# LAZY_REPEAT_MAX: llguidance's lexer budget can run out mid-generation on those (words under a
# maxLength of 5000: an error at a mask, where the index is exact).
REGEX_INDEX_MAX_CHARS = 2_000
LAZY_REPEAT_MAX = 100
_COUNTED = re.compile(r"\{\d*,?(\d+)\}")
_CLASS = r"\[(?:[^\]\\]|\\.)*\]"
_CLASS_COUNTED = re.compile(rf"(?:\(\?:{_CLASS}\)|{_CLASS})\{{\d*,?\d+\}}")  # `[^"\\]{1,128}`: one class, counted
# Under `split_above`, a part whose regex passes this many characters is not one terminal.
TERMINAL_MAX_CHARS = 2_000
# A recursive grammar is written split first where that is at most this share of the whole text.
SPLIT_FIRST_SHARE = 0.8


def _regular(regex: str, vocab: Vocabulary, lazy: bool) -> CompiledGrammar:
    """A regex's constraint: outlines-core's index (every state's mask built at compile), or with
    `lazy` (the default backend) llguidance's regex engine where the index would be large."""
    if lazy and len(regex) > REGEX_INDEX_MAX_CHARS and all(int(m) <= LAZY_REPEAT_MAX for m in _COUNTED.findall(_CLASS_COUNTED.sub("", regex))):
        from .llguidance_backend import compile_llguidance

        try:
            return compile_llguidance("regex", regex, vocab)
        except GrammarError as exc:  # a construct llguidance does not read: the index
            log.info("llguidance refused a %d-character regex (%s); indexing it", len(regex), str(exc)[:100])
    return CompiledRegex(regex, vocab)


def _from_ir(grammar: Grammar, vocab: Vocabulary, lazy: bool = False) -> CompiledGrammar:
    """Regex path when the grammar is regular and small, the Lark (CFG) engine when it recurses
    or is large (then regular parts are split into terminals of at most TERMINAL_MAX_CHARS).
    lazy: the default backend (a large regex on llguidance's regex engine, `_regular`)."""
    regex, regular = None, True
    try:
        with deep_recursion():
            regex = grammar.to_regex()
        if len(regex) <= REGEX_PATH_MAX_CHARS:
            return _regular(regex, vocab, lazy)
    except RecursiveGrammar:
        regular = False
    except GrammarTooLarge:  # regular, but only the Lark engine, split, can take it
        pass
    except RecursionError:
        raise GrammarError("the grammar is nested too deeply to compile") from None
    if not regular:
        return _recursive_on_lark(grammar, vocab)
    try:
        return lark_of_ir(grammar, vocab, TERMINAL_MAX_CHARS)
    except GrammarError:
        if regex is None:
            raise
    log.info("the Lark engine refused a large regular grammar; indexing its %d-character regex", len(regex))
    return CompiledRegex(regex, vocab)


def _terminal_too_large(exc: GrammarError) -> bool:
    message = str(exc)
    return message.startswith("terminal ") or message.startswith("lexer automaton over ")


def _lark_text(grammar: Grammar, split_above: int | None) -> str | GrammarError:
    """The grammar's Lark text, or the error that says why it cannot be written."""
    try:
        with deep_recursion():
            return grammar.to_lark(split_above=split_above)
    except GrammarError as exc:
        return exc
    except RecursionError:
        return GrammarError("the grammar is nested too deeply to compile")


def _recursive_on_lark(grammar: Grammar, vocab: Vocabulary) -> CompiledGrammar:
    """A recursive grammar on the Lark engine, written whole (each regular part one terminal) or
    split (`TERMINAL_MAX_CHARS`: large parts apart, large definitions one rule however often
    referenced). Split first where that writing is at most SPLIT_FIRST_SHARE of the whole one:
    there the whole writing repeats large definitions, and its lexer pays for every copy
    (vega-lite: 1,260,274 characters whole, 291,264 split; 17.9 s -> 6.7 s to compile, the same
    masks). Otherwise whole first (splitting adds rules: lintstagedrc's split writing is a
    reduce/reduce conflict, libman's takes twice as long). A writing refused for its size, or a
    split one refused for any reason, leaves the other to try."""
    whole, split = _lark_text(grammar, None), _lark_text(grammar, TERMINAL_MAX_CHARS)
    if isinstance(whole, GrammarError) and isinstance(split, GrammarError):
        raise whole  # neither can be written (writing them again would only say so again: helm-testsuite, 2 x 4 s)
    whole, split = (None if isinstance(text, GrammarError) else text for text in (whole, split))
    length = lambda text: math.inf if text is None else len(text)  # noqa: E731
    if not length(split) <= SPLIT_FIRST_SHARE * length(whole):
        try:
            return lark_of_ir(grammar, vocab, None, text=whole)
        except GrammarError as exc:
            if not _terminal_too_large(exc):
                raise
            return lark_of_ir(grammar, vocab, TERMINAL_MAX_CHARS, text=split)
    try:
        return lark_of_ir(grammar, vocab, TERMINAL_MAX_CHARS, text=split)
    except GrammarError:
        return lark_of_ir(grammar, vocab, None, text=whole)


def lark_of_ir(grammar: Grammar, vocab: Vocabulary, split_above: int | None = None, text: str | None = None) -> CompiledGrammar:
    """`grammar` on our Lark engine (Grammar.to_lark: `split_above` writes large regular parts
    part by part; `text`: that writing, where the caller has it already). Its language is the
    IR's, as on the regex path: a lexeme two terminals match (two union branches' keys or
    strings) is read as each (every_match), not as Lark's first."""
    try:
        from .lark_engine import compile_lark
    except ImportError as exc:
        raise GrammarError("this constraint is recursive or large and needs the Lark engine, which is not available") from exc
    try:
        with deep_recursion():
            if text is None:
                text = grammar.to_lark(split_above=split_above)
            try:
                return compile_lark(text, vocab, every_match=True)
            except GrammarError as exc:
                # Overlapping branches (an anyOf of objects with the same optional keys) reach
                # the end of two different tail rules on one token: Lark cannot choose which to
                # reduce. Written inline, as before tail rules, both are one alternative.
                if "Reduce/Reduce" not in str(exc) or text == (inline := grammar.to_lark(chains=False, split_above=split_above)):
                    raise
            return compile_lark(inline, vocab, every_match=True)
    except RecursionError:
        raise GrammarError("the grammar is nested too deeply to compile") from None


def compile_regex(pattern: str, vocab: Vocabulary, backend: str = "default") -> CompiledGrammar:
    """The full-match constraint of a regex (Rust regex syntax, as outlines-core reads it)."""
    _check(vocab, backend)
    check_spec(regex=pattern)
    if backend == "llguidance":
        from .llguidance_backend import compile_llguidance

        return _cached(("regex", pattern, vocab.fingerprint, backend), lambda: compile_llguidance("regex", pattern, vocab))
    return _cached(("regex", pattern, vocab.fingerprint, backend), lambda: _regular(pattern, vocab, backend == "default"))


def compile_json_schema(
    schema: Any, vocab: Vocabulary, whitespace: str | None = None, backend: str = "default",
    strict: bool = False, closed_objects: bool = False, frame: tuple[str, str] = ("", ""),
) -> CompiledGrammar:
    """A JSON schema (dict, JSON string, or pydantic model class). whitespace: None/"compact"
    (no spaces), "spaced" (json.dumps style), or "flexible" (up to 16 whitespace chars anywhere).
    strict: refuse keywords that are neither JSON-schema validation keywords nor annotations
    (by default they are ignored and listed on the log). closed_objects: no object admits keys
    its schema does not declare (by default `additionalProperties` absent means any extra key,
    the JSON-schema meaning, which costs 5-10x compile time on the regex path), and a closed
    object whose declared keys are all required writes them in schema order (xgrammar's and
    OpenAI's strict mode: each next key is forced text, drafted at no model cost); by default
    keys go in any order there too (every valid instance reachable).
    frame: (prefix, suffix), literal text written before and after the JSON value (the server's
    `<tool_call>` ... `</tool_call>`); printable ASCII without JSON's structural characters, so
    the wrappers that follow the JSON byte by byte (unique keys and items) pass over it."""
    _check(vocab, backend)
    whitespace = whitespace or "compact"
    _check_frame(frame)
    schema_dict = normalize_schema(schema)  # checks the nesting depth
    with deep_recursion():
        text = json.dumps(schema_dict)
        later: dict[str, str] = {}
        # keywords as each declared draft reads them, before references resolve (a $ref's sibling
        # `id` must not move its base URI, drafts 3-7) and again over the documents bundled in
        schema_dict, text = _as_declared(schema_dict, text, later)
        if _MAY_NEED_BUNDLING.search(text):  # a $ref to another document, or an $id: json_refs.bundle decides
            bundled = bundle(schema_dict)  # other documents' $refs made local (meta-schemas, register_schema)
            if bundled is not schema_dict:
                schema_dict, text = _as_declared(bundled, json.dumps(bundled), later)
        if later and strict:
            name, where = next(iter(later.items()))
            raise GrammarError(f"keyword {name!r} at {where} is not read by the draft the schema declares ($schema: a "
                               f"later draft's keyword, one beside $ref before 2019-09, or draft 3's boolean `required`): "
                               "validators ignore it (strict=True refuses it)")
        if later:
            schema_log.info("JSON schema: keywords its declared draft does not read (a later draft's, beside $ref before "
                            "2019-09, or draft 3's boolean `required`), ignored as validators do: %s",
                            ", ".join(f"{k} (at {v})" for k, v in later.items()))
        static = unevaluated_as_additional(schema_dict)  # where the keys it sees are known in advance
        if static is not schema_dict:
            schema_dict, text = static, json.dumps(static)
        reachable = without_unreachable_definitions(schema_dict)  # llguidance resolves every $ref in the document
        if reachable is not schema_dict:
            schema_dict, text = reachable, json.dumps(reachable)
        check_keyword_shapes(schema_dict)
    # the text keeps the schema's key order: declared keys are written in it, so two schemas
    # differing only in that order are two grammars (sorted keys once gave one the other's)
    key = ("json_schema", text, whitespace, strict, closed_objects, tuple(frame), vocab.fingerprint, backend)
    if backend == "llguidance" and strict:
        raise GrammarError("strict is an option of the default backend, not of llguidance")
    if backend == "llguidance":
        from .llguidance_backend import compile_llguidance
        from .llguidance_schema import escapes_held_out

        held = escapes_held_out(schema_dict)
        if held is None:  # llguidance reads escapes into some negated classes
            raise GrammarError("a pattern's negated class could not be rewritten for llguidance (it would admit escaped quotes or backslashes)")
        return _cached(key, lambda: _no_repeated_keys(compile_llguidance("json_schema", held, vocab, whitespace=whitespace, frame=frame),
                                                      vocab, schema_dict))

    def native(closed: bool) -> CompiledGrammar:
        unique_items: list[str] = []
        grammar = schema_to_grammar(schema_dict, whitespace, strict, closed, unique_items)
        if any(frame):
            grammar = dataclasses.replace(grammar, root=seq(Lit(frame[0]), grammar.root, Lit(frame[1])))
        compiled = _from_ir(grammar, vocab, lazy=backend == "default")
        if not unique_items:
            return compiled
        from .unique_items import UniqueItemsGrammar  # uniqueItems on top, exactly

        return UniqueItemsGrammar(compiled, vocab, schema_dict)

    def build(closed: bool) -> CompiledGrammar:
        if backend == "native":
            return native(closed)
        return _llguidance_or_native(schema_dict, vocab, whitespace, strict, closed, lambda: native(closed), frame)

    def closed_or_open() -> CompiledGrammar:
        """closed_objects narrows (declared keys only); where no engine can close this schema's
        objects, its own meaning (undeclared keys where it allows them) is still exact."""
        try:
            return build(closed_objects)
        except GrammarError as closed_error:
            if not closed_objects:
                raise
            try:
                compiled = build(False)
            except GrammarError:
                raise closed_error from None
            schema_log.warning("JSON schema: objects left open (undeclared keys where the schema allows them): closing "
                               "them is not expressible here (%s)", str(closed_error)[:200])
            return compiled

    return _cached(key, closed_or_open)


def _as_declared(schema: Any, text: str, left_out: dict[str, str]) -> tuple[Any, str]:
    """`schema` (and its `json.dumps` text) as its declared drafts read it (json_dialects)."""
    if not may_hold_older_forms(text):
        return schema, text
    read: dict[str, str] = {}
    schema = in_declared_drafts(schema, left_out, read)
    if read:
        schema_log.info("JSON schema: draft 3 keywords read as draft 4 says them: %s", ", ".join(f"{k} (at {v})" for k, v in read.items()))
    return schema, json.dumps(schema)


_MAY_NEED_BUNDLING = re.compile(r'"\$ref": "[^#]|"\$?id": "')  # in json.dumps text (its default separators)
_FRAME_FORBIDDEN = set('"\\{}[],:')


def _check_frame(frame: Any) -> None:
    if not (isinstance(frame, tuple) and len(frame) == 2 and all(isinstance(part, str) for part in frame)):
        raise GrammarError("frame must be a (prefix, suffix) pair of strings")
    for part in frame:
        if any(not (" " <= c <= "~") or c in _FRAME_FORBIDDEN for c in part):
            raise GrammarError(f"frame text {part!r} must be printable ASCII without any of {''.join(sorted(_FRAME_FORBIDDEN))}")


def _llguidance_or_native(
    schema: Any, vocab: Vocabulary, whitespace: str, strict: bool, closed_objects: bool,
    native: Callable[[], CompiledGrammar], frame: tuple[str, str] = ("", ""),
) -> CompiledGrammar:
    """The default backend for a JSON schema: llguidance where it applies and accepts the schema,
    else our compiler. Both are exact (tests/grammar/test_schema_differential.py checks each
    against jsonschema); llguidance compiles in milliseconds where ours takes up to seconds.
    Not for `strict` (ours checks the keywords) or "flexible" whitespace (ours bounds each run of
    whitespace to 16 characters, llguidance does not)."""
    if strict or whitespace == "flexible":
        return native()
    from .json_key_order import any_order
    from .json_required import Released
    from .llguidance_backend import compile_llguidance
    from .llguidance_schema import RewriteTooLarge, llguidance_schema

    ignored: dict[str, str] = {}
    narrowed: dict[str, str] = {}
    rewritten: list[Any] = []  # what llguidance_schema gave, per call (None: no rewrite)
    gave_up: list[bool] = []  # a rewrite was cut off (too deep or too large): a second one would be too

    def on_llguidance(exact_unique: bool) -> CompiledGrammar | None:
        """The rewritten schema compiled by llguidance, None where it cannot take it (on the
        second try, also where the rewrite is the one llguidance refused already)."""
        unique_items: list[str] = []
        if gave_up:
            return None
        with deep_recursion():
            try:
                spec = llguidance_schema(schema, closed_objects, ignored, narrowed, exact_unique=exact_unique, unique_items=unique_items,
                                         vocab=vocab)
            except (RecursionError, RewriteTooLarge) as exc:  # negations through a cycle, rewritten again: ours decides
                log.info("the schema's rewrite for llguidance was cut off (%s)", str(exc)[:100] or type(exc).__name__)
                gave_up.append(True)
                spec = None
            rewritten.append(spec)
            if spec is None or (len(rewritten) > 1 and spec == rewritten[0]):
                return None
            compiled = None
            # the required keys that moved, for the tracker; none inside unique arrays' items
            released = Released(unique_at=[where.removesuffix("/uniqueItems") for where in unique_items])
            reordered = any_order(spec, released, forced_order=closed_objects)  # keys in any order; as declared where llguidance refuses that
            for spec in [reordered, spec] if reordered is not spec else [spec]:
                try:
                    compiled = compile_llguidance("json_schema", spec, vocab, whitespace=whitespace, frame=frame)
                    break
                except (GrammarError, RecursionError) as exc:
                    log.info("llguidance refused the schema (%s)", str(exc)[:200])
            if compiled is None:
                return None
            contexts = released.contexts() if released is not None and spec is reordered else None
        compiled = _no_repeated_keys(compiled, vocab, spec)
        if contexts is not None:  # required keys moved: objects missing one stay open
            from .required_keys import RequiredKeysGrammar

            compiled = RequiredKeysGrammar(compiled, vocab, contexts, frame[0])
        if unique_items:  # llguidance has no uniqueItems: enforced on top, exactly
            from .unique_items import UniqueItemsGrammar

            compiled = UniqueItemsGrammar(compiled, vocab, schema)
        if ignored:
            schema_log.info("JSON schema: ignored keywords that constrain nothing: %s", ", ".join(f"{k} (at {v})" for k, v in ignored.items()))
        if narrowed:
            schema_log.info("JSON schema: generation is narrower than validation at %s", "; ".join(f"{k}: {v}" for k, v in narrowed.items()))
        return compiled

    compiled = on_llguidance(exact_unique=True)
    if compiled is not None:
        return compiled
    log.info("compiling the schema natively (llguidance refused it, or it holds objects that cannot be closed "
             "one by one, a format under not/oneOf, uniqueItems our compiler enumerates exactly)")
    try:
        return native()
    except GrammarError:
        # uniqueItems over a small finite domain: ours enumerates it; where ours refuses the
        # schema, llguidance with uniqueItems on top (unique_items.py) takes it (only where this
        # rewrite differs from the first: otherwise llguidance has refused this very schema)
        compiled = on_llguidance(exact_unique=False)
        if compiled is None:
            raise
        return compiled


def _no_repeated_keys(compiled: CompiledGrammar, vocab: Vocabulary, spec: Any) -> CompiledGrammar:
    """llguidance lets an object that admits undeclared keys repeat one (`{"id":1,"id":2}`,
    where another anyOf branch declares `id`): no key twice in one object, as our compiler. Not
    wrapped (about 10 us a mask) where `spec` (what llguidance compiled) admits no such object.
    Keys there are also held to the escapes JSON needs: llguidance reads `"\\u0061"` as an
    undeclared key, validators as `a` (so `{"\\u0061":"x"}` passed where `a` must be an integer)."""
    if not _admits_undeclared_keys(spec):
        return compiled
    from .unique_keys import UniqueKeysGrammar

    from .json_key_sets import finite_key_sets

    finite = finite_key_sets(spec)
    return UniqueKeysGrammar(compiled, vocab, plain_key_escapes=True, finite_keys=finite.prefixes, finite_count=finite.counts,
                             finite_names=finite.names, known_keys=finite.known)


_HOLDERS = {"$ref", "allOf", "anyOf", "oneOf", "$defs", "definitions", "$schema", "$id", "id", "$comment",
            "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "x-guidance"}


def _admits_undeclared_keys(spec: Any) -> bool:
    """Whether some schema node in `spec` may describe an object with keys it does not declare
    (over-approximated: a node that does not rule objects out and does not say
    `additionalProperties: false` without patternProperties, other than a pure $ref/allOf/anyOf
    holder whose parts are judged themselves, and the allOf/anyOf/oneOf parts of a node that
    says it: closed where parts merge, the merged object holds only its declared keys)."""
    todo: list[tuple[Any, bool]] = [(spec, False)]  # (node, a part of an object its closed parent keeps closed)
    while todo:
        node, covered = todo.pop()
        if node is True and not covered:
            return True
        if not isinstance(node, dict):
            continue
        kinds = node.get("type")
        objects = kinds is None or kinds == "object" or isinstance(kinds, list) and "object" in kinds
        constrained = set(node) - _HOLDERS
        fixed = "enum" in node or "const" in node
        closed = node.get("additionalProperties", True) is False and not node.get("patternProperties")
        if objects and not fixed and not covered and (constrained or not set(node) & {"$ref", "allOf", "anyOf", "oneOf"}):
            if not closed:
                return True
        arrays = kinds == "array" or isinstance(kinds, list) and "array" in kinds
        if arrays and not fixed and "items" not in node:  # items of any value, objects among them
            return True
        for key, value in node.items():
            if key in ("enum", "const", "default", "examples"):
                continue
            if key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):  # parts of this same object
                todo += [(v, covered or closed) for v in value]
            elif isinstance(value, dict) and key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"):
                todo += [(v, False) for v in value.values()]  # name -> schema maps
            elif isinstance(value, dict):
                todo.append((value, False))
            elif isinstance(value, list):
                todo += [(v, False) for v in value]
    return False


def compile_json_object(vocab: Vocabulary, whitespace: str | None = None, backend: str = "default") -> CompiledGrammar:
    """Any JSON object (JSON-object mode), without a key twice in one object (unique_keys.py)."""
    _check(vocab, backend)
    whitespace = whitespace or "compact"
    key = ("json_object", whitespace, vocab.fingerprint, backend)
    if backend == "llguidance":
        from .llguidance_backend import compile_llguidance

        return _cached(key, lambda: compile_llguidance("json_schema", {"type": "object"}, vocab, whitespace=whitespace))
    from .unique_keys import UniqueKeysGrammar

    return _cached(key, lambda: UniqueKeysGrammar(_from_ir(json_value_grammar(whitespace, object_only=True), vocab), vocab))


def compile_choices(choices: Sequence[str], vocab: Vocabulary, backend: str = "default") -> CompiledGrammar:
    """Exactly one of the given strings."""
    check_spec(choices=choices)
    return compile_regex("|".join(f"(?:{regex_escape(c)})" for c in choices), vocab, backend)


def compile_grammar(grammar: str, vocab: Vocabulary, backend: str = "default") -> CompiledGrammar:
    """A Lark grammar: its text, or the name of a bundled grammar (e.g. "json")."""
    _check(vocab, backend)
    check_spec(grammar=grammar)
    text = grammar
    if "\n" not in grammar and ":" not in grammar:  # a bare name: a bundled grammar
        from ..grammars import load_bundled_grammar

        text = load_bundled_grammar(grammar)
    if backend == "llguidance":
        from .llguidance_backend import compile_llguidance

        return _cached(("lark", text, vocab.fingerprint, backend), lambda: compile_llguidance("lark", text, vocab))

    def build() -> CompiledGrammar:
        from .lark_engine import compile_lark

        return compile_lark(text, vocab)

    return _cached(("lark", text, vocab.fingerprint, backend), build)


def compile_ir(grammar: Grammar, vocab: Vocabulary, backend: str = "default") -> CompiledGrammar:
    """A grammar built directly in the IR (`json_ir`), e.g. by composing several schema documents
    (`json_schema.SchemaSet`) with literals: the same engines as a JSON schema."""
    _check(vocab, backend)
    if not isinstance(grammar, Grammar):
        raise GrammarError(f"ir must be a json_ir.Grammar, got {type(grammar).__name__}")
    key = ("ir", repr(grammar.root), repr(sorted(grammar.defs.items())), vocab.fingerprint, backend)
    if backend == "llguidance":
        from .llguidance_backend import compile_llguidance

        return _cached(key, lambda: compile_llguidance("lark", grammar.to_lark(), vocab))
    return _cached(key, lambda: _from_ir(grammar, vocab, lazy=backend == "default"))


def compile(
    *,
    regex: str | None = None,
    json_schema: Any = None,
    json_object: bool = False,
    choices: Sequence[str] | None = None,
    grammar: str | None = None,
    ir: Grammar | None = None,
    vocab: Vocabulary,
    backend: str = "default",
    whitespace: str | None = None,
    strict: bool = False,
    closed_objects: bool = False,
) -> CompiledGrammar:
    """Compile exactly one constraint for `vocab`; cached by (spec, vocabulary, backend).
    strict / closed_objects: JSON-schema options (see `compile_json_schema`; its `frame` is
    reached through it)."""
    check_spec(regex=regex, json_schema=json_schema, json_object=json_object, choices=choices, grammar=grammar, ir=ir)
    if regex is not None:
        return compile_regex(regex, vocab, backend)
    if json_schema is not None:
        return compile_json_schema(json_schema, vocab, whitespace, backend, strict, closed_objects)
    if json_object:
        return compile_json_object(vocab, whitespace, backend)
    if choices is not None:
        return compile_choices(choices, vocab, backend)
    if ir is not None:
        return compile_ir(ir, vocab, backend)
    return compile_grammar(grammar, vocab, backend)  # type: ignore[arg-type]
