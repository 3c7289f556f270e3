"""The exact output distribution of plain (non-speculative) constrained sampling, by enumeration
(the tests compare engine outputs with it through `selfcheck.chi_square`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

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
