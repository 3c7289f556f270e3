"""References to other documents, made local before a JSON schema is compiled (bundling).

A `$ref` may name another document: the JSON Schema meta-schemas (a config format embedding a
schema says `"$ref": "http://json-schema.org/draft-07/schema#"`), or a file beside the schema
(`"base.json#/definitions/path"`, resolved against the schema's `$id`). Nothing is fetched: the
documents come from the meta-schemas that `jsonschema` installs (drafts 3 to 2020-12) and from
those a user registers with `register_schema(uri, document)`. Each referenced document is copied
once under the root's `$defs` and every reference into it, from the root or from other copied
documents, becomes a local pointer; both backends then see local references only, and the
meaning is unchanged (jsonschema with the same documents in its registry validates alike:
tests/grammar/test_json_refs.py). A reference to a document that is not available stays as it
is, and the compiler refuses it naming its URI.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import unquote, urljoin

from .json_merge import DATA_KEYWORDS, NAME_MAPS, pointer
from .json_shapes import schema_children
from .protocol import GrammarError

__all__ = ["bundle", "id_keywords", "reference_registry", "register_schema", "registered_schema", "without_unreachable_definitions"]

_REGISTERED: dict[str, Any] = {}
_LOCK = threading.Lock()
_PREFIX = "constrained_spec:"  # the $defs names of copied documents: constrained_spec:0, ...


def _document(uri: str) -> str:
    """A document's URI without its (empty) fragment."""
    return uri.split("#", 1)[0]


def register_schema(uri: str, document: Any) -> None:
    """Make `document` (a schema, dict or bool) the target of `$ref`s to `uri` in schemas compiled
    from now on (by this process). `uri` is the document's absolute URI, or the name a `$ref`
    gives it when the referring schema has no `$id` (`"base.json"`)."""
    if not isinstance(uri, str) or not _document(uri):
        raise GrammarError(f"register_schema: uri must name a document, got {uri!r}")
    if not isinstance(document, (dict, bool)):
        raise GrammarError(f"register_schema: the document for {uri!r} must be a JSON schema (object or boolean), got {type(document).__name__}")
    with _LOCK:
        _REGISTERED[_document(uri)] = document


def registered_schema(uri: str) -> Any | None:
    """The document a `$ref` to `uri` reaches: registered ones first, then the JSON Schema
    meta-schemas (from jsonschema's `jsonschema_specifications`), else None."""
    key = _document(uri)
    with _LOCK:
        if key in _REGISTERED:
            return _REGISTERED[key]
    try:
        from jsonschema_specifications import REGISTRY
    except ImportError:  # jsonschema is a dependency; without the meta-schemas such refs stay unresolved
        return None
    for candidate in (key, key.rstrip("/")):
        try:
            return REGISTRY.contents(candidate)
        except Exception:  # noqa: BLE001 - referencing raises its own NoSuchResource
            continue
    return None


def reference_registry() -> Any:
    """The registered documents as a `referencing.Registry` for jsonschema (which adds the
    meta-schemas itself), retrieving nothing else: validating an output never goes to the network."""
    from referencing import Registry, Resource
    from referencing.exceptions import NoSuchResource
    from referencing.jsonschema import DRAFT202012

    def retrieve(uri: str) -> Any:
        raise NoSuchResource(ref=uri)

    with _LOCK:
        documents = list(_REGISTERED.items())
    return Registry(retrieve=retrieve).with_resources(  # type: ignore[call-arg]
        (uri, Resource.from_contents(document, default_specification=DRAFT202012)) for uri, document in documents)


