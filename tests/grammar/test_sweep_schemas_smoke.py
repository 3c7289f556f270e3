"""benchmarks/sweep_schemas.py runs on a folder (so it cannot rot), and its Kubernetes reader
makes references into _definitions.json local."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import jsonschema
import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def _module():
    spec = importlib.util.spec_from_file_location("sweep_schemas", BENCHMARKS / "sweep_schemas.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.model
def test_sweep_on_a_folder(tmp_path, capsys):
    for name in ("own-fc-get-weather.json", "own-fc-invoice.json", "schemastore-stale.json"):
        shutil.copy(BENCHMARKS / "schema_corpus" / name, tmp_path / name)
    (tmp_path / "empty.json").write_text("")  # a mirror's placeholder for a large file: listed, not fatal
    counts = _module().main(["--folder", str(tmp_path), "--walks", "2", "--xgrammar"])
    out = capsys.readouterr().out
    assert counts["files not JSON"] == 1 and "skipped empty.json: not JSON" in out
    assert counts["schemas"] == 3 and counts["compiled"] == 3 and counts["walks"] == 6
    assert counts["dead ends"] == 0 and counts["invalid outputs"] == 0 and counts["finished"] >= 1
    assert counts["xgrammar outputs"] >= 1
    assert "compile median" in out and "compiled or refused by name, per schema" in out and "over 5 s: 0" in out


def test_kubernetes_references_become_local_definitions():
    table = {"a": {"$ref": "#/$defs/b"}, "b": {"type": "integer"}, "unused": {"type": "string"}}
    schema = {"properties": {"m": {"$ref": "/api/_definitions.json#/$defs/a"}}}
    assert _module()._with_local_definitions(schema, table) == {
        "properties": {"m": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "integer"}}}


def test_ans_references_are_bundled_under_definitions(tmp_path):
    module = _module()
    root = tmp_path / "src/main/resources/schema/ans" / module.ANS_VERSION
    (root / "traits").mkdir(parents=True)
    url = module.ANS_URL
    (root / "story.json").write_text(json.dumps({"$schema": "x", "id": url + "story.json", "type": "object",
                                                "properties": {"t": {"$ref": url + "traits/t.json"}, "s": {"$ref": url + "story.json"},
                                                               "default": {"$ref": url + "traits/t.json"}, "e": {"enum": [{"id": "x"}]}}}))
    (root / "traits" / "t.json").write_text(json.dumps({"id": url + "traits/t.json", "definitions": {"d": {"type": "integer"}},
                                                        "anyOf": [{"$ref": "#/definitions/d"}, {"$ref": url + "story.json"}]}))
    bundled = dict(module.ans_schemas(tmp_path))
    assert set(bundled) == {"story.json", "traits/t.json"}
    story = bundled["story.json"]
    assert story["properties"] == {"t": {"$ref": "#/definitions/traits__t"}, "s": {"$ref": "#/definitions/story"},
                                   "default": {"$ref": "#/definitions/traits__t"}, "e": {"enum": [{"id": "x"}]}}  # names and data kept
    assert story["definitions"]["traits__t"]["anyOf"] == [{"$ref": "#/definitions/traits__t/definitions/d"}, {"$ref": "#/definitions/story"}]
    assert jsonschema.Draft4Validator(story).is_valid({"t": 1, "s": {"t": {}}}) and not jsonschema.Draft4Validator(story).is_valid({"t": "x"})
