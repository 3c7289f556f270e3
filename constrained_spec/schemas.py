"""Schemas as users give them -> a JSON schema dict for the grammar + a parser for the output.

Accepted: a pydantic model class (the value is an instance of it), any other type pydantic can
describe (`list[int]`, a dataclass, a TypedDict: validated through `TypeAdapter`), a JSON schema
dict or JSON string (the value is the parsed JSON, checked with `jsonschema`). Also the CLI's
loaders: a schema file (or `-` for stdin) and `module:Class`. Every bad input raises ValueError
with a message a user can act on.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ResolvedSchema", "resolve_schema", "check_json_schema", "load_schema_file", "import_object", "OutputValidationError"]


class OutputValidationError(ValueError):
    """A complete output that does not validate against its schema (a grammar bug, never expected)."""


@dataclass(frozen=True)
class ResolvedSchema:
    """json_schema: what the grammar compiles. parse: complete output text -> validated value."""

    json_schema: dict[str, Any]
    parse: Callable[[str], Any]
    name: str


def check_json_schema(schema: Any) -> dict[str, Any]:
    """Check that `schema` is a JSON schema (an object, valid against its metaschema)."""
    if isinstance(schema, bool) or not isinstance(schema, Mapping):
        raise ValueError(f"a JSON schema must be a JSON object, got {type(schema).__name__}: {schema!r:.80}")
    import jsonschema

    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise ValueError(f"invalid JSON schema at {where}: {exc.message}") from None
    return dict(schema)


def _parse_with_jsonschema(schema: dict[str, Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        import jsonschema

        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OutputValidationError(f"the output is not valid JSON: {exc}") from None
        from .grammar.json_refs import reference_registry

        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:  # documents the schema's $refs name: the registered ones (nothing is fetched)
            jsonschema.validate(value, schema, cls=cls, registry=reference_registry())
        except jsonschema.ValidationError as exc:
            raise OutputValidationError(f"the output does not match the schema: {exc.message}") from None
        return value

    return parse


def resolve_schema(schema: Any) -> ResolvedSchema:
    """Any supported schema form -> ResolvedSchema (see the module docstring)."""
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            from .inputs import schema_path_hint

            hint = schema_path_hint(schema) if isinstance(schema, str) else ""
            raise ValueError(f"the schema string is not valid JSON: {exc}{hint}") from None
        except RecursionError:
            raise ValueError("the schema string is nested too deeply to parse") from None
    if isinstance(schema, (Mapping, list, tuple, int, float)) or schema is None:  # JSON values, not types
        checked = check_json_schema(schema)
        return ResolvedSchema(checked, _parse_with_jsonschema(checked), str(checked.get("title", "schema")))
    from pydantic import BaseModel, TypeAdapter, ValidationError

    def wrap(validate: Callable[[str], Any]) -> Callable[[str], Any]:
        def parse(text: str) -> Any:
            try:
                return validate(text)
            except ValidationError as exc:
                raise OutputValidationError(f"the output does not validate: {exc}") from None

        return parse

    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            json_schema = schema.model_json_schema()
        except Exception as exc:  # e.g. PydanticUserError for a model with undefined forward references
            raise ValueError(f"cannot build a JSON schema from {schema.__name__}: {_first_line(exc)}") from None
        return ResolvedSchema(json_schema, wrap(schema.model_validate_json), schema.__name__)
    try:
        adapter = TypeAdapter(schema)
        json_schema = adapter.json_schema()
    except Exception as exc:  # pydantic raises several error types for types it cannot describe
        raise ValueError(f"cannot build a JSON schema from {schema!r}: {_first_line(exc)}") from None
    return ResolvedSchema(json_schema, wrap(adapter.validate_json), getattr(schema, "__name__", str(schema)))


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def load_schema_file(path: str) -> dict[str, Any]:
    """Read a JSON schema from a file, or from stdin when `path` is "-"."""
    if path == "-":
        from .inputs import read_stdin_text

        text, where = read_stdin_text("the schema on stdin"), "stdin"
    else:
        file = Path(path).expanduser()
        if not file.is_file():
            raise ValueError(f"schema file not found: {path}")
        try:
            text, where = file.read_text(encoding="utf-8"), str(path)
        except UnicodeDecodeError as exc:
            raise ValueError(f"the schema file {path} is not valid UTF-8: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}") from None
    if not text.strip():
        raise ValueError(f"the schema in {where} is empty")
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the schema in {where} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError(f"the schema in {where} is nested too deeply to parse") from None
    return check_json_schema(schema)


def import_object(spec: str) -> Any:
    """`module:Name` (or `path/to/file.py:Name`) -> the object, e.g. a pydantic model class."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected module:Class (e.g. myapp.models:Person), got {spec!r}")
    try:
        if module_name.endswith(".py"):
            file = Path(module_name).expanduser()
            if not file.is_file():
                raise ValueError(f"python file not found: {module_name}")
            loader_spec = importlib.util.spec_from_file_location(file.stem, file)
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[loader_spec.name] = module  # pydantic resolves forward references through it
            loader_spec.loader.exec_module(module)
        else:
            if "" not in sys.path and "." not in sys.path:
                sys.path.insert(0, "")  # as `python -m`, let users name modules in the current folder
            module = importlib.import_module(module_name)
    except ValueError:
        raise
    except Exception as exc:  # ImportError, or any error the module raises while importing
        raise ValueError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj
