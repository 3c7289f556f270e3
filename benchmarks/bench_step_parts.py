"""Where one decoding step's time goes: the static runner's forward (CUDA graph replay, eager),
the work around it in `score` (host-to-device copies, logits), and one bare kernel launch (the
floor no step goes below on this machine). Medians of timed calls, each between two syncs.

    python benchmarks/bench_step_parts.py --device cuda                    # the default model
    python benchmarks/bench_step_parts.py --device cuda --random-weights   # its architecture, random
                                                                           # weights (no model files)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

SMOLLM2_135M = dict(  # the default model's architecture (config of SmolLM2-135M-Instruct)
    vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
    num_key_value_heads=3, max_position_embeddings=8192, rms_norm_eps=1e-5, tie_word_embeddings=True, rope_theta=100000.0,
)
SHAPES = [(1, 1), (1, 8), (8, 8), (32, 1), (32, 4)]  # (requests, tokens fed per request)


def median_ms(fn: Callable[[], object], repeats: int, sync: Callable[[], None]) -> float:
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def load(args: argparse.Namespace, device: torch.device):
    if args.random_weights:
        import transformers

        torch.manual_seed(0)
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMOLLM2_135M)).eval().to(device)
    from constrained_spec.models import load_model

    return load_model(verbose=False, device=device).model


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda or cuda:N")
    parser.add_argument("--random-weights", action="store_true", help="the default model's architecture with random weights")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--context", type=int, default=100, help="tokens already in each request's cache")
    args = parser.parse_args(argv)
    from constrained_spec.devices import DeviceError, resolve_device
    from constrained_spec.static_runner import StaticRunner

    try:
        device = resolve_device(args.device)
    except DeviceError as exc:
        parser.error(str(exc))
    cuda = device.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    model = load(args, device)
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    print(f"{'random-weight ' if args.random_weights else ''}SmolLM2-135M architecture on {name}, torch {torch.__version__}, "
          f"context {args.context}, median of {args.repeats}")
    one = torch.zeros(1, device=device)
    print(f"one bare kernel launch (add_ on 1 element): {median_ms(lambda: one.add_(1), args.repeats, sync):.3f} ms")
    print(f"one host-to-device copy of 8 ids: {median_ms(lambda: torch.tensor([1] * 8).to(device), args.repeats, sync):.3f} ms")
    modes = {"eager": StaticRunner(model, cuda_graphs=False, slots=32, capacity=1024)}
    if cuda:
        modes["graphs"] = StaticRunner(model, slots=32, capacity=1024)
    print(f"\n{'requests':>8} {'fed':>4} | {'mode':<7} {'score ms':>9} {'forward ms':>11} {'logits ms':>10}")
    results = {}
    for requests, fed in SHAPES:
        for mode, runner in modes.items():
            ids = [f"{mode}-{requests}-{fed}-{i}" for i in range(requests)]
            for i, rid in enumerate(ids):
                runner.start(rid, [(7 * i + j) % 1000 + 1 for j in range(args.context)])
            runner.score([(rid, [5]) for rid in ids])  # prefill

            def step() -> None:
                runner.score([(rid, [11] * fed) for rid in ids])
                for rid in ids:
                    runner.rollback(rid, fed)

            score_ms = median_ms(step, args.repeats, sync)
            lengths = torch.tensor([[runner.cached_length(rid)] for rid in ids])
            positions = (lengths + torch.arange(fed)).to(device)
            tokens = torch.full((requests, fed), 11, device=device)
            window = int(positions.max()) + 1
            forward_ms = median_ms(lambda: runner.net.forward(tokens, positions, 0, window), args.repeats, sync)
            if mode == "graphs":  # the replay alone, at the padded shape the runner uses
                high = 1 << max(requests - 1, 0).bit_length()
                width = next(b for b in runner.buckets if b >= fed)
                pad_ids = torch.full((high, width), 11, device=device)
                pad_pos = torch.zeros(high, width, dtype=torch.long, device=device)
                pad_pos[:requests, :fed] = positions
                graphs, win, cache = runner._graphs, runner.graph_window(window), runner.cache_key()
                forward_ms = median_ms(lambda: graphs(pad_ids, pad_pos, win, cache), args.repeats, sync)
            hidden = torch.zeros(requests * fed, runner.net.embed.shape[1], device=device)
            logits_ms = median_ms(lambda: runner.net.logits(hidden), args.repeats, sync)
            for rid in ids:
                runner.release(rid)
            results[requests, fed, mode] = (score_ms, forward_ms, logits_ms)
            print(f"{requests:>8} {fed:>4} | {mode:<7} {score_ms:9.3f} {forward_ms:11.3f} {logits_ms:10.3f}", flush=True)
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
