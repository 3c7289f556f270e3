"""The plumbing shared by matchers that wrap another and track the output beside it.

The repeated-keys and required-keys wrappers keep one immutable tracker state per accepted
token (`_states[0]` is the start), so rollback is a pop; a token the tracker refuses (its step
returns None) is refused by accept_token, validate_tokens and forced_bytes alike, and the rest
of the protocol is the inner matcher's. Subclasses define `_step` (a state after some bytes,
None where refused), `_refusal` (what accept_token says of such a token) and the masks;
`_dead_at` lets one refuse a token the step takes (unique keys: a key prefix that leads only to
used keys).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .protocol import GrammarError, GrammarMatcher

__all__ = ["TrackingMatcher"]


class TrackingMatcher:
    _refusal = "the tracker refuses it"

    def __init__(self, grammar: Any, inner: GrammarMatcher, states: list) -> None:
        self._grammar = grammar  # holds .vocab
        self._inner = inner
        self._states = states  # one per accepted token, after it; [0] = the start

    @property
    def vocab_size(self) -> int:
        return self._inner.vocab_size

    def _step(self, state: Any, data: bytes) -> Any | None:
        raise NotImplementedError

    def _dead_at(self, state: Any, before: Sequence[int], token_id: int) -> bool:
        """Whether `token_id` after `before` (both taken by the step) must still be refused."""
        return False

    def _next(self, state: Any, token_id: int) -> Any | None:
        vocab = self._grammar.vocab
        data = vocab.token_bytes[token_id] if 0 <= token_id < len(vocab.token_bytes) else None
        return state if token_id == vocab.eos_token_id or data is None else self._step(state, data)

    def accept_token(self, token_id: int) -> None:
        following = self._next(self._states[-1], int(token_id))
        if following is None:
            raise GrammarError(f"token {token_id} rejected: {self._refusal}")
        self._inner.accept_token(token_id)
        self._states.append(following)

    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        limit = self._inner.validate_tokens(token_ids)
        state = self._states[-1]
        for i, token_id in enumerate(token_ids[:limit]):
            following = self._next(state, int(token_id))
            if following is None or self._dead_at(state, token_ids[:i], token_id):
                return i
            state = following
        return limit

    def forced_bytes(self, max_bytes: int = 64) -> bytes:
        forced = self._inner.forced_bytes(max_bytes)
        # forced text the tracker would refuse (in practice never): force nothing
        return b"" if forced and self._step(self._states[-1], forced) is None else forced

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
