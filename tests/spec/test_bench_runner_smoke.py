"""benchmarks/bench_runner.py --smoke runs end to end (so the benchmark cannot rot): both runners'
score steps are timed at two batch sizes (the engine half, greedy JSON, is skipped: its equality of
tokens is tested in test_static_runner_model.py)."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_runner.py"


@pytest.mark.model
def test_smoke_mode_times_both_runners_at_two_batch_sizes(capsys):
    spec = importlib.util.spec_from_file_location("bench_runner", BENCH)
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_runner"] = bench
    spec.loader.exec_module(bench)
    result = bench.main(["--smoke"])
    assert set(result) == {(n, b) for n in ("static", "hf") for b in (1, 2)}
    assert all(ms > 0 and speedup > 0 for ms, speedup in result.values())
    assert result["hf", 1][1] == 1.0  # hf against itself
    out = capsys.readouterr().out
    assert "ms/step" in out and "speedup vs hf" in out
