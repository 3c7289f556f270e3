"""Triton backend: the whole verification step in two launches, one read of the target logits.

Launch 1, `_row_stats_kernel`, one program per ROWS logits rows (ROWS = 1 for real vocabularies):
streams the rows in blocks of 32 * WORDS tokens, applies the packed grammar mask (one int32 word
load serves 32 tokens) and the request's temperature on the fly, and keeps an online max / sum of
exp (softmax statistics) and the first-index argmax. No masked or tempered copy of the logits is
written.

Launch 2, `_verify_kernel`, one program per ROWS requests: walks the requests' drafts with
per-request loads only: p(x) = exp(l_x / T - max) / sum from the row statistics, accept iff
u * q(x) < p(x) (greedy: x == argmax). At the first rejection (or at the bonus row when all drafts
pass) it makes one more pass over that single row, drawing the recovered token exactly as
argmax_i(max(0, p_i - q_i) / E_i) (the bonus: argmax_i(p_i / E_i)) with the request's Exp(1) row
from `draw_randomness`. Greedy requests skip that pass: their token is the row argmax.

Traffic: every logits row once, plus one extra row, one q row and one noise row per sampled
request. Rows after a rejection are read by launch 1 although they are never used; skipping them
would serialise launch 1 behind launch 2.

On a machine without CUDA, Triton runs only in its interpreter, chosen by TRITON_INTERPRET=1 when
triton is first imported and when the @triton.jit decorators below run. This module sets it for
exactly that moment (only when there is no CUDA device and the caller did not set it) and restores
the environment at its end: importing it leaves os.environ as it was.
"""

from __future__ import annotations

import os

import torch

_SAVED_INTERPRET = os.environ.get("TRITON_INTERPRET")
if not torch.cuda.is_available() and _SAVED_INTERPRET is None:
    os.environ["TRITON_INTERPRET"] = "1"

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime.interpreter import InterpretedFunction  # noqa: E402

if not torch.cuda.is_available() and not isinstance(tl.max, InterpretedFunction):
    if _SAVED_INTERPRET is None:
        del os.environ["TRITON_INTERPRET"]
    raise RuntimeError(
        "no CUDA device, so Triton can only run in its interpreter, but triton was imported before "
        "TRITON_INTERPRET=1 was set: set it before anything imports triton (e.g. torch._dynamo)"
    )

from .inputs import VerifyBatch  # noqa: E402

__all__ = ["rejection_sample_logits_triton"]


@triton.jit
def _load_block(logits_ptr, logits_stride, bitmask_ptr, bitmask_stride, num_words, rows, row_ok, start, vocab,
                HAS_MASK: tl.constexpr, ROWS: tl.constexpr, WORDS: tl.constexpr):
    """Token ids `[ROWS, BLOCK]` and masked logits of one block of `rows [ROWS]` (-inf where forbidden)."""
    word_idx = start // 32 + tl.arange(0, WORDS)  # [WORDS]
    offs = start + tl.arange(0, WORDS * 32)  # [BLOCK]
    ok = row_ok[:, None] & (offs[None, :] < vocab)  # [ROWS, BLOCK]
    l = tl.load(logits_ptr + rows[:, None] * logits_stride + offs[None, :], mask=ok, other=float("-inf")).to(tl.float32)
    if HAS_MASK:
        # Tokens past the bitmask's 32 * W bits are forbidden, like bitmask.apply_bitmask_.
        words = tl.load(bitmask_ptr + rows[:, None] * bitmask_stride + word_idx[None, :],
                        mask=row_ok[:, None] & (word_idx[None, :] < num_words), other=0)  # [ROWS, WORDS]
        bits = (words[:, :, None] >> tl.arange(0, 32)[None, None, :]) & 1  # [ROWS, WORDS, 32]
        l = tl.where(tl.reshape(bits, (ROWS, WORDS * 32)) != 0, l, float("-inf"))
    return offs, l


