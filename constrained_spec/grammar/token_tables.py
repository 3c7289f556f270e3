"""The vocabulary laid out for vectorized DFA walks, and the per-(lexer state) token tables.

Every token's bytes sit in one padded matrix, so walking all ~49k tokens through a lexer
automaton from one state is a few numpy gathers per byte position instead of a Python loop per
token. A walk reports, per token, where the automaton died (the byte that ends the current lexeme)
and the state just before; tokens that never die end inside the lexeme. Each token is read only
up to the byte where it dies, so a walk costs the bytes actually read (most tokens leave a lexeme
within a few bytes), with no per-vocabulary trie to build first. The walks depend only on (lexer
context, state, offset), and their results are cached per compiled grammar by the engine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["TokenLayout"]


class TokenLayout:
    """Tokens with bytes, sorted by length (longest first) so step p touches only a prefix.

    `ids[k]` is the token id of sorted row k. Tokens with no bytes (special tokens) are left out:
    they are never allowed by the grammar.
    """

    def __init__(self, token_bytes: Sequence[bytes | None]) -> None:
        pairs = [(i, b) for i, b in enumerate(token_bytes) if b]
        pairs.sort(key=lambda p: -len(p[1]))
        self.ids = np.array([i for i, _ in pairs], dtype=np.int64)  # [N]
        self.lengths = np.array([len(b) for _, b in pairs], dtype=np.int32)  # [N]
        self.max_len = int(self.lengths[0]) if pairs else 0
        mat = np.full((len(pairs), self.max_len + 1), 256, dtype=np.int32)  # [N, L + 1]
        for k, (_, b) in enumerate(pairs):
            mat[k, : len(b)] = np.frombuffer(b, dtype=np.uint8)
        self.bytes = mat
        self.first_bytes = mat[:, 0]  # [N]
        self._first_counts = np.bincount(self.first_bytes, minlength=257)[:256]  # tokens per first byte
        self._by_first = np.argsort(self.first_bytes, kind="stable")  # [N]: rows by first byte, each byte's ascending
        self._first_starts = np.concatenate([[0], np.cumsum(self._first_counts)])  # [257]: each byte's slice of it

    @property
    def num_tokens(self) -> int:
        return len(self.ids)

    def starting_count(self, first: np.ndarray) -> int:
        """How many tokens start with a byte `first` (bool [256]) marks."""
        return int(self._first_counts[first].sum())

    def rows_starting(self, first: np.ndarray) -> np.ndarray:
        """The sorted rows [K] whose first byte `first` (bool [256]) marks."""
        marked = np.flatnonzero(first)
        if len(marked) > 8:
            return np.flatnonzero(first[self.first_bytes])
        parts = [self._by_first[self._first_starts[b]:self._first_starts[b + 1]] for b in marked.tolist()]
        return np.sort(np.concatenate(parts)) if len(parts) > 1 else parts[0] if parts else np.zeros(0, dtype=np.int64)

    def walk_all(self, trans: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
        """Walk every token from `start` through `trans` ([S + 1, 257], dead = S).

        Returns (death [N] int32: byte position that died, -1 if the token stayed alive;
        state [N] int32: the state before the dying byte, or the end state)."""
        return self.walk_rows(trans, np.arange(self.num_tokens), 0, start)

    def walk_rows(self, trans: np.ndarray, rows: np.ndarray, offset: int, start: int) -> tuple[np.ndarray, np.ndarray]:
        """Walk `token[offset:]` of the sorted rows `rows` [M] from `start`, each only up to the
        byte where it dies or ends. Returns (death [M] int32: absolute byte position that died,
        -1 if none; state [M] int32: the state before the dying byte, or the end state)."""
        death, state, _ = self.walk_rows_early(trans, rows, offset, start, None)
        return death, state

    def walk_rows_early(
        self, trans: np.ndarray, rows: np.ndarray, offset: int, start: int, early: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, list[tuple[int, np.ndarray, np.ndarray]]]:
        """walk_rows, also reporting where a token passes an `early` state (bool [S + 1]: the
        lexeme may end there) with a byte that goes on: (position p, indices into rows [K],
        states before byte p [K]) per position (none where `early` is None)."""
        dead = trans.shape[0] - 1
        death = np.full(len(rows), -1, dtype=np.int32)
        state = np.full(len(rows), start, dtype=np.int32)
        live = np.flatnonzero(self.lengths[rows] > offset)  # indices into rows still walking
        lengths = self.lengths[rows]
        stops: list[tuple[int, np.ndarray, np.ndarray]] = []
        p = offset
        while len(live):
            st = state[live]
            nxt = trans[st, self.bytes[rows[live], p]]
            died = nxt == dead
            if early is not None:
                stop = early[st] & ~died
                if stop.any():
                    stops.append((p, live[stop], st[stop]))
            death[live[died]] = p  # state keeps the state before the dying byte
            state[live[~died]] = nxt[~died]
            p += 1
            live = live[~died & (lengths[live] > p)]
        return death, state, stops