def bundle(schema: Any) -> Any:
    """`schema` with the documents its `$ref`s name copied under `$defs` and every reference that
    leaves a document or crosses a nested `$id` made a pointer from the root; `schema` itself
    where every reference is a plain local one already (nothing is copied)."""
    if not isinstance(schema, dict) or not _needs_bundling(schema):
        return schema
    id_keys = id_keywords(schema)
    base = _node_id(schema, id_keys)
    root_uri = _document(base) if isinstance(base, str) else ""
    placed: dict[str, str] = {}  # resource URI -> its pointer in the bundle (documents and nested $ids)
    anchors: dict[tuple[str, str], str] = {}  # (resource URI, anchor name) -> its pointer in the bundle
    defs: dict[str, Any] = {}
    taken = set(schema.get("$defs", {})) if isinstance(schema.get("$defs"), dict) else set()

    def index(node: Any, uri: str, at: str, id_keys: tuple[str, ...]) -> None:
        """Record where the resources of a document placed at pointer `at` sit: the document
        itself and each nested `$id`, resolved against its nearest enclosing one."""
        if uri:
            placed.setdefault(uri, at)
        stack = [(node, uri, "")]
        while stack:
            item, base_uri, path = stack.pop()
            if isinstance(item, list):
                stack.extend((value, base_uri, f"{path}/{i}") for i, value in enumerate(item))
                continue
            if not isinstance(item, dict):
                continue
            nested = _node_id(item, id_keys)
            if path and isinstance(nested, str) and nested and not nested.startswith("#"):
                base_uri = _document(urljoin(base_uri, nested) if base_uri else nested)
                placed.setdefault(base_uri, at + path)
            for name in (item.get("$anchor"), nested[1:] if isinstance(nested, str) and nested.startswith("#") else None):
                if isinstance(name, str) and name:  # $anchor, or a draft 4-7 plain-name id ("#foo")
                    anchors.setdefault((base_uri, name), at + path)
            stack.extend((value, base_uri, at_) for at_, value in _inside(item, path))

    def place(uri: str, name_hint: str) -> str | None:
        """The pointer where the document at `uri` (or registered as `name_hint`) sits, copying
        it in on first use; None where it is not available."""
        if uri in placed:
            return placed[uri]
        document = registered_schema(uri)
        if document is None and name_hint != uri:
            document = registered_schema(name_hint)
        if document is None:
            return None
        number = len(defs)
        while f"{_PREFIX}{number}" in taken:
            number += 1
        name = f"{_PREFIX}{number}"
        taken.add(name)
        at = pointer("", "$defs", name)
        keys = id_keywords(document) if isinstance(document, dict) else ("$id",)  # the copy's own dialect
        index(document, uri, at, keys)
        defs[name] = True  # placeholder while the copy is rewritten (a cycle finds it placed)
        defs[name] = rewrite(document, uri, at, at, "", keys)
        return at

    def target(ref: str, base_uri: str, resource_at: str, where: str) -> str:
        """`ref` met at `where` inside the resource placed at `resource_at` with base `base_uri`."""
        doc_part, _, fragment = ref.partition("#")
        if not doc_part:
            at, uri = resource_at, base_uri
        else:
            uri = _document(urljoin(base_uri, doc_part)) if base_uri else doc_part
            at = place(uri, doc_part)
            if at is None:
                return ref  # not available: the compiler refuses it, naming the URI
            if uri not in placed:  # registered under the name the $ref gives it
                uri = doc_part
        if fragment and not fragment.startswith("/"):  # an anchor of that resource
            found = anchors.get((uri, fragment))
            if found is None:
                raise GrammarError(f"$ref {ref!r} at {where}: no $anchor {fragment!r} in the resource {uri or 'at the root'!r}")
            return "#" + found
        return "#" + at + fragment

    def rewrite(node: Any, base_uri: str, doc_at: str, resource_at: str, path: str, id_keys: tuple[str, ...]) -> Any:
        """`node`, at pointer `path` of the document placed at `doc_at`, with its references
        rewritten; `base_uri` and `resource_at`: the enclosing resource's URI and place."""
        if isinstance(node, list):
            return [rewrite(item, base_uri, doc_at, resource_at, f"{path}/{i}", id_keys) for i, item in enumerate(node)]
        if not isinstance(node, dict):
            return node
        nested = _node_id(node, id_keys)
        if path and isinstance(nested, str) and nested and not nested.startswith("#"):
            base_uri, resource_at = _document(urljoin(base_uri, nested) if base_uri else nested), doc_at + path
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                out[key] = target(value, base_uri, resource_at, doc_at + path + "/$ref")
            elif key in DATA_KEYWORDS:
                out[key] = value
            elif key in NAME_MAPS and isinstance(value, dict):  # names map to schemas: a name is no keyword
                out[key] = {name: rewrite(schema, base_uri, doc_at, resource_at, pointer(path, key, name), id_keys)
                            for name, schema in value.items()}
            elif (key == "$schema" or key in id_keys) and isinstance(value, str) and (path or doc_at):
                continue  # a nested or copied resource's $id/$schema: its references are root pointers now
            else:
                out[key] = rewrite(value, base_uri, doc_at, resource_at, pointer(path, key), id_keys)
        return out

    index(schema, root_uri, "", id_keys)
    bundled = rewrite(schema, root_uri, "", "", "", id_keys)
    if defs:
        bundled["$defs"] = {**(bundled.get("$defs") or {}), **defs}
    return bundled


