"""Exact rejection sampling for speculative decoding: the torch reference.

Terms (for one request with k drafted tokens x_1..x_k):
- p_j: the target's processed distribution at draft position j (`process_logits`), j = 1..k+1.
- q_j: the draft's distribution for x_j; one-hot at x_j for deterministic proposers (n-gram,
  grammar-forced strings), in which case no draft probabilities are passed.
- accepted: x_j is kept with probability min(1, p_j(x_j) / q_j(x_j)), in order, stopping at the
  first rejection. Everything drafted after a rejection is discarded.
- recovered token: on the first rejection at j, a token drawn from the residual
  max(0, p_j - q_j) / Z. Together, the two paths give exactly p_j (see `rejection_rule`).
- bonus token: when all k drafts are accepted, one more token drawn from p_{k+1}, free of charge
  because the target already scored that position.
Greedy requests (temperature 0) accept x_j iff it is the argmax of p_j; recovered and bonus
tokens are the argmax. This is the T = 0 special case only.

Randomness is drawn up front (`draw_randomness`) so that the Triton kernel and this reference
consume identical numbers and produce identical tokens: per request, one uniform per drafted
token and one row of Exp(1) noise over the vocabulary. argmax_i(w_i / E_i) with E_i ~ Exp(1) is an
exact draw from w / sum(w), so the same row samples a recovered or a bonus token (a request uses
at most one of them per step).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "rejection_rule",
    "SamplerRandomness",
    "draw_randomness",
    "rejection_sample",
    "greedy_verify",
    "sampled_verify",
    "sample_from_probs",
]


def rejection_rule(target_probs: Sequence[float], draft_probs: Sequence[float], draft_token: int) -> tuple[float, list[float]]:
    """One speculative step: the probability of accepting `draft_token`, and the residual.

    accept = min(1, p(x) / q(x)); residual = max(0, p - q) / Z with Z = sum(max(0, p - q)).

    Proof of exactness: token y is emitted on the accept path with probability
    q(y) * min(1, p(y)/q(y)) = min(p(y), q(y)); the total rejection probability is
    1 - sum_v min(p(v), q(v)) = Z; so the reject path emits y with probability
    Z * max(0, p(y) - q(y)) / Z. The sum is min(p, q) + max(0, p - q) = p(y).

    Z = 0 means p <= q everywhere, and since both sum to one, p == q: then p(x)/q(x) = 1 and the
    draft is always accepted, so the residual is never sampled. It falls back to p only to stay
    well defined.
    """
    if len(target_probs) != len(draft_probs) or len(target_probs) == 0:
        raise ValueError(f"distribution shapes differ or are empty: {len(target_probs)} vs {len(draft_probs)}")
    p = [float(v) for v in target_probs]
    q = [float(v) for v in draft_probs]
    if any(v < 0 for v in p + q):
        raise ValueError("negative probability")
    if abs(sum(p) - 1.0) > 1e-9 or abs(sum(q) - 1.0) > 1e-9:
        raise ValueError(f"distributions must sum to one (got {sum(p)!r} and {sum(q)!r})")
    if not 0 <= draft_token < len(q):
        raise ValueError(f"draft token {draft_token} is outside the vocabulary of {len(q)}")
    qx = q[draft_token]
    if qx <= 0:
        raise ValueError("draft token must have positive proposal mass q(x) > 0")
    accept_probability = min(1.0, p[draft_token] / qx)
    residual_mass = [max(pv - qv, 0.0) for pv, qv in zip(p, q)]
    normalizer = sum(residual_mass)
    residual = [m / normalizer for m in residual_mass] if normalizer else list(p)
    return accept_probability, residual


@dataclass(frozen=True)
class SamplerRandomness:
    """The random numbers one verification step consumes.

    uniforms: `[num_draft_tokens]` in [0, 1), one per drafted token (flattened like the drafts).
    exponentials: `[batch, V]` Exp(1) noise, one row per request for its recovered/bonus token.
    """

    uniforms: torch.Tensor
    exponentials: torch.Tensor


def draw_randomness(
    generators: Sequence[torch.Generator | None],
    num_draft_tokens: Sequence[int],
    vocab_size: int,
    device: torch.device | str = "cpu",
    greedy: Sequence[bool] | None = None,
) -> SamplerRandomness:
    """Per request, in this order: k uniforms, then V exponentials, from that request's generator.

    A request's numbers depend only on its own generator, never on the rest of the batch, so a
    seeded request gives the same output alone or batched. Each request's numbers are drawn on
    its generator's device (the engine keeps generators on the model's device, so nothing V-wide
    crosses the bus) and land on `device`.
    greedy: per request; a greedy request never reads its exponentials (its tokens are argmaxes),
    so it draws none and keeps a row of ones: the V-wide draw is the costliest part of a step.
    Exp(1) noise is -log(1 - u) of float64 uniforms (53 bits: the tail is cut at E = 36.7, not
    at the 16.6 of float32 uniforms), ~3x cheaper here than `Tensor.exponential_`.
    """
    if len(generators) != len(num_draft_tokens):
        raise ValueError("one generator per request is needed")
    if greedy is not None and len(greedy) != len(generators):
        raise ValueError("greedy needs one flag per request")
    device = torch.device(device)
    uniforms = []
    exponentials = torch.ones(len(generators), vocab_size, dtype=torch.float32, device=device)  # [B, V]
    for b, (gen, k) in enumerate(zip(generators, num_draft_tokens)):
        where = gen.device if gen is not None else torch.device("cpu")
        uniforms.append(torch.rand(k, generator=gen, dtype=torch.float32, device=where).to(device))
        if greedy is None or not greedy[b]:
            u = torch.rand(vocab_size, generator=gen, dtype=torch.float64, device=where)  # [V] in [0, 1)
            exponentials[b] = u.neg_().log1p_().neg_().to(device, torch.float32)  # -log(1 - u) ~ Exp(1)
    return SamplerRandomness(
        uniforms=torch.cat(uniforms) if uniforms else torch.empty(0, device=device),
        exponentials=exponentials,
    )


def sample_from_probs(weights: torch.Tensor, exponentials: torch.Tensor) -> torch.Tensor:
    """Exact categorical draw from unnormalized nonnegative `weights [..., V]` using Exp(1) noise
    of the same shape: argmax(w / E). Returns long `[...]`."""
    return (weights / exponentials.clamp_min(torch.finfo(exponentials.dtype).tiny)).argmax(dim=-1)


def _check_inputs(target_probs, draft_token_ids, cu_num_draft_tokens, draft_probs, randomness, is_greedy) -> None:
    if target_probs.ndim != 2 or draft_token_ids.ndim != 1 or cu_num_draft_tokens.ndim != 1:
        raise ValueError("target_probs must be [num_tokens, V], draft_token_ids [D], cu_num_draft_tokens [B + 1]")
    batch = cu_num_draft_tokens.numel() - 1
    num_drafts = draft_token_ids.numel()
    if batch < 1 or int(cu_num_draft_tokens[0]) != 0 or int(cu_num_draft_tokens[-1]) != num_drafts:
        raise ValueError("cu_num_draft_tokens must start at 0 and end at the number of draft tokens")
    if target_probs.shape[0] != num_drafts + batch:
        raise ValueError(f"target_probs needs {num_drafts + batch} rows (one per draft + one bonus per request), got {target_probs.shape[0]}")
    if draft_probs is not None and draft_probs.shape != (num_drafts, target_probs.shape[1]):
        raise ValueError(f"draft_probs must be [{num_drafts}, {target_probs.shape[1]}], got {tuple(draft_probs.shape)}")
    if randomness.uniforms.shape != (num_drafts,) or randomness.exponentials.shape != (batch, target_probs.shape[1]):
        raise ValueError("randomness does not match the batch (see draw_randomness)")
    if is_greedy.shape != (batch,):
        raise ValueError(f"is_greedy must be [{batch}]")


def rejection_sample(
    target_probs: torch.Tensor,
    draft_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    randomness: SamplerRandomness,
    is_greedy: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Verify a ragged batch of drafts against the target. The reference for every kernel.

    target_probs: `[D + B, V]` processed target distributions; request b owns rows
        cu[b] + b .. cu[b+1] + b (one per draft position, then its bonus row).
    draft_token_ids: long `[D]`, all requests' drafts flattened.
    cu_num_draft_tokens: long `[B + 1]`, cumulative draft counts starting at 0.
    draft_probs: `[D, V]` q for each draft position, or None when every draft is one-hot.
    randomness: from `draw_randomness`.
    is_greedy: bool `[B]`. A greedy request's rows are only argmaxed, so they may hold its
        processed logits instead of the one-hot p (same argmax, no V-wide one-hot).
    Returns (output_token_ids long `[B, max_k + 1]` padded with -1, num_accepted long `[B]`).
    Request b emits output_token_ids[b, :num_accepted[b] + 1].
    """
    _check_inputs(target_probs, draft_token_ids, cu_num_draft_tokens, draft_probs, randomness, is_greedy)
    cu = cu_num_draft_tokens.tolist()
    batch = len(cu) - 1
    max_k = max(cu[b + 1] - cu[b] for b in range(batch))
    out = torch.full((batch, max_k + 1), -1, dtype=torch.long)
    num_accepted = torch.zeros(batch, dtype=torch.long)
    drafts = draft_token_ids.tolist()
    greedy_flags = is_greedy.tolist()
    uniforms = randomness.uniforms.tolist()
    for b in range(batch):
        start, k = cu[b], cu[b + 1] - cu[b]
        rows = target_probs[start + b : start + b + k + 1].float()  # [k + 1, V]
        x = drafts[start : start + k]
        # One vectorized pass per request (not per draft position); the first rejection is found
        # on the small [k] lists.
        if greedy_flags[b]:
            choices = rows.argmax(dim=-1).tolist()  # [k + 1]; rows may be logits or one-hot p
            j = next((i for i in range(k) if x[i] != choices[i]), k)
            emitted = choices[j]
        else:
            index = torch.tensor(x, dtype=torch.long, device=rows.device)  # [k], beside the rows it indexes
            px = rows[torch.arange(k, device=rows.device), index].tolist() if k else []  # p_j(x_j)
            if draft_probs is None:
                qx = [1.0] * k
            else:
                qx = draft_probs[start : start + k].float().gather(1, index[:, None]).squeeze(1).tolist()
            # u < p/q, written without the division; p(x) = 0 (masked) always rejects.
            j = next((i for i in range(k) if qx[i] <= 0 or not uniforms[start + i] * qx[i] < px[i]), k)
            if j < k and qx[j] <= 0:
                raise ValueError(f"draft token {x[j]} has q(x) = 0: it was not drawn from draft_probs")
            weights = rows[j]  # [V]: the bonus row, or the residual below
            if j < k:
                if draft_probs is None:  # one-hot q: max(0, p - q) is p without x
                    weights = weights.clone()
                    weights[x[j]] = 0.0
                else:
                    weights = (weights - draft_probs[start + j].float()).clamp_min(0)
                if float(weights.sum()) <= 0:  # unreachable unless p == q; see rejection_rule
                    weights = rows[j]
            emitted = int(sample_from_probs(weights, randomness.exponentials[b].float()))
        out[b, :j] = torch.tensor(x[:j], dtype=torch.long)
        out[b, j] = emitted
        num_accepted[b] = j
    return out.to(target_probs.device), num_accepted.to(target_probs.device)


