"""Regular constraints through outlines-core's token-level DFA (`outlines_core.Index`).

`CompiledRegex` holds the index plus lazily built per-state caches (packed bitmask row, forced
next byte), shared by all matchers; a `RegexMatcher` is just a stack of DFA states, so accept,
rollback and fork are list operations.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch

from ..bitmask import bitmask_width
from .protocol import GrammarError
from .vocabulary import Vocabulary

__all__ = ["CompiledRegex", "RegexMatcher", "regex_escape"]

_TERMINATED = -1  # pseudo-state after EOS
_REGEX_SPECIAL = set(r"\.+*?()|[]{}^$#&-~")


def regex_escape(text: str) -> str:
    """Escape `text` so the Rust regex engine (outlines-core) matches it literally."""
    out = []
    for ch in text:
        if ch in _REGEX_SPECIAL:
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    return "".join(out)


# outlines-core 0.2.14's Index drops every transition from an accepting DFA state into a
# non-accepting one (`[0-9]+(\.[0-9]+)?` could never write "."). We index `(?:P)<SENTINEL>`
# instead, so the only accepting state is after the sentinel, and read "P accepts here" as "the
# sentinel token is allowed here". The sentinel is a noncharacter models never write, carried by
# a fake token id just past the mask width.
_SENTINEL = "\U0010FFFF"


def _sentinel_id(vocab: Vocabulary) -> int:
    return vocab.size


@lru_cache(maxsize=8)
def _outlines_vocabulary(vocab: Vocabulary):  # -> outlines_core.Vocabulary
    import outlines_core

    by_bytes: dict[bytes, list[int]] = {}
    for token_id, piece in enumerate(vocab.token_bytes):
        if piece is not None:  # specials (incl. EOS) must stay out of the map
            by_bytes.setdefault(piece, []).append(token_id)
    by_bytes.setdefault(_SENTINEL.encode(), []).append(_sentinel_id(vocab))
    return outlines_core.Vocabulary(vocab.eos_token_id, by_bytes)


def _live_transitions(raw: dict[int, dict[int, int]], sentinel: int, eos: int) -> tuple[dict[int, dict[int, int]], frozenset[int]]:
    """Drop the sentinel/EOS edges and every edge into a state that can no longer reach a match
    of P (e.g. inside a half-written sentinel). Returns (transitions, accepting states)."""
    accepting = {s for s, edges in raw.items() if sentinel in edges}
    reverse: dict[int, list[int]] = {}
    for s, edges in raw.items():
        for t, d in edges.items():
            if t != sentinel and t != eos:
                reverse.setdefault(d, []).append(s)
    live, todo = set(accepting), list(accepting)
    while todo:
        for s in reverse.get(todo.pop(), ()):
            if s not in live:
                live.add(s)
                todo.append(s)
    transitions = {
        s: {t: d for t, d in raw[s].items() if d in live and t != sentinel and t != eos} for s in live
    }
    return transitions, frozenset(accepting)


@lru_cache(maxsize=8)
def _first_bytes(vocab: Vocabulary) -> np.ndarray:
    """First byte of every token (-1 for specials), `[len(vocab)]`."""
    return np.array([b[0] if b else -1 for b in vocab.token_bytes], dtype=np.int16)


@lru_cache(maxsize=8)
def _single_byte_tokens(vocab: Vocabulary) -> dict[int, int]:
    """byte value -> a token id whose bytes are exactly that byte."""
    table: dict[int, int] = {}
    for token_id, piece in enumerate(vocab.token_bytes):
        if piece is not None and len(piece) == 1:
            table.setdefault(piece[0], token_id)
    return table


def _trim_partial_utf8(data: bytes) -> bytes:
    """Drop a trailing incomplete UTF-8 sequence so forced text is always whole characters."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # continuation byte: keep looking for the lead byte
            continue
        need = 1 if byte < 0x80 else 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
        return data if need <= back else data[:-back]
    return data


