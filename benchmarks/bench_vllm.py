"""Our plugin inside vLLM vs vLLM's own structured outputs and speculation, on the JSON tasks of
bench_speculative.py (the default model, CPU, one request at a time, T = 0 and T = 1).

Configurations (one vLLM engine each, started in the vLLM Python, measured in one run):
- xgrammar:                   vLLM + xgrammar (compact JSON, like ours)
- xgrammar+ngram:             vLLM + xgrammar + vLLM's n-gram speculation (prompt lookup 1..3 tokens)
- constrained_spec:           vLLM + our structured-output backend
- constrained_spec+proposers: vLLM + our backend + our proposers (the `auto` chain, custom_class)

    python benchmarks/bench_vllm.py                 # 12 tasks x T in {0, 1}
    python benchmarks/bench_vllm.py --tasks person order tool_call movie --temperatures 0 1
    python benchmarks/bench_vllm.py --tensor-parallel-size 3   # each engine split over 3 ranks (SmolLM2: 9 heads)

Every schema is compiled in an untimed one-token warm-up request first. Prints tokens/s, the mean accepted length (tokens per target forward: 1 + accepted drafts per
draft step, from vLLM's counters), valid outputs (schema-valid JSON that finished) and the
speed ratio against vLLM + xgrammar + ngram. Engines run one after another, so load from other
processes hits them at different times: on a shared machine compare ratios across repeated runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_speculative import TASKS  # noqa: E402

CONFIGS = ["xgrammar", "xgrammar+ngram", "constrained_spec", "constrained_spec+proposers"]
BASELINE = "xgrammar+ngram"
NUM_SPECULATIVE_TOKENS = 4


def engine_options(config: str, model: str, tensor_parallel_size: int = 1) -> dict:
    from constrained_spec.vllm.proposer import PROPOSER_PATH

    options: dict = dict(model=model, dtype="float32", max_model_len=2048, enforce_eager=True, seed=0, disable_log_stats=False)
    if tensor_parallel_size > 1:  # worker processes, one per rank (the proposer runs in each)
        options.update(tensor_parallel_size=tensor_parallel_size, distributed_executor_backend="mp")
    if config.startswith("xgrammar"):
        options["structured_outputs_config"] = {"backend": "xgrammar", "disable_any_whitespace": True}
    else:
        options["structured_outputs_config"] = {"backend": "constrained_spec"}
    if config == "xgrammar+ngram":
        options["speculative_config"] = {"method": "ngram", "num_speculative_tokens": NUM_SPECULATIVE_TOKENS, "prompt_lookup_min": 1, "prompt_lookup_max": 3}
    if config == "constrained_spec+proposers":
        options["speculative_config"] = {"method": "custom_class", "model": PROPOSER_PATH, "num_speculative_tokens": NUM_SPECULATIVE_TOKENS}
    return options


def worker(config: str, model: str, task_names: list[str], temperatures: list[float], max_tokens: int, tensor_parallel_size: int = 1) -> dict:
    """In the vLLM Python: one engine, every task at every temperature, one request at a time."""
    import jsonschema
    from vllm import LLM, SamplingParams
    from vllm.plugins import load_general_plugins
    from vllm.sampling_params import StructuredOutputsParams

    load_general_plugins()
    llm = LLM(**engine_options(config, model, tensor_parallel_size))
    tasks = [t for t in TASKS if t[0] in task_names]
    # Warm-up: one token per task compiles every schema first (xgrammar compiles in milliseconds,
    # ours in the frontend, the scheduler and the proposer's worker), so the timed runs measure decoding.
    for _, text, schema in tasks:
        warm = SamplingParams(max_tokens=1, structured_outputs=StructuredOutputsParams(json=schema))
        llm.chat([{"role": "user", "content": text}], warm, use_tqdm=False)
    results = {}
    for temperature in temperatures:
        before = _counters(llm)
        tokens = valid = 0
        seconds = 0.0
        for i, (_, text, schema) in enumerate(tasks):
            params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=1000 + i, structured_outputs=StructuredOutputsParams(json=schema))
            start = time.perf_counter()
            (out,) = llm.chat([{"role": "user", "content": text}], params, use_tqdm=False)
            seconds += time.perf_counter() - start
            completion = out.outputs[0]
            tokens += len(completion.token_ids)
            try:
                jsonschema.validate(json.loads(completion.text), schema)
                valid += completion.finish_reason == "stop"
            except (ValueError, jsonschema.ValidationError):
                pass
        after = _counters(llm)
        drafts = after[0] - before[0]
        accepted = after[1] - before[1]
        results[str(temperature)] = dict(tokens=tokens, seconds=seconds, valid=valid, requests=len(tasks), drafts=drafts, accepted=accepted)
    return results


def _counters(llm) -> tuple[int, int]:
    metrics = {m.name: getattr(m, "value", None) for m in llm.get_metrics()}
    return int(metrics.get("vllm:spec_decode_num_drafts") or 0), int(metrics.get("vllm:spec_decode_num_accepted_tokens") or 0)


def mean_accepted(r: dict) -> float:
    """Tokens per target forward: draft steps emit 1 + accepted tokens, the others 1."""
    forwards = r["tokens"] - r["accepted"]
    return r["tokens"] / forwards if forwards else 0.0


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=CONFIGS, choices=CONFIGS)
    parser.add_argument("--tasks", nargs="+", default=[t[0] for t in TASKS], help="subset of bench_speculative's task names")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--model", default=None, help="a local HF model folder (default: SmolLM2-135M-Instruct)")
    parser.add_argument("--tensor-parallel-size", type=int, default=1, help="ranks per engine; the cores are split between them")
    parser.add_argument("--threads", type=int, default=2, help="cores the engine uses (all ranks together)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: run one config in the vLLM Python
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(args.worker, args.model, args.tasks, args.temperatures, args.max_tokens, args.tensor_parallel_size)), flush=True)
        return {}
    unknown = set(args.tasks) - {t[0] for t in TASKS}
    if unknown:
        parser.error(f"unknown tasks {sorted(unknown)}")
    from constrained_spec.vllm.runtime import model_folder, vllm_cwd, vllm_env, vllm_python

    model = str(model_folder(args.model))
    results = {}
    for config in args.configs:
        print(f"{config}: starting a vLLM engine ...", file=sys.stderr, flush=True)
        cmd = [vllm_python(), os.path.abspath(__file__), "--worker", config, "--model", model, "--max-tokens", str(args.max_tokens),
               "--tasks", *args.tasks, "--temperatures", *map(str, args.temperatures),
               "--tensor-parallel-size", str(args.tensor_parallel_size)]  # fmt: skip
        env = vllm_env(threads=args.threads, ranks=args.tensor_parallel_size)
        done = subprocess.run(cmd, env=env, cwd=vllm_cwd(), capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode or not lines:
            sys.exit(f"error: the {config} engine failed:\n{done.stderr[-3000:]}")
        results[config] = json.loads(lines[-1][len("RESULT ") :])
    print_table(results, args.temperatures)
    return results


def print_table(results: dict, temperatures: list[float]) -> None:
    print(f"\n{'T':>3}  {'configuration':<28} {'tokens':>6} {'tok/s':>6} {'mean acc. len':>13} {'valid':>6} {'vs ' + BASELINE:>18}")
    for temperature in temperatures:
        base = results.get(BASELINE, {}).get(str(temperature))
        for config, per_t in results.items():
            r = per_t[str(temperature)]
            tok_s = r["tokens"] / r["seconds"] if r["seconds"] else 0.0
            ratio = f"{tok_s / (base['tokens'] / base['seconds']):.2f}x" if base and base["seconds"] else "-"
            print(f"{temperature:>3g}  {config:<28} {r['tokens']:>6} {tok_s:>6.1f} {mean_accepted(r):>13.2f} {r['valid']:>3}/{r['requests']:<2} {ratio:>18}")


if __name__ == "__main__":
    main()
