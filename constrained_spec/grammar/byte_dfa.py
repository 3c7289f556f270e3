"""Python regex -> trimmed byte-level DFA, for Lark terminals.

Lark terminals are Python `re` patterns over text; tokens are bytes. We parse the pattern with
Python's own parser (`re._parser`), build a Thompson NFA whose character classes are expanded
into UTF-8 byte-range sequences, then determinize over bytes. States that cannot reach an
accepting state are removed, so "the DFA is alive" means "this prefix can still complete".

Supported: literals, classes (incl. \\d \\w \\s, negation, unicode), `.`, groups, alternation,
greedy repeats, the `i` / `s` flags. Rejected with a clear message: anchors, lookarounds,
backreferences, lazy quantifiers (their shortest-match meaning differs from the longest match
the lexer uses; `compile_lark` substitutes greedy equivalents for Lark's common ones).
"""

from __future__ import annotations

import functools

import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import re._constants as C  # type: ignore[import-not-found]
import re._parser as sre  # type: ignore[import-not-found]

if TYPE_CHECKING:
    import numpy as np

__all__ = ["ByteDFA", "RegexUnsupported", "compile_byte_dfa", "negate_ranges", "normalize_ranges", "patterns_apart", "patterns_share", "python_category",
           "search_superset_dfa"]

_MAXCP = sys.maxunicode
_SURROGATES = (0xD800, 0xDFFF)


class RegexUnsupported(ValueError):
    """The pattern uses a feature a finite automaton over bytes cannot express exactly."""


@dataclass(frozen=True)
class ByteDFA:
    """State 0 is the start. `trans[s][b]` is the next state or -1 (dead)."""

    trans: tuple[tuple[int, ...], ...]
    accepting: frozenset[int]

    @property
    def num_states(self) -> int:
        return len(self.trans)

    @functools.cached_property
    def byte_classes(self) -> tuple[int, ...]:
        """For each byte, its class: bytes with the same transition in every state share one."""
        ids: dict[tuple[int, ...], int] = {}
        return tuple(ids.setdefault(column, len(ids)) for column in zip(*self.trans)) if self.trans else (0,) * 256

    @functools.cached_property
    def table(self) -> "np.ndarray":
        """`trans` as an int32 array [num_states, 256], -1 = dead (lexer contexts copy it)."""
        import numpy as np

        return np.array(self.trans, dtype=np.int32).reshape(len(self.trans), 256)

    @functools.cached_property
    def _sparse_rows(self) -> dict[int, tuple[tuple[int, int], ...] | None]:
        return {}

    def sparse_row(self, state: int) -> tuple[tuple[int, int], ...] | None:
        """The state's (byte, next state) pairs that do not die, in byte order, where there are
        at most 32 (a literal's state has one); None where there are more. Remembered per state
        asked for, not built for every state (a 20,000-state DFA of free text would hold millions)."""
        rows = self._sparse_rows
        if state not in rows:
            row = self.trans[state]
            rows[state] = tuple((b, t) for b, t in enumerate(row) if t >= 0) if 256 - row.count(-1) <= 32 else None
        return rows[state]

    def run(self, data: bytes, state: int = 0) -> int:
        for b in data:
            state = self.trans[state][b]
            if state < 0:
                return -1
        return state

    def fullmatch(self, data: bytes) -> bool:
        return self.run(data) in self.accepting


# ---- character sets as sorted disjoint codepoint ranges -------------------------------------

Ranges = tuple[tuple[int, int], ...]


def normalize_ranges(ranges: list[tuple[int, int]]) -> Ranges:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def negate_ranges(ranges: Ranges) -> Ranges:
    out, nxt = [], 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= _MAXCP:
        out.append((nxt, _MAXCP))
    return tuple(out)


@lru_cache(maxsize=None)
def python_category(name: str) -> Ranges:
    """Codepoints of a `re` category, measured once with `re` itself (exact by construction)."""
    pattern = re.compile({"DIGIT": r"\d", "WORD": r"\w", "SPACE": r"\s"}[name])
    ranges: list[tuple[int, int]] = []
    start = None
    for cp in range(_MAXCP + 2):
        inside = cp <= _MAXCP and pattern.match(chr(cp)) is not None
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            ranges.append((start, cp - 1))
            start = None
    return tuple(ranges)


