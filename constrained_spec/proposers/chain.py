"""Chains of proposers: one draft built from several sources, e.g. the grammar-forced key, then
the value copied from the prompt, then the next forced key.

`ChainProposer([a, b, c])` asks its members in priority order for a draft continuing the draft
so far (the history extended by it, the grammar matcher forked and advanced along it), takes the
first non-empty one, and starts over from `a` until the budget is spent or nobody has anything.
A mixed draft is still a valid proposal: one-hot rows for deterministic tokens (a function of
the context and the earlier draft tokens), dense q rows where a draft model sampled.

Pruning by expected value. Members differ a lot in how often their tokens are accepted (forced
text at T = 1 ~0.8 per token, the first token of a copy ~0.3, the rest of an accepted copy far
more), and every drafted token makes verification dearer (~5-10% of a forward each on CPU). The
chain keeps a decayed acceptance estimate per (member, position inside that member's segment,
greedy or sampled), learned from `verified()` feedback, and stops the draft before the first
token whose probability of being reached *and* accepted (the product of the estimates so far)
falls below `min_reach`. The estimates depend only on earlier steps, never on this step's
random numbers, so the loop stays exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch

from .base import Draft, ProposalContext, Proposer

__all__ = ["ChainProposer", "auto_proposer"]


_POSITIONS = 4  # acceptance is tracked for segment positions 0, 1, 2 and 3+


class ChainProposer:
    """`min_reach`: stop drafting before a token whose estimated probability of being reached
    and accepted is below this (0 disables pruning). `prior`: starting acceptance estimate per
    member name (default 0.5), worth `prior_weight` observations; `decay` per observation."""

    def __init__(
        self,
        proposers: Sequence[Proposer],
        name: str | None = None,
        *,
        min_reach: float = 0.15,
        prior: dict[str, float] | None = None,
        prior_weight: float = 2.0,
        decay: float = 0.98,
    ) -> None:
        if not proposers:
            raise ValueError("ChainProposer needs at least one proposer")
        if not 0 <= min_reach < 1:
            raise ValueError(f"min_reach={min_reach}: must be in [0, 1)")
        if not 0 < decay <= 1:
            raise ValueError(f"decay={decay}: must be in (0, 1]")
        self.proposers = list(proposers)
        self.name = name or "+".join(p.name for p in self.proposers)
        self.min_reach, self.decay = min_reach, decay
        self._prior = dict(prior or {})
        self._prior_weight = prior_weight
        self._stats: dict[tuple[str, int, bool], list[float]] = {}  # (member, position, greedy) -> [hits, tries]
        self._layouts: dict[str, list[tuple[str, int, bool]]] = {}  # request -> the last draft's stats keys

    def acceptance(self, member: str, position: int, greedy: bool) -> float:
        """Estimated probability that a token `member` drafts at `position` of its segment is
        accepted, given the draft tokens before it were."""
        hits, tries = self._stats.get((member, min(position, _POSITIONS - 1), greedy), (None, None))
        if hits is None:
            return self._prior.get(member, 0.5)
        return hits / tries

    def verified(self, request_id: str, num_drafted: int, num_accepted: int) -> None:
        """Feedback from the loop: of this request's last draft, the first `num_drafted` tokens
        were verified and the first `num_accepted` of them accepted."""
        layout = self._layouts.pop(request_id, [])[:num_drafted]
        for j, key in enumerate(layout[: num_accepted + 1]):
            stat = self._stats.get(key)
            if stat is None:
                w = self._prior_weight
                stat = self._stats[key] = [self._prior.get(key[0], 0.5) * w, w]
            stat[0] = stat[0] * self.decay + (1.0 if j < num_accepted else 0.0)
            stat[1] = stat[1] * self.decay + 1.0
        for proposer in self.proposers:
            feedback = getattr(proposer, "verified", None)
            if feedback is not None:
                feedback(request_id, num_drafted, num_accepted)

    def propose(self, context: ProposalContext, max_tokens: int) -> Draft:
        tokens: list[int] = []
        rows: list[torch.Tensor | None] = []  # q row per token, None where one-hot
        sources: list[str] = []
        num_forced = 0
        layout: list[tuple[str, int, bool]] = []
        greedy = context.params.greedy
        reach = 1.0  # estimated probability that every token drafted so far is accepted
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
            keep = 0
            for position in range(len(draft)):
                a = self.acceptance(proposer.name, position, greedy)
                if reach * a < self.min_reach:
                    break
                reach *= a
                keep += 1
            pruned = keep < len(draft)
            if pruned:  # a prefix of a draft is a valid draft (dense rows included)
                draft = Draft(draft.token_ids[:keep], draft.probs[:keep] if draft.probs is not None else None, draft.source, min(draft.num_forced, keep))
            if not keep:
                break
            layout += [(proposer.name, min(position, _POSITIONS - 1), greedy) for position in range(keep)]
            if matcher is not None:
                for token in draft.token_ids:  # raises GrammarError on a forbidden token
                    matcher.accept_token(token)
            if num_forced == len(tokens):
                num_forced += draft.num_forced  # forced tokens count only while they lead
            tokens.extend(draft.token_ids)
            rows.extend(draft.probs.unbind(0) if draft.probs is not None else [None] * len(draft))
            if not sources or sources[-1] != draft.source:
                sources.append(draft.source)
            if pruned:
                break
        self._layouts[context.request_id] = layout
        if len(self._layouts) > 4096:  # requests that ended without feedback age out
            self._layouts.pop(next(iter(self._layouts)))
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
    given), then a copy from the prompt or output (n-gram, matched on bytes when `token_bytes`
    is given), then the engine's earlier outputs (suffix tree), then the draft model if one is
    given."""
    from .forced import ForcedProposer
    from .ngram import NgramProposer
    from .suffix import SuffixProposer

    members: list[Proposer] = []
    if tokenizer is not None:
        members.append(ForcedProposer(tokenizer, token_bytes=token_bytes))
    members += [NgramProposer(token_bytes=token_bytes, encode=tokenizer), SuffixProposer()]
    if draft_model is not None:
        from .draft_model import DraftModelProposer

        members.append(DraftModelProposer(draft_model, **draft_options))
    return ChainProposer(members, name="auto")
