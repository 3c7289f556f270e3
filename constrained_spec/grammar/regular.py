"""JSON Schema patterns as regular languages: lookaheads, intersections and complements written
as one regex without lookarounds.

Neither llguidance nor our regex translator has lookarounds, and schemas write exclusions with
them (`^(?!relationships$|links$)\\w[-\\w_]*$`, `^((?!message|severity).)*$`); a `not` of a
pattern, two patterns in an `allOf`, or a format beside a pattern ask for a complement or an
intersection. Each of these is a regular language: a pattern is compiled to a DFA over code
point intervals, combined (product, complement, concatenation), minimized and written back as
a regex by state elimination (`lookaround_free`, `intersection`, `complement`).

Two readings: a pattern is matched by ECMA 262 (the spec) and by Python's `re` (`jsonschema`),
which differ on `\\d`, `\\w`, `\\s`, `.` and `$` (Python's are Unicode-aware; its `$` also
holds before a final newline). A language used positively takes the narrow reading (what both
accept), one under a negation the wide reading (what either accepts), so the result holds for
both. Only lookaheads at the top level of a pattern's sequence, `((?!X).)*` as the last item
of an end-anchored pattern, and `$` anywhere (`(,|$)`: read as one step past every code point,
then split into "the string ends here" and the rest) are read; anything else raises ValueError.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from functools import lru_cache

import re._constants as C  # type: ignore[import-not-found]
import re._parser as sre  # type: ignore[import-not-found]

from .byte_dfa import negate_ranges as _invert
from .byte_dfa import normalize_ranges as _norm
from .byte_dfa import python_category

__all__ = ["DFA", "pattern_dfa", "agreed_search", "anchors_inside", "lookaround_free", "intersection", "complement", "to_regex", "patterns_disjoint"]

MAX_CP = 0x10FFFF
_MAX_NFA = 20000  # NFA states (bounded repeats are copied)
_MAX_DFA = 4000
_MAX_REGEX = 40000  # characters of a written regex

Charset = tuple[tuple[int, int], ...]  # sorted disjoint closed intervals of code points
_ALL: Charset = ((0, MAX_CP),)
_END = MAX_CP + 1  # a `$` inside a pattern, read as one step past every code point (_Reader.then)
_START = MAX_CP + 3  # a `^` inside a pattern, likewise (_split_start; apart from _END, so never one atom with it)


def _meet(a: Charset, b: Charset) -> Charset:
    return _invert(_norm(_invert(a) + _invert(b)))


_ECMA_SPACE = _norm([(9, 13), (32, 32), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
                     (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)])  # fmt: skip
_ECMA = {"DIGIT": ((48, 57),), "WORD": _norm([(48, 57), (65, 90), (95, 95), (97, 122)]), "SPACE": _ECMA_SPACE}
_PY_SPACE = _norm([(9, 13), (0x1C, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
                   (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)])  # fmt: skip


def _category(name: str, wide: bool) -> Charset:
    """`\\d`-like classes: ECMA's and Python's common part (narrow) or both together (wide)."""
    negated = name.startswith("CATEGORY_NOT_")
    base = name.removeprefix("CATEGORY_NOT_").removeprefix("CATEGORY_")
    if base not in _ECMA:
        raise ValueError(f"unsupported class {name}")
    # \D etc.: the complement of the other reading's \d; ECMA's \d and \w lie within Python's
    union = wide != negated
    python = python_category(base) if union else _PY_SPACE if base == "SPACE" else _ECMA[base]
    chosen = _norm(_ECMA[base] + python) if union else _meet(_ECMA[base], python)
    return _invert(chosen) if negated else chosen


def _dot(wide: bool, dotall: bool) -> Charset:
    if dotall:
        return _ALL
    return _invert(((10, 10),)) if wide else _invert(_norm([(10, 10), (13, 13), (0x2028, 0x2029)]))


class _NFA:
    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[Charset, int]]] = []

    def state(self) -> int:
        if len(self.eps) >= _MAX_NFA:
            raise ValueError("the pattern's automaton is too large")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def chars(self, cs: Charset) -> tuple[int, int]:
        a, b = self.state(), self.state()
        self.edges[a].append((cs, b))
        return a, b

    def embed(self, dfa: DFA) -> tuple[int, int]:
        """The DFA's states as NFA states: (its start, a final state every accepting one reaches)."""
        ids = [self.state() for _ in dfa.trans]
        final = self.state()
        for s in range(len(dfa.trans)):
            self.edges[ids[s]] += [(cs, ids[t]) for t, cs in dfa.edges(s).items()]
            if s in dfa.accept:
                self.eps[ids[s]].append(final)
        return ids[0], final


