"""What one verification forward costs, and how far its logits drift, per device and dtype.

Speculation pays when scoring k + 1 tokens in one forward costs little more than scoring 1
(the speedup model in `constrained_spec/spec_stats.py` takes this curve), and it is *exact* only
if the target's logits for a token do not depend on how many tokens the forward scored with it.
Floating point makes them depend a little; the question is whether more than plain decoding
already varies with the batch it runs in. For each device and dtype this prints:

- the cost of scoring n new tokens (relative to 1, median of `--repeats`, interleaved);
- k-row drift: max |logit difference| between scoring k + 1 tokens in one forward (what
  verification does) and one at a time, through the engine's runner (k = the largest --sizes - 1);
- batch drift: max |logit difference| of one request decoded alone vs inside a ragged batch of
  `--batch` requests (what plain, non-speculative decoding does under load);
- whether speculation is offered in that dtype: only where k-row drift <= batch drift
  (`constrained_spec/devices.py` holds the measured table and enforces it at run time).

    python benchmarks/verify_cost.py                          # cpu (and cuda when present); float32, bfloat16
    python benchmarks/verify_cost.py --devices cuda --dtypes float32 bfloat16 float16
    python benchmarks/verify_cost.py --smoke                  # float32, n in {1, 2}, 2 repeats
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cost_curve(model, context: torch.Tensor, sizes: list[int], repeats: int) -> dict[int, float]:
    """Median seconds to score n new tokens after `context`, per n (runs interleaved)."""
    from transformers import DynamicCache

    from constrained_spec.runner_check import cache_keyword

    keyword = cache_keyword(model)
    device = next(model.parameters()).device
    times: dict[int, list[float]] = {n: [] for n in sizes}
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        cache = DynamicCache()
        model(input_ids=context.to(device), use_cache=True, logits_to_keep=1, **{keyword: cache})
        for _ in range(repeats):
            for n in sizes:
                new = torch.randint(100, 40000, (1, n), generator=generator).to(device)
                _sync(device)
                start = time.perf_counter()
                model(input_ids=new, use_cache=True, logits_to_keep=n, **{keyword: cache})
                _sync(device)
                times[n].append(time.perf_counter() - start)
                cache.crop(-n)
    return {n: statistics.median(t) for n, t in times.items()}


def _tokens(count: int, seed: int) -> list[int]:
    return torch.randint(100, 40000, (count,), generator=torch.Generator().manual_seed(seed)).tolist()


def make_runner(model, name: str):
    """The engine's runner for `model` (engine_setup.make_runner), without prefix reuse."""
    from constrained_spec.engine_setup import make_runner as engine_runner

    runner = engine_runner(model, name)
    runner.prefix_cache_size = 0  # both runners read it when they would save a prompt
    return runner


def k_row_drift(model, context: list[int], k: int, length: int = 24, runner: str = "auto") -> float:
    """Max |logit diff| between scoring `length` tokens k + 1 at a time and one at a time, through
    the engine's runner (the calls the speculative loop makes)."""
    tokens = _tokens(length, 2)
    rows = {}
    for size in (1, k + 1):
        runner_ = make_runner(model, runner)
        runner_.start("r", context)
        rows[size] = torch.cat([runner_.score([("r", tokens[s : s + size])])[0].cpu() for s in range(0, length, size)])
    return float((rows[k + 1] - rows[1]).abs().max())


