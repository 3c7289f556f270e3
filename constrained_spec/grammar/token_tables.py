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
        self._tries: dict[int, list] = {}
        # active[p] = number of tokens longer than p (a prefix of the sorted rows).
        self.active = np.array([(self.lengths > p).sum() for p in range(self.max_len)], dtype=np.int64)

    @property
    def num_tokens(self) -> int:
        return len(self.ids)

    def walk_all(self, trans: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
        """Walk every token from `start` through `trans` ([S + 1, 257], dead = S).

        Returns (death [N] int32: byte position that died, -1 if the token stayed alive;
        state [N] int32: the state before the dying byte, or the end state)."""
        return self.walk_suffixes(trans, 0, start)

    def walk_suffixes(self, trans: np.ndarray, offset: int, start: int) -> tuple[np.ndarray, np.ndarray]:
        """Walk `token[offset:]` of every token longer than `offset` (the sorted rows
        [0, active[offset])) from `start`; death positions are absolute byte positions.

        Walks the trie of those byte strings level by level, so shared prefixes are read once:
        a few numpy gathers per level instead of one per token byte."""
        dead = trans.shape[0] - 1
        levels = self._trie(offset)
        m = int(self.active[offset]) if offset < self.max_len else 0
        out_death = np.full(m, -1, dtype=np.int32)
        out_state = np.full(m, start, dtype=np.int32)
        st_prev = np.array([start], dtype=np.int32)
        death_prev = np.array([-1], dtype=np.int32)
        before_prev = st_prev
        for depth, (parent, byte, end_rows, end_nodes) in enumerate(levels):
            ps = st_prev[parent]
            st = trans[ps, byte]
            newly = (st == dead) & (ps != dead)
            death = np.where(newly, depth + offset, death_prev[parent])
            before = np.where(newly, ps, before_prev[parent])
            if len(end_rows):
                d = death[end_nodes]
                out_death[end_rows] = d
                out_state[end_rows] = np.where(d < 0, st[end_nodes], before[end_nodes])
            st_prev, death_prev, before_prev = st, death, before
        return out_death, out_state

    def _trie(self, offset: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Per trie level of the strings token[offset:]: (parent node [K], byte [K], rows of
        strings ending at this level, their node). Built once per offset, vectorized."""
        got = self._tries.get(offset)
        if got is not None:
            return got
        m = int(self.active[offset]) if offset < self.max_len else 0
        sub = self.bytes[:m, offset:]  # [M, W]; padding 256 sorts after every byte
        lens = self.lengths[:m] - offset
        order = np.lexsort(sub.T[::-1]) if m else np.zeros(0, dtype=np.int64)
        srt, slen = sub[order], lens[order]
        diff = np.ones_like(srt, dtype=bool)
        diff[1:] = srt[1:] != srt[:-1]
        first_diff = np.logical_or.accumulate(diff, axis=1)  # differs from the previous row in [:p+1]
        levels = []
        node_of = np.zeros(m, dtype=np.int64)  # node index of each sorted row at the previous level
        for p in range(int(slen.max()) if m else 0):
            r = np.flatnonzero(slen > p)
            new = first_diff[r, p]
            new[0] = True
            node = np.cumsum(new) - 1
            heads = r[new]
            parent = node_of[heads] if p else np.zeros(len(heads), dtype=np.int64)
            byte = srt[heads, p]
            node_of[r] = node
            ending = slen[r] == p + 1
            levels.append((parent, byte, order[r[ending]], node[ending]))
        self._tries[offset] = levels
        return levels
