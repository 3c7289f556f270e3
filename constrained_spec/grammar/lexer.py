"""Lark's lexer as byte automata: terminals, and the product DFA of the terminals the lexer
chooses among in one parser state (a "lexer context").

Lexing rule (what Lark's basic/contextual lexers do, in automaton form):
- a lexeme keeps growing while any terminal of the context can still match it (maximal munch,
  one byte of lookahead: a lexeme ends exactly when the next byte continues no terminal);
- when it ends, the terminal emitted is the first *accepting* one in Lark's order
  (priority, longest possible width, pattern length, name), then Lark's "unless" rule retypes a
  regex match that equals a string terminal (so `select` read by NAME becomes the keyword SELECT,
  but `selectx` stays a NAME). With `every_match` (JSON schemas' grammars) the lexeme is read as
  each accepting terminal instead, and may also end where one accepts while another goes on
  (`early`); the engine follows every parse (lark_engine.py).
Known difference from Lark (documented in the README section): Lark tries terminals in order and
takes the first that matches *any* prefix, while we take the longest lexeme; the two agree unless a
higher-ordered terminal matches a strictly shorter prefix than a lower one (rare: only explicit
terminal priorities or unusual overlaps), and we never backtrack more than one byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .byte_dfa import ByteDFA, RegexUnsupported, compile_byte_dfa
from .protocol import GrammarError

__all__ = ["Terminal", "LexerContext", "terminals_from_lark"]

# Lark's `common` terminals written with lazy quantifiers / lookbehind, and greedy, unambiguous
# patterns that match exactly the same lexemes (first unescaped quote / first "*/" closes).
_EQUIVALENT_PATTERNS = {
    '".*?(?<!\\\\)(\\\\\\\\)*?"': r'"(?:[^"\\\n]|\\[^\n])*"',  # ESCAPED_STRING
    "/\\*(.|\n)*?\\*/": r"/\*(?:[^*]|\*+[^*/])*\*+/",  # C_COMMENT
}


@dataclass(frozen=True)
class Terminal:
    name: str
    dfa: ByteDFA
    is_string: bool  # a Lark PatternStr (literal), eligible for the "unless" retyping
    value: str  # the literal, or the regex source
    flags: frozenset[str]
    regexp: str  # Lark's to_regexp(), what Lark itself matches with
    sort_key: tuple  # Lark's lexer order


def terminals_from_lark(lark_terminals) -> dict[str, Terminal]:
    """Compile every Lark TerminalDef to a byte DFA; unsupported regex features -> GrammarError."""
    out: dict[str, Terminal] = {}
    for t in lark_terminals:
        regexp = t.pattern.to_regexp()
        source = _EQUIVALENT_PATTERNS.get(regexp, regexp)
        try:
            dfa = compile_byte_dfa(source)
        except RegexUnsupported as e:
            raise GrammarError(f"terminal {t.name} ({regexp!r}): {e}") from e
        key = (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name)
        out[str(t.name)] = Terminal(
            name=str(t.name),
            dfa=dfa,
            is_string=t.pattern.type == "str",
            value=t.pattern.value,
            flags=frozenset(t.pattern.flags),
            regexp=regexp,
            sort_key=(t.priority, key),
        )
    return out


class LexerContext:
    """The terminals one lexer chooses among, run side by side as one product DFA.

    State 0 is the empty lexeme. `trans[s, b]` is the next state, `dead` (= num_states) when no
    terminal continues; column 256 is padding (keeps the state), so token walks can be
    vectorized over a padded byte matrix. `alive_bits[s]`: bit i set when terms[i] can still
    complete; `winner[s]`: index of the terminal Lark emits if the lexeme ends in s, -1 if none.
    `ends[s]`: the terminals the lexeme is read as if it ends in s: (winner,) by Lark's rule, or
    with `every_match` each accepting terminal (a set of parses: a JSON schema's grammar means
    the union of its branches, and two branches' terminals may match one lexeme); `end_arr[s]`:
    its index in `end_sets`, -1 if none (dead included). `early[s]` (every_match): the same
    terminals where the lexeme may also end before a byte that continues it (another terminal
    goes on), else ().
    """

    def __init__(self, terms: list[Terminal], ignore: frozenset[str] = frozenset(), max_states: int = 50000,
                 every_match: bool = False) -> None:
        terms = sorted(terms, key=lambda t: t.sort_key[1])
        self.terms: tuple[str, ...] = tuple(t.name for t in terms)
        self.index = {name: i for i, name in enumerate(self.terms)}
        self.ignore_bits = sum(1 << i for i, name in enumerate(self.terms) if name in ignore)
        dfas = [t.dfa for t in terms]
        embedded, unless = _unless_rules(terms)

        # Bytes every terminal treats alike (same column in each DFA) lead to the same product
        # state: the walk visits one byte per class (JSON contexts have ~20 classes, not 256).
        ranks: dict[tuple[int, ...], int] = {}
        rank_of = [ranks.setdefault(joint, len(ranks)) for joint in zip(*(d.byte_classes for d in dfas))] if dfas else [0] * 256
        first_bytes = [rank_of.index(k) for k in range(len(ranks) or 1)]  # one byte per class, in byte order

        # A product state is the tuple of (terminal index, its DFA state) for the terminals still
        # alive: past a key that told terminals apart few are, and a step costs their number,
        # not the context's (a schema's context holds hundreds of key terminals). Once one
        # terminal alone is alive, the rest of the walk is that terminal's own DFA: such states
        # are not walked here but laid down as a block of its DFA's table (an object's optional
        # keys give contexts of 1, 2, ..., n keys, each mostly single-key states: clang-format's
        # 235 contexts held 206,389 states built one by one).
        start = tuple((i, 0) for i in range(len(dfas)))
        ids = {start: 0}
        order = [start]  # the start and the states of two or more live terminals
        singles: dict[tuple[int, int], int] = {}  # (terminal, its DFA state) -> slot, a move's target -1 - slot

        def state_id(key: tuple) -> int:
            if len(key) == 1:
                return -1 - singles.setdefault(key[0], len(singles))
            if key not in ids:
                if len(order) >= max_states:
                    raise GrammarError(f"lexer automaton over {self.terms} exceeds {max_states} states")
                ids[key] = len(order)
                order.append(key)
            return ids[key]

        classes = len(first_bytes)
        edge_memo: dict[tuple[int, int], list[tuple[int, int]]] = {}

        def edges(i: int, q: int) -> list[tuple[int, int]]:
            """Terminal i's (class, next state) pairs out of q, by class. A class's bytes move
            every terminal alike, so its first byte is its first live byte: the pairs come out in
            class order, as a walk over the classes would meet them."""
            got = edge_memo.get((i, q))
            if got is None:
                live = dfas[i].sparse_row(q)
                if live is not None and len(live) == 1:  # a literal's state: one live byte
                    got = [(rank_of[live[0][0]], live[0][1])]
                elif live is not None and len(live) < classes:  # a few live bytes, not every class
                    first_of_class: dict[int, int] = {}
                    for b, t in live:
                        first_of_class.setdefault(rank_of[b], t)
                    got = list(first_of_class.items())
                else:
                    row = dfas[i].trans[q]
                    got = [(k, row[b]) for k, b in enumerate(first_bytes) if row[b] >= 0]
                edge_memo[(i, q)] = got
            return got

        # Moves as flat (state, class, next state) columns, not a row of every class per state.
        from_states: list[int] = []
        on_classes: list[int] = []
        to_states: list[int] = []
        done = 0
        while done < len(order):
            by_class: dict[int, list[tuple[int, int]]] = {}
            for i, q in order[done]:  # in terminal order, so each next state's pairs are too
                for k, t in edges(i, q):
                    by_class.setdefault(k, []).append((i, t))
            for k, pairs in by_class.items():
                from_states.append(done)
                on_classes.append(k)
                to_states.append(state_id(tuple(pairs)))
            done += 1

        # The blocks: each terminal some move leaves alone, its whole DFA, after the walked states.
        walked_count = len(order)
        block_of: dict[int, int] = {}  # terminal -> its block's first state
        self.num_states = walked_count
        for i, _ in singles:
            if i not in block_of:
                block_of[i] = self.num_states
                self.num_states += dfas[i].num_states
        if self.num_states > max_states:
            raise GrammarError(f"lexer automaton over {self.terms} exceeds {max_states} states")
        self.dead = self.num_states
        slot_state = np.array([block_of[i] + q for i, q in singles] or [0], dtype=np.int64)
        targets = np.array(to_states, dtype=np.int64)
        targets = np.where(targets < 0, slot_state[np.maximum(-1 - targets, 0)], targets)
        by_class_table = np.full((walked_count, classes), -1, dtype=np.int64)  # [W, classes]
        by_class_table[from_states, on_classes] = targets
        table = np.full((self.num_states + 1, 257), self.dead, dtype=np.int32)  # [S + 1, 257]
        walked = by_class_table[:, rank_of]  # [W, 256], -1 = dead
        table[:walked_count, :256] = np.where(walked < 0, self.dead, walked)
        for i, first in block_of.items():
            own = dfas[i].table  # [n_i, 256], -1 = dead
            table[first:first + len(own), :256] = np.where(own < 0, self.dead, own + first)
        table[:, 256] = np.arange(self.num_states + 1)
        self.trans = table
        self._rows: list[list[int] | None] = [None] * self.num_states  # row(): Python rows, on first use

        self.alive_bits: list[int] = []
        self.accept_bits: list[int] = []
        self.winner: list[int] = []
        self.ends: list[tuple[int, ...]] = []
        accepting = [d.accepting for d in dfas]
        for key in order:  # its pairs in terminal order
            alive = acc = 0
            accepted = []
            for i, q in key:
                alive |= 1 << i
                if q in accepting[i]:
                    acc |= 1 << i
                    accepted.append(i)
            w = _winner(acc, accepted, embedded, unless)
            self.alive_bits.append(alive)
            self.accept_bits.append(acc)
            self.winner.append(w)
            self.ends.append(tuple(accepted) if every_match else (w,) if w >= 0 else ())
        for i in block_of:  # one terminal alive: it is what the lexeme is read as, where it accepts
            final = [q in accepting[i] for q in range(dfas[i].num_states)]
            self.alive_bits += [1 << i] * len(final)
            self.accept_bits += [1 << i if f else 0 for f in final]
            self.winner += [i if f else -1 for f in final]
            self.ends += [(i,) if f else () for f in final]
        set_ids: dict[tuple[int, ...], int] = {}
        end_ids = [set_ids.setdefault(e, len(set_ids)) if e else -1 for e in self.ends]
        self.end_sets: list[tuple[int, ...]] = list(set_ids)
        self.end_arr = np.array(end_ids + [-1], dtype=np.int32)  # [S + 1]
        # every_match: where a terminal accepts while another, not accepting, goes on (a key
        # alone beside that key written with what follows), the lexeme may also end there:
        # longest match alone would lose the shorter one's parse. `early_arr[s]`: its end set, -1 if none
        early = [e if every_match and e >= 0 and alive & ~acc else -1
                 for e, alive, acc in zip(end_ids, self.alive_bits, self.accept_bits)]
        self.early_arr = np.array(early + [-1], dtype=np.int32)  # [S + 1]
        self.early: list[tuple[int, ...]] = [self.end_sets[e] if e >= 0 else () for e in early]
        self.early_states = self.early_arr >= 0  # bool [S + 1]
        self.has_early = bool(self.early_states.any())
        self._good_cache: dict[int, np.ndarray] = {}

    def row(self, state: int) -> list[int]:
        """Row `state` of `trans` as a Python list, -1 = dead, for the per-token Python walk:
        built on first use (a grammar's hundreds of contexts are built at compile time and a
        generation visits few of their states; built for every state, these rows were a sixth
        of the contexts' build time)."""
        got = self._rows[state]
        if got is None:
            moves = self.trans[state, :256]
            got = self._rows[state] = np.where(moves == self.dead, -1, moves).tolist()
        return got

    def good_states(self, viable_bits: int) -> np.ndarray:
        """Bool [S + 1]: states where some still-completable terminal is in `viable_bits`."""
        got = self._good_cache.get(viable_bits)
        if got is None:
            got = np.array([(a & viable_bits) != 0 for a in self.alive_bits] + [False])
            self._good_cache[viable_bits] = got
        return got


@lru_cache(maxsize=4096)
def _matches_whole(regexp: str, value: str) -> bool:
    """Lark's test (a match from the start that is the whole literal), remembered: a grammar's
    contexts share most of their terminals (hundreds of keys in each of hundreds of contexts)."""
    m = re.match(regexp, value)
    return m is not None and m.group(0) == value


def _unless_rules(terms: list[Terminal]) -> tuple[set[int], dict[int, list[int]]]:
    """Lark's `_create_unless`: string terminals fully matched by a regex terminal of the same
    priority are retyped from it; those whose flags the regex also has leave the alternation."""
    embedded: set[int] = set()
    unless: dict[int, list[int]] = {}
    for r, rt in enumerate(terms):
        if rt.is_string:
            continue
        for s, st in enumerate(terms):
            if not st.is_string or st.sort_key[0] != rt.sort_key[0]:
                continue
            if _matches_whole(rt.regexp, st.value):
                unless.setdefault(r, []).append(s)
                if st.flags <= rt.flags:
                    embedded.add(s)
    return embedded, unless


def _winner(acc: int, accepted: list[int], embedded: set[int], unless: dict[int, list[int]]) -> int:
    """The terminal Lark emits where `accepted` (ascending; `acc` as bits) accept, -1 if none."""
    if not accepted:
        return -1
    first = next((i for i in accepted if i not in embedded), accepted[0])
    for s in unless.get(first, ()):
        if acc >> s & 1:  # the string terminal's DFA accepts exactly its literal
            return s
    return first