@triton.jit
def _row_stats_kernel(
    logits_ptr, logits_stride,  # [num_tokens, V]
    bitmask_ptr, bitmask_stride, num_words,  # int32 [num_tokens, W]
    row_temp_ptr,  # float32 [num_tokens]
    row_max_ptr, row_sum_ptr, row_argmax_ptr,  # float32, float32, int32 [num_tokens]
    num_tokens, vocab,
    HAS_MASK: tl.constexpr, ROWS: tl.constexpr, WORDS: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)  # [ROWS]
    row_ok = rows < num_tokens
    temp = tl.load(row_temp_ptr + rows, mask=row_ok, other=1.0)
    scale = tl.where(temp > 0, temp, 1.0)  # greedy rows: the argmax of the raw masked logits
    m = tl.full((ROWS,), float("-inf"), tl.float32)
    s = tl.zeros((ROWS,), tl.float32)
    best_idx = tl.zeros((ROWS,), tl.int32)
    for start in range(0, vocab, WORDS * 32):
        offs, l = _load_block(logits_ptr, logits_stride, bitmask_ptr, bitmask_stride, num_words, rows, row_ok,
                              start, vocab, HAS_MASK, ROWS, WORDS)
        z = l / scale[:, None]  # [ROWS, BLOCK]
        blk_max = tl.max(z, axis=1)  # [ROWS]
        blk_idx = tl.min(tl.where(z == blk_max[:, None], offs[None, :], 2147483647), axis=1)
        best_idx = tl.where(blk_max > m, blk_idx, best_idx)  # strict: earlier blocks win ties, like torch
        new_m = tl.maximum(m, blk_max)
        safe_m = tl.where(new_m == float("-inf"), 0.0, new_m)  # avoid -inf - -inf while all masked
        s = s * tl.exp(m - safe_m) + tl.sum(tl.exp(z - safe_m[:, None]), axis=1)
        m = new_m
    tl.store(row_max_ptr + rows, m, mask=row_ok)
    tl.store(row_sum_ptr + rows, s, mask=row_ok)
    tl.store(row_argmax_ptr + rows, best_idx, mask=row_ok)


