"""Schema resolution: pydantic classes, other types, dicts, JSON strings, files, module:Class."""

import json
import textwrap

import pytest
from pydantic import BaseModel

from constrained_spec.schemas import OutputValidationError, import_object, load_schema_file, resolve_schema


class City(BaseModel):
    name: str
    population: int


def test_pydantic_class_gives_instances():
    resolved = resolve_schema(City)
    assert resolved.json_schema["required"] == ["name", "population"]
    value = resolved.parse('{"name":"Oslo","population":700000}')
    assert isinstance(value, City) and value.population == 700000
    with pytest.raises(OutputValidationError, match="does not validate"):
        resolved.parse('{"name":"Oslo"}')


def test_other_types_go_through_type_adapter():
    resolved = resolve_schema(list[int])
    assert resolved.json_schema == {"type": "array", "items": {"type": "integer"}}
    assert resolved.parse("[1,2]") == [1, 2]


def test_dict_and_string_schemas_give_checked_json():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    for form in (schema, json.dumps(schema)):
        resolved = resolve_schema(form)
        assert resolved.parse('{"a": 3}') == {"a": 3}
        with pytest.raises(OutputValidationError, match="does not match the schema"):
            resolved.parse('{"a": "x"}')


@pytest.mark.parametrize(
    "schema, message",
    [
        ({"type": "strin"}, "invalid JSON schema at type"),
        ({"properties": {"a": {"minimum": "zero"}}}, "invalid JSON schema at properties/a/minimum"),
        ([1, 2], "a JSON schema must be a JSON object"),
        ("{not json", "the schema string is not valid JSON"),
    ],
)
def test_invalid_schemas_have_clear_messages(schema, message):
    with pytest.raises(ValueError, match=message):
        resolve_schema(schema)


def test_schema_files(tmp_path):
    good = tmp_path / "s.json"
    good.write_text('{"type": "string"}')
    assert load_schema_file(str(good)) == {"type": "string"}
    with pytest.raises(ValueError, match="schema file not found: .*missing.json"):
        load_schema_file(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": ')
    with pytest.raises(ValueError, match="is not valid JSON"):
        load_schema_file(str(bad))
    empty = tmp_path / "empty.json"
    empty.write_text("  ")
    with pytest.raises(ValueError, match="is empty"):
        load_schema_file(str(empty))


def test_import_object_from_module_and_file(tmp_path):
    assert import_object("json:dumps") is json.dumps
    file = tmp_path / "models.py"
    file.write_text(textwrap.dedent("""
        from pydantic import BaseModel
        class Pet(BaseModel):
            name: str
    """))
    assert import_object(f"{file}:Pet").__name__ == "Pet"
    with pytest.raises(ValueError, match="expected module:Class"):
        import_object("json")
    with pytest.raises(ValueError, match="cannot import 'no_such_module_xyz'"):
        import_object("no_such_module_xyz:A")
    with pytest.raises(ValueError, match="has no attribute 'Nope'"):
        import_object("json:Nope")
