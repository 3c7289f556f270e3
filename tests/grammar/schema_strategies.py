"""Hypothesis strategies for JSON schemas built from the keywords real-world schemas use.

Schemas mean the same under drafts 7 and 2020-12 (so `hypothesis-jsonschema`, a draft-7
generator, draws instances for them) except `prefixItems`, which it ignores; the oracle judges
every instance with a 2020-12 validator anyway, so a draw that misses is just one more invalid case.
"""

from __future__ import annotations

from hypothesis import strategies as st

NAMES = st.sampled_from(["a", "b", "c", "id", "name", "tags", "x-y", "with space", "\u00e9t\u00e9", 'q"t', "qt", "sl/ash"])  # qt: q"t less its escape (B9)
PATTERNS = st.sampled_from(["^[a-z]+$", "^[A-Z][a-z0-9_]*$", "^[0-9]{3}-[0-9]{4}$", "^(foo|bar)$", "a+", "^\\d+$", "^.{2,5}$", "^[^@]+@[^@]+$"])
FORMATS = st.sampled_from(["date", "date-time", "time", "email", "uuid", "uri", "ipv4", "hostname", "json-pointer", "x-unknown"])  # regex, idn-hostname: test_formats (3.5 s, 1.1 s to compile natively)
SCALARS = st.sampled_from(["a", "b", "x y", "", 0, 1, -3, 2.5, None, True, False])
ANNOTATIONS = st.sampled_from([{}, {}, {"title": "T"}, {"description": "d", "default": None}, {"examples": [1]}, {"$comment": "c"}, {"x-vendor": {"k": 1}}, {"readOnly": True}])
SMALL = st.integers(-100, 100)


def _with(base: dict, optional: dict) -> st.SearchStrategy[dict]:
    return st.builds(lambda extra, note: {**base, **extra, **note}, st.fixed_dictionaries({}, optional=optional), ANNOTATIONS)


def _bounded_int(kind: str) -> st.SearchStrategy[dict]:
    bounds = {"minimum": SMALL, "maximum": SMALL, "exclusiveMinimum": SMALL, "exclusiveMaximum": SMALL}
    if kind == "integer":
        bounds["multipleOf"] = st.sampled_from([2, 3, 5])
    else:
        bounds["minimum"] = st.one_of(SMALL, st.sampled_from([-0.5, 1.25]))
    return _with({"type": kind}, bounds)


LEAVES = st.one_of(
    _with({"type": "string"}, {"minLength": st.integers(0, 3), "maxLength": st.integers(2, 8), "pattern": PATTERNS}),
    st.builds(lambda f: {"type": "string", "format": f}, FORMATS),
    _with({"type": "string"}, {"format": FORMATS, "maxLength": st.integers(4, 12), "pattern": st.sampled_from(["^[a-z]", "[0-9]$", "@"])}),
    _bounded_int("integer"),
    _bounded_int("number"),
    st.sampled_from([{"type": "boolean"}, {"type": "null"}, {}, {"type": ["string", "null"]}, {"type": ["integer", "boolean"]}]),
    st.builds(lambda vs: {"enum": vs}, st.lists(SCALARS, min_size=1, max_size=4, unique_by=lambda v: (type(v), v))),
    st.builds(lambda v: {"const": v}, SCALARS),
)


def _object(children: st.SearchStrategy) -> st.SearchStrategy[dict]:
    def build(props: dict, required_mask: list[bool], extra: object, min_props: int | None, note: dict) -> dict:
        schema: dict = {"type": "object", "properties": props, **note}
        required = [k for k, r in zip(props, required_mask) if r]
        if required:
            schema["required"] = required
        if extra != "absent":
            schema["additionalProperties"] = extra
        if min_props is not None:
            schema["minProperties"] = min_props
        return schema

    return st.builds(
        build,
        st.dictionaries(NAMES, children, max_size=4),
        st.lists(st.booleans(), min_size=4, max_size=4),
        st.one_of(st.just("absent"), st.just(False), st.just(True), children),
        st.one_of(st.none(), st.none(), st.integers(1, 2)),
        ANNOTATIONS,
    )