def greedy_verify(
    logits: Sequence[torch.Tensor], bitmask: torch.Tensor | None, drafts: Sequence[Sequence[int]]
) -> tuple[list[list[int]], list[int], bool]:
    """`rejection_sample` for a batch of greedy requests that only mask (no penalties, top-k/p,
    bias), read straight from the raw logits: the same tokens, without a V-wide pass per row.

    logits: per request b, its raw target logits `[k_b + 1, V]` on the CPU; bitmask: int32
    `[D + B, W]` (request b's rows in turn, the vocabulary limit folded in) or None; drafts:
    request b's k_b draft ids. Rows are read in order and only up to the first rejected draft (nothing after it
    is emitted), each by `_masked_argmax`. Returns (emitted tokens per request, accepted drafts
    per request, whether every row read allows a token)."""
    packed = None if bitmask is None else bitmask.numpy().view(np.uint32)  # [D + B, W]
    emitted, accepted, ok, start = [], [], True, 0
    for rows, x in zip(logits, drafts):
        tokens, j = _greedy_request(_as_table(rows), None if packed is None else packed[start : start + len(x) + 1], x)
        ok = ok and tokens[-1] >= 0  # a row with nothing allowed (or only -inf)
        emitted.append(tokens)
        accepted.append(j)
        start += len(x) + 1
    return emitted, accepted, ok