class DFA:
    """Over `atoms`, intervals partitioning all code points: `trans[s][atom]` (-1: dead); state 0 starts."""

    def __init__(self, atoms: list[tuple[int, int]], trans: list[list[int]], accept: set[int]) -> None:
        self.atoms, self.trans, self.accept = atoms, trans, accept

    def edges(self, state: int) -> dict[int, Charset]:
        """The state's transitions as target -> the characters leading there."""
        by_target: dict[int, list[tuple[int, int]]] = {}
        for atom, t in enumerate(self.trans[state]):
            if t >= 0:
                by_target.setdefault(t, []).append(self.atoms[atom])
        return {t: _norm(ivs) for t, ivs in by_target.items()}

    def empty(self) -> bool:
        return not self.accept

    def infinite(self) -> bool:
        """Whether it accepts infinitely many strings: a cycle among its states (minimized, every
        state is reached from the start and reaches acceptance)."""
        color = [0] * len(self.trans)  # 0 unvisited, 1 on the path, 2 done
        for root in range(len(self.trans)):
            if color[root]:
                continue
            color[root] = 1
            stack = [(root, iter({t for t in self.trans[root] if t >= 0}))]
            while stack:
                state, targets = stack[-1]
                target = next(targets, None)
                if target is None:
                    color[state] = 2
                    stack.pop()
                elif color[target] == 1:
                    return True
                elif not color[target]:
                    color[target] = 1
                    stack.append((target, iter({t for t in self.trans[target] if t >= 0})))
        return False


def _atoms(charsets) -> list[tuple[int, int]]:
    cuts = {0, MAX_CP + 1}
    for cs in charsets:
        for lo, hi in cs:
            cuts.update((lo, hi + 1))
    points = sorted(cuts)
    return list(zip(points, [p - 1 for p in points[1:]]))


def _covered(cs: Charset, atoms: list[tuple[int, int]], lows: list[int]) -> list[int]:
    out = []
    for lo, hi in cs:
        i = bisect_right(lows, lo) - 1
        while i < len(atoms) and atoms[i][1] <= hi:
            out.append(i)
            i += 1
    return out


def _determinize(nfa: _NFA, start: int, final: int) -> DFA:
    atoms = _atoms(cs for row in nfa.edges for cs, _ in row)
    lows = [lo for lo, _ in atoms]
    moves = [[(_covered(cs, atoms, lows), t) for cs, t in row] for row in nfa.edges]

    def closure(states) -> frozenset[int]:
        seen, todo = set(states), list(states)
        while todo:
            for t in nfa.eps[todo.pop()]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return frozenset(seen)

    first = closure([start])
    index, order, trans = {first: 0}, [first], []
    while len(trans) < len(order):
        targets: dict[int, set[int]] = {}
        for s in order[len(trans)]:
            for covered, t in moves[s]:
                for atom in covered:
                    targets.setdefault(atom, set()).add(t)
        row = [-1] * len(atoms)
        for atom, ts in targets.items():
            nxt = closure(ts)
            if nxt not in index:
                if len(order) >= _MAX_DFA:
                    raise ValueError("the pattern's automaton is too large")
                index[nxt] = len(order)
                order.append(nxt)
            row[atom] = index[nxt]
        trans.append(row)
    return _minimize(DFA(atoms, trans, {i for i, st in enumerate(order) if final in st}))


def _minimize(dfa: DFA) -> DFA:
    """Trim states that cannot reach acceptance, merge equivalent ones, merge equal atoms."""
    n = len(dfa.trans)
    back: list[set[int]] = [set() for _ in range(n)]
    for s, row in enumerate(dfa.trans):
        for t in row:
            if t >= 0:
                back[t].add(s)
    live, todo = set(dfa.accept), list(dfa.accept)
    while todo:
        for p in back[todo.pop()]:
            if p not in live:
                live.add(p)
                todo.append(p)
    if 0 not in live:
        return DFA([(0, MAX_CP)], [[-1]], set())
    rows = [[t if t in live else -1 for t in row] for row in dfa.trans]
    block = [int(s in dfa.accept) if s in live else -1 for s in range(n)]
    while True:
        sigs: dict[tuple, int] = {}
        new = [sigs.setdefault((block[s], tuple(block[t] if t >= 0 else -1 for t in rows[s])), len(sigs)) if s in live else -1
               for s in range(n)]  # fmt: skip
        if len(sigs) == len({b for b in block if b >= 0}):
            break
        block = new
    reps: dict[int, int] = {}
    for s in range(n):
        if s in live:
            reps.setdefault(block[s], s)
    numbering = {block[0]: 0}
    for b in sorted(reps, key=lambda b: reps[b]):
        numbering.setdefault(b, len(numbering))
    trans = [[-1] * len(dfa.atoms) for _ in numbering]
    accept = set()
    for b, s in reps.items():
        trans[numbering[b]] = [numbering[block[t]] if t >= 0 else -1 for t in rows[s]]
        if s in dfa.accept:
            accept.add(numbering[b])
    # atoms every state treats alike are one atom
    columns: dict[tuple, int] = {}
    keep, merged = [], []
    for a in range(len(dfa.atoms)):
        col = tuple(row[a] for row in trans)
        if col in columns and merged[columns[col]][-1][1] + 1 == dfa.atoms[a][0]:
            merged[columns[col]].append(dfa.atoms[a])
        else:
            columns[col] = len(keep)
            keep.append(a)
            merged.append([dfa.atoms[a]])
    if len(keep) == len(dfa.atoms):
        return DFA(dfa.atoms, trans, accept)
    atoms = [(ivs[0][0], ivs[-1][1]) for ivs in merged]
    return DFA(atoms, [[row[a] for a in keep] for row in trans], accept)


