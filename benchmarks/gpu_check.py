"""One command for a GPU machine: the CUDA tests, the benchmarks, and one summary (< 10 min on one GPU).

    python benchmarks/gpu_check.py                 # everything
    python benchmarks/gpu_check.py --skip drift    # leave steps out (names below)

Steps, each a subprocess with its own time limit (the limits add up to under 10 minutes):
- tests:   the CUDA-relevant tests without the default model (kernels compiled on the GPU, the
           engine on CUDA, device options, the runner self-check, the static runner's CUDA graphs
           on tiny Llamas against transformers);
- model-tests: the default model on the GPU (HF runner, static runner with CUDA graphs: logits
           equal transformers', greedy JSON equal to the HF runner's);
- kernel:  benchmarks/bench_kernel.py with dense and with one-hot drafts (copy-bandwidth share,
           time per call) against the goals: >= 70% of copy bandwidth at B = 256, k in {4, 8};
           <= 40 us per call at B <= 16;
- runner:  benchmarks/bench_runner.py on cuda: static (CUDA graphs) vs static-eager vs hf, batch 1
           and 8, one score step and greedy JSON through the engine;
- spec:    benchmarks/bench_speculative.py with the model on the GPU, T = 0 and 1, 6 tasks, none vs
           auto vs transformers + xgrammar;
- batch:   benchmarks/bench_batch.py, 32 requests at once, none vs auto, T = 0 and 1;
- drift:   benchmarks/verify_cost.py on cuda, float32 / bfloat16 / float16 (the table that decides
           which dtypes speculation is offered in).
Without CUDA it stops at once with exit code 2. Exit code 0 only when every step ran clean.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
CUDA_TESTS = [
    "tests/kernels", "tests/spec/test_engine_kernel.py", "tests/test_devices.py", "tests/spec/test_runner_check.py",
    "tests/test_rejection_sampler.py", "tests/spec/test_static_runner.py",
]
MODEL_TESTS = ["tests/spec/test_model.py", "tests/spec/test_static_runner_model.py"]
SPEC_TASKS = ["person", "order", "tool_call", "movie", "person2", "order2"]  # at least 6 (see bench_speculative.TASKS)


@dataclass
class Step:
    name: str
    argv: list[str]
    timeout_s: int


@dataclass
class StepResult:
    name: str
    status: str  # "ok", "failed (exit N)", "timed out", "skipped"
    seconds: float = 0.0
    lines: list[str] = field(default_factory=list)  # the summary lines this step contributes


def plan(python: str, spec_tasks: list[str]) -> list[Step]:
    """The steps in order, with their time limits (seconds; 570 in all)."""
    pytest = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-rfE"]
    return [
        Step("tests", [*pytest, *CUDA_TESTS], 120),
        Step("model-tests", [*pytest, *MODEL_TESTS], 90),
        Step("kernel-dense", [python, str(BENCH / "bench_kernel.py"), "--drafts", "dense"], 40),
        Step("kernel-onehot", [python, str(BENCH / "bench_kernel.py"), "--drafts", "onehot"], 40),
        Step("runner", [python, str(BENCH / "bench_runner.py"), "--device", "cuda", "--rounds", "2", "--steps", "20", "--max-tokens", "64"], 60),
        Step("spec", [python, str(BENCH / "bench_speculative.py"), "--device", "cuda", "--temperatures", "0", "1",
                      "--configs", "none", "auto", "--tasks", *spec_tasks], 120),
        Step("batch", [python, str(BENCH / "bench_batch.py"), "--batch", "32", "--device", "cuda"], 60),
        Step("drift", [python, str(BENCH / "verify_cost.py"), "--devices", "cuda", "--dtypes", "float32", "bfloat16",
                       "float16", "--repeats", "5", "--sizes", "1", "2", "4", "8", "9"], 40),
    ]


# ---- reading each step's output (pure functions: tested on CPU) ----

_KERNEL_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+\|\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%")


def summarize_tests(out: str) -> list[str]:
    tail = [line for line in out.strip().splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    return [f"tests: {tail[-1].strip('= ') if tail else 'no pytest summary line'}"]


def summarize_kernel(out: str, drafts: str) -> list[str]:
    """Copy-bandwidth share at B = 256, k in {4, 8} and the slowest call at B <= 16, with the goals."""
    big, small = [], []
    for line in out.splitlines():
        m = _KERNEL_ROW.match(line)
        if not m:
            continue
        batch, k, _vocab, ms, _gbs, share = int(m[1]), int(m[2]), int(m[3]), float(m[4]), float(m[5]), float(m[6])
        if batch == 256 and k in (4, 8):
            big.append(share)
        if batch <= 16:
            small.append(ms * 1000)
    if not big or not small:
        return [f"kernel ({drafts}): no benchmark rows found"]
    bw_ok, us_ok = min(big) >= 70, max(small) <= 40
    return [
        f"kernel ({drafts}): {min(big):.0f}-{max(big):.0f}% of copy bandwidth at B=256, k in {{4,8}} (goal >= 70%: "
        f"{'met' if bw_ok else 'NOT met'}); slowest call at B<=16 {max(small):.0f} us (goal <= 40 us: {'met' if us_ok else 'NOT met'})"
    ]


def summarize_spec(out: str) -> list[str]:
    """The final table rows of bench_speculative (T, config, tok/s, vs none, vs xgrammar)."""
    rows = []
    for line in out.splitlines():
        m = re.match(r"^\s*([\d.]+)\s+(none|auto|transformers\+xgrammar)\s+\d+\s+([\d.]+)\s+.*?(\S+x|-)\s+(\S+x|-)\s*$", line)
        if m:
            rows.append(f"spec T={m[1]} {m[2]}: {m[3]} tok/s (vs none {m[4]}, vs transformers+xgrammar {m[5]})")
    return rows or ["spec: no result table found"]


def summarize_batch(out: str) -> list[str]:
    rows = [f"batch-32 {line.strip()}" for line in out.splitlines() if re.match(r"^T=[\d.]+: none", line)]
    return rows or ["batch: no result lines found"]


def summarize_runner(out: str) -> list[str]:
    """The final table of bench_runner (batch, runner, ms/step, speedup, engine tok/s, speedup)."""
    rows = [f"runner {' '.join(line.split())}" for line in out.splitlines() if re.match(r"^\s*\d+\s+(static|hf)\S*\s+[\d.]+\s", line)]
    return rows or ["runner: no result table found"]


def summarize_drift(out: str) -> list[str]:
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    return rows or ["drift: no table found"]


SUMMARIZERS = {
    "tests": summarize_tests,
    "model-tests": summarize_tests,
    "runner": summarize_runner,
    "kernel-dense": lambda out: summarize_kernel(out, "dense"),
    "kernel-onehot": lambda out: summarize_kernel(out, "one-hot"),
    "spec": summarize_spec,
    "batch": summarize_batch,
    "drift": summarize_drift,
}


def format_summary(results: list[StepResult], device_name: str, versions: str) -> str:
    total = sum(r.seconds for r in results)
    lines = [f"== gpu_check on {device_name} ({versions}), {total:.0f} s ==", ""]
    for r in results:
        lines.append(f"[{r.status}] {r.name} ({r.seconds:.0f} s)")
        lines.extend(f"    {line}" for line in r.lines)
    clean = all(r.status in ("ok", "skipped") for r in results)
    lines += ["", "all steps ran clean" if clean else "SOME STEPS FAILED (their output is above)"]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = [s.name for s in plan("python", SPEC_TASKS)]
    parser.add_argument("--skip", nargs="+", default=[], choices=names, metavar="STEP", help=f"steps to leave out: {', '.join(names)}")
    parser.add_argument("--tasks", nargs="+", default=SPEC_TASKS, help="bench_speculative tasks (at least 6 for the README numbers)")
    return parser


def run_step(step: Step) -> tuple[StepResult, str]:
    start = time.perf_counter()
    try:
        proc = subprocess.run(step.argv, cwd=ROOT, capture_output=True, text=True, timeout=step.timeout_s)
        out = proc.stdout + proc.stderr
        status = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        status = f"timed out after {step.timeout_s} s"
    result = StepResult(step.name, status, time.perf_counter() - start, SUMMARIZERS[step.name](out))
    return result, out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(f"error: gpu_check needs a CUDA GPU; torch {torch.__version__} sees none (run the CPU suite with: python3 -m pytest -q)", file=sys.stderr)
        return 2
    from constrained_spec.runner_check import versions

    results = []
    for step in plan(sys.executable, args.tasks):
        if step.name in args.skip:
            results.append(StepResult(step.name, "skipped"))
            continue
        print(f"-- {step.name}: {' '.join(step.argv[1:])}", flush=True)
        result, out = run_step(step)
        print(out, flush=True)
        results.append(result)
    print(format_summary(results, torch.cuda.get_device_name(), f"{versions()}, triton {_triton_version()}"))
    return 0 if all(r.status in ("ok", "skipped") for r in results) else 1


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except ImportError:
        return "absent"


if __name__ == "__main__":
    raise SystemExit(main())
