"""JSON schema -> grammar IR (`json_ir`), keyword by keyword, with exact error paths.

Generation is deliberately narrower than validation so every accepted text is a valid instance:
canonical numbers, properties in schema order, and `additionalProperties` absent = no extra keys
(the usual choice for structured generation). Anything we cannot express exactly raises
GrammarError naming the keyword and its JSON-pointer path.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .json_ir import EMPTY, Grammar, Lit, Node, Ref, Rep, Rx, alt, opt, seq
from .json_terminals import FORMATS, INTEGER, NUMBER, STRING_CHAR, int_range, number_range, pattern_to_json_regex
from .protocol import GrammarError

__all__ = ["schema_to_grammar", "json_value_grammar", "normalize_schema", "WHITESPACE_MODES"]

_ANNOTATIONS = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions", "discriminator", "contentMediaType",
    "contentEncoding",
}  # fmt: skip
_SUPPORTED = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items",
    "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf", "$ref",
}  # fmt: skip
_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
_ANY = "__any_json__"

# whitespace: (between structural tokens, after ':', after ',')
WHITESPACE_MODES = {
    "compact": ("", "", ""),
    "spaced": ("", " ", " "),  # what json.dumps writes by default
    "flexible": (r"[ \t\n\r]{0,16}",) * 3,
}


def normalize_schema(schema: Any) -> dict | bool:
    """A dict, a JSON string, or a pydantic model class -> the schema as a dict (or bool)."""
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, (str, bytes)):
        try:
            return json.loads(schema)
        except json.JSONDecodeError as exc:
            raise GrammarError(f"json_schema is not valid JSON: {exc}") from exc
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    raise GrammarError(f"json_schema must be a dict, a JSON string or a pydantic model class, not {type(schema).__name__}")


class _Translator:
    def __init__(self, root: Any, whitespace: str) -> None:
        if whitespace not in WHITESPACE_MODES:
            raise GrammarError(f"unknown whitespace mode {whitespace!r}; use one of {sorted(WHITESPACE_MODES)}")
        self.root = root
        ws, after_colon, after_comma = WHITESPACE_MODES[whitespace]
        self.flexible = whitespace == "flexible"
        self.ws = Rx(ws) if ws else EMPTY
        self.colon = seq(self.ws, Lit(":"), Rx(after_colon) if self.flexible else Lit(after_colon))
        self.comma = seq(self.ws, Lit(","), Rx(after_comma) if self.flexible else Lit(after_comma))
        self.item_sep = (",", ":") if whitespace == "compact" else (", ", ": ")
        self.defs: dict[str, Node] = {}

    # ---- entry points ----
    def grammar(self, schema: Any) -> Grammar:
        root = self.node(schema, "")
        return Grammar(seq(self.ws, root, self.ws) if self.flexible else root, self.defs)

    def any_value(self) -> Node:
        if _ANY not in self.defs:
            self.defs[_ANY] = EMPTY  # placeholder while building (recursion)
            value = Ref(_ANY)
            member = seq(Rx(f'"(?:{STRING_CHAR})*"'), self.colon, value)
            obj = seq(Lit("{"), self.ws, opt(seq(member, Rep(seq(self.comma, member), 0, None))), self.ws, Lit("}"))
            arr = seq(Lit("["), self.ws, opt(seq(value, Rep(seq(self.comma, value), 0, None))), self.ws, Lit("]"))
            self.defs[_ANY] = alt(Lit("null"), Lit("true"), Lit("false"), Rx(NUMBER), Rx(f'"(?:{STRING_CHAR})*"'), obj, arr)
        return Ref(_ANY)

    # ---- schema nodes ----
    def node(self, schema: Any, path: str) -> Node:
        if schema is True or schema == {}:
            return self.any_value()
        if schema is False:
            raise GrammarError(f"schema at {path or '/'} is `false`: no value can match it")
        if not isinstance(schema, dict):
            raise GrammarError(f"schema at {path or '/'} must be an object or a boolean, got {type(schema).__name__}")
        for key in schema:
            if key not in _SUPPORTED and key not in _ANNOTATIONS:
                raise GrammarError(f"unsupported JSON schema keyword {key!r} at {path or '/'}/{_escape(key)}")
        if "$ref" in schema:
            return self.ref(schema, path)
        for key in ("allOf", "anyOf", "oneOf"):
            if key in schema:
                return self.combinator(key, schema, path)
        if "const" in schema or "enum" in schema:
            return self.enum(schema, path)
        types = schema.get("type", list(_TYPES))
        if isinstance(types, str):
            types = [types]
        bad = [t for t in types if t not in _TYPES]
        if bad:
            raise GrammarError(f"unknown type {bad[0]!r} at {path}/type")
        if "number" in types and "integer" in types:
            types = [t for t in types if t != "integer"]  # integers are numbers
        return alt(*(self.typed(t, schema, path) for t in types))

    def typed(self, kind: str, schema: dict, path: str) -> Node:
        if kind == "null":
            return Lit("null")
        if kind == "boolean":
            return alt(Lit("true"), Lit("false"))
        if kind == "integer":
            return self.integer(schema, path)
        if kind == "number":
            return self.number(schema, path)
        if kind == "string":
            return self.string(schema, path)
        if kind == "array":
            return self.array(schema, path)
        return self.object(schema, path)

    def ref(self, schema: dict, path: str) -> Node:
        pointer = schema["$ref"]
        extra = {k: v for k, v in schema.items() if k != "$ref" and k not in _ANNOTATIONS}
        if extra:
            raise GrammarError(f"unsupported JSON schema keyword {sorted(extra)[0]!r} next to $ref at {path}/{_escape(sorted(extra)[0])}")
        if not isinstance(pointer, str) or not pointer.startswith("#"):
            raise GrammarError(f"only local $ref ('#/...') is supported, got {pointer!r} at {path}/$ref")
        if pointer not in self.defs:
            self.defs[pointer] = EMPTY  # placeholder: a cycle sees Ref(pointer)
            self.defs[pointer] = self.node(self.resolve(pointer, path), pointer[1:])
        return Ref(pointer)

    def resolve(self, pointer: str, path: str) -> Any:
        target = self.root
        for part in pointer[1:].split("/")[1:] if pointer != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            try:
                target = target[int(part)] if isinstance(target, list) else target[part]
            except (KeyError, IndexError, ValueError, TypeError):
                raise GrammarError(f"$ref {pointer!r} at {path}/$ref does not resolve") from None
        return target

    def combinator(self, key: str, schema: dict, path: str) -> Node:
        options = schema[key]
        if not isinstance(options, list) or not options:
            raise GrammarError(f"{key} at {path}/{key} must be a non-empty array")
        rest = {k: v for k, v in schema.items() if k != key and k not in _ANNOTATIONS}
        if key == "allOf":
            merged = dict(rest)
            for i, sub in enumerate(options):
                sub = self.resolve(sub["$ref"], f"{path}/allOf/{i}") if isinstance(sub, dict) and set(sub) == {"$ref"} else sub
                for k, v in (sub.items() if isinstance(sub, dict) else ()):
                    if k in _ANNOTATIONS:
                        continue
                    if k in merged and merged[k] != v:
                        raise GrammarError(f"allOf at {path}/allOf/{i}/{_escape(k)} conflicts with another branch on {k!r}; not expressible")
                    merged[k] = v
            return self.node(merged, path)
        if rest:
            # siblings constrain every branch: push them into each branch (exact only via allOf)
            options = [{"allOf": [rest, o]} for o in options]
        return alt(*(self.node(o, f"{path}/{key}/{i}") for i, o in enumerate(options)))

    def enum(self, schema: dict, path: str) -> Node:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        if not isinstance(values, list):
            raise GrammarError(f"enum at {path}/enum must be an array")
        types = schema.get("type")
        if types is not None:
            types = [types] if isinstance(types, str) else types
            values = [v for v in values if _json_type(v) in types or (_json_type(v) == "integer" and "number" in types)]
        if not values:
            raise GrammarError(f"enum/const at {path} allows no value")
        return alt(*(Lit(json.dumps(v, separators=self.item_sep, ensure_ascii=False)) for v in values))

    def integer(self, schema: dict, path: str) -> Node:
        lo, hi = _bounds(schema, path, integer=True)
        if lo is None and hi is None:
            return Rx(INTEGER)
        regex = int_range(lo, hi)
        if regex is None:
            raise GrammarError(f"integer bounds at {path} allow no value")
        return Rx(regex)

    def number(self, schema: dict, path: str) -> Node:
        keys = [k for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in schema]
        if not keys:
            return Rx(NUMBER)
        for k in keys:
            v = schema[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not float(v).is_integer():
                raise GrammarError(f"{k} {v!r} at {path}/{k}: only integer bounds are expressible for numbers")
        lo = hi = None
        lo_excl = hi_excl = False
        if "minimum" in schema:
            lo = int(schema["minimum"])
        if "exclusiveMinimum" in schema and (lo is None or schema["exclusiveMinimum"] >= lo):
            lo, lo_excl = int(schema["exclusiveMinimum"]), True
        if "maximum" in schema:
            hi = int(schema["maximum"])
        if "exclusiveMaximum" in schema and (hi is None or schema["exclusiveMaximum"] <= hi):
            hi, hi_excl = int(schema["exclusiveMaximum"]), True
        regex = number_range(lo, lo_excl, hi, hi_excl)
        if regex is None:
            raise GrammarError(f"number bounds at {path} allow no value")
        return Rx(regex)

    def string(self, schema: dict, path: str) -> Node:
        lo, hi = schema.get("minLength", 0), schema.get("maxLength")
        if "format" in schema:
            fmt = schema["format"]
            if fmt not in FORMATS:
                raise GrammarError(f"unsupported string format {fmt!r} at {path}/format (supported: {', '.join(sorted(FORMATS))})")
            if "pattern" in schema or "minLength" in schema or "maxLength" in schema:
                raise GrammarError(f"format together with pattern/minLength/maxLength at {path} is not expressible")
            return Rx(f'"{FORMATS[fmt]}"')
        if "pattern" in schema:
            if "minLength" in schema or "maxLength" in schema:
                raise GrammarError(f"pattern together with minLength/maxLength at {path} is not expressible")
            try:
                return Rx('"' + pattern_to_json_regex(schema["pattern"]) + '"')
            except ValueError as exc:
                raise GrammarError(f"pattern at {path}/pattern cannot be translated: {exc}") from exc
        count = f"{{{lo},{'' if hi is None else hi}}}" if (lo, hi) != (0, None) else "*"
        return Rx(f'"(?:{STRING_CHAR}){count}"')

    def array(self, schema: dict, path: str) -> Node:
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", True)
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        if items is False:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
        if hi is not None and hi < lo:
            raise GrammarError(f"minItems/maxItems at {path} allow no array")
        nodes = [self.node(s, f"{path}/prefixItems/{i}") for i, s in enumerate(prefix)]
        tail = None if items is False else self.node(items, f"{path}/items")

        def rest(i: int) -> Node:  # elements i.. (each preceded by a comma), given i emitted
            if i >= len(nodes):
                if tail is None:
                    return EMPTY
                more_hi = None if hi is None else hi - i
                return Rep(seq(self.comma, tail), max(0, lo - i), more_hi) if more_hi != 0 else EMPTY
            if hi is not None and i >= hi:
                return EMPTY
            element = seq(self.comma, nodes[i], rest(i + 1))
            return element if i < lo else opt(element)

        first = nodes[0] if nodes else tail
        if first is None or hi == 0:
            body = EMPTY
        else:
            body = seq(first, rest(1))
            if lo == 0:
                body = opt(body)
        return seq(Lit("["), self.ws, body, self.ws, Lit("]"))

    def object(self, schema: dict, path: str) -> Node:
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        missing = required - set(props)
        extra = schema.get("additionalProperties", False)
        if missing and extra is False:
            raise GrammarError(f"required property {sorted(missing)[0]!r} at {path}/required is not in properties")
        members = [
            (name in required, seq(Lit(json.dumps(name, ensure_ascii=False)), self.colon, self.node(sub, f"{path}/properties/{_escape(name)}")))
            for name, sub in props.items()
        ]
        if extra is not False:
            if props or required:
                raise GrammarError(f"additionalProperties at {path}/additionalProperties next to properties/required is not supported")
            value = self.node(extra, f"{path}/additionalProperties")
            member = seq(Rx(f'"(?:{STRING_CHAR})*"'), self.colon, value)
            body = opt(seq(member, Rep(seq(self.comma, member), 0, None)))
            return seq(Lit("{"), self.ws, body, self.ws, Lit("}"))

        def after(i: int) -> Node:  # members i.., each preceded by a comma
            parts = [seq(self.comma, m) if req else opt(seq(self.comma, m)) for req, m in members[i:]]
            return seq(*parts)

        options = []
        for k, (req, member) in enumerate(members):  # k = the first member written
            options.append(seq(member, after(k + 1)))
            if req:
                break
        body = alt(*options) if options else EMPTY
        if all(not req for req, _ in members):
            body = opt(body) if options else EMPTY
        return seq(Lit("{"), self.ws, body, self.ws, Lit("}"))


def _bounds(schema: dict, path: str, integer: bool) -> tuple[int | None, int | None]:
    lo = hi = None
    for key, is_lo, excl in (("minimum", True, False), ("exclusiveMinimum", True, True), ("maximum", False, False), ("exclusiveMaximum", False, True)):
        if key not in schema:
            continue
        v = schema[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise GrammarError(f"{key} at {path}/{key} must be a number")
        if is_lo:
            b = math.floor(v) + 1 if excl else math.ceil(v)
            lo = b if lo is None else max(lo, b)
        else:
            b = math.ceil(v) - 1 if excl else math.floor(v)
            hi = b if hi is None else min(hi, b)
    return lo, hi


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}.get(type(value), "unknown")


def _escape(key: str) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def schema_to_grammar(schema: Any, whitespace: str = "compact") -> Grammar:
    """Translate a JSON schema (dict / JSON string / pydantic class) to the grammar IR."""
    root = normalize_schema(schema)
    return _Translator(root, whitespace).grammar(root)


def json_value_grammar(whitespace: str = "compact", object_only: bool = True) -> Grammar:
    """Any JSON object (JSON-object mode) or any JSON value."""
    translator = _Translator({}, whitespace)
    value = translator.any_value()
    if not object_only:
        return Grammar(value, translator.defs)
    member = seq(Rx(f'"(?:{STRING_CHAR})*"'), translator.colon, value)
    obj = seq(Lit("{"), translator.ws, opt(seq(member, Rep(seq(translator.comma, member), 0, None))), translator.ws, Lit("}"))
    return Grammar(obj, translator.defs)

