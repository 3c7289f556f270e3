"""The vocabulary laid out for vectorized DFA walks, and the per-(lexer state) token tables.

Every token's bytes sit in one padded matrix (padding byte 256 keeps a DFA state unchanged), so
walking all ~49k tokens through a lexer automaton from one state is a few dozen numpy gathers
instead of a Python loop per token. A walk reports, per token, where the automaton died (the byte
that ends the current lexeme) and the state just before; tokens that never die end inside the
lexeme. These tables depend only on (lexer context, state), so they are computed once per
compiled grammar and reused at every step.
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
        # active[p] = number of tokens longer than p (a prefix of the sorted rows).
        self.active = np.array([(self.lengths > p).sum() for p in range(self.max_len)], dtype=np.int64)

    @property
    def num_tokens(self) -> int:
        return len(self.ids)

    def walk_all(self, trans: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
        """Walk every token from `start` through `trans` ([S + 1, 257], dead = S).

        Returns (death [N] int32: byte position that died, -1 if the token stayed alive;
        state [N] int32: the state before the dying byte, or the end state)."""
        dead = trans.shape[0] - 1
        n = self.num_tokens
        state = np.full(n, start, dtype=np.int32)
        death = np.full(n, -1, dtype=np.int32)
        alive = np.ones(n, dtype=bool)
        for p in range(self.max_len):
            m = int(self.active[p])
            cur = state[:m]
            nxt = trans[cur, self.bytes[:m, p]]
            died = (nxt == dead) & alive[:m]
            if died.any():
                death[:m][died] = p
                alive[:m] &= ~died
            state[:m] = np.where(alive[:m], nxt, cur)
        return death, state

    def walk_from(
        self, trans: np.ndarray, rows: np.ndarray, offsets: np.ndarray, start: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Like walk_all, for sorted rows `rows` [M] starting at byte `offsets` [M]; death
        positions are absolute byte positions in the token."""
        dead = trans.shape[0] - 1
        m = len(rows)
        state = np.full(m, start, dtype=np.int32)
        death = np.full(m, -1, dtype=np.int32)
        alive = np.ones(m, dtype=bool)
        steps = int((self.lengths[rows] - offsets).max()) if m else 0
        for k in range(steps):
            pos = np.minimum(offsets + k, self.max_len)
            nxt = trans[state, self.bytes[rows, pos]]
            died = (nxt == dead) & alive
            if died.any():
                death[died] = pos[died]
                alive &= ~died
            state = np.where(alive, nxt, state)
        return death, state