def _product(a: DFA, b: DFA, keep) -> DFA:
    """The pairs' automaton (-1 read as a dead sink) accepting where keep(in_a, in_b)."""
    atoms = _atoms([[iv] for iv in a.atoms] + [[iv] for iv in b.atoms])
    lows_a, lows_b = [lo for lo, _ in a.atoms], [lo for lo, _ in b.atoms]
    # (an atom past a DFA's last one, a marker it does not read: dead there)
    col_a = [bisect_right(lows_a, lo) - 1 if lo <= a.atoms[-1][1] else None for lo, _ in atoms]
    col_b = [bisect_right(lows_b, lo) - 1 if lo <= b.atoms[-1][1] else None for lo, _ in atoms]
    sink = keep(False, False)  # both dead: a state of its own where that is accepted (a complement)
    index, order, trans = {(0, 0): 0}, [(0, 0)], []
    while len(trans) < len(order):
        x, y = order[len(trans)]
        row = []
        for i in range(len(atoms)):
            pair = (a.trans[x][col_a[i]] if x >= 0 and col_a[i] is not None else -1, b.trans[y][col_b[i]] if y >= 0 and col_b[i] is not None else -1)
            if pair == (-1, -1) and not sink:
                row.append(-1)
                continue
            if pair not in index:
                if len(order) >= _MAX_DFA:
                    raise ValueError("the patterns' automaton is too large")
                index[pair] = len(order)
                order.append(pair)
            row.append(index[pair])
        trans.append(row)
    accept = {i for i, (x, y) in enumerate(order) if keep(x in a.accept, y in b.accept)}
    return _minimize(DFA(atoms, trans, accept))


def meet(a: DFA, b: DFA) -> DFA:
    return _product(a, b, lambda x, y: x and y)


def negate(a: DFA) -> DFA:
    """Every string `a` does not accept (the dead state made a live sink)."""
    nothing = DFA([(0, MAX_CP)], [[-1]], set())
    return _product(a, nothing, lambda x, _: not x)


def _concat(parts: list[DFA]) -> DFA:
    nfa = _NFA()
    ends = [nfa.embed(p) for p in parts]
    for (_, end), (start, _) in zip(ends, ends[1:]):
        nfa.eps[end].append(start)
    return _determinize(nfa, ends[0][0], ends[-1][1])


def _star_of(cs: Charset) -> DFA:
    nfa = _NFA()
    s = nfa.state()
    nfa.edges[s].append((cs, s))
    return _determinize(nfa, s, s)


