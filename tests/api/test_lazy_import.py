"""`import constrained_spec` stays cheap; the API is exported lazily."""

import subprocess
import sys


def test_import_does_not_load_heavy_modules():
    code = (
        "import sys, constrained_spec as c; "
        "heavy = [m for m in ('transformers', 'triton', 'fastapi') if m in sys.modules]; "
        "assert not heavy, heavy; "
        "assert c.Generator.__name__ == 'Generator' and c.Result.__name__ == 'Result' and callable(c.generate); "
        "heavy = [m for m in ('transformers', 'triton', 'fastapi') if m in sys.modules]; "
        "assert not heavy, ('after touching the API', heavy)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_unknown_attribute_raises():
    import constrained_spec

    try:
        constrained_spec.nope
    except AttributeError as exc:
        assert "no attribute 'nope'" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