def batch_drift(model, context: list[int], batch: int, length: int = 12, runner: str = "auto") -> float:
    """Max |logit diff| of one request decoded token by token alone vs inside a ragged batch of
    `batch` requests (other prompts of other lengths), through the engine's runner."""
    tokens = _tokens(length, 3)
    others = [_tokens(len(context) // (i + 2) + 1, 10 + i) for i in range(batch - 1)]
    alone, together = make_runner(model, runner), make_runner(model, runner)
    alone.start("r", context)
    together.start("r", context)
    for i, prompt in enumerate(others):
        together.start(f"o{i}", prompt)
    worst = 0.0
    with torch.no_grad():
        for t, token in enumerate(tokens):
            row_alone = alone.score([("r", [token])])[0].cpu()
            rows = together.score([("r", [token])] + [(f"o{i}", [tokens[(t + i + 1) % length]]) for i in range(len(others))])
            worst = max(worst, float((rows[0].cpu() - row_alone).abs().max()))
    return worst


def measure(device: torch.device, dtype_name: str, args: argparse.Namespace) -> dict:
    from constrained_spec.devices import speculation_dtype_check
    from constrained_spec.models import load_model

    model = load_model(dtype=dtype_name, device=device, verbose=False).model
    context = _tokens(args.context, 0)
    curve = cost_curve(model, torch.tensor([context]), sorted(set(args.sizes)), args.repeats)
    k = max(args.sizes) - 1
    drift_k = k_row_drift(model, context, max(k, 1), length=args.length, runner=args.runner)
    drift_batch = batch_drift(model, context, args.batch, length=max(args.length // 2, 1), runner=args.runner)
    del model
    offered = drift_k <= drift_batch
    recorded = speculation_dtype_check(device, getattr(torch, dtype_name))
    return dict(curve=curve, k=max(k, 1), drift_k=drift_k, drift_batch=drift_batch, offered=offered, recorded=recorded)


def format_table(results: dict[tuple[str, str], dict], batch: int) -> str:
    """The drift table (one row per device and dtype), as in the README."""
    lines = [
        f"| device | dtype | 1 token (ms) | k-row drift (k+1 rows vs 1) | batch drift (1 vs {batch} requests) | speculation |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for (device, dtype), r in results.items():
        verdict = "offered" if r["offered"] else "refused"
        lines.append(
            f"| {device} | {dtype} | {r['curve'][1] * 1000:.1f} | {r['drift_k']:.3g} (k = {r['k']}) | {r['drift_batch']:.3g} | {verdict} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="+", default=None, help="default: cpu, and cuda when present")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 3, 4, 5, 8, 9, 16])
    parser.add_argument("--context", type=int, default=200, help="tokens already in the KV cache")
    parser.add_argument("--batch", type=int, default=4, help="requests in the batch-drift measurement")
    parser.add_argument("--runner", default="auto", choices=["auto", "static", "hf"], help="the model runner (as the engine's)")
    parser.add_argument("--length", type=int, default=24, help="tokens scored in the k-row drift measurement (half that for batch drift)")
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--smoke", action="store_true", help="cpu float32, sizes 1 and 2, 2 repeats (for the test)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.devices, args.dtypes, args.sizes, args.repeats, args.context, args.length = ["cpu"], ["float32"], [1, 2], 2, 16, 6
    if args.threads:
        torch.set_num_threads(args.threads)
    if 1 not in args.sizes or min(args.sizes) < 1:
        parser.error(f"--sizes must be >= 1 and include 1 (costs are relative to scoring one token), got {args.sizes}")
    if args.repeats < 1 or args.context < 1 or args.length < 2 or args.batch < 2:
        parser.error(f"--repeats and --context must be >= 1, --length and --batch >= 2, got {args.repeats}, {args.context}, {args.length}, {args.batch}")
    from constrained_spec.devices import DeviceError, resolve_device

    try:
        devices = [resolve_device(d) for d in (args.devices or ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))]
    except DeviceError as exc:
        parser.error(str(exc))
    results = {}
    print(f"torch threads {torch.get_num_threads()}, context {args.context} tokens, median of {args.repeats}")
    for device in devices:
        for name in args.dtypes:
            r = results[(str(device), name)] = measure(device, name, args)
            curve = r["curve"]
            print(f"\n{device} {name}: one token {curve[1] * 1000:.1f} ms")
            print(f"  {'n':>3} {'ms':>7} {'vs 1':>6}")
            for n, seconds in curve.items():
                print(f"  {n:>3} {seconds * 1000:>7.1f} {seconds / curve[1]:>5.2f}x")
            print(f"  k-row drift {r['drift_k']:.3g} (k = {r['k']}), batch drift {r['drift_batch']:.3g} -> speculation "
                  f"{'offered' if r['offered'] else 'refused'} (devices.py table: {r['recorded'] or 'offered'})")
    print("\n" + format_table(results, args.batch))
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
