"""The contract between grammars and everything above them.

Everything above the grammar layer (proposers, the speculative loop, the API) sees only these two
protocols and packed bitmasks (`constrained_spec.bitmask`). Backends (our outlines-core + Lark
engine, the optional llguidance adapter) implement them.

Objects go from immutable to per-request: a `CompiledGrammar` is built once per (constraint,
vocabulary), cached and shared across requests and threads; `matcher()` gives a
`GrammarMatcher` that carries one request's state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch


class GrammarError(ValueError):
    """A constraint that cannot be compiled (unsupported keyword, bad regex, bad Lark grammar), or
    a matcher misuse (a forbidden token, a rollback past the start). The message says which."""


@runtime_checkable
class GrammarMatcher(Protocol):
    """One request's position in a grammar. Never silently corrupted: misuse raises GrammarError
    and leaves the state as it was."""

    @property
    def vocab_size(self) -> int:
        """Width of the mask in tokens (the model's logit width)."""

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """Write the allowed-token bits for the current state into `bitmask[row]`
        (int32 `[rows, ceil(V/32)]`). EOS is allowed exactly where the grammar accepts."""

    def accept_token(self, token_id: int) -> None:
        """Advance by one token; raises GrammarError (state unchanged) if it is not allowed.
        Accepting EOS terminates the matcher."""

    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        """Length of the longest prefix of `token_ids` the grammar accepts from here. State unchanged."""

    def rollback(self, num_tokens: int) -> None:
        """Undo the last `num_tokens` accepted tokens; raises GrammarError past the start."""

    def is_accepting(self) -> bool:
        """True where the text so far is a complete match (EOS would be allowed)."""

    def is_terminated(self) -> bool:
        """True once EOS was accepted, or no token at all can follow."""

    def forced_bytes(self, max_bytes: int = 64) -> bytes:
        """Bytes every valid continuation must start with (up to `max_bytes`); b"" if none or
        unknown. Feeds the grammar-forced-string proposer; being wrong costs speed, never
        correctness, because drafts are verified (but it must never be wrong in valid UTF-8 terms)."""

    def fork(self) -> "GrammarMatcher":
        """An independent copy of this matcher's state (cheap)."""


@runtime_checkable
class CompiledGrammar(Protocol):
    """An immutable, shareable compiled constraint for one vocabulary."""

    @property
    def vocab_size(self) -> int: ...

    def matcher(self) -> GrammarMatcher: ...