class CompiledRegex:
    """An immutable compiled regex for one vocabulary. Thread-safe: caches only grow."""

    def __init__(self, pattern: str, vocab: Vocabulary) -> None:
        import outlines_core

        self.pattern = pattern
        self.vocab = vocab
        try:
            index = outlines_core.Index(f"(?:{pattern}){_SENTINEL}", _outlines_vocabulary(vocab))
        except Exception as exc:  # outlines-core raises ValueError/BaseException subclasses
            raise GrammarError(f"cannot compile regex {pattern[:200]!r}: {exc}") from exc
        self.initial_state: int = index.get_initial_state()
        # state -> {token: next state}, only into states that can still reach a match.
        self._transitions, self._final = _live_transitions(index.get_transitions(), _sentinel_id(vocab), vocab.eos_token_id)
        if self.initial_state not in self._transitions:
            raise GrammarError(f"regex {pattern[:200]!r} matches no string this vocabulary can write")
        self._masks: dict[int, torch.Tensor] = {}
        self._forced: dict[int, tuple[int, int | None] | None] = {}
        self._lock = threading.Lock()

    @property
    def vocab_size(self) -> int:
        return self.vocab.size

    @property
    def num_states(self) -> int:
        return len(self._transitions)

    def matcher(self) -> "RegexMatcher":
        return RegexMatcher(self)

    # ---- per-state queries (cached) ----
    def next_state(self, state: int, token_id: int) -> int | None:
        if state == _TERMINATED:
            return None
        if token_id == self.vocab.eos_token_id:
            return _TERMINATED if state in self._final else None
        return self._transitions.get(state, {}).get(token_id)

    def is_final(self, state: int) -> bool:
        return state in self._final

    def allowed_tokens(self, state: int) -> list[int]:
        """Token ids allowed in `state`, EOS included where the state accepts."""
        tokens = [t for t in self._transitions.get(state, {}) if t != self.vocab.eos_token_id]
        if state in self._final:
            tokens.append(self.vocab.eos_token_id)
        return tokens

    def mask(self, state: int) -> torch.Tensor:
        """Packed int32 row `[ceil(V/32)]` for `state` (shared: never modify it)."""
        row = self._masks.get(state)
        if row is None:
            width = bitmask_width(self.vocab.size)
            allowed = np.zeros(width * 32, dtype=bool)
            if state != _TERMINATED:
                allowed[np.asarray(self.allowed_tokens(state), dtype=np.int64)] = True
            # little bit order: bit i of byte j is token 8j+i, so little-endian int32 word j
            # holds tokens 32j..32j+31 with bit i = token 32j+i (the bitmask.py layout).
            packed = np.packbits(allowed, bitorder="little").view("<i4")
            row = torch.from_numpy(packed.copy())
            with self._lock:
                self._masks.setdefault(state, row)
        return row

    def forced_step(self, state: int) -> tuple[int, int | None] | None:
        """(byte, state after it) when every continuation from `state` starts with one byte;
        the state is None when no single-byte token can carry us past it. None if not forced."""
        if state in self._forced:
            return self._forced[state]
        result: tuple[int, int | None] | None = None
        if state != _TERMINATED and state not in self._final:
            tokens = np.fromiter(self._transitions.get(state, {}).keys(), dtype=np.int64)
            tokens = tokens[tokens < len(self.vocab.token_bytes)]
            firsts = np.unique(_first_bytes(self.vocab)[tokens]) if len(tokens) else np.empty(0)
            if len(firsts) == 1 and firsts[0] >= 0:
                byte = int(firsts[0])
                single = _single_byte_tokens(self.vocab).get(byte)
                after = self._transitions[state].get(single) if single is not None else None
                result = (byte, after)
        self._forced[state] = result
        return result


class RegexMatcher:
    """One request's position in a `CompiledRegex`: a stack of DFA states (unbounded rollback)."""

    def __init__(self, compiled: CompiledRegex, states: list[int] | None = None) -> None:
        self._compiled = compiled
        self._states = states if states is not None else [compiled.initial_state]

    @property
    def vocab_size(self) -> int:
        return self._compiled.vocab.size

    @property
    def state(self) -> int:
        return self._states[-1]

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        source = self._compiled.mask(self.state)
        if bitmask.dtype != torch.int32 or bitmask.ndim != 2 or bitmask.shape[1] != source.shape[0]:
            raise GrammarError(
                f"bitmask must be int32 [rows, {source.shape[0]}] for vocab size {self.vocab_size}, "
                f"got {bitmask.dtype} {tuple(bitmask.shape)}"
            )
        bitmask[row].copy_(source)

    def accept_token(self, token_id: int) -> None:
        nxt = self._compiled.next_state(self.state, int(token_id))
        if nxt is None:
            where = "after EOS" if self.state == _TERMINATED else f"at output position {len(self._states) - 1}"
            raise GrammarError(f"token {token_id} is not allowed by the grammar {where}")
        self._states.append(nxt)

    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        state = self.state
        for count, token_id in enumerate(token_ids):
            nxt = self._compiled.next_state(state, int(token_id))
            if nxt is None:
                return count
            state = nxt
        return len(token_ids)

    def rollback(self, num_tokens: int) -> None:
        if num_tokens < 0 or num_tokens > len(self._states) - 1:
            raise GrammarError(f"cannot roll back {num_tokens} tokens: only {len(self._states) - 1} accepted")
        if num_tokens:
            del self._states[-num_tokens:]

    def is_accepting(self) -> bool:
        return self._compiled.is_final(self.state)

    def is_terminated(self) -> bool:
        return self.state == _TERMINATED

    def forced_bytes(self, max_bytes: int = 64) -> bytes:
        out = bytearray()
        state: int | None = self.state
        while state is not None and len(out) < max_bytes:
            step = self._compiled.forced_step(state)
            if step is None:
                break
            out.append(step[0])
            state = step[1]
        return _trim_partial_utf8(bytes(out))

    def fork(self) -> "RegexMatcher":
        return RegexMatcher(self._compiled, list(self._states))
