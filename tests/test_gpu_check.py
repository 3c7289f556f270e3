"""benchmarks/gpu_check.py: what can be checked without a GPU (it refuses to run without one):
argument parsing, the step plan and its time limits, reading each step's output, the summary."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPT.parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


gpu_check = load_script("gpu_check")


def test_plan_fits_in_ten_minutes_and_covers_every_step():
    steps = gpu_check.plan("python", gpu_check.SPEC_TASKS)
    assert sum(s.timeout_s for s in steps) < 10 * 60
    assert [s.name for s in steps] == ["tests", "model-tests", "kernel-dense", "kernel-onehot", "runner", "spec", "batch", "drift"]
    spec_step = next(s for s in steps if s.name == "spec")
    assert "cuda" in spec_step.argv and len(gpu_check.SPEC_TASKS) >= 6 and "0" in spec_step.argv and "1" in spec_step.argv
    module = load_script("bench_speculative")
    assert set(gpu_check.SPEC_TASKS) <= {t[0] for t in module.TASKS}


def test_arguments():
    parser = gpu_check.build_parser()
    assert parser.parse_args(["--skip", "drift", "batch"]).skip == ["drift", "batch"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--skip", "nonsense"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_without_cuda_it_stops_at_once_with_exit_2(capsys):
    assert gpu_check.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: gpu_check needs a CUDA GPU") and len(err.strip().splitlines()) == 1


KERNEL_OUT = """device: NVIDIA H200; drafts: onehot
copy bandwidth: 4200.0 GB/s
   B  k       V | kernel ms    GB/s  %copy | unfused ms  ratio | torch-ref ms  ratio
   1  4   49152 |     0.030    33.0    0.8% |      0.300 10.00x |        1.000 33.33x
  16  8  128256 |     0.045  1000.0   23.8% |      0.600 13.33x |        9.000 200.00x
 256  4  128256 |     0.400  3200.0   76.2% |      3.000  7.50x |          nan   nanx
 256  8  128256 |     0.700  2900.0   69.0% |      5.000  7.14x |          nan   nanx
"""


def test_kernel_summary_reads_the_goals():
    (line,) = gpu_check.summarize_kernel(KERNEL_OUT, "one-hot")
    assert "69-76% of copy bandwidth" in line and "goal >= 70%: NOT met" in line
    assert "slowest call at B<=16 45 us (goal <= 40 us: NOT met)" in line
    assert gpu_check.summarize_kernel("crashed", "dense") == ["kernel (dense): no benchmark rows found"]


def test_spec_batch_drift_and_tests_summaries():
    spec_out = (
        "\n  T  config                 tokens   tok/s mean acc. len draft acc.  vs none  vs xgr\n"
        "  0  none                      640    39.7          1.00          -    1.00x   0.58x\n"
        "  0  auto                      640    92.2          2.41       0.81    2.32x   1.35x\n"
        "  1  transformers+xgrammar     600    20.0          1.00          -    0.40x   1.00x\n"
    )
    rows = gpu_check.summarize_spec(spec_out)
    assert rows[1] == "spec T=0 auto: 92.2 tok/s (vs none 2.32x, vs transformers+xgrammar 1.35x)" and len(rows) == 3
    assert gpu_check.summarize_batch("T=0: none 282.0 tok/s, auto 568.0 tok/s (2.01x)\n") == ["batch-32 T=0: none 282.0 tok/s, auto 568.0 tok/s (2.01x)"]
    assert gpu_check.summarize_drift("x\n| cuda:0 | float32 | 20.9 | 1e-05 (k = 8) | 2e-05 | offered |\n") == ["| cuda:0 | float32 | 20.9 | 1e-05 (k = 8) | 2e-05 | offered |"]
    assert gpu_check.summarize_tests("....\n==== 70 passed, 2 skipped in 60.1s ====\n") == ["tests: 70 passed, 2 skipped in 60.1s"]
    runner_out = "batch  runner  ms/step\n    1  static              1.2         17.50x         310.0          6.20x\n    1  hf   21.0  1.00x  50.0  1.00x\n"
    assert gpu_check.summarize_runner(runner_out) == ["runner 1 static 1.2 17.50x 310.0 6.20x", "runner 1 hf 21.0 1.00x 50.0 1.00x"]


def test_summary_names_failures():
    results = [
        gpu_check.StepResult("tests", "ok", 61.0, ["tests: 70 passed in 60s"]),
        gpu_check.StepResult("spec", "timed out after 120 s", 120.0, ["spec: no result table found"]),
        gpu_check.StepResult("drift", "skipped"),
    ]
    text = gpu_check.format_summary(results, "NVIDIA H200", "torch 2.11.0, transformers 5.18.0")
    assert text.splitlines()[0] == "== gpu_check on NVIDIA H200 (torch 2.11.0, transformers 5.18.0), 181 s =="
    assert "[timed out after 120 s] spec (120 s)" in text and text.endswith("SOME STEPS FAILED (their output is above)")
    assert gpu_check.format_summary(results[:1], "x", "y").endswith("all steps ran clean")