@triton.jit
def _verify_kernel(
    logits_ptr, logits_stride,  # [num_tokens, V]
    bitmask_ptr, bitmask_stride, num_words,  # int32 [num_tokens, W]
    temp_ptr,  # float32 [B]
    draft_ids_ptr,  # int64 [D]
    cu_ptr,  # int64 [B + 1]
    draft_probs_ptr, draft_probs_stride,  # [D, V] (unused when HAS_DRAFT_PROBS is False)
    uniforms_ptr,  # float32 [D]
    exp_ptr, exp_stride,  # float32 [B, V]
    row_max_ptr, row_sum_ptr, row_argmax_ptr,  # [num_tokens], from _row_stats_kernel
    out_ptr, out_stride,  # int64 [B, max_k + 1], pre-filled with -1
    num_accepted_ptr,  # int64 [B]
    batch, max_k, vocab,
    HAS_MASK: tl.constexpr, HAS_DRAFT_PROBS: tl.constexpr, ROWS: tl.constexpr, WORDS: tl.constexpr,
):
    reqs = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)  # [ROWS]
    req_ok = reqs < batch
    start = tl.load(cu_ptr + reqs, mask=req_ok, other=0)
    k = tl.load(cu_ptr + reqs + 1, mask=req_ok, other=0) - start
    first_row = start + reqs
    temp = tl.load(temp_ptr + reqs, mask=req_ok, other=0.0)
    greedy = temp == 0
    scale = tl.where(greedy, 1.0, temp)

    # Accept / reject every draft from per-request loads; remember the first rejection.
    rejected_at = k
    for j in range(0, max_k):
        pending = req_ok & (rejected_at == k) & (j < k)
        row = first_row + j
        x = tl.load(draft_ids_ptr + start + j, mask=pending, other=0)
        x_ok = pending & (x >= 0) & (x < vocab)
        lx = tl.load(logits_ptr + row * logits_stride + x, mask=x_ok, other=float("-inf")).to(tl.float32)
        if HAS_MASK:
            word = tl.load(bitmask_ptr + row * bitmask_stride + x // 32, mask=x_ok & (x // 32 < num_words), other=0)
            lx = tl.where(((word >> (x % 32).to(tl.int32)) & 1) != 0, lx, float("-inf"))
        px = tl.exp(lx / scale - tl.load(row_max_ptr + row, mask=pending, other=0.0)) / tl.load(
            row_sum_ptr + row, mask=pending, other=1.0)
        if HAS_DRAFT_PROBS:
            qx = tl.load(draft_probs_ptr + (start + j) * draft_probs_stride + x, mask=x_ok, other=0.0).to(tl.float32)
        else:
            qx = tl.full((ROWS,), 1.0, tl.float32)
        u = tl.load(uniforms_ptr + start + j, mask=pending, other=1.0)
        is_argmax = x == tl.load(row_argmax_ptr + row, mask=pending, other=-1)
        accept = tl.where(greedy, is_argmax, (u * qx < px) & (qx > 0))
        tl.store(out_ptr + reqs * out_stride + j, x, mask=pending & accept)
        rejected_at = tl.where(pending & (accept == 0), j, rejected_at)

    row = first_row + rejected_at  # the row that emits: recovered (rejected_at < k) or bonus
    token = tl.load(row_argmax_ptr + row, mask=req_ok, other=0).to(tl.int64)  # greedy requests
    sampled = req_ok & (greedy == 0)
    if tl.max(sampled.to(tl.int32), axis=0) > 0:
        # Recovered token from max(0, p - q), or the bonus token from p (q = 0 on the bonus row).
        x_rej = tl.load(draft_ids_ptr + start + rejected_at, mask=sampled & (rejected_at < k), other=-1)
        q_limit = tl.where(sampled & (rejected_at < k), vocab, 0)  # the bonus row has no q
        m = tl.load(row_max_ptr + row, mask=sampled, other=0.0)
        s = tl.load(row_sum_ptr + row, mask=sampled, other=1.0)
        best_w = tl.full((ROWS,), -1.0, tl.float32)
        best_idx = tl.zeros((ROWS,), tl.int32)
        max_w = tl.zeros((ROWS,), tl.float32)
        for v0 in range(0, vocab, WORDS * 32):
            offs, l = _load_block(logits_ptr, logits_stride, bitmask_ptr, bitmask_stride, num_words, row, sampled,
                                  v0, vocab, HAS_MASK, ROWS, WORDS)
            p = tl.exp(l / scale[:, None] - m[:, None]) / s[:, None]  # [ROWS, BLOCK]
            if HAS_DRAFT_PROBS:
                q = tl.load(draft_probs_ptr + (start + rejected_at)[:, None] * draft_probs_stride + offs[None, :],
                            mask=offs[None, :] < q_limit[:, None], other=0.0).to(tl.float32)
            else:
                q = tl.where(offs[None, :] == x_rej[:, None], 1.0, 0.0)
            w = tl.maximum(p - q, 0.0)
            e = tl.load(exp_ptr + reqs[:, None] * exp_stride + offs[None, :],
                        mask=sampled[:, None] & (offs[None, :] < vocab), other=1.0)
            r = w / tl.maximum(e, 1.1754943508222875e-38)  # sample_from_probs: argmax(w / E)
            blk = tl.max(r, axis=1)
            blk_idx = tl.min(tl.where(r == blk[:, None], offs[None, :], 2147483647), axis=1)
            best_idx = tl.where(blk > best_w, blk_idx, best_idx)
            best_w = tl.maximum(best_w, blk)
            max_w = tl.maximum(max_w, tl.max(w, axis=1))
        token = tl.where(sampled, best_idx.to(tl.int64), token)
        # An all-zero residual happens only when p == q, where the draft is always accepted; the
        # reference then falls back to p. Recompute those (practically never taken) rows from p.
        fallback = sampled & (max_w <= 0)
        if tl.max(fallback.to(tl.int32), axis=0) > 0:
            best_w = tl.full((ROWS,), -1.0, tl.float32)
            for v0 in range(0, vocab, WORDS * 32):
                offs, l = _load_block(logits_ptr, logits_stride, bitmask_ptr, bitmask_stride, num_words, row,
                                      fallback, v0, vocab, HAS_MASK, ROWS, WORDS)
                p = tl.exp(l / scale[:, None] - m[:, None]) / s[:, None]
                e = tl.load(exp_ptr + reqs[:, None] * exp_stride + offs[None, :],
                            mask=fallback[:, None] & (offs[None, :] < vocab), other=1.0)
                r = p / tl.maximum(e, 1.1754943508222875e-38)
                blk = tl.max(r, axis=1)
                blk_idx = tl.min(tl.where(r == blk[:, None], offs[None, :], 2147483647), axis=1)
                best_idx = tl.where(blk > best_w, blk_idx, best_idx)
                best_w = tl.maximum(best_w, blk)
            token = tl.where(fallback, best_idx.to(tl.int64), token)
    tl.store(out_ptr + reqs * out_stride + rejected_at, token, mask=req_ok)
    tl.store(num_accepted_ptr + reqs, rejected_at, mask=req_ok)


def _tile(vocab: int, words_per_block: int | None, rows_per_program: int | None) -> tuple[int, int]:
    """(ROWS, WORDS): 2048-token blocks, one row per program for real vocabularies; tiny
    vocabularies pack several rows (or requests) per program instead, up to 4096 elements per
    tile on a GPU (registers) and 2**16 in the interpreter (whose cost is per program, not per element)."""
    words = words_per_block or min(64, triton.next_power_of_2((vocab + 31) // 32))
    tile = 2**16 if INTERPRETED else 4096
    rows = rows_per_program or max(1, min(tile // 16, tile // (32 * words)))
    return rows, words


def rejection_sample_logits_triton(
    verify: VerifyBatch,
    max_num_draft_tokens: int,
    words_per_block: int | None = None,
    rows_per_program: int | None = None,
    num_warps: int = 8,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch both kernels. Fields as in `constrained_spec.kernels.rejection_sample_logits`."""
    logits, bitmask, temperature, draft_probs, randomness = verify.logits, verify.bitmask, verify.temperature, verify.draft_probs, verify.randomness
    draft_token_ids, cu_num_draft_tokens = verify.draft_token_ids, verify.cu_num_draft_tokens
    num_tokens, vocab = logits.shape
    batch = cu_num_draft_tokens.numel() - 1
    device = logits.device
    logits = logits if logits.stride(1) == 1 else logits.contiguous()
    rows, words = _tile(vocab, words_per_block, rows_per_program)
    cu = cu_num_draft_tokens.to(device, torch.long).contiguous()
    temperature = temperature.to(device, torch.float32).contiguous()
    row_temp = temperature.repeat_interleave(cu[1:] - cu[:-1] + 1, output_size=num_tokens)  # [num_tokens]
    row_max = torch.empty(num_tokens, dtype=torch.float32, device=device)
    row_sum = torch.empty(num_tokens, dtype=torch.float32, device=device)
    row_argmax = torch.empty(num_tokens, dtype=torch.int32, device=device)
    has_mask = bitmask is not None
    mask = bitmask.to(device).contiguous() if has_mask else row_argmax  # dummy pointer when unused
    num_words = mask.shape[1] if has_mask else 0
    _row_stats_kernel[(triton.cdiv(num_tokens, rows),)](
        logits, logits.stride(0), mask, mask.stride(0) if has_mask else 0, num_words,
        row_temp, row_max, row_sum, row_argmax, num_tokens, vocab,
        HAS_MASK=has_mask, ROWS=rows, WORDS=words, num_warps=num_warps,
    )
    has_q = draft_probs is not None
    q = (draft_probs if draft_probs.stride(1) == 1 else draft_probs.contiguous()) if has_q else row_max
    exponentials = randomness.exponentials.to(device, torch.float32).contiguous()
    out = torch.full((batch, max_num_draft_tokens + 1), -1, dtype=torch.long, device=device)
    num_accepted = torch.empty(batch, dtype=torch.long, device=device)
    _verify_kernel[(triton.cdiv(batch, rows),)](
        logits, logits.stride(0), mask, mask.stride(0) if has_mask else 0, num_words,
        temperature, draft_token_ids.to(device, torch.long).contiguous(), cu,
        q, q.stride(0) if has_q else 0, randomness.uniforms.to(device, torch.float32).contiguous(),
        exponentials, exponentials.stride(0), row_max, row_sum, row_argmax,
        out, out.stride(0), num_accepted, batch, max_num_draft_tokens, vocab,
        HAS_MASK=has_mask, HAS_DRAFT_PROBS=has_q, ROWS=rows, WORDS=words, num_warps=num_warps,
    )
    return out, num_accepted


# Every @triton.jit above has run: give the caller's environment back (see the module docstring).
INTERPRETED = isinstance(_row_stats_kernel, InterpretedFunction)
if _SAVED_INTERPRET is None:
    os.environ.pop("TRITON_INTERPRET", None)