class _Reader:
    """sre items -> automata, in one reading (wide: under a negation)."""

    def __init__(self, wide: bool, flags: int) -> None:
        if flags & (re.IGNORECASE | re.MULTILINE | re.VERBOSE | re.LOCALE):
            raise ValueError("a pattern with inline flags other than s")
        self.wide, self.dotall = wide, bool(flags & re.DOTALL)

    def flipped(self) -> _Reader:
        return _Reader(not self.wide, re.DOTALL if self.dotall else 0)

    def charset(self, op, av) -> Charset:
        if op is C.LITERAL:
            return ((av, av),)
        if op is C.NOT_LITERAL:
            return _invert(((av, av),))
        if op is C.ANY:
            return _dot(self.wide, self.dotall)
        if op is C.CATEGORY:
            return _category(str(av), self.wide)
        if op is C.IN:
            negated = bool(av) and av[0][0] is C.NEGATE
            reader = self.flipped() if negated else self
            parts: list[tuple[int, int]] = []
            for mop, mav in av[1:] if negated else av:
                if mop is C.RANGE:
                    parts.append(mav)
                else:
                    parts += reader.charset(mop, mav)
            members = _norm(parts)
            return _invert(members) if negated else members
        raise ValueError(f"unsupported regex construct {str(op).lower()}")

    def fragment(self, nfa: _NFA, items) -> tuple[int, int]:
        start = end = nfa.state()
        for op, av in items:
            a, b = self.item(nfa, op, av)
            nfa.eps[end].append(a)
            end = b
        return start, end

    def item(self, nfa: _NFA, op, av) -> tuple[int, int]:
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN, C.CATEGORY):
            return nfa.chars(self.charset(op, av))
        if op is C.AT and av in (C.AT_END, C.AT_END_STRING):  # `(,|$)`: the string's end, told apart by then()
            return nfa.chars(((_END, _END),))
        if op is C.AT and av in (C.AT_BEGINNING, C.AT_BEGINNING_STRING):  # `(^|,)`: the string's start (_split_start)
            return nfa.chars(((_START, _START),))
        if op is C.SUBPATTERN:
            if av[1] or av[2]:
                raise ValueError("a group with inline flags")
            return self.fragment(nfa, av[3])
        if op is C.BRANCH:
            a, b = nfa.state(), nfa.state()
            for branch in av[1]:
                x, y = self.fragment(nfa, branch)
                nfa.eps[a].append(x)
                nfa.eps[y].append(b)
            return a, b
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):  # laziness changes which match, not whether one exists
            lo, hi, body = av
            if lo > 1000 or (hi != C.MAXREPEAT and hi > 1000):
                raise ValueError("a repeat bound over 1000")
            start = end = nfa.state()
            for _ in range(lo):
                x, y = self.fragment(nfa, body)
                nfa.eps[end].append(x)
                end = y
            if hi == C.MAXREPEAT:
                x, y = self.fragment(nfa, body)
                tail = nfa.state()
                nfa.eps[end] += [x, tail]
                nfa.eps[y] += [x, tail]
                return start, tail
            tail = nfa.state()
            nfa.eps[end].append(tail)
            for _ in range(hi - lo):
                x, y = self.fragment(nfa, body)
                nfa.eps[end].append(x)
                nfa.eps[y].append(tail)
                end = y
            return start, tail
        raise ValueError(f"unsupported regex construct {str(op).lower()}")

    def plain(self, items) -> DFA:
        nfa = _NFA()
        start, end = self.fragment(nfa, items)
        return _determinize(nfa, start, end)

    def sequence(self, items: list, at_start: bool, tail: DFA) -> DFA:
        """Strings matching `items` then `tail` in full; lookaheads among `items` read the rest
        of the string. `at_start`: `items` begin at the string's start."""
        for k, (op, av) in enumerate(items):
            if op in (C.ASSERT, C.ASSERT_NOT):
                direction, body = av
                if direction != 1:
                    raise ValueError("a lookbehind")
                reader = self.flipped() if op is C.ASSERT_NOT else self
                seen = reader.prefixed(list(body), at_start and k == 0)
                rest = self.sequence(items[k + 1 :], False, tail)
                if rest.atoms[-1][1] > MAX_CP:
                    raise ValueError("a `^` after a lookahead")
                rest = meet(rest, negate(seen) if op is C.ASSERT_NOT else seen)
                return _concat([self.before(items[:k]), rest]) if k else rest
            if op is C.AT and av not in (C.AT_END, C.AT_END_STRING, C.AT_BEGINNING, C.AT_BEGINNING_STRING):
                raise ValueError("an anchor inside a pattern")
            if _tempered(op, av) and k == len(items) - 1 and _only_empty(tail):
                body, char = _tempered(op, av)
                seen = self.flipped().prefixed(body, False)
                nonempty = meet(seen, negate(_only_empty_dfa()))
                found_somewhere = _concat([_star_of(_ALL), nonempty])
                rest = meet(_star_of(self.charset(*char)), negate(found_somewhere))
                return _concat([self.before(items[:k]), rest]) if k else rest
        return self.then(self.plain(items), tail)

    def before(self, items: list) -> DFA:
        """`items` followed by more of the pattern: a `$` or `^` among them is not read."""
        dfa = self.plain(items)
        if dfa.atoms[-1][1] > MAX_CP:
            raise ValueError("a `$` or `^` before a lookahead")
        return dfa

    def then(self, dfa: DFA, tail: DFA) -> DFA:
        """`dfa` (read by plain(), a `$` inside it an _END step) then `tail`: where a `$` was
        passed, the string ends there. In the wide reading Python's `$` also holds before a
        final newline, which the rest of the pattern may then read (`a$\\n?`) or leave (`\\Z`
        is read so too there: wider, as a wide reading may be)."""
        if dfa.atoms[-1][1] <= MAX_CP:
            return _concat([dfa, tail])
        plain, ended, before_newline = _split_end(dfa)
        if not self.wide:
            return _union(_concat([plain, tail]), _concat([ended, _only_empty_dfa()]))
        newline = DFA([(0, 9), (10, 10), (11, MAX_CP)], [[-1, 1, -1], [-1, -1, -1]], {1})
        return _union(_union(_concat([plain, tail]), _concat([ended, _optional_newline()])), _concat([before_newline, newline]))

    def prefixed(self, items: list, at_start: bool) -> DFA:
        """Strings a lookahead body matches a prefix of (its `$` the string's end)."""
        branches = [list(b) for b in items[0][1][1]] if len(items) == 1 and items[0][0] is C.BRANCH else [items]
        found = None
        for branch in branches:
            if branch and branch[0] == (C.AT, C.AT_BEGINNING):
                if not at_start:  # (where the lookahead may stand at 0 or later, `^` holds at 0 only)
                    raise ValueError("a `^` inside a lookahead that is not at the pattern's start")
                branch = branch[1:]
            dfa = self.anchored_end(branch, at_start)
            if dfa.atoms[-1][1] > MAX_CP:
                raise ValueError("a `^` inside a lookahead")
            found = dfa if found is None else _union(found, dfa)
        return found if found is not None else DFA([(0, MAX_CP)], [[-1]], set())

    def anchored_end(self, branch: list, at_start: bool) -> DFA:
        """`branch` then the rest of the string: anything, or the end where it ends with `$`."""
        if branch and branch[-1][0] is C.AT and branch[-1][1] in (C.AT_END, C.AT_END_STRING):
            newline = self.wide and branch[-1][1] is C.AT_END  # Python's `$` also before a final newline
            end = _optional_newline() if newline else _only_empty_dfa()
            return self.sequence(branch[:-1], at_start, end)
        return self.sequence(branch, at_start, _star_of(_ALL))


