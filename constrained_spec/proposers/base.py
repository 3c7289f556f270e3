"""The contract every draft proposer meets.

A proposer looks at one request's context and returns up to `max_tokens` draft tokens. Its
drafts are only suggestions: the speculative loop verifies them with the exact rejection rule, so
a poor proposer costs speed, never correctness. Two rules keep the loop exact:
- one-hot drafts (`probs is None`) must be a deterministic function of the context (prompt,
  output so far, earlier finished requests), never of this step's random numbers;
- dense drafts carry q for every drafted position, computed by `sampling.process_logits` with the
  request's params, the draft prefix as history and the grammar mask of that position, and each
  token must be drawn from that q.
Drafts never contain a token the grammar forbids (cut with `GrammarMatcher.validate_tokens`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from ..grammar.protocol import GrammarMatcher
from ..sampling import SamplingParams


@dataclass
class ProposalContext:
    """What a proposer may read about one request. `matcher` is positioned after the committed
    output; a proposer that needs to walk the grammar must `fork()` it, never advance it."""

    request_id: str
    prompt_ids: Sequence[int]
    output_ids: Sequence[int]
    params: SamplingParams
    matcher: GrammarMatcher | None
    generator: torch.Generator | None = None  # for proposers that sample (draft models)
    # Trailing tokens of output_ids that are this step's draft, not yet verified (set by chains);
    # a proposer that learns from the output must learn only from the tokens before them.
    num_drafted: int = 0


@dataclass
class Draft:
    """token_ids: the drafted tokens. probs: `[len(token_ids), V]` q rows, or None when every
    drafted token is one-hot (deterministic). source: the proposer's name, for stats.
    num_forced: how many leading tokens came from grammar-forced text."""

    token_ids: list[int] = field(default_factory=list)
    probs: torch.Tensor | None = None
    source: str = ""
    num_forced: int = 0

    def __len__(self) -> int:
        return len(self.token_ids)


class Proposer(Protocol):
    name: str

    def propose(self, context: ProposalContext, max_tokens: int) -> Draft:
        """Up to `max_tokens` draft tokens for this request (possibly none)."""

    def observe(self, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> None:
        """Called when a request finishes, so proposers can learn from earlier outputs."""

    # Optional: `verified(request_id, num_drafted, num_accepted)` is called after each step that
    # verified a draft of this proposer (the loop's cut may have shortened it to num_drafted).
