"""The GPU benchmark's --smoke mode runs on CPU (Triton interpreter) so the script cannot rot.
It also checks the kernel and the unfused peer against the reference on every configuration."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_kernel.py"


@pytest.mark.parametrize("drafts", ["dense", "onehot"])
def test_benchmark_smoke_mode_runs_and_matches_reference(drafts):
    # The script turns on the interpreter itself when there is no GPU.
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--drafts", drafts], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "copy bandwidth" in proc.stdout and "MISMATCH" not in proc.stderr
    assert len([line for line in proc.stdout.splitlines() if line.strip().endswith("x")]) == 2  # one row per size