def _as_table(rows: torch.Tensor) -> np.ndarray:
    """A request's CPU logits rows `[k + 1, V]` as numpy (float32 or float64)."""
    return (rows if rows.dtype in (torch.float32, torch.float64) else rows.float()).numpy()


def _greedy_request(table: np.ndarray, words: np.ndarray | None, x: Sequence[int]) -> tuple[list[int], int]:
    """The greedy rule on one request's rows `table` `[k + 1, V]` (packed masks `words`
    `[k + 1, W]` or None) and drafts `x`: rows read in order up to the first draft that is not
    the masked argmax. Returns (emitted tokens, accepted drafts); the last token is -1 where its
    row allows nothing."""
    for j in range(len(x) + 1):
        pick = _masked_argmax(table[j], None if words is None else words[j])
        if j == len(x) or x[j] != pick:
            return [*x[:j], pick], j
    raise AssertionError("unreachable: the bonus row always emits")


def sampled_verify(
    logits: Sequence[torch.Tensor], bitmask: torch.Tensor, drafts: Sequence[Sequence[int]],
    temperatures: Sequence[float], generators: Sequence[torch.Generator | None],
) -> tuple[list[list[int]], list[int], bool]:
    """`rejection_sample` for a batch of requests that only mask and scale (no penalties,
    top-k/p, bias) with one-hot drafts, read from the raw CPU logits over each row's allowed
    tokens only: the same distribution, without a V-wide pass (a V-wide noise draw alone costs
    ~0.4 ms) or V random numbers. A temperature of 0 takes the greedy rule (`greedy_verify`).

    Randomness, per request from its generator: k + 1 float64 uniforms in one draw (one call:
    each costs ~50 us on a cache the forward has just swept), the first k for the drafts, the
    last for the row that emits its last token. A draft
    x is accepted where u < p(x) (q is one-hot); the last token is drawn by inverse transform
    over the allowed tokens (in token order) from w, the residual (p without x) or, after every
    draft, p itself.
    The stream differs from `draw_randomness`' (the kernel's), so a seed gives other tokens
    here than through the kernel; each is seeded, batch-independent and exact.

    logits: per request b, its raw target logits `[k_b + 1, V]`; bitmask: int32 `[D + B, W]`
    (request b's rows in turn, the vocabulary limit folded in). Returns (emitted tokens per
    request, accepted drafts per request, whether every row read allows a token)."""
    packed = bitmask.numpy().view(np.uint32)  # [D + B, W]
    emitted, accepted, ok, start = [], [], True, 0
    for rows, x, temperature, gen in zip(logits, drafts, temperatures, generators):
        k = len(x)
        table = _as_table(rows)  # [k + 1, V]
        if not temperature:
            tokens, j = _greedy_request(table, packed[start : start + k + 1], x)
            ok = ok and tokens[-1] >= 0
            emitted.append(tokens)
            accepted.append(j)
            start += k + 1
            continue
        uniforms = torch.rand(k + 1, generator=gen, dtype=torch.float64).tolist()  # [k + 1]
        for j in range(k + 1):
            ids, weights = _allowed_weights(table[j], packed[start + j], temperature)
            sums = _block_sums(weights)  # [blocks] float64: the total here, the draw's first level below
            total = float(sums.sum())
            if not total > 0:  # nothing allowed, or every allowed logit is -inf
                ok = False
                emitted.append([*x[:j], -1])
                accepted.append(j)
                break
            if j < k:
                at = x[j] if ids is None else int(np.searchsorted(ids, x[j]))
                held = at < weights.size and (ids is None or ids[at] == x[j])
                if held and uniforms[j] * total < weights[at]:  # u < p(x): accepted
                    continue
                if held:  # the residual max(0, p - onehot(x)): p without x
                    weights[at] = 0.0
                    block = at // _BLOCK  # its block summed again (a subtraction could leave a residue)
                    sums[block] = weights[block * _BLOCK : (block + 1) * _BLOCK].sum(dtype=np.float64)
            pick = _inverse_transform(weights, uniforms[k], sums)
            emitted.append([*x[:j], pick if ids is None else int(ids[pick])])
            accepted.append(j)
            break
        start += k + 1
    return emitted, accepted, ok


