"""benchmarks/bench_server.py --smoke against the session's live server, so the benchmark cannot rot."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model


def _load_bench():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_server.py"
    spec = importlib.util.spec_from_file_location("bench_server", path)
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_server"] = bench  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(bench)
    return bench


def test_bench_server_smoke(live_server, capsys):
    bench = _load_bench()
    code = bench.main(["--smoke", "--base-url", live_server.base_url])
    out = capsys.readouterr().out
    report = json.loads(out.strip().splitlines()[-1])
    assert code == 0, out
    assert [row["phase"] for row in report["rows"]] == ["2 clients", "1 client"]
    assert all(row["requests"] >= 1 and row["errors"] == 0 and row["invalid"] == 0 for row in report["rows"])
    assert "throughput ratio" in out


def test_bench_refuses_remote_hosts():
    bench = _load_bench()
    with pytest.raises(SystemExit):
        bench.main(["--smoke", "--base-url", "http://example.com/v1"])