def _casefold_variants(ranges: Ranges) -> Ranges:
    """Add the case variants `re.IGNORECASE` matches (per codepoint; large ranges unchanged
    outside ASCII/Latin since those are already closed in practice for the classes we meet)."""
    extra: list[tuple[int, int]] = []
    for lo, hi in ranges:
        for cp in range(lo, min(hi, lo + 4096) + 1):
            ch = chr(cp)
            for v in {ch.lower(), ch.upper(), ch.swapcase()}:
                if len(v) == 1:
                    extra.append((ord(v), ord(v)))
    return normalize_ranges(list(ranges) + extra)


def _class_ranges(items: list, ignorecase: bool) -> Ranges:
    negate = False
    ranges: list[tuple[int, int]] = []
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            ranges.append((av, av))
        elif op is C.RANGE:
            ranges.append(av)
        elif op is C.CATEGORY:
            name = str(av).removeprefix("CATEGORY_")
            base = name.removeprefix("NOT_")
            if base not in ("DIGIT", "WORD", "SPACE"):
                raise RegexUnsupported(f"unsupported class category {av}")
            cat = python_category(base)
            ranges.extend(negate_ranges(cat) if name.startswith("NOT_") else cat)
        else:
            raise RegexUnsupported(f"unsupported class item {op}")
    out = normalize_ranges(ranges)
    if ignorecase:
        out = _casefold_variants(out)
    return negate_ranges(out) if negate else out


def _without_surrogates(ranges: Ranges) -> Ranges:
    lo_s, hi_s = _SURROGATES
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if hi < lo_s or lo > hi_s:
            out.append((lo, hi))
            continue
        if lo < lo_s:
            out.append((lo, lo_s - 1))
        if hi > hi_s:
            out.append((hi_s + 1, hi))
    return tuple(out)


# ---- UTF-8 range sequences -------------------------------------------------------------------

_LEN_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, _MAXCP))


