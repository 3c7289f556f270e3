"""The exact output distribution of plain (non-speculative) constrained sampling, by enumeration,
and a chi-square goodness-of-fit test against observed engine outputs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from scipy.stats import chi2

from constrained_spec.bitmask import new_bitmask
from constrained_spec.sampling import SamplingParams, process_logits

Outcome = tuple[tuple[int, ...], str]  # (token_ids without EOS, finish_reason)


def exact_outcomes(model: Callable, grammar, prompt: Sequence[int], params: SamplingParams, eos: int) -> dict[Outcome, float]:
    """P(outcome) for every outcome of sampling token by token from `model` under `grammar` (or
    none) with `params`, stopping at EOS ("stop") or after `params.max_tokens` tokens ("length")."""
    out: dict[Outcome, float] = {}
    stack = [((), grammar.matcher() if grammar is not None else None, 1.0)]
    while stack:
        prefix, matcher, prob = stack.pop()
        logits = model(torch.tensor([list(prompt) + list(prefix)]))[0, -1:]  # [1, V]
        mask = None
        if matcher is not None:
            mask = new_bitmask(1, matcher.vocab_size)
            matcher.fill_bitmask(mask, 0)
        p = process_logits(logits, params, prompt, prefix, (), mask)[0]  # [V]
        for token in torch.nonzero(p > 0).flatten().tolist():
            q = prob * float(p[token])
            if token == eos:
                out[(prefix, "stop")] = out.get((prefix, "stop"), 0.0) + q
                continue
            nxt = prefix + (token,)
            child = None
            if matcher is not None:
                child = matcher.fork()
                child.accept_token(token)
            if child is not None and child.is_terminated():
                out[(nxt, "stop")] = q
            elif len(nxt) >= params.max_tokens:
                out[(nxt, "length")] = q
            else:
                stack.append((nxt, child, q))
    return out


def chi_square_pvalue(observed: Mapping, expected: Mapping, min_expected: float = 5.0) -> tuple[float, int, float]:
    """Pearson chi-square of observed counts against expected counts (same keys; cells expected
    fewer than `min_expected` times pooled). Observed keys missing from `expected` are a failure
    the caller checks first. Returns (statistic, degrees of freedom, p-value)."""
    bins, pooled_o, pooled_e = [], 0.0, 0.0
    for key, e in expected.items():
        o = observed.get(key, 0)
        if e < min_expected:
            pooled_o, pooled_e = pooled_o + o, pooled_e + e
        else:
            bins.append((o, e))
    if pooled_e > 0:
        bins.append((pooled_o, pooled_e))
    stat = sum((o - e) ** 2 / e for o, e in bins)
    dof = len(bins) - 1
    return stat, dof, float(chi2.sf(stat, dof))