def _extend(children: st.SearchStrategy) -> st.SearchStrategy[dict]:
    return st.one_of(
        _object(children),
        st.builds(lambda items, extra: {"type": "array", "items": items, **extra}, children,
                  st.fixed_dictionaries({}, optional={"minItems": st.integers(0, 2), "maxItems": st.integers(2, 4), "uniqueItems": st.just(True)})),
        st.builds(lambda prefix, rest: {"type": "array", "prefixItems": prefix, **rest}, st.lists(children, min_size=1, max_size=2),
                  st.sampled_from([{}, {"items": False}, {"minItems": 1}])),
        st.builds(lambda a, b: {"anyOf": [a, b]}, children, children),
        st.builds(lambda a, b: {"oneOf": [a, b]}, children, children),
        st.builds(lambda obj, names: {"allOf": [obj, {"required": names}]}, _object(children), st.lists(NAMES, min_size=1, max_size=2, unique=True)),
        # negations and conditions: only objects fail `required` and `properties`, so every other
        # value is on the other side of a `not`
        st.builds(lambda a, name: {**a, "not": {"required": [name]}}, children, NAMES),
        st.builds(lambda a, kind: {**a, "not": {"type": kind}}, children, st.sampled_from(["string", "integer", "object", "null"])),
        st.builds(lambda obj, a, b: {**obj, "oneOf": [{"required": [a]}, {"required": [b]}]}, _object(children), NAMES, NAMES),
        st.builds(lambda obj, name, value, then, other: {**obj, "if": {"properties": {name: {"const": value}}, "required": [name]},
                                                         "then": then, "else": other},
                  _object(children), NAMES, SCALARS, children, children),
    )


TREES = st.recursive(LEAVES, _extend, max_leaves=6)


def _with_definitions(shared: dict, tree: dict) -> dict:
    return {"$defs": {"shared": shared}, "type": "object", "properties": {"p": {"$ref": "#/$defs/shared"}, "q": tree}, "required": ["p"]}


