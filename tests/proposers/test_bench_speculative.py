"""The speculative benchmark's --smoke mode runs end to end (so the benchmark cannot rot)."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_speculative.py"


@pytest.mark.model
def test_smoke_mode_runs_and_speculation_emits_more_than_one_token_per_forward(capsys):
    spec = importlib.util.spec_from_file_location("bench_speculative", BENCH)
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_speculative"] = bench  # dataclasses look their module up
    spec.loader.exec_module(bench)
    rows = {row.config: row for row in bench.main(["--smoke"])}
    assert set(rows) == {"none", "auto", "transformers+xgrammar"}
    assert all(row.tokens > 0 and row.seconds > 0 for row in rows.values())
    assert rows["none"].mean_accepted == 1.0  # no drafts: one token per forward
    assert rows["auto"].mean_accepted > 1.5  # forced keys and enum values are accepted at T = 0
    assert rows["auto"].tokens == rows["none"].tokens  # greedy: the same output either way
    assert "vs none" in capsys.readouterr().out
