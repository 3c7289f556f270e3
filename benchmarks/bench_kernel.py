"""Benchmark: the fused Triton verification step against unfused torch pipelines.

One command (GPU):   python benchmarks/bench_kernel.py
Tiny CPU check:      python benchmarks/bench_kernel.py --smoke   (Triton under the interpreter)

For B in {1, 16, 256}, k in {1, 4, 8}, V in {49152, 128256} it prints, in one run on one device:
- the device's copy bandwidth (read + write of a large buffer, measured first);
- the kernel's time and effective bandwidth: the bytes any exact implementation must read once
  (every logits row, the bitmask, the uniforms, one Exp(1) row and, for dense drafts, one q row
  per request: only q(x) is needed elsewhere) / time, and that as a share of copy bandwidth;
- the unfused vectorized pipeline (mask, softmax, batched accept test, residual draw in torch);
- the torch backend (mask, softmax, the reference sampler's per-request loop), for B <= 16;
- speedup ratios of the kernel over both. Every configuration is also checked token for token.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton

from constrained_spec.bitmask import pack_allowed
from constrained_spec.kernels import rejection_sample_logits
from constrained_spec.kernels.rejection_torch import target_probs
from constrained_spec.rejection import SamplerRandomness, draw_randomness


def unfused_vectorized(logits, bitmask, temperature, drafts, cu, q, rnd: SamplerRandomness, max_k: int):
    """Mask + softmax over every row, then the rejection rule as batched torch ops (no Python loop)."""
    probs = target_probs(logits, bitmask, temperature, cu)  # [N, V]
    batch, num_drafts = cu.numel() - 1, drafts.numel()
    ks = cu[1:] - cu[:-1]  # [B]
    req = torch.repeat_interleave(torch.arange(batch, device=cu.device), ks, output_size=num_drafts)  # [D]
    pos = torch.arange(num_drafts, device=cu.device) - cu[req]  # [D]
    rows = cu[req] + req + pos  # [D]
    px = probs[rows, drafts]
    qx = q[torch.arange(num_drafts, device=cu.device), drafts] if q is not None else torch.ones_like(px)
    greedy = temperature == 0  # [B]
    accept = torch.where(greedy[req], probs[rows].argmax(-1) == drafts, (rnd.uniforms * qx < px) & (qx > 0))
    grid = torch.ones(batch, max_k, dtype=torch.bool, device=cu.device)
    grid[req, pos] = accept
    num_acc = torch.minimum(grid.int().cumprod(1).sum(1), ks)  # [B]
    emit = cu[:-1] + torch.arange(batch, device=cu.device) + num_acc
    p_emit = probs[emit]  # [B, V]
    rejected = num_acc < ks
    draft_idx = (cu[:-1] + num_acc).clamp(max=max(num_drafts - 1, 0))
    if q is not None:
        q_emit = q[draft_idx] * rejected[:, None]
    else:
        q_emit = torch.zeros_like(p_emit)
        q_emit[rejected, drafts[draft_idx][rejected]] = 1.0
    w = (p_emit - q_emit).clamp_min(0)
    w = torch.where(w.sum(-1, keepdim=True) > 0, w, p_emit)
    tok = torch.where(greedy, p_emit.argmax(-1), (w / rnd.exponentials.clamp_min(torch.finfo(torch.float32).tiny)).argmax(-1))
    out = torch.full((batch, max_k + 1), -1, dtype=torch.long, device=cu.device)
    out[req, pos] = torch.where(pos < num_acc[req], drafts, -1)
    out[torch.arange(batch, device=cu.device), num_acc] = tok
    return out, num_acc


def make_inputs(batch: int, k: int, vocab: int, dense: bool, device: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    rows = batch * (k + 1)
    logits = (torch.randn(rows, vocab, generator=g) * 3).to(device)
    allowed = torch.rand(rows, vocab, generator=g) < 0.5
    bitmask = pack_allowed(allowed).to(device)
    temperature = torch.where(torch.arange(batch) % 4 == 3, 0.0, 0.8).to(device)  # a quarter greedy
    cu = (torch.arange(batch + 1) * k).to(device)
    q = torch.softmax(torch.randn(batch * k, vocab, generator=g) * 3, -1) if dense else None
    drafts = torch.multinomial(q, 1, generator=g).squeeze(1) if dense else torch.randint(vocab, (batch * k,), generator=g)
    gens = [torch.Generator().manual_seed(seed + b) for b in range(batch)]
    rnd = draw_randomness(gens, [k] * batch, vocab, device=device)
    return logits, bitmask, temperature, drafts.to(device), cu, None if q is None else q.to(device), rnd


def timed(fn, iters: int) -> float:
    """Median seconds per call (CUDA events on a GPU)."""
    fn()
    times = []
    for _ in range(iters):
        if torch.cuda.is_available():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def copy_bandwidth(device: str, nbytes: int, iters: int) -> float:
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    return 2 * nbytes / timed(lambda: dst.copy_(src), iters)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on CPU (Triton interpreter); checks it runs")
    ap.add_argument("--drafts", choices=["dense", "onehot"], default="dense")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.smoke:
        sizes, iters, copy_bytes = [(2, 1, 96), (3, 2, 50)], 1, 1 << 20
    elif device != "cuda":
        print("the full benchmark needs a CUDA GPU (use --smoke on CPU)", file=sys.stderr)
        return 2
    else:
        sizes = [(b, k, v) for v in (49152, 128256) for k in (1, 4, 8) for b in (1, 16, 256)]
        iters, copy_bytes = args.iters, 1 << 30
    dense = args.drafts == "dense"
    bw = copy_bandwidth(device, copy_bytes, max(iters, 3))
    print(f"device: {torch.cuda.get_device_name() if device == 'cuda' else 'cpu (interpreter)'}; drafts: {args.drafts}")
    print(f"copy bandwidth: {bw / 1e9:.1f} GB/s")
    print(f"{'B':>4} {'k':>2} {'V':>7} | {'kernel ms':>9} {'GB/s':>7} {'%copy':>6} | {'unfused ms':>10} {'ratio':>6} | {'torch-ref ms':>12} {'ratio':>6}")
    for batch, k, vocab in sizes:
        logits, bitmask, temp, drafts, cu, q, rnd = make_inputs(batch, k, vocab, dense, device)
        args_ = (logits, bitmask, temp, drafts, cu, q, rnd)
        kernel = lambda: rejection_sample_logits(*args_, kernel="triton", max_num_draft_tokens=k)  # noqa: E731
        unfused = lambda: unfused_vectorized(*args_, k)  # noqa: E731
        reference = lambda: rejection_sample_logits(*args_, kernel="torch", max_num_draft_tokens=k)  # noqa: E731
        expected = reference()
        for name, fn in (("kernel", kernel), ("unfused", unfused)):
            got = fn()
            if not (torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])):
                print(f"MISMATCH: {name} differs from the reference at B={batch} k={k} V={vocab}", file=sys.stderr)
                return 1
        nbytes = logits.numel() * logits.element_size() + bitmask.numel() * 4 + rnd.exponentials.numel() * 4
        nbytes += rnd.uniforms.numel() * 4 + (batch * vocab * q.element_size() if q is not None else 0)
        t_kernel, t_unfused = timed(kernel, iters), timed(unfused, iters)
        t_ref = timed(reference, max(1, iters // 4)) if batch <= 16 or args.smoke else float("nan")
        print(
            f"{batch:>4} {k:>2} {vocab:>7} | {t_kernel * 1e3:>9.3f} {nbytes / t_kernel / 1e9:>7.1f} {100 * nbytes / t_kernel / bw:>5.1f}% | "
            f"{t_unfused * 1e3:>10.3f} {t_unfused / t_kernel:>5.2f}x | {t_ref * 1e3:>12.3f} {t_ref / t_kernel:>5.2f}x"
        )
    print("ratio = other pipeline's time / kernel time (higher is better for the kernel)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
