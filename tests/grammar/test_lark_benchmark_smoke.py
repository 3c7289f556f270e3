"""The Lark mask benchmark's --smoke mode runs (so the benchmark cannot rot)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def test_lark_masks_benchmark_smoke(capsys) -> None:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "lark_masks.py"
    spec = importlib.util.spec_from_file_location("lark_masks_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--smoke"]) == 0
    out = capsys.readouterr().out
    for name in ("json", "arithmetic", "sql", "tool_call"):
        assert f"{name}" in out
    assert out.count("warm") == 4
