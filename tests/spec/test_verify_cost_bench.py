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
    r = results[("cpu", "float32")]
    assert set(r["curve"]) == {1, 2} and all(seconds > 0 for seconds in r["curve"].values())
    assert r["k"] == 1 and math.isfinite(r["drift_k"]) and math.isfinite(r["drift_batch"])
    assert 0 <= r["drift_k"] < 1e-2 and 0 <= r["drift_batch"] < 1e-2  # float32: rounding only
    assert r["offered"] == (r["drift_k"] <= r["drift_batch"])
    out = capsys.readouterr().out
    assert "cpu float32: one token" in out and "| cpu | float32 |" in out and "batch drift" in out
    with pytest.raises(SystemExit):
        module.main(["--sizes", "2", "4"])  # costs are relative to one token: 1 is required
    with pytest.raises(SystemExit):
        module.main(["--repeats", "0"])
    with pytest.raises(SystemExit):
        module.main(["--devices", "tpu"])