def _allowed_weights(row: np.ndarray, words: np.ndarray, temperature: float) -> tuple[np.ndarray | None, np.ndarray]:
    """p up to a factor over the tokens `words` (packed uint32 `[W]`) allows in the logits
    `row` `[V]`: (their ids ascending `[n]`, exp((z - max) / T) `[n]` float64) where the mask
    allows few words' tokens, else (None, `[V]` float32 with 0 where masked): a free-text row
    is cheaper whole than gathered."""
    held = np.flatnonzero(words)  # the words holding allowed tokens
    if held.size * 4 > words.size:
        allowed = np.unpackbits(words.view(np.uint8), bitorder="little", count=row.shape[0]).view(bool)  # [V]
        best = int(row.argmax())
        if allowed[best] and row[best] > -np.inf:
            # the row's maximum is allowed (free text, usually): weights of the whole row, the
            # masked ones zeroed after (nothing exceeds the maximum, so nothing overflows); no
            # masked copy of the row, ~45 us less
            w = np.subtract(row, row[best], dtype=np.float32)  # [V]
            if temperature != 1.0:
                w *= np.float32(1.0 / temperature)
            np.exp(w, out=w)
            np.multiply(w, allowed, out=w)
            return None, w
        z = np.where(allowed, row, -np.inf).astype(np.float32, copy=False)  # [V]
        ids = None
    else:
        ids = _ids_in(words, held, row.shape[0])  # [n]
        z = row[ids].astype(np.float64)  # [n]
    top = z.max(initial=-np.inf)
    if top == -np.inf:
        return ids, np.zeros(z.shape, dtype=z.dtype)
    return ids, np.exp((z - top) * (1.0 / temperature))


