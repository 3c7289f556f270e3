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
from urllib.parse import unquote

from .json_ir import ANY_JSON as _ANY, EMPTY, Grammar, Lit, Node, Ref, Rep, Rx, alt, opt, seq
from .json_terminals import FORMATS, INTEGER, NUMBER, STRING_CHAR, int_range, number_range, pattern_to_json_regex
from .protocol import GrammarError

__all__ = ["schema_to_grammar", "json_value_grammar", "normalize_schema", "SchemaSet", "WHITESPACE_MODES"]

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

# whitespace: (between structural tokens, after ':', after ',')
WHITESPACE_MODES = {
    "compact": ("", "", ""),
    "spaced": ("", " ", " "),  # what json.dumps writes by default
    "flexible": (r"[ \t\n\r]{1,16}",) * 3,  # used optionally: terminals never match empty
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
        self.ws = opt(Rx(ws)) if ws else EMPTY
        self.colon = seq(self.ws, Lit(":"), self.ws if self.flexible else Lit(after_colon))
        self.comma = seq(self.ws, Lit(","), self.ws if self.flexible else Lit(after_comma))
        self.item_sep = (",", ":") if whitespace == "compact" else (", ", ": ")
        self.defs: dict[str, Node] = {}
        self.document = ""  # prefixes definition names, so several documents share one `defs`

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
        if schema is True or (isinstance(schema, dict) and not set(schema) - _ANNOTATIONS):
            return self.any_value()
        if schema is False:
            raise GrammarError(f"schema at {path or '/'} is `false`: no value can match it")
        if not isinstance(schema, dict):
            raise GrammarError(f"schema at {path or '/'} must be an object or a boolean, got {type(schema).__name__}")
        for key in schema:
            if key not in _SUPPORTED and key not in _ANNOTATIONS:
                raise GrammarError(f"unsupported JSON schema keyword {key!r} at {_at(path, key)}")
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
        if extra:  # 2020-12: $ref applies alongside its siblings, i.e. an allOf
            return self.combinator("allOf", {"allOf": [{"$ref": pointer}, extra]}, path)
        if not isinstance(pointer, str) or not pointer.startswith("#"):
            raise GrammarError(f"only local $ref ('#/...') is supported, got {pointer!r} at {path}/$ref")
        name = self.document + pointer
        if name not in self.defs:
            self.defs[name] = EMPTY  # placeholder: a cycle sees Ref(name)
            self.defs[name] = self.node(self.resolve(pointer, path), pointer[1:])
        return Ref(name)

    def resolve(self, pointer: str, path: str) -> Any:
        if not isinstance(pointer, str) or not pointer.startswith("#"):
            raise GrammarError(f"only local $ref ('#/...') is supported, got {pointer!r} at {path}/$ref")
        target = self.root
        for part in pointer[1:].split("/")[1:] if pointer != "#" else []:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
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
            return self.node(self.merge_all_of([rest, *options], path), path)
        if rest:
            # siblings constrain every branch: push them into each branch (exact only via allOf)
            options = [{"allOf": [rest, o]} if o is not False else False for o in options]
        live = [(i, o) for i, o in enumerate(options) if o is not False]  # `false` never matches
        if not live:
            raise GrammarError(f"every branch of {key} at {_at(path, key)} is `false`: no value can match it")
        if key == "oneOf" and len(live) > 1 and not self.disjoint([o for _, o in live]):
            raise GrammarError(
                f"oneOf at {_at(path, key)}: branches may overlap, so 'exactly one' is not expressible; "
                "use anyOf, distinct types, or a const/enum discriminator property"
            )
        return alt(*(self.node(o, f"{path}/{key}/{i}") for i, o in live))

    def merge_all_of(self, parts: list[Any], path: str) -> dict:
        """allOf as one schema, when the branches constrain disjoint keywords (exact)."""
        merged: dict = {}
        owner: dict[str, int] = {}
        seen: set[str] = set()
        for i, sub in enumerate(parts):
            while isinstance(sub, dict) and "$ref" in sub:
                if sub["$ref"] in seen:
                    raise GrammarError(f"allOf at {path}/allOf/{i} refers to itself through {sub['$ref']!r}; not expressible")
                seen.add(sub["$ref"])
                extra = {k: v for k, v in sub.items() if k != "$ref"}
                if extra:
                    parts.append(extra)
                sub = self.resolve(sub["$ref"], f"{path}/allOf/{i}")
            if sub is True:
                continue
            if sub is False:
                raise GrammarError(f"allOf at {path}/allOf/{i} is `false`: no value can match it")
            for k, v in sub.items():
                if k in _ANNOTATIONS:
                    continue
                if k in merged and merged[k] != v:
                    raise GrammarError(f"allOf at {path}/allOf/{i}/{_escape(k)} conflicts with another branch on {k!r}; not expressible")
                merged[k] = v
                owner.setdefault(k, i)
        # keywords whose meaning depends on siblings must come from one branch
        for group in (("items", "prefixItems"), ("properties", "additionalProperties")):
            owners = {owner[k] for k in group if k in owner}
            if len(owners) > 1:
                raise GrammarError(f"allOf at {path}/allOf splits {' and '.join(group)} across branches; not expressible")
        return merged

    def disjoint(self, options: list[Any]) -> bool:
        """Conservative: no instance can match two of these schemas."""
        resolved = [self.resolve(o["$ref"], "") if isinstance(o, dict) and set(o) - _ANNOTATIONS == {"$ref"} else o for o in options]
        if not all(isinstance(o, dict) for o in resolved):
            return False
        kinds = [_possible_types(o) for o in resolved]
        if all(k is not None for k in kinds) and all(not (a & b) for i, a in enumerate(kinds) for b in kinds[i + 1 :]):
            return True
        # discriminated objects: one required property whose const/enum values never overlap
        common = set.intersection(*(set(o.get("required", [])) for o in resolved))
        for name in common:
            values = [_const_values(o.get("properties", {}).get(name)) for o in resolved]
            if all(v is not None for v in values) and all(not (a & b) for i, a in enumerate(values) for b in values[i + 1 :]):
                return True
        return False

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
        forms = []
        for v in values:
            forms.append(Lit(json.dumps(v, separators=self.item_sep, ensure_ascii=False)))
            if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer() and abs(v) < 2**53:
                forms += [Lit(str(int(v))), Lit(f"{int(v)}.0")]  # 1 == 1.0 in JSON schema
        return alt(*forms)

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
        lo, hi = _count(schema, "minLength", 0), _count(schema, "maxLength", None)
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
        lo, hi = _count(schema, "minItems", 0), _count(schema, "maxItems", None)
        if False in prefix:  # a `false` position: the array must end before it
            prefix = prefix[: prefix.index(False)]
            items = False
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
        required = set(schema.get("required", []))
        props = {k: v for k, v in schema.get("properties", {}).items() if v is not False or k in required}
        for name in schema.get("required", []):
            if name not in props:
                props[name] = True  # required without a schema: any value
        extra = schema.get("additionalProperties", False)
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


def _possible_types(schema: dict) -> set[str] | None:
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return {("number" if _json_type(v) == "integer" else _json_type(v)) for v in values}
    t = schema.get("type")
    if t is None:
        return None
    return {("number" if x == "integer" else x) for x in ([t] if isinstance(t, str) else t)}


def _const_values(schema: Any) -> set[str] | None:
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return {json.dumps(schema["const"], sort_keys=True)}
    if "enum" in schema:
        return {json.dumps(v, sort_keys=True) for v in schema["enum"]}
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}.get(type(value), "unknown")


