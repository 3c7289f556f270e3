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
        # state: the walk visits one byte per class, in byte order, so states are numbered as a
        # byte-by-byte walk numbers them (JSON contexts have ~20 classes, not 256).
        ranks: dict[tuple[int, ...], int] = {}
        rank_of = [ranks.setdefault(joint, len(ranks)) for joint in zip(*(d.byte_classes for d in dfas))] if dfas else [0] * 256
        first_bytes = [rank_of.index(k) for k in range(len(ranks) or 1)]  # one byte per class, in byte order

        # A product state is the tuple of (terminal index, its DFA state) for the terminals still
        # alive: past a key that told terminals apart few are, and a step costs their number,
        # not the context's (a schema's context holds hundreds of key terminals).
        start = tuple((i, 0) for i in range(len(dfas)))
        ids = {start: 0}
        order = [start]

        def state_id(key: tuple) -> int:
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

        # Moves as flat (state, class, next state) columns, not a row of every class per state:
        # most product states are one key's literal, with one move out.
        from_states: list[int] = []
        on_classes: list[int] = []
        to_states: list[int] = []
        done = 0
        while done < len(order):
            cur = order[done]
            if len(cur) == 1:
                (i, q), = cur
                for k, t in edges(i, q):
                    from_states.append(done)
                    on_classes.append(k)
                    to_states.append(state_id(((i, t),)))
            else:
                by_class: dict[int, list[tuple[int, int]]] = {}
                for i, q in cur:  # in terminal order, so each next state's pairs are too
                    for k, t in edges(i, q):
                        by_class.setdefault(k, []).append((i, t))
                for k in sorted(by_class):  # states numbered in class order, as before
                    from_states.append(done)
                    on_classes.append(k)
                    to_states.append(state_id(tuple(by_class[k])))
            done += 1

        self.num_states = len(order)
        self.dead = self.num_states
        by_class_table = np.full((self.num_states, classes), -1, dtype=np.int32)  # [S, classes]
        by_class_table[from_states, on_classes] = to_states
        walked = by_class_table[:, rank_of]  # [S, 256], -1 = dead
        table = np.full((self.num_states + 1, 257), self.dead, dtype=np.int32)
        table[: self.num_states, :256] = np.where(walked < 0, self.dead, walked)
        table[:, 256] = np.arange(self.num_states + 1)
        self.trans = table  # [S + 1, 257]
        self._rows: list[list[int] | None] = [None] * self.num_states  # row(): Python rows, on first use

        self.alive_bits: list[int] = []
        self.accept_bits: list[int] = []
        self.winner: list[int] = []
        for key in order:
            alive = acc = 0
            for i, q in key:
                alive |= 1 << i
                if q in dfas[i].accepting:
                    acc |= 1 << i
            self.alive_bits.append(alive)
            self.accept_bits.append(acc)
            self.winner.append(_winner(acc, embedded, unless, len(dfas)))
        set_ids: dict[tuple[int, ...], int] = {}
        self.ends: list[tuple[int, ...]] = []
        for acc, w in zip(self.accept_bits, self.winner):
            self.ends.append(tuple(i for i in range(len(dfas)) if acc >> i & 1) if every_match else (w,) if w >= 0 else ())
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


def _winner(acc: int, embedded: set[int], unless: dict[int, list[int]], n: int) -> int:
    if not acc:
        return -1
    first = next((i for i in range(n) if acc >> i & 1 and i not in embedded), None)
    if first is None:
        first = next(i for i in range(n) if acc >> i & 1)
    for s in unless.get(first, ()):
        if acc >> s & 1:  # the string terminal's DFA accepts exactly its literal
            return s
    return first
