"""Regular constraints through outlines-core's token-level DFA (`outlines_core.Index`).

`CompiledRegex` holds every live state's packed mask row (built at compile with one numpy pass
per state: filling a mask is a copy), its moves as two int32 arrays (token, next state) and a lazy
forced-next-byte cache, shared by all matchers; a `RegexMatcher` is just a stack of DFA states, so
accept, rollback and fork are list operations. Compile time is dominated by outlines-core's own
Index build (Rust, O(states x vocab)); the Index is dropped once read: it holds ~95 bytes per
move (two strings of at most 80 characters: 7.3M moves, 700 MB), the arrays 8.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch

from ..bitmask import bitmask_width
from .protocol import GrammarError
from .vocabulary import Vocabulary, trim_partial_utf8

__all__ = ["CompiledRegex", "RegexMatcher", "regex_escape", "regex_error_detail"]

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
# sentinel token leads to a final state". The sentinel is a noncharacter models never write, carried by
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


def _pack(tokens: np.ndarray, vocab_size: int) -> np.ndarray:
    """Token ids -> packed little-endian bit row, uint8 `[4 * ceil(V/32)]` (the bitmask.py layout
    once viewed as int32: bit i of word j is token 32j+i)."""
    allowed = np.zeros(bitmask_width(vocab_size) * 32, dtype=bool)
    allowed[tokens] = True
    return np.packbits(allowed, bitorder="little")


def _state_tables(
    raw: dict[int, dict[int, int]], finals: set[int], sentinel: int, eos: int, vocab_size: int
) -> tuple[dict[int, np.ndarray], dict[int, tuple[memoryview, memoryview]], frozenset[int]]:
    """Per live state, its packed allowed-token row (EOS not included) and its moves (tokens
    ascending, next states: int32 [M] memoryviews, into live states only); and the accepting states.

    A state accepts P iff the sentinel leads from it to a final state of `(?:P)<SENTINEL>`: merely
    allowing the sentinel is not enough, since P itself may read U+10FFFF as an ordinary character
    (inside any `[^"]` string class). Liveness needs only the state graph (state -> distinct next
    states), never per-token entries: a state is live when it can still reach an accepting state.
    Edges into dead states (e.g. inside a half-written sentinel) are masked out."""
    accepting = frozenset(s for s, edges in raw.items() if edges.get(sentinel) in finals)
    successors: dict[int, set[int]] = {}
    arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # state -> (tokens, next states), special edges left out
    for s, edges in raw.items():
        if sentinel in edges or eos in edges:  # numpy: a Python filter over ~50,000 edges cost 5 ms a state
            tokens = np.fromiter(edges.keys(), dtype=np.int64, count=len(edges))
            nexts = np.fromiter(edges.values(), dtype=np.int64, count=len(edges))
            plain = (tokens != sentinel) & (tokens != eos)
            arrays[s] = tokens[plain], nexts[plain]
            successors[s] = set(np.unique(arrays[s][1]).tolist())
        else:
            successors[s] = set(edges.values())
    reverse: dict[int, list[int]] = {}
    for s, nexts in successors.items():
        for d in nexts:
            reverse.setdefault(d, []).append(s)
    live, todo = set(accepting), list(accepting)
    while todo:
        for s in reverse.get(todo.pop(), ()):
            if s not in live:
                live.add(s)
                todo.append(s)
    rows: dict[int, np.ndarray] = {}
    moves: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    live_ids = np.fromiter(live, dtype=np.int64, count=len(live))
    for s in live:
        edges = raw[s]
        if s in arrays:
            tokens, nexts = arrays[s]
        else:
            tokens = np.fromiter(edges.keys(), dtype=np.int64, count=len(edges))
            nexts = np.fromiter(edges.values(), dtype=np.int64, count=len(edges))
        if not successors[s] <= live:
            keep = np.isin(nexts, live_ids)
            tokens, nexts = tokens[keep], nexts[keep]
        order = np.argsort(tokens)  # memoryviews: bisect over one is ~0.4 us, numpy's searchsorted on a scalar ~10
        moves[s] = memoryview(tokens[order].astype(np.int32)), memoryview(nexts[order].astype(np.int32))
        rows[s] = _pack(tokens, vocab_size)
    return rows, moves, accepting


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


def _return_freed_memory() -> None:
    """glibc keeps freed heap memory (the Index's hash maps) resident; malloc_trim returns it
    (elsewhere: nothing to do, or no such call)."""
    import ctypes
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # musl or another libc
            pass


def regex_error_detail(pattern: str, exc: BaseException) -> str:
    """A position and reason for a regex outlines-core refused, from Python's `re` parser
    (a close dialect); the engine's own message where Python reads the pattern fine."""
    import re

    try:
        re.compile(pattern)
    except re.error as err:
        where = f"at position {err.pos}" if err.pos is not None else ""
        return f"{err.msg} {where}".strip()
    except (RecursionError, OverflowError, ValueError):
        pass
    for construct, name in (("(?=", "lookahead"), ("(?!", "lookahead"), ("(?<=", "lookbehind"), ("(?<!", "lookbehind")):
        at = pattern.find(construct)
        if at >= 0:
            return f"{name} is not supported (at position {at})"
    back = re.search(r"\\[1-9]", pattern)
    if back:
        return f"backreferences are not supported (at position {back.start()})"
    return f"not supported by the regex engine (Rust regex syntax): {' '.join(str(exc).split())}"


class CompiledRegex:
    """An immutable compiled regex for one vocabulary. Thread-safe: caches only grow.

    Every live state's packed mask row is built at compile (one numpy pass per state), so filling
    a mask is a copy; advancing asks the outlines-core Index (Rust) for the next state once the
    mask bit says the token is allowed."""

    def __init__(self, pattern: str, vocab: Vocabulary) -> None:
        import outlines_core

        self.pattern = pattern
        self.vocab = vocab
        try:
            index = outlines_core.Index(f"(?:{pattern}){_SENTINEL}", _outlines_vocabulary(vocab))
        except Exception as exc:  # outlines-core raises ValueError/BaseException subclasses
            raise GrammarError(f"cannot compile regex {pattern[:200]!r}: {regex_error_detail(pattern, exc)}") from exc
        self.initial_state: int = index.get_initial_state()
        raw = index.get_transitions()  # state -> {token: next}; dropped after this pass
        finals = set(index.get_final_states())
        del index  # read whole: its moves live on in self._moves, ~12x smaller
        self._rows, self._moves, self._final = _state_tables(raw, finals, _sentinel_id(vocab), vocab.eos_token_id, vocab.size)
        del raw
        if len(self._rows) * vocab.size > 50_000_000:  # ~ a GB of index freed: hand it back to the system
            _return_freed_memory()
        if self.initial_state not in self._rows:
            raise GrammarError(f"regex {pattern[:200]!r} matches no string this vocabulary can write")
        # every live state's int32 mask row, EOS included, built now so filling a mask is one copy
        # (a non-accepting state's row shares the packed buffer; an accepting one gets the EOS bit)
        self._masks: dict[int, torch.Tensor] = {s: self._build_mask(s) for s in self._rows}
        self._forced: dict[int, tuple[int, int | None] | None] = {}
        self._lock = threading.Lock()
        # what it holds (the compile cache weighs it): moves and two packed rows per state
        self.approx_bytes = sum(t.nbytes + n.nbytes for t, n in self._moves.values()) + 2 * sum(r.nbytes for r in self._rows.values())

    @property
    def vocab_size(self) -> int:
        return self.vocab.size

    @property
    def num_states(self) -> int:
        return len(self._rows)

    def matcher(self) -> "RegexMatcher":
        return RegexMatcher(self)

    # ---- per-state queries ----
    def next_state(self, state: int, token_id: int) -> int | None:
        if state == _TERMINATED:
            return None
        if token_id == self.vocab.eos_token_id:
            return _TERMINATED if state in self._final else None
        row = self._rows.get(state)
        if row is None or not 0 <= token_id < self.vocab.size or not (row[token_id >> 3] >> (token_id & 7)) & 1:
            return None  # the row already excludes tokens into dead states
        tokens, nexts = self._moves[state]
        return nexts[bisect_left(tokens, token_id)]

    def is_final(self, state: int) -> bool:
        return state in self._final

    def allowed_tokens(self, state: int) -> list[int]:
        """Token ids allowed in `state`, EOS included where the state accepts."""
        row = self._rows.get(state)
        tokens = [] if row is None else np.flatnonzero(np.unpackbits(row, bitorder="little")).tolist()
        if state in self._final:
            tokens.append(self.vocab.eos_token_id)
        return tokens

    def mask(self, state: int) -> torch.Tensor:
        """Packed int32 row `[ceil(V/32)]` for `state` (shared: never modify it)."""
        row = self._masks.get(state)
        if row is None:  # a dead or terminated state: nothing is allowed
            row = self._build_mask(state)
            with self._lock:
                row = self._masks.setdefault(state, row)
        return row

    def _build_mask(self, state: int) -> torch.Tensor:
        packed = self._rows.get(state)
        if packed is None:
            packed = np.zeros(bitmask_width(self.vocab.size) * 4, dtype=np.uint8)
        elif state in self._final:
            packed = packed.copy()
            eos = self.vocab.eos_token_id
            packed[eos >> 3] |= 1 << (eos & 7)
        return torch.from_numpy(packed.view("<i4"))

    def forced_step(self, state: int) -> tuple[int, int | None] | None:
        """(byte, state after it) when every continuation from `state` starts with one byte;
        the state is None when no single-byte token can carry us past it. None if not forced."""
        if state in self._forced:
            return self._forced[state]
        result: tuple[int, int | None] | None = None
        if state != _TERMINATED and state not in self._final and state in self._rows:
            tokens = np.flatnonzero(np.unpackbits(self._rows[state], bitorder="little"))
            tokens = tokens[tokens < len(self.vocab.token_bytes)]
            firsts = np.unique(_first_bytes(self.vocab)[tokens]) if len(tokens) else np.empty(0)
            if len(firsts) == 1 and firsts[0] >= 0:
                byte = int(firsts[0])
                single = _single_byte_tokens(self.vocab).get(byte)
                after = self.next_state(state, single) if single is not None else None
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
        return trim_partial_utf8(bytes(out))

    def fork(self) -> "RegexMatcher":
        return RegexMatcher(self._compiled, list(self._states))
