"""The union of several compiled grammars' languages over one vocabulary.

A text is valid iff some branch accepts it. Each branch keeps its own matcher, advanced in step;
a branch that refuses a token drops out until a rollback brings it back. That is exact for any
branches, overlapping or not: the mask is the OR of the live branches' masks (EOS where some live
branch accepts), and a token sequence is valid as far as the furthest live branch takes it. The
server's `tool_choice="auto"` reply is one: content (text or JSON) or a framed array of calls.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from .protocol import CompiledGrammar, GrammarError, GrammarMatcher
from .vocabulary import trim_partial_utf8

__all__ = ["UnionGrammar", "UnionMatcher"]


class UnionGrammar:
    def __init__(self, branches: Sequence[CompiledGrammar]) -> None:
        if not branches:
            raise GrammarError("a union needs at least one grammar")
        sizes = {branch.vocab_size for branch in branches}
        if len(sizes) != 1:
            raise GrammarError(f"the grammars of a union must share one vocabulary, got widths {sorted(sizes)}")
        self.branches = tuple(branches)

    @property
    def vocab_size(self) -> int:
        return self.branches[0].vocab_size

    def matcher(self) -> "UnionMatcher":
        return UnionMatcher([branch.matcher() for branch in self.branches], [tuple(range(len(self.branches)))])


class UnionMatcher:
    def __init__(self, matchers: list[GrammarMatcher], live: list[tuple[int, ...]]) -> None:
        self._matchers = matchers
        self._live = live  # [i]: the branches that accept the first i tokens ([0]: every one)
        self._scratch: torch.Tensor | None = None  # one mask row `[1, ceil(V/32)]` int32, per device

    @property
    def vocab_size(self) -> int:
        return self._matchers[0].vocab_size

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        first, *others = self._live[-1]
        self._matchers[first].fill_bitmask(bitmask, row)
        if not others:
            return
        if self._scratch is None or self._scratch.device != bitmask.device or self._scratch.shape[1] != bitmask.shape[1]:
            self._scratch = torch.empty((1, bitmask.shape[1]), dtype=bitmask.dtype, device=bitmask.device)
        for index in others:
            self._matchers[index].fill_bitmask(self._scratch, 0)
            bitmask[row] |= self._scratch[0]

    def accept_token(self, token_id: int) -> None:
        live = self._live[-1]
        if len(live) == 1:  # (after the first tokens, usually): its own check, no validate first
            self._matchers[live[0]].accept_token(token_id)  # GrammarError, state unchanged, if refused
            self._live.append(live)
            return
        taking = tuple(i for i in live if self._matchers[i].validate_tokens([token_id]) == 1)
        if not taking:
            raise GrammarError(f"token {token_id} rejected: no branch of the union allows it here")
        for index in taking:
            self._matchers[index].accept_token(token_id)
        self._live.append(taking)

    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        return max(self._matchers[i].validate_tokens(token_ids) for i in self._live[-1])

    def rollback(self, num_tokens: int) -> None:
        if num_tokens > len(self._live) - 1:
            raise GrammarError(f"cannot roll back {num_tokens} tokens: only {len(self._live) - 1} accepted")
        if not num_tokens:
            return
        undone = self._live[-num_tokens:]
        for index, matcher in enumerate(self._matchers):
            steps = sum(index in live for live in undone)  # a branch drops out for good, so these are its last steps
            if steps:
                matcher.rollback(steps)
        del self._live[-num_tokens:]

    def is_accepting(self) -> bool:
        return any(self._matchers[i].is_accepting() for i in self._live[-1])

    def is_terminated(self) -> bool:
        return all(self._matchers[i].is_terminated() for i in self._live[-1])

    def forced_bytes(self, max_bytes: int = 64) -> bytes:
        # every continuation starts with what all live branches force (a common prefix of two
        # can end mid-character)
        forced = [self._matchers[i].forced_bytes(max_bytes) for i in self._live[-1]]
        return forced[0] if len(forced) == 1 else trim_partial_utf8(os.path.commonprefix(forced))

    def fork(self) -> "UnionMatcher":
        return UnionMatcher([matcher.fork() for matcher in self._matchers], list(self._live))