def _split_end(dfa: DFA) -> tuple[DFA, DFA, DFA]:
    """A DFA over code points and _END as three over code points: the strings it accepts without
    an _END step; those it accepts followed by one or more _END steps (a `$` passed: read no
    further); and those it accepts followed by _END steps, a newline, and _END steps or none
    (Python's `$` before a final newline, which the pattern then reads). A string with another
    code point after an _END step matches nowhere: in none of them."""
    lows = [lo for lo, _ in dfa.atoms]
    end, newline = bisect_right(lows, _END) - 1, bisect_right(lows, 10) - 1
    atoms, trans = _without_marker(dfa, _END)

    def ends(state: int) -> set[int]:
        """The states one or more _END steps from `state` reach."""
        found, step = set(), dfa.trans[state][end]
        while step >= 0 and step not in found:
            found.add(step)
            step = dfa.trans[step][end]
        return found

    def accepting(accept: set[int]) -> DFA:
        return _minimize(DFA(atoms, [row[:] for row in trans], accept))

    after_end = [ends(s) for s in range(len(dfa.trans))]  # per state
    start = bisect_right(lows, _START) - 1 if dfa.atoms[-1][1] >= _START else None
    if start is not None and any(dfa.trans[e][start] >= 0 for reached in after_end for e in reached):
        raise ValueError("a `^` after a `$`")
    ended = {s for s, reached in enumerate(after_end) if reached & dfa.accept}
    read_newline = {s for s, reached in enumerate(after_end)
                    if any((t := dfa.trans[e][newline]) >= 0 and (t in dfa.accept or after_end[t] & dfa.accept) for e in reached)}
    return accepting(set(dfa.accept)), accepting(ended), accepting(read_newline)


def _without_marker(dfa: DFA, marker: int) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """`dfa`'s atoms and transitions with the marker's steps left out (the other marker kept:
    the code points' atoms, then _START's own where the DFA reads it)."""
    lows = [lo for lo, _ in dfa.atoms]
    columns = [a for a, (lo, _) in enumerate(dfa.atoms) if lo <= MAX_CP]
    atoms = [(dfa.atoms[a][0], min(dfa.atoms[a][1], MAX_CP)) for a in columns]
    if marker != _START and dfa.atoms[-1][1] >= _START:
        columns.append(bisect_right(lows, _START) - 1)
        atoms.append((_START, _START))
    return atoms, [[row[a] for a in columns] for row in dfa.trans]


def _split_start(dfa: DFA) -> tuple[DFA, DFA | None]:
    """A DFA over code points and _START (no _END) as two over code points: the strings it
    accepts without a _START step, and those it accepts after one or more _START steps taken
    first (a `^` passed at the string's start: matched from there); None where it has none."""
    if dfa.atoms[-1][1] < _START:
        return dfa, None
    start = bisect_right([lo for lo, _ in dfa.atoms], _START) - 1
    atoms, trans = _without_marker(dfa, _START)
    roots, step = [], dfa.trans[0][start]
    while step >= 0 and step not in roots:
        roots.append(step)
        step = dfa.trans[step][start]
    anchored = None
    for root in roots:  # the same automaton started at `root`: states 0 and root swapped
        swap = {0: root, root: 0}
        rows = [[swap.get(t, t) for t in trans[swap.get(state, state)]] for state in range(len(trans))]
        rooted = _minimize(DFA(atoms, rows, {swap.get(a, a) for a in dfa.accept}))
        anchored = rooted if anchored is None else _union(anchored, rooted)
    return _minimize(DFA(atoms, [row[:] for row in trans], set(dfa.accept))), anchored


