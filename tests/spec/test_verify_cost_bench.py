"""benchmarks/verify_cost.py --smoke runs end to end (so the measurement cannot rot)."""

import importlib.util
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "verify_cost.py"


@pytest.mark.model
def test_smoke_mode_measures_a_cost_curve_and_row_drift(capsys):
    spec = importlib.util.spec_from_file_location("verify_cost", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.main(["--smoke"])
    curve, drift = results["float32"]
    assert set(curve) == {1, 2} and all(seconds > 0 for seconds in curve.values())
    assert set(drift) == {2} and math.isfinite(drift[2]) and drift[2] >= 0
    out = capsys.readouterr().out
    assert "float32: one token" in out and "vs 1" in out
    with pytest.raises(SystemExit):
        module.main(["--sizes", "2", "4"])  # costs are relative to one token: 1 is required
    with pytest.raises(SystemExit):
        module.main(["--repeats", "0"])
