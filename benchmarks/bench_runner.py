"""The static-cache runner vs the transformers (HF) runner on the default model, measured in one run.

Two measurements, each at batch 1 and batch 8, with the configurations interleaved round by round
(who goes first alternates) so load from other processes hits them alike (ratios are medians of
per-round ratios):
- step: one `score` of 5 tokens per request (the last token + 4 drafts) and a rollback of 4, on
  prompts of ~40 tokens: the runner alone.
- engine: greedy JSON generation (person schema, default proposers) for B requests at once through
  the whole engine, tokens/s.

    python benchmarks/bench_runner.py                 # static vs hf
    python benchmarks/bench_runner.py --compile       # + static with torch.compile (inductor; one
                                                      #   bucket of width 8, compiled once, slow)
    python benchmarks/bench_runner.py --smoke         # tiny, steps only, for the test
    python benchmarks/bench_runner.py --device cuda   # static (CUDA graphs) vs static-eager vs hf
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

PEOPLE = [("Maria", 41, "Valencia"), ("Kenji", 57, "Osaka"), ("Ada", 36, "London"), ("Olu", 29, "Lagos"),
          ("Ines", 63, "Porto"), ("Raj", 45, "Pune"), ("Lena", 22, "Graz"), ("Tom", 70, "Perth")]
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"}}, "required": ["name", "age", "city"]}


def prompts(tokenizer) -> list[list[int]]:
    out = []
    for name, age, city in PEOPLE:
        messages = [{"role": "user", "content": f"Extract the person as JSON with name, age and city. Text: {name} is {age} and lives in {city}."}]
        out.append(list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]))
    return out


def make_runner(name: str, model):
    from constrained_spec.runners import HFRunner
    from constrained_spec.static_runner import StaticRunner

    if name == "hf":
        return HFRunner(model)
    if name == "static+compile":
        return StaticRunner(model, compile=True, buckets=(8,))
    if name == "static-eager":
        return StaticRunner(model, cuda_graphs=False)
    return StaticRunner(model)  # the default: CUDA graphs on CUDA, eager on CPU


def time_steps(runner, batch: list[list[int]], steps: int, tag: str) -> float:
    """ms per `score` of [last + 4 drafts] for every request, each followed by a rollback of 4."""
    ids = [f"{tag}-{i}" for i in range(len(batch))]
    for rid, p in zip(ids, batch):
        runner.start(rid, p[:-1])
    runner.score([(rid, [p[-1]]) for rid, p in zip(ids, batch)])  # prefill (not timed)
    start = time.perf_counter()
    for s in range(steps):
        runner.score([(rid, [100 + s, 200, 300, 400, 500]) for rid in ids])
        for rid in ids:
            runner.rollback(rid, 4)
    if torch.cuda.is_available():
        torch.cuda.synchronize()  # CUDA work is asynchronous: wait for the last step
    elapsed = (time.perf_counter() - start) / steps * 1000
    for rid in ids:
        runner.release(rid)
    return elapsed


def time_engine(engine, batch: list[list[int]], grammar, max_tokens: int) -> tuple[float, list]:
    """tokens/s of greedy generation for the whole batch at once, and the outputs."""
    from constrained_spec.sampling import SamplingParams

    start = time.perf_counter()
    outs = engine.generate(batch, SamplingParams(temperature=0, max_tokens=max_tokens), grammar)
    return sum(len(o.token_ids) for o in outs) / (time.perf_counter() - start), outs


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10, help="timed score steps per round")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--compile", action="store_true", help="also static with torch.compile (inductor) on the step measurement")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--device", default="cpu", help="cpu (default), auto, cuda or cuda:N; on CUDA static-eager is added")
    parser.add_argument("--no-engine", action="store_true", help="only the step measurement")
    parser.add_argument("--smoke", action="store_true", help="1 round, 1 step, batches 1 and 2, no warm-up, no engine measurement")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.smoke:
        args.rounds, args.steps, args.max_tokens, args.batches, args.no_engine = 1, 1, 8, [1, 2], True
    if min(args.rounds, args.steps, args.max_tokens, *args.batches) < 1 or max(args.batches) > len(PEOPLE):
        parser.error(f"--rounds/--steps/--max-tokens must be >= 1 and batches in 1..{len(PEOPLE)}")

    from constrained_spec.engine_setup import build_engine, make_vocabulary
    from constrained_spec.grammar import compile_json_schema
    from constrained_spec.models import load_model

    from constrained_spec.devices import DeviceError, resolve_device

    try:
        device = resolve_device(args.device)
    except DeviceError as exc:
        parser.error(str(exc))
    loaded = load_model(verbose=False, device=device)
    vocabulary = make_vocabulary(loaded)
    grammar = None if args.no_engine else compile_json_schema(PERSON, vocabulary)
    all_prompts = prompts(loaded.tokenizer)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"model {loaded.name}, torch {torch.__version__}, threads {torch.get_num_threads()}, load average {load:.1f}, "
          f"{args.rounds} rounds", flush=True)
    names = ["static", "hf"] + (["static-eager"] if device.type == "cuda" else []) + (["static+compile"] if args.compile else [])
    runners = {}
    for name in names:
        start = time.perf_counter()
        runners[name] = make_runner(name, loaded.model)
        print(f"  {name}: ready in {time.perf_counter() - start:.1f} s", flush=True)
    engines = {} if args.no_engine else {name: build_engine(loaded, draft="auto", vocabulary=vocabulary, runner=name) for name in ("static", "hf")}
    for b in [] if args.smoke else args.batches:  # first use of each shape (allocations, kernel choices) is not timed
        for name in names:
            time_steps(runners[name], all_prompts[:b], 1, "warm")
    step_ms = {(n, b): [] for n in names for b in args.batches}
    tok_s = {(n, b): [] for n in engines for b in args.batches}
    for r in range(args.rounds):
        for b in args.batches:
            batch = all_prompts[:b]
            order = names if r % 2 == 0 else names[::-1]  # alternate who goes first: load drifts
            for name in order:
                step_ms[name, b].append(time_steps(runners[name], batch, args.steps, f"r{r}"))
            outputs = {}
            for name in [n for n in order if n in engines]:
                speed, outputs[name] = time_engine(engines[name], batch, grammar, args.max_tokens)
                tok_s[name, b].append(speed)
            same = all(a.token_ids == h.token_ids for a, h in zip(outputs.get("static", []), outputs.get("hf", [])))
            engine_part = (" | " + ", ".join(f"{n} {tok_s[n, b][-1]:.1f} tok/s" for n in engines) + f" | same tokens: {same}") if engines else ""
            print(f"  round {r + 1} batch {b}: " + ", ".join(f"{n} {step_ms[n, b][-1]:.1f} ms/step" for n in names) + engine_part, flush=True)
            if not same:
                raise SystemExit("error: static and hf runners produced different greedy outputs")

    def ratio(values: dict, a: str, b: str, batch: int, invert: bool = False) -> float:
        pairs = [(x / y if not invert else y / x) for x, y in zip(values[a, batch], values[b, batch])]
        return statistics.median(pairs)

    print(f"\n{'batch':>5}  {'runner':<15} {'ms/step':>8} {'speedup vs hf':>14} {'engine tok/s':>13} {'speedup vs hf':>14}")
    result = {}
    for b in args.batches:
        for name in names:
            step = statistics.median(step_ms[name, b])
            step_x = ratio(step_ms, name, "hf", b, invert=True)
            engine = f"{statistics.median(tok_s[name, b]):13.1f}" if name in engines else f"{'-':>13}"
            engine_x = f"{ratio(tok_s, name, 'hf', b):13.2f}x" if name in engines else f"{'-':>14}"
            print(f"{b:>5}  {name:<15} {step:8.1f} {step_x:13.2f}x {engine} {engine_x}")
            result[name, b] = (step, step_x)
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
