"""The grammar benchmark's --smoke mode runs, so the benchmark cannot rot."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


@pytest.mark.model
def test_bench_grammar_smoke(capsys):
    path = Path(__file__).parent.parent.parent / "benchmarks" / "bench_grammar.py"
    spec = importlib.util.spec_from_file_location("bench_grammar", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = module.main(["--smoke"])
    assert rows and rows[0]["backend"] == "ours (default)" and rows[0]["compiled"] == 1
    assert rows[0]["p50_ms"] > 0 and rows[0]["p99_ms"] >= rows[0]["p50_ms"]
    assert "mask p50" in capsys.readouterr().out