def _tempered(op, av):
    """`((?!X).)*`: (X's items, the consumed character's (op, av)), else None."""
    if op not in (C.MAX_REPEAT, C.MIN_REPEAT) or av[0] != 0 or av[1] != C.MAXREPEAT or len(av[2]) != 1:
        return None
    inner = av[2][0]
    if inner[0] is C.SUBPATTERN and not inner[1][1] and not inner[1][2]:
        inner = inner[1][3]
    else:
        inner = [inner]
    if len(inner) == 2 and inner[0][0] is C.ASSERT_NOT and inner[0][1][0] == 1 and inner[1][0] in (C.ANY, C.IN, C.LITERAL, C.NOT_LITERAL, C.CATEGORY):
        return list(inner[0][1][1]), inner[1]
    return None


def _only_empty_dfa() -> DFA:
    return DFA([(0, MAX_CP)], [[-1]], {0})


def _only_empty(dfa: DFA) -> bool:
    """Whether the DFA's one string is the empty one (the end of the string follows)."""
    return dfa.accept == {0} and len(dfa.trans) == 1 and all(t < 0 for t in dfa.trans[0])


def _optional_newline() -> DFA:
    return DFA([(0, 9), (10, 10), (11, MAX_CP)], [[-1, 1, -1], [-1, -1, -1]], {0, 1})


def _union(a: DFA, b: DFA) -> DFA:
    return _product(a, b, lambda x, y: x or y)


def pattern_dfa(pattern: str, wide: bool = False) -> DFA:
    """The strings in which the JSON Schema `pattern` finds a match (`re.search`), narrow or wide
    reading (module doc). ValueError for what is not read. The DFA is shared: read it, never
    change it."""
    if not isinstance(pattern, str):
        raise ValueError("a pattern must be a string")
    return _pattern_dfa(pattern, wide)


# the merges and negations of one large schema read the same few patterns again and again
# (JSONSchemaBench o35186: an 18,709-character negation read 9 times, 0.6 s each)
@lru_cache(maxsize=128)
def _pattern_dfa(pattern: str, wide: bool) -> DFA:
    try:
        tree = sre.parse(_named_groups(pattern))
    except (re.error, RecursionError, OverflowError) as exc:
        raise ValueError(f"invalid pattern {pattern!r}: {exc}") from exc
    reader = _Reader(wide, tree.state.flags & ~re.UNICODE)
    items = list(tree)
    # the parser hoists anchors shared by every branch out of a top-level alternation
    lead = items[:1] if items[:1] == [(C.AT, C.AT_BEGINNING)] else []
    rest = items[len(lead):]
    branches = [lead + list(b) for b in rest[0][1][1]] if len(rest) == 1 and rest[0][0] is C.BRANCH else [items]
    found = None
    for branch in branches:
        leading = branch[:1] == [(C.AT, C.AT_BEGINNING)]
        free, anchored = _split_start(reader.anchored_end(branch[1:] if leading else branch, leading))
        dfa = free if leading else _concat([_star_of(_ALL), free])  # found anywhere: anything before it
        dfa = dfa if anchored is None else _union(dfa, anchored)  # a `^` inside passed first: found at the start
        found = dfa if found is None else _union(found, dfa)
    return found


_ENDS_IN_NEWLINE = DFA([(0, 9), (10, 10), (11, MAX_CP)], [[0, 1, 0], [0, 1, 0]], {1})
_ESCAPED = DFA([(0, 0x1F), (0x20, 0x21), (0x22, 0x22), (0x23, 0x5B), (0x5C, 0x5C), (0x5D, MAX_CP)],
               [[1, 0, 1, 0, 1, 0], [1, 1, 1, 1, 1, 1]], {1})  # strings holding a character JSON escapes


