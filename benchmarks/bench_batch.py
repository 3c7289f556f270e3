"""Batch throughput: N JSON requests decoded together, plain ("none") vs speculative ("auto").

The default model on the default device (CUDA when present), the tasks of bench_speculative.py
repeated to fill the batch, one Engine.generate call per configuration and temperature. Prints
total generated tokens / wall time and the ratio auto / none measured in the same run.

    python benchmarks/bench_batch.py                    # batch 32, T in {0, 1}, 128 tokens
    python benchmarks/bench_batch.py --batch 8 --device cpu
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_speculative import TASKS, prompt_ids  # noqa: E402


def throughput(engine, loaded, vocabulary, batch: int, temperature: float, max_tokens: int) -> tuple[int, float]:
    """(tokens generated, seconds) for `batch` requests in one generate call."""
    from constrained_spec.grammar import compile_json_schema
    from constrained_spec.sampling import SamplingParams

    tasks = [TASKS[i % len(TASKS)] for i in range(batch)]
    prompts = [prompt_ids(loaded.tokenizer, text) for _, text, _ in tasks]
    grammars = [compile_json_schema(schema, vocabulary) for _, _, schema in tasks]
    params = [SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=i) for i in range(batch)]
    start = time.perf_counter()
    outs = engine.generate(prompts, params, grammars)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return sum(len(o.token_ids) for o in outs), time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda or cuda:N")
    args = parser.parse_args(argv)
    if args.batch < 1 or args.max_tokens < 1:
        parser.error(f"--batch and --max-tokens must be >= 1, got {args.batch} and {args.max_tokens}")
    from constrained_spec.devices import DeviceError, resolve_device
    from constrained_spec.engine_setup import build_engine, make_vocabulary
    from constrained_spec.models import load_model

    try:
        device = resolve_device(args.device)
    except DeviceError as exc:
        parser.error(str(exc))
    loaded = load_model(verbose=False, device=device)
    vocabulary = make_vocabulary(loaded)
    throughput(build_engine(loaded, draft="none", vocabulary=vocabulary), loaded, vocabulary, 2, 0.0, 8)  # warm up
    results = {}
    print(f"batch {args.batch}, max_tokens {args.max_tokens}, {device}")
    for temperature in args.temperatures:
        for draft in ("none", "auto"):
            engine = build_engine(loaded, draft=draft, vocabulary=vocabulary)
            throughput(engine, loaded, vocabulary, args.batch, temperature, 8)  # untimed: first uses (kernel variants, graph shapes)
            tokens, seconds = throughput(engine, loaded, vocabulary, args.batch, temperature, args.max_tokens)
            results[(temperature, draft)] = tokens / seconds
        ratio = results[(temperature, "auto")] / results[(temperature, "none")]
        print(f"T={temperature:g}: none {results[(temperature, 'none')]:.1f} tok/s, auto {results[(temperature, 'auto')]:.1f} tok/s ({ratio:.2f}x)")
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
