"""What one verification forward costs, and whether its numbers depend on how many rows it scores.

Speculation pays when scoring k + 1 tokens in one forward costs little more than scoring 1
(the speedup model in `constrained_spec/spec_stats.py` takes this curve), and it is *exact* only
if the target's logits for a token do not depend on how many tokens the forward scored with it:
otherwise the "target distribution" would change with the draft length. For each dtype this
prints the cost of scoring n new tokens (relative to 1, median of `--repeats`, interleaved) and
whether logits scored n at a time are bit-identical to those scored one at a time.

    python benchmarks/verify_cost.py                      # float32 and bfloat16, default model
    python benchmarks/verify_cost.py --smoke              # float32, n in {1, 2}, 2 repeats
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch


def cost_curve(model, context: torch.Tensor, sizes: list[int], repeats: int) -> dict[int, float]:
    """Median seconds to score n new tokens after `context`, per n (runs interleaved)."""
    from transformers import DynamicCache

    times: dict[int, list[float]] = {n: [] for n in sizes}
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        cache = DynamicCache()
        model(input_ids=context, cache=cache, use_cache=True, logits_to_keep=1)
        for _ in range(repeats):
            for n in sizes:
                new = torch.randint(100, 40000, (1, n), generator=generator)
                start = time.perf_counter()
                model(input_ids=new, cache=cache, use_cache=True, logits_to_keep=n)
                times[n].append(time.perf_counter() - start)
                cache.crop(-n)
    return {n: statistics.median(t) for n, t in times.items()}


def row_invariance(model, context: torch.Tensor, block: int, length: int = 24) -> float:
    """Max |logit difference| between scoring `length` tokens `block` at a time and one at a time."""
    from transformers import DynamicCache

    tokens = torch.randint(100, 40000, (1, length), generator=torch.Generator().manual_seed(2))
    rows = {}
    with torch.no_grad():
        for size in (1, block):
            cache = DynamicCache()
            model(input_ids=context, cache=cache, use_cache=True, logits_to_keep=1)
            parts = [model(input_ids=tokens[:, s : s + size], cache=cache, use_cache=True, logits_to_keep=size).logits[0] for s in range(0, length, size)]
            rows[size] = torch.cat(parts).float()
    return float((rows[block] - rows[1]).abs().max())


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 3, 4, 5, 8, 9, 16])
    parser.add_argument("--context", type=int, default=200, help="tokens already in the KV cache")
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--smoke", action="store_true", help="float32, sizes 1 and 2, 2 repeats (for the test)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.dtypes, args.sizes, args.repeats, args.context = ["float32"], [1, 2], 2, 32
    if args.threads:
        torch.set_num_threads(args.threads)
    if 1 not in args.sizes or min(args.sizes) < 1:
        parser.error(f"--sizes must be >= 1 and include 1 (costs are relative to scoring one token), got {args.sizes}")
    if args.repeats < 1 or args.context < 1:
        parser.error(f"--repeats and --context must be >= 1, got {args.repeats} and {args.context}")
    from constrained_spec.models import load_model

    context = torch.randint(100, 40000, (1, args.context), generator=torch.Generator().manual_seed(0))
    results = {}
    print(f"torch threads {torch.get_num_threads()}, context {args.context} tokens, median of {args.repeats}")
    for name in args.dtypes:
        model = load_model(dtype=getattr(torch, name), verbose=False).model
        curve = cost_curve(model, context, sorted(set(args.sizes)), args.repeats)
        drift = {n: row_invariance(model, context, n) for n in sorted(set(args.sizes)) if n > 1}
        results[name] = (curve, drift)
        print(f"\n{name}: one token {curve[1] * 1000:.1f} ms")
        print(f"  {'n':>3} {'ms':>7} {'vs 1':>6}  {'max |logit diff| vs one at a time':>34}")
        for n, seconds in curve.items():
            diff = "-" if n == 1 else ("0 (bit-identical)" if drift[n] == 0 else f"{drift[n]:.2g}")
            print(f"  {n:>3} {seconds * 1000:>7.1f} {seconds / curve[1]:>5.2f}x  {diff:>34}")
        del model
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