def _at(path: str, key: Any) -> str:
    return f"{path}/{_escape(key)}"


def _count(schema: dict, key: str, default: int | None) -> int | None:
    value = schema.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value


def _escape(key: str) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def schema_to_grammar(schema: Any, whitespace: str = "compact") -> Grammar:
    """Translate a JSON schema (dict / JSON string / pydantic class) to the grammar IR."""
    root = normalize_schema(schema)
    return _Translator(root, whitespace).grammar(root)


def json_value_grammar(whitespace: str = "compact", object_only: bool = True) -> Grammar:
    """Any JSON object (JSON-object mode) or any JSON value."""
    if not object_only:
        translator = _Translator({}, whitespace)
        return Grammar(translator.any_value(), translator.defs)
    docs = SchemaSet(whitespace)
    return docs.grammar(docs.any_json_object())



class SchemaSet:
    """Several independent schema documents translated into one grammar IR, e.g. the argument
    schemas of several tools plus a response schema. Each document's `$ref`s resolve inside that
    document (its definitions get their own names), and every document uses one whitespace mode.

        docs = SchemaSet()
        grammar = docs.grammar(alt(Lit("<a>"), docs.node(schema_a), docs.node(schema_b)))
    """

    def __init__(self, whitespace: str = "compact") -> None:
        self._translator = _Translator({}, whitespace)
        self._count = 0

    def node(self, schema: Any, label: str = "") -> Node:
        """The IR node of one whole document (a dict, JSON string or pydantic class). `label`
        names it in error messages (e.g. "tools[0].parameters")."""
        root = normalize_schema(schema)
        self._count += 1
        t = self._translator
        t.root, t.document = root, f"doc{self._count}:"
        try:
            return t.node(root, "")
        except GrammarError as exc:
            raise GrammarError(f"{label}: {exc}" if label else str(exc)) from None

    def any_json_object(self) -> Node:
        """Any JSON object (JSON-object mode)."""
        t = self._translator
        value = t.any_value()
        member = seq(Rx(f'"(?:{STRING_CHAR})*"'), t.colon, value)
        return seq(Lit("{"), t.ws, opt(seq(member, Rep(seq(t.comma, member), 0, None))), t.ws, Lit("}"))

    def grammar(self, root: Node) -> Grammar:
        return Grammar(root, dict(self._translator.defs))