_BLOCK = 1024  # inverse transform in two levels past this many weights (a cumsum of all costs more)


def _block_sums(weights: np.ndarray) -> np.ndarray:
    """float64 sums of `weights` `[n]` by blocks of _BLOCK `[ceil(n / _BLOCK)]`."""
    if weights.size <= _BLOCK:
        return weights.sum(dtype=np.float64, keepdims=True)
    return np.add.reduceat(weights, np.arange(0, weights.size, _BLOCK), dtype=np.float64)


def _inverse_transform(weights: np.ndarray, u: float, sums: np.ndarray) -> int:
    """The first index whose cumulative weight exceeds u * total (`weights` `[n]` >= 0, some
    positive; u in [0, 1)): a draw from weights / total that never lands on a zero weight.
    Block sums first (`sums`: `_block_sums(weights)`), then one block's cumulative sum; where
    rounding carries the target past the end, the last positive weight."""
    starts = np.arange(0, weights.size, _BLOCK)
    cumulative = np.cumsum(sums)  # [blocks]
    target = u * cumulative[-1]
    block = int(np.searchsorted(cumulative, target, side="right"))
    if block >= sums.size:
        block = int(np.flatnonzero(sums)[-1])
    part = weights[starts[block] : starts[block] + _BLOCK]
    inner = np.cumsum(part, dtype=np.float64)
    at = int(np.searchsorted(inner, target - (cumulative[block - 1] if block else 0.0), side="right"))
    if at >= part.size or part[at] <= 0:
        at = int(np.flatnonzero(part)[-1])
    return int(starts[block]) + at


def _masked_argmax(row: np.ndarray, words: np.ndarray | None) -> int:
    """The first maximum of `row` `[V]` among the tokens `words` (packed uint32 `[W]`) allows,
    or -1 where none is allowed or every allowed logit is -inf. A constrained position allows a
    few words' tokens: only their logits are read (a fresh logits row costs ~40 us to scan).
    Elsewhere the plain argmax, when the mask allows it: the first maximum overall is then the
    first allowed one."""
    if words is None:
        pick = int(row.argmax())
    else:
        held = np.flatnonzero(words)  # the words holding allowed tokens
        if held.size > 64:  # free text: the plain argmax, unless the mask forbids it
            pick = int(row.argmax())
            if pick < words.shape[0] * 32 and (int(words[pick >> 5]) >> (pick & 31)) & 1:
                return pick if row[pick] > -math.inf else -1
        allowed = _ids_in(words, held, row.shape[0])
        if not allowed.size:
            return -1
        pick = int(allowed[row[allowed].argmax()])  # the first maximum among the allowed
    return pick if row[pick] > -math.inf else -1


def _ids_in(words: np.ndarray, held: np.ndarray, size: int) -> np.ndarray:
    """The token ids below `size` that the packed row `words` (uint32 `[W]`) allows, ascending,
    expanding only the words `held` (its nonzero ones) `[n]`."""
    bits = np.unpackbits(words[held].view(np.uint8), bitorder="little").reshape(-1, 32).astype(bool)
    ids = (held[:, None] * 32 + np.arange(32))[bits]
    return ids[ids < size]