@lru_cache(maxsize=256)
def agreed_search(pattern: str) -> "Callable[[str], bool] | None":
    """A test of whether `pattern` finds a match in a string, where every reader agrees on every
    string: ECMA 262, Python's `re` and llguidance (explicit characters and classes; `\\w`,
    `\\d`, `\\s` and `.` differ between them); Python's `$` before a final newline aside,
    which is read as ECMA's (the narrow reading). The pattern must match no text holding a
    character JSON escapes (`"`, `\\`, controls): llguidance reads some classes differently
    there (`^[^\\\\]+$` matched `a\\b`). None for any other pattern."""
    # what reads differently anyway, told from the text: no DFAs built (`[/.\\w-]{0,254}`: 80 s;
    # a count past 64 copies its item that often, `[a-z]{0,254}` 0.3 s)
    if (len(pattern) > 256 or not pattern.startswith("^") or not pattern.endswith("$") or pattern.endswith("\\$")
            or re.search(r"\\[wWdDsSbB]", pattern) or _bare_dot(pattern)
            or any(int(x) > 64 for pair in re.findall(r"\{(\d+)(?:,(\d*))?\}", pattern) for x in pair if x)):
        return None
    try:
        narrow, wide = pattern_dfa(pattern), pattern_dfa(pattern, wide=True)
    except (ValueError, RecursionError):
        return None
    if not meet(meet(wide, negate(narrow)), negate(_ENDS_IN_NEWLINE)).empty() or not meet(narrow, _ESCAPED).empty():
        return None
    lows = [lo for lo, _ in narrow.atoms]

    def search(text: str) -> bool:
        state = 0
        for ch in text:
            state = narrow.trans[state][bisect_right(lows, ord(ch)) - 1]
            if state < 0:
                return False
        return state in narrow.accept

    return search


def _bare_dot(pattern: str) -> bool:
    """Whether `pattern` holds a `.` outside a class (any character but line ends, which each
    reader counts differently)."""
    in_class = escaped = False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == ".":
            return True
    return False


def _named_groups(pattern: str) -> str:
    """ECMA's `(?<name>...)` as Python's `(?P<name>...)` (lookbehinds `(?<=`, `(?<!` stay)."""
    return re.sub(r"(?<!\\)\(\?<(?=[A-Za-z_])", "(?P<", pattern)


# ---- writing a DFA back as a regex (state elimination) ----

_ALT, _CAT, _QUANT, _ATOM = range(4)  # how tightly a written regex binds
_EPS = ("", _ATOM)
_SURROGATES = ((0xD800, 0xDFFF),)
_META = set("\\.+*?()|[]{}^$#&-~")
_CLASS_META = set("\\]^-[&~")


def _code(cp: int, in_class: bool) -> str:
    ch = chr(cp)
    if 0x20 <= cp < 0x7F:
        return "\\" + ch if ch in (_CLASS_META if in_class else _META) else ch
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def _members(cs: Charset) -> str:
    """Class members; ranges are cut at quotes, backslashes and controls, which stand alone
    (as our JSON translator wants them: it writes those as escapes)."""
    out = []
    for lo, hi in cs:
        for a, b in _meet(((lo, hi),), _invert(((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)))):
            out.append(_code(a, True) if a == b else f"{_code(a, True)}-{_code(b, True)}")
        out += [_code(c, True) for c in range(lo, min(hi, 0x1F) + 1)]
        out += [_code(c, True) for c in (0x22, 0x5C) if lo <= c <= hi]
    return "".join(out)


def _charset_regex(cs: Charset) -> tuple[str, int]:
    cs = _meet(cs, _invert(_SURROGATES))  # not text: no engine writes a lone surrogate
    if len(cs) == 1 and cs[0][0] == cs[0][1]:
        return _code(cs[0][0], False), _ATOM
    outside = _meet(_invert(cs), _invert(_SURROGATES))
    if outside and len(outside) < len(cs):
        return "[^" + _members(outside) + "]", _ATOM
    return "[" + _members(cs) + "]", _ATOM


def _grouped(r: tuple[str, int], level: int) -> str:
    return r[0] if r[1] >= level else f"(?:{r[0]})"


def _cat(*parts: tuple[str, int]) -> tuple[str, int]:
    parts = tuple(p for p in parts if p != _EPS)
    if not parts:
        return _EPS
    if len(parts) == 1:
        return parts[0]
    return "".join(_grouped(p, _CAT) for p in parts), _CAT


def _star(r: tuple[str, int]) -> tuple[str, int]:
    return _EPS if r == _EPS else (_grouped(r, _ATOM) + "*", _QUANT)


def _alt(a: tuple[str, int] | None, b: tuple[str, int] | None) -> tuple[str, int] | None:
    if a is None or a == b:
        return b
    if b is None:
        return a
    if _EPS in (a, b):
        other = b if a == _EPS else a
        return _grouped(other, _ATOM) + "?", _QUANT
    return f"{_grouped(a, _ALT)}|{_grouped(b, _ALT)}", _ALT