def _utf8_split(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Byte-range sequences matching exactly the UTF-8 encodings of codepoints lo..hi
    (same encoded length). Each sequence is a list of inclusive (lo, hi) byte ranges."""
    n = len(chr(lo).encode("utf-8"))
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m:
                return _utf8_split(lo, lo | m) + _utf8_split((lo | m) + 1, hi)
            if hi & m != m:
                return _utf8_split(lo, (hi & ~m) - 1) + _utf8_split(hi & ~m, hi)
    a, b = chr(lo).encode("utf-8"), chr(hi).encode("utf-8")
    return [list(zip(a, b))]


def _utf8_sequences(ranges: Ranges) -> list[list[tuple[int, int]]]:
    seqs: list[list[tuple[int, int]]] = []
    for lo, hi in _without_surrogates(ranges):
        for blo, bhi in _LEN_BOUNDS:
            a, b = max(lo, blo), min(hi, bhi)
            if a <= b:
                seqs.extend(_utf8_split(a, b))
    return seqs


# ---- Thompson NFA over bytes -----------------------------------------------------------------


_LOOSE_REPEAT = 8  # a superset automaton counts repeats up to this many, then "or more"


class _NFA:
    def __init__(self, loose: bool = False) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []  # (byte lo, byte hi, target)
        self.loose = loose  # zero-width assertions always hold, lazy repeats as greedy: a superset

    def state(self) -> int:
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def charset(self, ranges: Ranges) -> tuple[int, int]:
        start, end = self.state(), self.state()
        for seq in _utf8_sequences(ranges):
            cur = start
            for i, (lo, hi) in enumerate(seq):
                nxt = end if i == len(seq) - 1 else self.state()
                self.edges[cur].append((lo, hi, nxt))
                cur = nxt
        return start, end

    def build(self, node: list, flags: int) -> tuple[int, int]:
        """Fragment (start, end) for a parsed sequence."""
        start = cur = self.state()
        for op, av in node:
            s, e = self.atom(op, av, flags)
            self.eps[cur].append(s)
            cur = e
        return start, cur

    def atom(self, op, av, flags: int) -> tuple[int, int]:
        icase = bool(flags & re.IGNORECASE)
        if op is C.LITERAL:
            return self.charset(_class_ranges([(C.LITERAL, av)], icase))
        if op is C.NOT_LITERAL:
            return self.charset(negate_ranges(_class_ranges([(C.LITERAL, av)], icase)))
        if op is C.IN:
            return self.charset(_class_ranges(av, icase))
        if op is C.ANY:
            return self.charset(((0, _MAXCP),) if flags & re.DOTALL else negate_ranges(((10, 10),)))
        if op is C.SUBPATTERN:
            _group, add, remove, sub = av
            return self.build(sub, (flags | add) & ~remove)
        if op is C.BRANCH:
            start, end = self.state(), self.state()
            for alt in av[1]:
                s, e = self.build(alt, flags)
                self.eps[start].append(s)
                self.eps[e].append(end)
            return start, end
        if op is C.MAX_REPEAT:
            lo, hi, sub = av
            return self.repeat(lo, hi, sub, flags)
        if self.loose and op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            state = self.state()  # taken as always true: the language can only grow
            return state, state
        if op is C.MIN_REPEAT:
            if self.loose:  # lazy or greedy, the same strings contain a match
                lo, hi, sub = av
                return self.repeat(lo, hi, sub, flags)
            raise RegexUnsupported("lazy quantifiers (*?, +?, ??) are not supported")
        if op is C.AT:
            raise RegexUnsupported(f"anchors ({av}) are not supported")
        if op in (C.ASSERT, C.ASSERT_NOT):
            raise RegexUnsupported("lookarounds are not supported")
        raise RegexUnsupported(f"regex feature {op} is not supported")

    def repeat(self, lo: int, hi: int, sub, flags: int) -> tuple[int, int]:
        if self.loose and hi is not C.MAXREPEAT and hi > _LOOSE_REPEAT:  # {1,256} as {1,}: a superset, small
            lo, hi = min(lo, _LOOSE_REPEAT), C.MAXREPEAT
        elif self.loose and lo > _LOOSE_REPEAT:
            lo = _LOOSE_REPEAT
        start = cur = self.state()
        for _ in range(lo):
            s, e = self.build(sub, flags)
            self.eps[cur].append(s)
            cur = e
        if hi is C.MAXREPEAT:
            s, e = self.build(sub, flags)
            self.eps[cur].append(s)
            self.eps[e].append(s)
            end = self.state()
            self.eps[cur].append(end)
            self.eps[e].append(end)
            return start, end
        end = self.state()
        for _ in range(hi - lo):
            self.eps[cur].append(end)
            s, e = self.build(sub, flags)
            self.eps[cur].append(s)
            cur = e
        self.eps[cur].append(end)
        return start, end

    def closure(self, states) -> frozenset[int]:
        seen = set(states)
        stack = list(states)
        while stack:
            for t in self.eps[stack.pop()]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        return frozenset(seen)


def compile_byte_dfa(pattern: str, max_states: int = 20000) -> ByteDFA:
    """Compile a Python regex (str pattern) to a trimmed byte-level DFA matching the UTF-8
    encodings of exactly the strings the pattern fully matches."""
    try:
        parsed = sre.parse(pattern, 0)
    except re.error as e:
        raise RegexUnsupported(f"bad regex {pattern!r}: {e}") from e
    nfa = _NFA()
    start, final = nfa.build(list(parsed), parsed.state.flags)
    return _determinize(nfa, start, final, max_states, pattern)


def _determinize(nfa: _NFA, start: int, final: int, max_states: int, pattern: str) -> ByteDFA:
    # Bytes between two consecutive edge bounds are alike everywhere: subset construction,
    # trimming and minimization run per class of bytes (tens, not 256); rows are widened to
    # 256 bytes only for the minimized states.
    bounds = sorted({0, 256} | {b for edges in nfa.edges for lo, hi, _ in edges for b in (lo, hi + 1)})
    class_at = {b: i for i, b in enumerate(bounds)}
    class_of = [0] * 256  # byte -> its class
    for i in range(len(bounds) - 1):
        class_of[bounds[i] : bounds[i + 1]] = [i] * (bounds[i + 1] - bounds[i])
    classes = len(bounds) - 1
    # NFA state -> its edges as (first class, class after the last, target)
    moves = [[(class_at[lo], class_at[hi + 1], t) for lo, hi, t in edges] for edges in nfa.edges]
    closures: dict[frozenset[int], frozenset[int]] = {}
    first = nfa.closure([start])
    index = {first: 0}
    order = [first]
    trans: list[list[int]] = []  # [state][class] -> state, -1 for none
    while len(trans) < len(order):
        # Sweep the classes in order: the NFA targets change only where an edge starts or
        # ends, and each run of classes between two such points goes to one DFA state.
        starts: dict[int, list[int]] = {}
        ends: dict[int, list[int]] = {}
        for s in order[len(trans)]:
            for lo, hi, t in moves[s]:
                starts.setdefault(lo, []).append(t)
                ends.setdefault(hi, []).append(t)
        by_class = [-1] * classes
        active: dict[int, int] = {}  # NFA target -> how many edges give it here
        points = sorted(starts.keys() | ends.keys())
        for k, c in enumerate(points):
            for t in ends.get(c, ()):
                if active[t] == 1:
                    del active[t]
                else:
                    active[t] -= 1
            for t in starts.get(c, ()):
                active[t] = active.get(t, 0) + 1
            if not active:
                continue
            key = frozenset(active)
            nxt = closures.get(key)
            if nxt is None:
                nxt = closures[key] = nfa.closure(key)
            target = index.get(nxt)
            if target is None:
                if len(order) >= max_states:
                    raise RegexUnsupported(f"regex {pattern!r} needs more than {max_states} DFA states")
                target = index[nxt] = len(order)
                order.append(nxt)
            end = points[k + 1] if k + 1 < len(points) else classes
            by_class[c:end] = [target] * (end - c)
        trans.append(by_class)
    accepting = {i for i, st in enumerate(order) if final in st}
    return _trim(trans, accepting, class_of)


_ANYTHING = [(C.MAX_REPEAT, (0, C.MAXREPEAT, [(C.ANY, None)]))]  # .* (built with DOTALL)
_STARTS = (C.AT_BEGINNING, C.AT_BEGINNING_STRING)
_ENDS = (C.AT_END, C.AT_END_STRING)


def search_superset_dfa(pattern: str, max_states: int = 2000) -> ByteDFA:
    """A DFA over UTF-8 bytes accepting at least every string in which `pattern` finds a match
    (`re.search`: JSON Schema's `pattern`). A superset, for proofs that two patterns share no
    string: a leading `^` and a trailing `$` anchor it (`$` also before a final newline, as in
    `re`); other zero-width assertions (`\\b`, lookarounds, anchors elsewhere) count as always
    true, lazy repeats as greedy. Backreferences and large automata raise RegexUnsupported."""
    try:
        parsed = sre.parse(pattern, 0)
    except (re.error, RecursionError, OverflowError) as e:
        raise RegexUnsupported(f"bad regex {pattern!r}: {e}") from e
    nodes, flags = list(parsed), parsed.state.flags
    multiline = bool(flags & re.MULTILINE)  # ^ and $ then hold at every line: unanchored
    anchored_start = bool(nodes) and nodes[0][0] is C.AT and nodes[0][1] in _STARTS and not multiline
    anchored_end = bool(nodes) and nodes[-1][0] is C.AT and nodes[-1][1] in _ENDS and not multiline
    body = nodes[int(anchored_start): len(nodes) - int(anchored_end)]
    nfa = _NFA(loose=True)
    pieces = [] if anchored_start else [nfa.build(_ANYTHING, re.DOTALL)]
    pieces.append(nfa.build(body, flags))
    pieces.append(nfa.build([(C.MAX_REPEAT, (0, 1, [(C.LITERAL, 10)]))], flags) if anchored_end else nfa.build(_ANYTHING, re.DOTALL))
    for (_, end), (start, _) in zip(pieces, pieces[1:]):
        nfa.eps[end].append(start)
    return _determinize(nfa, pieces[0][0], pieces[-1][1], max_states, pattern)


def _share_a_string(a: ByteDFA, b: ByteDFA, max_pairs: int) -> bool | None:
    """Whether some byte string is accepted by both (None: undecided within max_pairs)."""
    seen, todo = {(0, 0)}, [(0, 0)]
    while todo:
        x, y = todo.pop()
        if x in a.accepting and y in b.accepting:
            return True
        row_a, row_b = a.trans[x], b.trans[y]
        for byte in range(256):
            pair = (row_a[byte], row_b[byte])
            if pair[0] >= 0 and pair[1] >= 0 and pair not in seen:
                if len(seen) >= max_pairs:
                    return None
                seen.add(pair)
                todo.append(pair)
    return False


def patterns_apart(first: str, second: str, max_pairs: int = 50000) -> bool:
    """Conservative: no string matches both JSON Schema patterns (`re.search` each). False
    where that cannot be shown (a backreference, automata over the budget, or a shared string)."""
    return patterns_share(first, second, max_pairs) is False


@lru_cache(maxsize=1024)
def patterns_share(first: str, second: str, max_pairs: int = 50000) -> bool | None:
    """Whether some string matches both patterns: True (found), False (none), None (undecided:
    a backreference, or automata over the budget)."""
    try:
        return _share_a_string(search_superset_dfa(first), search_superset_dfa(second), max_pairs)
    except RegexUnsupported:
        return None


def _trim(trans: list[list[int]], accepting: set[int], class_of: list[int]) -> ByteDFA:
    """Drop states that cannot reach acceptance (so alive == completable); renumber from 0.
    trans: [state][byte class] -> state or -1; class_of: byte -> class, classes in byte order."""
    n = len(trans)
    rev: list[set[int]] = [set() for _ in range(n)]
    for s, row in enumerate(trans):
        for t in row:
            if t >= 0:
                rev[t].add(s)
    live = set(accepting)
    stack = list(accepting)
    while stack:
        for p in rev[stack.pop()]:
            if p not in live:
                live.add(p)
                stack.append(p)
    if 0 not in live:  # empty language: a single dead start state
        return ByteDFA(trans=(tuple([-1] * 256),), accepting=frozenset())
    keep = [s for s in range(n) if s in live]
    new = {s: i for i, s in enumerate(keep)}
    rows = [[new.get(t, -1) if t >= 0 else -1 for t in trans[s]] for s in keep]
    return _minimize(rows, {new[s] for s in accepting if s in live}, class_of)


def _minimize(rows: list[list[int]], accepting: set[int], class_of: list[int]) -> ByteDFA:
    """Moore partition refinement: merge states with identical futures (smaller token tables).
    rows: [state][byte class] -> state or -1, classes ordered as their bytes (class_of)."""
    # One class per set of equal columns: the others add nothing to a state's signature.
    columns: dict[tuple[int, ...], int] = {}
    for c, column in enumerate(zip(*rows)):
        columns.setdefault(column, c)
    reps = sorted(columns.values())
    reduced = [[row[c] for c in reps] for row in rows]
    # block[-1] is a sentinel -1, so a dead target (-1) reads it: signatures via map, in C.
    block = [1 if s in accepting else 0 for s in range(len(rows))] + [-1]
    while True:
        sigs: dict[tuple, int] = {}
        new_block = []
        for s, row in enumerate(reduced):
            sig = (block[s], tuple(map(block.__getitem__, row)))
            new_block.append(sigs.setdefault(sig, len(sigs)))
        if len(sigs) == len(set(block)) - 1:
            break
        block = new_block + [-1]
    # Renumber so the start state's block is 0, in BFS order (classes in byte order, so the
    # numbering is the one a walk over all 256 bytes gives).
    order = {block[0]: 0}
    rep: dict[int, int] = {}
    for s in range(len(rows)):
        rep.setdefault(block[s], s)
    queue = [block[0]]
    for b in queue:
        for t in rows[rep[b]]:
            if t >= 0 and block[t] not in order:
                order[block[t]] = len(order)
                queue.append(block[t])
    out = [None] * len(order)
    for b, i in order.items():
        by_class = [order[block[t]] if t >= 0 else -1 for t in rows[rep[b]]]
        out[i] = tuple(map(by_class.__getitem__, class_of))
    acc = frozenset(order[block[s]] for s in accepting if block[s] in order)
    return ByteDFA(trans=tuple(out), accepting=acc)
