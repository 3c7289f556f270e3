"""Chains of proposers: one draft built from several sources, e.g. the grammar-forced key, then
the value copied from the prompt, then the next forced key.

`ChainProposer([a, b, c])` asks its members in priority order for a draft continuing the draft
so far (the history extended by it, the grammar matcher forked and advanced along it), takes the
first non-empty one, and starts over from `a` until the budget is spent or nobody has anything.
A mixed draft is still a valid proposal: one-hot rows for deterministic tokens (a function of
the context and the earlier draft tokens), dense q rows where a draft model sampled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch

from .base import Draft, ProposalContext, Proposer

__all__ = ["ChainProposer", "auto_proposer"]


class ChainProposer:
    def __init__(self, proposers: Sequence[Proposer], name: str | None = None) -> None:
        if not proposers:
            raise ValueError("ChainProposer needs at least one proposer")
        self.proposers = list(proposers)
        self.name = name or "+".join(p.name for p in self.proposers)

    def propose(self, context: ProposalContext, max_tokens: int) -> Draft:
        tokens: list[int] = []
        rows: list[torch.Tensor | None] = []  # q row per token, None where one-hot
        sources: list[str] = []
        num_forced = 0
        matcher = context.matcher.fork() if context.matcher is not None else None
        while len(tokens) < max_tokens and not (matcher is not None and matcher.is_terminated()):
            sub_context = replace(context, output_ids=[*context.output_ids, *tokens], matcher=matcher, num_drafted=context.num_drafted + len(tokens))
            for proposer in self.proposers:
                draft = proposer.propose(sub_context, max_tokens - len(tokens))
                if len(draft):
                    break
            else:
                break  # nobody has anything more
            if len(draft) > max_tokens - len(tokens):
                raise ValueError(f"proposer {proposer.name!r} returned {len(draft)} tokens, more than the {max_tokens - len(tokens)} asked for")
            if matcher is not None:
                for token in draft.token_ids:  # raises GrammarError on a forbidden token
                    matcher.accept_token(token)
            if num_forced == len(tokens):
                num_forced += draft.num_forced  # forced tokens count only while they lead
            tokens.extend(draft.token_ids)
            rows.extend(draft.probs.unbind(0) if draft.probs is not None else [None] * len(draft))
            if not sources or sources[-1] != draft.source:
                sources.append(draft.source)
        return Draft(token_ids=tokens, probs=_stack_rows(tokens, rows), source="+".join(sources), num_forced=num_forced)

    def observe(self, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> None:
        for proposer in self.proposers:
            proposer.observe(prompt_ids, output_ids)


def _stack_rows(tokens: list[int], rows: list[torch.Tensor | None]) -> torch.Tensor | None:
    """`[k, V]` q rows with one-hot rows filled in, or None when every row is one-hot."""
    dense = [r for r in rows if r is not None]
    if not dense:
        return None
    out = torch.zeros(len(tokens), dense[0].shape[-1], dtype=dense[0].dtype, device=dense[0].device)
    for j, (token, row) in enumerate(zip(tokens, rows)):
        if row is None:
            out[j, token] = 1.0
        else:
            out[j] = row
    return out


def auto_proposer(tokenizer: Any = None, *, token_bytes: Sequence[bytes | None] | None = None, draft_model: Any = None, **draft_options: Any) -> ChainProposer:
    """The default chain ("auto"): grammar-forced text (when a tokenizer or encode callable is
    given), then a copy from the prompt or output (n-gram), then the engine's earlier outputs
    (suffix tree), then the draft model if one is given."""
    from .forced import ForcedProposer
    from .ngram import NgramProposer
    from .suffix import SuffixProposer

    members: list[Proposer] = []
    if tokenizer is not None:
        members.append(ForcedProposer(tokenizer, token_bytes=token_bytes))
    members += [NgramProposer(), SuffixProposer()]
    if draft_model is not None:
        from .draft_model import DraftModelProposer

        members.append(DraftModelProposer(draft_model, **draft_options))
    return ChainProposer(members, name="auto")
