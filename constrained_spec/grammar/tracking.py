"""The plumbing shared by matchers that wrap another and track the output beside it.

The repeated-keys and required-keys wrappers keep one immutable tracker state per accepted
token (`_states[0]` is the start), so rollback is a pop; the rest of the protocol is the inner
matcher's. Subclasses define the masks, accept_token, validate_tokens and forced_bytes.
"""

from __future__ import annotations

from typing import Any

from .protocol import GrammarError, GrammarMatcher

__all__ = ["TrackingMatcher"]


class TrackingMatcher:
    def __init__(self, grammar: Any, inner: GrammarMatcher, states: list) -> None:
        self._grammar = grammar
        self._inner = inner
        self._states = states  # one per accepted token, after it; [0] = the start

    @property
    def vocab_size(self) -> int:
        return self._inner.vocab_size

    def rollback(self, num_tokens: int) -> None:
        if num_tokens < 0 or num_tokens > len(self._states) - 1:
            raise GrammarError(f"cannot roll back {num_tokens} tokens: only {len(self._states) - 1} accepted")
        self._inner.rollback(num_tokens)
        if num_tokens:
            del self._states[-num_tokens:]

    def is_accepting(self) -> bool:
        return self._inner.is_accepting()

    def is_terminated(self) -> bool:
        return self._inner.is_terminated()

    def fork(self) -> Any:
        return type(self)(self._grammar, self._inner.fork(), list(self._states))
