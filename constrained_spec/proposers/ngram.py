"""N-gram / prompt lookup: if the last n tokens of prompt + output occurred before, propose what
followed them. Extraction tasks copy names, numbers and phrases from the prompt, and JSON output
repeats its own structure, so the copy is often right.

One-hot and deterministic: the candidate is a function of the token history only. Among earlier
occurrences of the longest matching n-gram (most recent first, up to `max_candidates`), the one
whose continuation the grammar accepts furthest wins, so a copy that would break the grammar
loses to one that does not.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .base import Draft, ProposalContext

__all__ = ["NgramProposer"]


class NgramProposer:
    """Prompt-lookup drafts. `min_n`..`max_n`: n-gram lengths tried, longest first."""

    name = "ngram"

    def __init__(self, min_n: int = 2, max_n: int = 4, max_candidates: int = 4) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError(f"need 1 <= min_n <= max_n, got min_n={min_n}, max_n={max_n}")
        if max_candidates < 1:
            raise ValueError(f"max_candidates={max_candidates}: must be >= 1")
        self.min_n, self.max_n, self.max_candidates = min_n, max_n, max_candidates

    def _candidates(self, seq: np.ndarray, max_tokens: int) -> list[list[int]]:
        """Continuations after earlier occurrences of the longest matching suffix n-gram."""
        length = len(seq)
        if length < self.min_n + 1:
            return []
        # Earlier occurrences of the last token, then grown backwards one token at a time.
        ends = np.flatnonzero(seq[: length - 1] == seq[-1])  # [M] index of each match's last token
        matched = np.ones(len(ends), dtype=np.int64)  # [M] matched n-gram length per occurrence
        alive = np.ones(len(ends), dtype=bool)
        for n in range(2, min(self.max_n, length - 1) + 1):
            starts = ends - (n - 1)
            alive &= starts >= 0
            alive[alive] = seq[starts[alive]] == seq[length - n]
            if not alive.any():
                break
            matched[alive] = n
        best = int(matched.max()) if len(ends) else 0
        if best < self.min_n:
            return []
        chosen = ends[matched == best][::-1][: self.max_candidates]  # most recent first
        return [seq[end + 1 : end + 1 + max_tokens].tolist() for end in chosen]

    def propose(self, context: ProposalContext, max_tokens: int) -> Draft:
        if max_tokens <= 0:
            return Draft(source=self.name)
        seq = np.asarray([*context.prompt_ids, *context.output_ids], dtype=np.int64)
        best: list[int] = []
        for candidate in self._candidates(seq, max_tokens):
            if context.matcher is not None:
                candidate = candidate[: context.matcher.validate_tokens(candidate)]
            if len(candidate) > len(best):
                best = candidate
        return Draft(token_ids=best, source=self.name)

    def observe(self, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> None:
        """Looks only at the current request's history: nothing to learn."""
