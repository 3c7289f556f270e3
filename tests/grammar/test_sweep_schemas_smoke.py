"""benchmarks/sweep_schemas.py runs on a folder (so it cannot rot), and its Kubernetes reader
makes references into _definitions.json local."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

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
    counts = _module().main(["--folder", str(tmp_path), "--walks", "2", "--xgrammar"])
    assert counts["schemas"] == 3 and counts["compiled"] == 3 and counts["walks"] == 6
    assert counts["dead ends"] == 0 and counts["invalid outputs"] == 0 and counts["finished"] >= 1
    assert counts["xgrammar outputs"] >= 1
    assert "compile median" in capsys.readouterr().out


def test_kubernetes_references_become_local_definitions():
    table = {"a": {"$ref": "#/$defs/b"}, "b": {"type": "integer"}, "unused": {"type": "string"}}
    schema = {"properties": {"m": {"$ref": "/api/_definitions.json#/$defs/a"}}}
    assert _module()._with_local_definitions(schema, table) == {
        "properties": {"m": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "integer"}}}
