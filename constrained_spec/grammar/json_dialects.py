"""Keywords that a schema's declared draft does not have are not keywords there.

A schema that names its draft (`"$schema": "http://json-schema.org/draft-04/schema#"`) is
validated by that draft's rules: validators ignore keywords added by later drafts as unknown
annotations. SchemaStore's web-manifest (draft 4) lists orientations as `oneOf` of `const`s; a
draft-4 validator reads each branch as `{}`, every value meets all eight, so no orientation is
valid, and generating `"landscape"` would be an invalid output. So those keywords are left out
(listed on the log, or refused under `strict`), per resource: a bundled document keeps its own
`$schema`. A schema without `$schema`, or naming a draft this module does not know, keeps every
keyword (the compilers read the drafts' keywords alike).
"""

from __future__ import annotations

import re
from typing import Any

from .json_merge import DATA_KEYWORDS, NAME_MAPS, pointer

__all__ = ["declared_draft", "may_use_later_keywords", "without_later_keywords"]

# keyword -> the first draft that has it (2019: 2019-09, 2020: 2020-12)
_ADDED = {
    "const": 6, "contains": 6, "propertyNames": 6,
    "if": 7, "then": 7, "else": 7,
    "dependentRequired": 2019, "dependentSchemas": 2019, "unevaluatedProperties": 2019, "unevaluatedItems": 2019,
    "minContains": 2019, "maxContains": 2019,
    "prefixItems": 2020,
}  # fmt: skip
_DRAFTS = {"draft-03": 3, "draft-04": 4, "draft-06": 6, "draft-07": 7, "draft/2019-09": 2019, "draft/2020-12": 2020}
_OLD_DRAFT = re.compile(r'"\$schema": "https?://json-schema\.org/(?:draft-0[3467]|draft/2019-09)/')


def declared_draft(uri: Any) -> int | None:
    """The draft a `$schema` URI names (3, 4, 6, 7, 2019, 2020), or None."""
    if not isinstance(uri, str):
        return None
    found = re.match(r"https?://json-schema\.org/(draft-0\d|draft/\d{4}-\d\d)/schema#?$", uri.strip())
    return _DRAFTS.get(found.group(1)) if found else None


_LATER_KEY = re.compile('"(?:' + "|".join(_ADDED) + ')": ')


def may_use_later_keywords(text: str) -> bool:
    """A cheap test on the schema's `json.dumps` text: does some resource declare a draft older
    than 2020-12, and does a keyword added since appear? (Only then can a keyword be one its
    draft lacks.)"""
    return _OLD_DRAFT.search(text) is not None and _LATER_KEY.search(text) is not None


def without_later_keywords(schema: Any, left_out: dict[str, str]) -> Any:
    """`schema` without the keywords each resource's declared draft lacks; `left_out` gets each
    keyword left out and the JSON pointer of its first place."""

    def walk(node: Any, draft: int | None, path: str) -> Any:
        if isinstance(node, list):
            return [walk(v, draft, pointer(path, i)) for i, v in enumerate(node)]
        if not isinstance(node, dict):
            return node
        draft = declared_draft(node.get("$schema")) or draft
        out = {}
        for key, value in node.items():
            if draft is not None and _ADDED.get(key, 0) > draft:
                left_out.setdefault(key, pointer(path, key))
            elif key in DATA_KEYWORDS:
                out[key] = value
            elif key in NAME_MAPS and isinstance(value, dict):
                out[key] = {name: walk(sub, draft, pointer(path, key, name)) for name, sub in value.items()}
            else:
                out[key] = walk(value, draft, pointer(path, key))
        return out

    return walk(schema, None, "")