def id_keywords(schema: dict) -> tuple[str, ...]:
    """The keyword that gives a subschema its own URI: `id` where the schema declares draft 3 or
    4, `$id` from draft 6 on (each an annotation in the other drafts: `id` often a plain name,
    `$id` a path some draft-4 generators write; jsonschema reads them so)."""
    dialect = schema.get("$schema")
    return ("id",) if isinstance(dialect, str) and ("draft-03" in dialect or "draft-04" in dialect) else ("$id",)


def _node_id(node: dict, keys: tuple[str, ...]) -> Any:
    return next((node[key] for key in keys if key in node), None)


def _subschemas(node: Any, path: str):
    """(pointer, dict) for every dict in `node` outside JSON values (enum, const, ...)."""
    stack = [(path, node)]
    while stack:
        at, item = stack.pop()
        if isinstance(item, dict):
            yield at, item
            stack.extend(_inside(item, at))
        elif isinstance(item, list):
            stack.extend((f"{at}/{i}", value) for i, value in enumerate(item))


def _inside(node: dict, path: str) -> list[tuple[str, Any]]:
    """(pointer, value) for what the schema object `node` at `path` holds that may hold schemas:
    data (enum, const, required, ...) is left out, and a name map (properties, $defs, ...) gives
    its members, so a property named `enum` is walked like any other."""
    out = []
    for key, value in node.items():
        if key in DATA_KEYWORDS:
            continue
        if key in NAME_MAPS and isinstance(value, dict):
            out.extend((pointer(path, key, name), schema) for name, schema in value.items())
        else:
            out.append((pointer(path, key), value))
    return out


_DEFINITIONS = ("definitions", "$defs")


def without_unreachable_definitions(schema: Any) -> Any:
    """`schema` without the root's `definitions`/`$defs` entries that no reference reachable
    from the rest of the root reaches (the same object where nothing is dropped). An unused
    entry constrains nothing, but llguidance resolves every reference in the document: one
    unused entry naming a document that is not available (a GitHub schema's
    `"$ref": "/schemata/comment#"`) made it refuse the whole schema, which our compiler then
    took 10 s to compile. Kept whole where some reachable reference is not a plain pointer
    (an anchor, another document) or points at the definitions as such."""
    if not isinstance(schema, dict) or not any(isinstance(schema.get(key), dict) for key in _DEFINITIONS):
        return schema
    pending: list[Any] = [{k: v for k, v in schema.items() if k not in _DEFINITIONS}]
    kept: set[tuple[str, Any]] = set()  # (definitions key, name) kept, and (reference, True) walked
    while pending:
        node = pending.pop()
        if not isinstance(node, dict):
            continue
        pending += [sub for _, sub in schema_children(node, "")]
        ref = node.get("$ref")
        if not isinstance(ref, str) or ref == "#":
            continue
        if not ref.startswith("#/"):
            return schema  # an anchor or another document: what it reaches is not read here
        parts = [unquote(p).replace("~1", "/").replace("~0", "~") for p in ref[2:].split("/")]
        if parts[0] in _DEFINITIONS and len(parts) < 2:
            return schema
        target: Any = schema
        for part in parts:  # walk the node itself: it may sit in a container of schemas under names of its own
            target = (target.get(part) if isinstance(target, dict) else
                      target[int(part)] if isinstance(target, list) and part.isdigit() and int(part) < len(target) else None)
            if target is None:
                return schema  # does not resolve: the compilers name it
        if (ref, True) not in kept:
            kept.add((ref, True))
            if parts[0] in _DEFINITIONS:
                kept.add((parts[0], parts[1]))
            pending.append(target)
    out = dict(schema)
    for key in _DEFINITIONS:
        if isinstance(schema.get(key), dict):
            out[key] = {name: sub for name, sub in schema[key].items() if (key, name) in kept}
    dropped = sum(len(schema[key]) - len(out[key]) for key in _DEFINITIONS if isinstance(schema.get(key), dict))
    return out if dropped else schema


def _needs_bundling(schema: dict) -> bool:
    """Whether some `$ref` names another document, or some subschema has its own `$id` (`id` in
    drafts 3-4: what `bundle` reads as one), which changes what the references below it mean."""
    id_keys = id_keywords(schema)
    for path, node in _subschemas(schema, ""):
        ref = node.get("$ref")
        if isinstance(ref, str) and _document(ref):
            return True
        nested = _node_id(node, id_keys)
        if path and isinstance(nested, str) and nested and not nested.startswith("#"):
            return True
    return False