def to_regex(dfa: DFA) -> str | None:
    """An anchored regex (`^(?:...)$`, full match) for the DFA's strings; None where it has none."""
    if dfa.empty():
        return None
    n = len(dfa.trans)
    start, final = n, n + 1
    edges: dict[int, dict[int, tuple[str, int]]] = {s: {} for s in range(n + 2)}
    for s in range(n):
        edges[s] = {t: _charset_regex(cs) for t, cs in dfa.edges(s).items()}
        if s in dfa.accept:
            edges[s][final] = _EPS
    edges[start][0] = _EPS
    remaining = set(range(n))
    while remaining:
        into = {k: [p for p in edges if k in edges[p] and p != k] for k in remaining}
        k = min(remaining, key=lambda k: (len(into[k]) * len([q for q in edges[k] if q != k]), k))
        remaining.discard(k)
        loop = _star(edges[k][k]) if k in edges[k] else _EPS
        for p in into[k]:
            lead = edges[p].pop(k)
            for q, out in edges[k].items():
                if q == k:
                    continue
                joined = _alt(edges[p].get(q), _cat(lead, loop, out))
                if len(joined[0]) > _MAX_REGEX:
                    raise ValueError(f"the pattern written without lookarounds passes {_MAX_REGEX:,} characters")
                edges[p][q] = joined
        del edges[k]
    found = edges[start].get(final)
    return None if found is None else f"^(?:{found[0]})$"


@lru_cache(maxsize=1024)
def patterns_disjoint(first: str, second: str) -> bool:
    """Whether no string matches both patterns in either reading (Python's or ECMA 262's):
    their wide readings share none. False where one is not read. Over code points, where
    byte_dfa's byte automata outgrow their budget on Unicode classes (`\\d+(?:[+-]\\S+)?\\s*`
    in a loop: more than 2,000 states there, 0.1 s here)."""
    try:
        return meet(pattern_dfa(first, wide=True), pattern_dfa(second, wide=True)).empty()
    except (ValueError, RecursionError):
        return False


@lru_cache(maxsize=1024)
def anchors_inside(pattern: str) -> bool:
    """Whether `pattern` reads the string's end (`$`, `\\Z`) elsewhere than as the last item of
    the pattern or of one of its top-level branches, or its start (`^`) elsewhere than first
    (`^([^,]+(,|$)){3,}$`, `(^|,)a`: llguidance refuses those; lookaround_free writes them out)."""
    try:
        items = list(sre.parse(_named_groups(pattern)))
    except (re.error, RecursionError, OverflowError):
        return False
    return _anchors_inside(items)


def _anchors_inside(items: list) -> bool:
    """anchors_inside for a sequence of sre items at the pattern's top (a group alone there,
    `(^a$)`, is read as its own top: llguidance takes its edge anchors)."""
    if items[:1] == [(C.AT, C.AT_BEGINNING)]:  # (hoisted by the parser out of every top-level branch)
        items = items[1:]
    branches = [list(b) for b in items[0][1][1]] if len(items) == 1 and items[0][0] is C.BRANCH else [items]
    for branch in branches:
        if len(branch) == 1 and branch[0][0] is C.SUBPATTERN and not branch[0][1][1] and not branch[0][1][2]:
            if _anchors_inside(list(branch[0][1][3])):
                return True
            continue
        inner = branch[1:] if branch[:1] == [(C.AT, C.AT_BEGINNING)] else branch
        if _reads_anchor(inner[:-1] if inner and _is_anchor(inner[-1], (C.AT_END, C.AT_END_STRING)) else inner):
            return True
    return False


def _is_anchor(item, kinds: tuple = (C.AT_END, C.AT_END_STRING, C.AT_BEGINNING, C.AT_BEGINNING_STRING)) -> bool:
    return item[0] is C.AT and item[1] in kinds


def _reads_anchor(items) -> bool:
    return any(_is_anchor((op, av)) or any(_reads_anchor(list(part)) for part in _nested(op, av)) for op, av in items)


def _nested(op, av) -> list:
    """The item sequences inside one sre item (a group, a branch's alternatives, a repeated
    item, a lookaround's body)."""
    if op is C.SUBPATTERN:
        return [av[3]]
    if op is C.BRANCH:
        return list(av[1])
    if op in (C.MAX_REPEAT, C.MIN_REPEAT):
        return [av[2]]
    return [av[1]] if op in (C.ASSERT, C.ASSERT_NOT) else []


def lookaround_free(pattern: str) -> str | None:
    """`pattern` (search semantics, lookaheads allowed) as one anchored regex without
    lookarounds (the narrow reading); None where no string matches it."""
    return to_regex(pattern_dfa(pattern))


def intersection(patterns: list[str]) -> str | None:
    """One anchored regex for the strings every pattern finds a match in (narrow readings)."""
    return _intersection(tuple(patterns))


# large schemas merge and negate the same few patterns hundreds of times (one per oneOf branch);
# a few hundred entries cover one compile, and a long-lived process keeps no more than that
@lru_cache(maxsize=256)
def _intersection(patterns: tuple[str, ...]) -> str | None:
    found = pattern_dfa(patterns[0])
    for pattern in patterns[1:]:
        found = meet(found, pattern_dfa(pattern))
    return to_regex(found)


@lru_cache(maxsize=256)
def complement(pattern: str) -> str | None:
    """One anchored regex for the strings `pattern` finds no match in (in either reading)."""
    return to_regex(negate(pattern_dfa(pattern, wide=True)))