def _recursive(leaf: dict, width: int) -> dict:
    node = {"type": "object", "properties": {"v": leaf, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": width}}, "required": ["v"]}
    return {"$defs": {"node": node}, "$ref": "#/$defs/node"}


SCHEMAS = st.one_of(
    TREES,
    st.builds(_with_definitions, TREES, TREES),
    st.builds(_recursive, LEAVES, st.integers(1, 3)),
)


def _open_object(children: st.SearchStrategy) -> st.SearchStrategy[dict]:
    """Objects that say only properties and at least one required key (type object or not): the
    schemas a negation or an overlapping oneOf branch is expressed for, one way to fail at a time."""
    def build(props: dict, required: list[str], typed: bool) -> dict:
        return {**({"type": "object"} if typed else {}), "properties": props, "required": required}

    return st.builds(build, st.dictionaries(NAMES, children, max_size=3), st.lists(NAMES, min_size=1, max_size=2, unique=True), st.booleans())


# what real oneOf branches tell apart by: a type, a const or enum (their negations are expressible)
DISCRIMINATING = st.one_of(
    st.sampled_from([{}, {"type": "string"}, {"type": "integer"}, {"type": ["string", "null"]}, {"type": "boolean"}, {"type": "array"}]),
    st.builds(lambda v: {"const": v}, SCALARS),
    st.builds(lambda vs: {"enum": vs}, st.lists(SCALARS, min_size=1, max_size=3, unique_by=lambda v: (type(v), v))),
)
# Overlapping object branches (issue 11: oneOf of objects with different required keys, not of
# an object schema): exact through one anyOf branch per way the negated object can fail.
NEGATED_OBJECTS = st.one_of(
    st.builds(lambda a, b: {"oneOf": [a, b]}, _open_object(DISCRIMINATING), _open_object(DISCRIMINATING)),
    st.builds(lambda base, a, b: {**base, "oneOf": [a, b]}, _object(DISCRIMINATING), _open_object(DISCRIMINATING), _open_object(DISCRIMINATING)),
    st.builds(lambda base, negated: {**base, "not": negated}, st.one_of(_object(LEAVES), LEAVES), _open_object(DISCRIMINATING)),
    # every value but some (numbers between the excluded integers, strings outside a trie), and
    # arrays with an item that fails `items`
    st.builds(lambda base, negated: {**base, "not": negated}, st.one_of(LEAVES, _object(DISCRIMINATING)),
              st.builds(lambda vs: {"enum": vs}, st.lists(st.one_of(SCALARS, st.sampled_from(["ab", "abc", "b\"q", "x-1", 7])), min_size=1, max_size=4,
                                                          unique_by=lambda v: (type(v), v)))),
    st.builds(lambda base, items: {**base, "not": {"type": "array", "items": items}}, LEAVES, DISCRIMINATING),
)


def _tagged_branch(kind: str, props: dict, at: int, required_mask: list[bool], extra: object, typed: bool) -> dict:
    """An object branch of a tagged union: `kind` required with its own constant, written at
    position `at` among the other properties."""
    names = [n for n in props if n != "kind"]
    at = min(at, len(names))
    order = [*names[:at], "kind", *names[at:]]
    values = {**props, "kind": {"const": kind} if len(kind) % 2 else {"enum": [kind]}}
    branch: dict = {**({"type": "object"} if typed else {}), "properties": {n: values[n] for n in order},
                    "required": ["kind", *(n for n, r in zip(names, required_mask) if r)]}
    if extra != "absent":
        branch["additionalProperties"] = extra
    return branch


def _tagged_union(branches: list, union: str, by_ref: list[bool], outer: dict | None, siblings: dict) -> dict:
    """anyOf/oneOf of tagged branches (MCP's content kinds), some through `$defs`, at the root or
    as the value of an outer object's key `v`; the union's node may declare other keys."""
    defs = {f"b{i}": b for i, (b, ref) in enumerate(zip(branches, by_ref)) if ref}
    options = [{"$ref": f"#/$defs/b{i}"} if ref else b for i, (b, ref) in enumerate(zip(branches, by_ref))]
    node = {**siblings, union: options}
    schema = node if outer is None else {**outer, "properties": {**outer.get("properties", {}), "v": node}, "required": ["v"]}
    return {**schema, "$defs": defs} if defs else schema


def _tagged_branches(children: st.SearchStrategy, extras: tuple = ("absent", "absent", False, True)) -> st.SearchStrategy[list]:
    branch = st.builds(lambda props, at, mask, extra, typed: (props, at, mask, extra, typed),
                       # kind mostly after another key: those branches get the copies the tests walk
                       st.dictionaries(st.sampled_from(["a", "b", "id", "name", "text"]), children, min_size=1, max_size=3),
                       st.sampled_from([0, 1, 1, 2, 3]),
                       st.lists(st.booleans(), min_size=3, max_size=3), st.sampled_from(extras), st.booleans())
    return st.lists(branch, min_size=2, max_size=3).map(
        lambda bs: [_tagged_branch(kind, *b) for kind, b in zip(["text", "image", "audio!"], bs)])


# Unions told apart by a required key's constant: the default backend also writes each branch
# with that key first and with its required keys first (json_key_order._discriminator_first)
TAGGED_UNIONS = st.builds(
    _tagged_union,
    _tagged_branches(LEAVES),
    st.sampled_from(["anyOf", "oneOf"]),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.one_of(st.none(), _object(LEAVES)),
    st.sampled_from([{}, {"type": "object"}, {"properties": {"meta": {"type": "string"}}}, {"required": ["kind"]}]),
)
# The union's node declares keys itself and requires the kind, its branches open (Glaive's tools:
# `shape` declared and required beside a oneOf of a constant each and the measures it requires):
# the default backend writes each branch merged with the node's keys, in the tagged orders too
NODE_DECLARED_UNIONS = st.builds(
    _tagged_union,
    _tagged_branches(LEAVES, extras=("absent",)),
    st.sampled_from(["anyOf", "oneOf"]),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.one_of(st.none(), _object(LEAVES)),
    st.sampled_from([{"type": "object", "properties": {"id": {"type": "integer"}, "kind": {"type": "string"}, "meta": {"type": "string"}},
                      "required": ["kind"]},
                     {"properties": {"a": {}, "kind": {"enum": ["text", "image", "audio!", "other"]}}, "required": ["kind"]}]),
)


def _closed_node_union(branches: list, union: str, by_ref: list[bool], outer: dict | None, kind_at: int, node_leaves: list,
                       nullable: bool, requires_kind: bool) -> dict:
    """A closed union node declaring every key its branches declare (`kind` at `kind_at`, each
    other key `{}` or a leaf of its own, and `meta` that no branch declares), its branches open and
    declaring only those keys, perhaps beside a `{"type": "null"}` branch (the node then typed
    object or null): aiproj's Authentication."""
    names = [n for n in dict.fromkeys(n for b in branches for n in b["properties"]) if n != "kind"]
    names.insert(min(kind_at, len(names)), "kind")
    props = {n: {"type": "string"} if n == "kind" else leaf for n, leaf in zip([*names, "meta"], node_leaves * 3)}
    siblings = {"type": ["object", "null"] if nullable else "object", "properties": props, "additionalProperties": False,
                **({"required": ["kind"]} if requires_kind else {})}
    null = [{"type": "null"}] if nullable else []
    return _tagged_union([*branches, *null], union, [*by_ref[:len(branches)], *[False] * len(null)], outer, siblings)


# The same under a closed node that declares the branches' keys, beside a null branch or not: the
# default backend spreads the node into each branch (closed), which is then written kind first
CLOSED_NODE_UNIONS = st.builds(
    _closed_node_union,
    _tagged_branches(LEAVES, extras=("absent",)),
    st.sampled_from(["anyOf", "oneOf"]),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.one_of(st.none(), _object(LEAVES)),
    st.integers(1, 3),  # the kind after another node key: the spread's branches are then written in another order
    st.lists(st.one_of(st.just({}), st.just({}), LEAVES), min_size=3, max_size=3),
    st.booleans(),
    st.booleans(),
)
