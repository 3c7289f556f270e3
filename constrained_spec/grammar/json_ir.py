"""A tiny grammar IR between JSON schemas and the two engines that run them.

A schema is translated once into these nodes; `to_regex` inlines everything into one regex for
outlines-core (fails with `RecursiveGrammar` on a cycle), `to_lark` writes a Lark grammar where
only cyclic definitions become rules and every non-recursive piece becomes one regex terminal.
Regex fragments use only syntax that both Rust's regex crate and Python's `re` read the same way
(`\\xNN`, classes, `(?:...)`, `{m,n}`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .protocol import GrammarError
from .regex_backend import regex_escape

__all__ = ["Node", "Lit", "Rx", "Seq", "Alt", "Chain", "Rep", "Ref", "Grammar", "RecursiveGrammar", "GrammarTooLarge", "seq", "alt", "opt", "regex_size", "MAX_REGEX_CHARS", "MAX_LARK_ALTERNATIVES"]

# outlines-core builds a DFA at ~3.6 us per regex character here (1M chars: ~4 s). A schema can
# expand exponentially (each array level writes its item twice: `[item(,item)*]`), so regexes
# beyond this are refused before they are written.
MAX_REGEX_CHARS = 1_000_000
# Lark rewrites `?` and `( | )` inside one rule into that rule's alternatives, multiplying them
# along a sequence: past this many, its grammar loader runs for minutes and gigabytes.
MAX_LARK_ALTERNATIVES = 20_000
# Lark's LALR tables grow faster than the alternatives of all rules together (on the 2-core VM:
# 1,097 took 6 s, 3,659 10 s, 4,608 62 s): past this total the grammar is refused, quickly.
MAX_LARK_TOTAL_ALTERNATIVES = 4_096
# An option beside recursive ones, and a recursive option's own members, are written member by
# member up to this many Lark alternatives an option; where the whole grammar would then pass the
# limits above, `to_lark` writes it again with BESIDE_SPLIT_ALTERNATIVES and recursive options merged.
AROUND_RECURSION_ALTERNATIVES = 512
BESIDE_SPLIT_ALTERNATIVES = 64
# A recursive sequence, or an alternation with a `Chain`, that would make more Lark alternatives
# than this in its rule is written right-nested instead: each tail of it a rule of its own,
# a sequence's rules keeping at most TAIL_ALTERNATIVES inline (fewer LALR states: 413 against
# 1,791 at 64 for 61 optional members around a required one; 3 s to compile against 10 s).
CHAIN_ABOVE = 64
TAIL_ALTERNATIVES = 8
# Under `split_above`, a repeated item written longer than this is a rule of its own, copied by name.
SHARED_ITEM_CHARS = 200


def _checked_alternatives(counts: list[tuple[str, int]], total: int) -> int:
    """`total` plus the rules' alternative counts; GrammarTooLarge past a rule's or the total limit."""
    for name, count in counts:
        if count > MAX_LARK_ALTERNATIVES:
            raise GrammarTooLarge(f"the grammar's rule {name!r} would expand to more than {MAX_LARK_ALTERNATIVES:,} "
                                  "alternatives in Lark: too many optional members around recursive values")
        total += count
    if total > MAX_LARK_TOTAL_ALTERNATIVES:
        raise GrammarTooLarge(f"the grammar's rules would expand to {total:,} or more alternatives in Lark (limit "
                              f"{MAX_LARK_TOTAL_ALTERNATIVES:,}): too many optional members around recursive values")
    return total


def _per_lark_call(seen_at: int | None = None) -> Callable:
    """Memoize a Grammar method of (node, ...) for the length of one `to_lark` call (the counts
    and tests nest: each option's count asks for its members', theirs for their options'...),
    by node identity (the node is kept, so its id is not reused) and whether optional bodies are
    split (`_bodies`: the counts differ), keeping whether an option beneath was merged for its
    budget (`_merged`, set again on every hit); calls given a non-empty `seen` (argument
    `seen_at`) are not memoized."""
    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def memoized(self: "Grammar", node: "Node", *args: Any) -> Any:
            memo = self.__dict__.get("_memo")
            if memo is None or (seen_at is not None and len(args) > seen_at and args[seen_at]):
                return method(self, node, *args)
            key = (method.__name__, id(node), self.__dict__.get("_bodies"))
            hit = memo.get(key)
            if hit is None or hit[0] is not node:
                outer, self._merged = self._merged, False
                hit = memo[key] = (node, method(self, node, *args), self._merged)
                self._merged = outer
            self._merged |= hit[2]
            return hit[1]
        return memoized
    return wrap


class Node:
    __slots__ = ()


@dataclass(frozen=True)
class Lit(Node):
    text: str


@dataclass(frozen=True)
class Rx(Node):
    pattern: str  # a self-contained regex fragment


@dataclass(frozen=True)
class Seq(Node):
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Chain:
    """The language of an alternation, written right-nested for Lark: option k is `firsts[k]`
    followed by `leads[k+1:]`, and each tail of `leads` becomes one rule, shared by every option
    (linear). An object body of optional members is built left-nested for the regex engine (each
    member written twice keeps the DFA small) but that form makes 2^n alternatives in one Lark
    rule; a left-nested rule instead would need two tokens of lookahead at each ","."""
    firsts: tuple[Node, ...]
    leads: tuple[Node, ...]


@dataclass(frozen=True)
class Alt(Node):
    options: tuple[Node, ...]
    chain: Chain | None = field(default=None, compare=False, repr=False)  # the same language, for Lark


@dataclass(frozen=True)
class Rep(Node):
    item: Node
    min: int
    max: int | None  # None = unbounded


@dataclass(frozen=True)
class Ref(Node):
    name: str


EMPTY = Lit("")


def seq(*items: Node) -> Node:
    flat: list[Node] = []
    for item in items:
        if isinstance(item, Seq):
            flat.extend(item.items)
        elif item != EMPTY:
            flat.append(item)
    # Adjacent literals stay separate pieces: on the Lark path each becomes its own terminal,
    # and merging "," into ',"key":' would make one terminal a prefix of another (the lexer then
    # cannot tell where a "," ends).
    if not flat:
        return EMPTY
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


ANY_JSON = "__any_json__"  # the definition name of "any JSON value"


def alt(*options: Node) -> Node:
    if any(isinstance(o, Ref) and o.name.startswith(ANY_JSON) for o in options):
        widest = max((o for o in options if isinstance(o, Ref) and o.name.startswith(ANY_JSON)), key=_any_depth)
        if all(isinstance(o, Ref) and o.name.startswith(ANY_JSON) for o in options) or _any_depth(widest) == float("inf"):
            return widest
    if Ref(ANY_JSON) in options:  # any value covers every other option (keeps LALR unambiguous)
        return Ref(ANY_JSON)
    unique: list[Node] = []
    for option in options:
        for o in option.options if isinstance(option, Alt) else (option,):
            if o not in unique:
                unique.append(o)
    return unique[0] if len(unique) == 1 else Alt(tuple(unique))


def _any_depth(ref: "Ref") -> float:
    rest = ref.name[len(ANY_JSON) :]
    return float(rest) if rest else float("inf")


def opt(item: Node) -> Node:
    return Rep(item, 0, 1)


class RecursiveGrammar(Exception):
    """The grammar has a cycle of definitions: it needs the context-free (Lark) path."""


class GrammarTooLarge(GrammarError):
    """A regex (the whole grammar, or one Lark terminal) would exceed MAX_REGEX_CHARS."""


@dataclass
class Grammar:
    root: Node
    defs: dict[str, Node]
    free_extras: bool = True  # False: the translator left out free-form undeclared keys (logged)
    narrowed: dict[str, str] = field(default_factory=dict)  # JSON pointer -> how generation is narrower there (logged)

    # ---- regex ----
    def to_regex(self) -> str:
        cycles = _refs(self.root, self.defs) & self.cyclic_names()
        if cycles:
            raise RecursiveGrammar(min(cycles))
        self._check_size(self.root)
        return self._regex(self.root, ())

    def _check_size(self, node: Node) -> None:
        size = regex_size(node, {}, self.defs)
        if size > MAX_REGEX_CHARS:
            raise GrammarTooLarge(f"the schema expands to a regular expression of about {size:.3g} characters "
                                  f"(limit {MAX_REGEX_CHARS:,}): arrays nested too deeply or too many properties")

    def _regex(self, node: Node, stack: tuple[str, ...]) -> str:
        if isinstance(node, Lit):
            return regex_escape(node.text)
        if isinstance(node, Rx):
            return f"(?:{node.pattern})"
        if isinstance(node, Seq):
            return "".join(self._regex(i, stack) for i in node.items)
        if isinstance(node, Alt):
            return "(?:" + "|".join(self._regex(o, stack) for o in node.options) + ")"
        if isinstance(node, Rep):
            return f"(?:{self._regex(node.item, stack)}){_quantifier(node.min, node.max)}"
        if isinstance(node, Ref):
            if node.name in stack:
                raise RecursiveGrammar(node.name)
            return self._regex(self.defs[node.name], stack + (node.name,))
        raise TypeError(f"unknown node {node!r}")

    # ---- lark ----
    def cyclic_names(self) -> set[str]:
        """Definitions that reach themselves through references."""
        edges = {name: _refs(node) for name, node in self.defs.items()}  # direct references
        cyclic = set()
        for start in self.defs:
            seen, todo = set(), list(edges[start])
            while todo:
                name = todo.pop()
                if name == start:
                    cyclic.add(start)
                    break
                if name not in seen:
                    seen.add(name)
                    todo.extend(edges[name])
        return cyclic

    def to_lark(self, chains: bool = True, split_above: int | None = None) -> str:
        """The grammar as Lark text. `chains=False` writes every sequence and alternation inline,
        as before chains existed (for grammars where a tail rule shared by overlapping branches
        makes a reduce/reduce conflict: see compiler._from_ir). `split_above`: a part whose regex
        would pass this many characters is written as recursive parts are (its members apart,
        long sequences chained), not as one terminal (for regular grammars too large to index
        as one regex: see compiler._from_ir)."""
        try:
            return self._to_lark(AROUND_RECURSION_ALTERNATIVES, chains, split_above)
        except GrammarTooLarge:  # members around recursion merged again: fewer alternatives
            return self._to_lark(0, chains, split_above)

    def _to_lark(self, around: int, chains: bool, split_above: int | None = None) -> str:
        self._memo: dict = {}
        self._sizes: dict[int, int] = {}
        self._split_above = split_above
        self._chains = chains
        self._around = around
        self._bodies: bool | str = "auto"
        self._merged = False
        self._tails: dict[str, tuple[str, int]] = {}  # rule name -> (body, alternatives)
        self._alternatives = 0  # of the rules so far
        try:
            return self._lark_rules()
        finally:
            del self._memo, self._sizes, self._split_above, self._chains, self._around, self._bodies, self._merged, self._tails, self._alternatives

    def _lark_rules(self) -> str:
        cyclic = self.cyclic_names()
        if self._split_above is not None:  # large definitions are rules too: written once, however often referenced
            cyclic |= {name for name in _refs(self.root, self.defs) if regex_size(self.defs[name], self._sizes, self.defs) > self._split_above}
        # counted before they are written: a grammar too large is refused without its text
        # (helm-testsuite's took 9 s to write, to be refused)
        counts = [(name, self._lark_alternatives(node, cyclic)) for name, node in [("start", self.root)] + [(n, self.defs[n]) for n in sorted(cyclic)]]
        self._alternatives = _checked_alternatives(counts, 0)  # and each tail's, as it is written (_name_tail)
        rules = {"start": self._lark(self.root, cyclic)}
        for name in sorted(cyclic):
            rules[_rule_name(name)] = self._lark(self.defs[name], cyclic)
        for name, (body, count) in sorted(self._tails.items()):
            rules[name] = body
        return "\n".join(f"{name}: {body}" for name, body in rules.items()) + "\n"

    @_per_lark_call()
    def _lark_alternatives(self, node: Node, cyclic: set[str]) -> int:
        """How many alternatives Lark makes of the text `_lark(node)` writes (inside its rule;
        a starred item becomes a rule of its own, checked here too)."""
        if not self._has_cycle_ref(node, cyclic) and not self.nullable(node):
            head = _separator_head(node)
            return 1 if head is None else self._lark_alternatives(seq(*head.items[1:]), cyclic)
        if isinstance(node, Ref):
            return 1 if node.name in cyclic else self._lark_alternatives(self.defs[node.name], cyclic)
        if isinstance(node, (Seq, Alt)):
            return self._chain_alternatives(node, cyclic) if self._chained(node, cyclic) else self._inline_alternatives(node, cyclic)
        if isinstance(node, Rep):
            item = self._lark_alternatives(node.item, cyclic)
            if node.max is None:
                if item > MAX_LARK_ALTERNATIVES:
                    return item
                return min(item ** node.min * 2, MAX_LARK_ALTERNATIVES + 1)
            return _repeat_alternatives(item, node.min, node.max, MAX_LARK_ALTERNATIVES + 1)
        return 1  # EMPTY

    @_per_lark_call()
    def _inline_alternatives(self, node: Node, cyclic: set[str]) -> int:
        """How many alternatives a sequence or an alternation makes written inline, in one rule."""
        if isinstance(node, Seq):
            count = 1
            for item in node.items:
                count = min(count * self._lark_alternatives(item, cyclic), MAX_LARK_ALTERNATIVES + 1)
            return count
        if isinstance(node, Alt):
            options = [o for o in node.options if o != EMPTY]
            if any(self._has_cycle_ref(o, cyclic) for o in options):  # written by _lark_beside_split
                with self._bodies_for(options, cyclic):
                    counts = [self._beside_alternatives(o, cyclic) for o in options]
            else:
                counts = [self._lark_alternatives(o, cyclic) for o in options]
            return min(sum(counts) + (len(options) < len(node.options)), MAX_LARK_ALTERNATIVES + 1)
        raise TypeError(f"not a sequence or an alternation: {node!r}")

    @_per_lark_call()
    def _chained(self, node: Node, cyclic: set[str]) -> bool:
        """Whether `_lark` writes this recursive sequence, or alternation with a `Chain`,
        right-nested (`_lark_chain`): written inline it would make more than CHAIN_ABOVE
        alternatives. Splitting a sequence only at the end of a rule never needs more lookahead
        than the rule written whole: each tail is reduced where the whole rule would have been."""
        chainable = (isinstance(node, Seq) and len(node.items) > 1) or (isinstance(node, Alt) and node.chain is not None)
        return chainable and self.__dict__.get("_chains", False) and self._has_cycle_ref(node, cyclic) and self._inline_alternatives(node, cyclic) > CHAIN_ABOVE

    def _seq_cut(self, node: Seq, cyclic: set[str]) -> tuple[int, int]:
        """Where a chained sequence's tail rule starts (after at least one item, before the
        alternatives of the items kept inline pass TAIL_ALTERNATIVES), and those alternatives."""
        cut, count = 1, self._lark_alternatives(node.items[0], cyclic)
        while cut < len(node.items) - 1:
            more = count * self._lark_alternatives(node.items[cut], cyclic)
            if more > TAIL_ALTERNATIVES:
                break
            cut, count = cut + 1, more
        return cut, min(count, MAX_LARK_ALTERNATIVES + 1)

    @_per_lark_call()
    def _chain_alternatives(self, node: Node, cyclic: set[str]) -> int:
        """How many alternatives `_lark_chain(node)` writes in the rule it is in (its tail rules
        are counted where they are written, in `_tails`)."""
        if isinstance(node, Seq):
            return self._seq_cut(node, cyclic)[1]
        assert isinstance(node, Alt) and node.chain is not None
        with self._bodies_for([*node.chain.firsts, *node.chain.leads], cyclic):
            count = 0
            for first in node.chain.firsts:
                ways = 1
                for item in self._flat_items(first):
                    ways = min(ways * self._member_alternatives(item, cyclic), MAX_LARK_ALTERNATIVES + 1)
                count += ways
        return min(count, MAX_LARK_ALTERNATIVES + 1)

    def _lark_chain(self, node: Node, cyclic: set[str]) -> str:
        """A chained node (`_chained`) as an atom whose tails are rules of their own: a sequence
        keeps its first items inline; an alternation with a `Chain` is written option by option,
        member by member as `_lark_beside_split` writes them (the same terminals as a sibling's),
        each option's remaining optional members one shared tail rule."""
        if isinstance(node, Seq):
            cut = self._seq_cut(node, cyclic)[0]
            tail = self._tail_rule(node.items[cut:], cyclic)
            return "(" + " ".join([self._lark(i, cyclic) for i in node.items[:cut]] + [tail]) + ")"
        assert isinstance(node, Alt) and node.chain is not None
        firsts, leads = node.chain.firsts, node.chain.leads
        with self._bodies_for([*firsts, *leads], cyclic):
            tails: list[str] = [""] * (len(leads) + 1)
            for j in reversed(range(1, len(leads))):
                body = " ".join(p for p in (self._lark_member(leads[j], cyclic), tails[j + 1]) if p)
                tails[j] = self._name_tail(body, self._member_alternatives(leads[j], cyclic))
            options = []
            for k, first in enumerate(firsts):
                parts = [self._lark_member(i, cyclic) for i in self._flat_items(first)] + [tails[k + 1]]
                options.append("(" + " ".join(p for p in parts if p) + ")")
        return "(" + " | ".join(options) + ")"

    def _tail_rule(self, items: tuple[Node, ...], cyclic: set[str]) -> str:
        """The rule of a chained sequence's last items, written item by item as the sequence was
        (merged into one terminal, `(,"q1":..)?,"q2":..}` would swallow the "," our lexer must
        see alone), chained again where they make too many alternatives."""
        if len(items) == 1:
            return self._name_tail(self._lark(items[0], cyclic), self._lark_alternatives(items[0], cyclic))
        rest = Seq(items)
        if self._inline_alternatives(rest, cyclic) > TAIL_ALTERNATIVES:
            return self._name_tail(self._lark_chain(rest, cyclic), self._chain_alternatives(rest, cyclic))
        return self._name_tail("(" + " ".join(self._lark(i, cyclic) for i in items) + ")", self._inline_alternatives(rest, cyclic))

    def _name_tail(self, body: str, count: int) -> str:
        """The rule holding `body` (one per distinct body: equal tails are one rule)."""
        name = "t_" + hashlib.blake2b(body.encode(), digest_size=8).hexdigest()
        if name not in self._tails:
            self._alternatives = _checked_alternatives([(name, count)], self._alternatives)
            self._tails[name] = (body, count)
        return name

    @_per_lark_call(seen_at=1)
    def _has_cycle_ref(self, node: Node, cyclic: set[str], seen: frozenset[str] = frozenset()) -> bool:
        """Whether `node` reaches a cyclic definition, or (under `split_above`) is a composite
        too large to be one terminal: both are written part by part."""
        limit = self.__dict__.get("_split_above")
        if limit is not None and not isinstance(node, (Lit, Rx)) and regex_size(node, self._sizes, self.defs) > limit:
            return True
        if isinstance(node, Ref):
            if node.name in cyclic:
                return True
            return node.name not in seen and self._has_cycle_ref(self.defs[node.name], cyclic, seen | {node.name})
        children = node.items if isinstance(node, Seq) else node.options if isinstance(node, Alt) else (node.item,) if isinstance(node, Rep) else ()
        return any(self._has_cycle_ref(c, cyclic, seen) for c in children)

    @_per_lark_call(seen_at=0)
    def nullable(self, node: Node, seen: frozenset[str] = frozenset()) -> bool:
        """Can `node` match the empty string? (Lark terminals must not.)"""
        if isinstance(node, Lit):
            return node.text == ""
        if isinstance(node, Rx):
            return False  # by construction: optional whitespace is Rep(Rx(...{1,n}), 0, 1)
        if isinstance(node, Seq):
            return all(self.nullable(i, seen) for i in node.items)
        if isinstance(node, Alt):
            return any(self.nullable(o, seen) for o in node.options)
        if isinstance(node, Rep):
            return node.min == 0 or self.nullable(node.item, seen)
        if isinstance(node, Ref):
            return node.name not in seen and self.nullable(self.defs[node.name], seen | {node.name})
        raise TypeError(f"unknown node {node!r}")

    def _lark(self, node: Node, cyclic: set[str]) -> str:
        if self.__dict__.get("_split_above") is not None:  # large grammars: each shared node written once
            return self._lark_once(node, cyclic)
        return self._lark_written(node, cyclic)

    @_per_lark_call()
    def _lark_once(self, node: Node, cyclic: set[str]) -> str:
        return self._lark_written(node, cyclic)

    def _lark_written(self, node: Node, cyclic: set[str]) -> str:
        """Lark text for `node` as one ATOM: every alternation it writes is parenthesised, so
        the result can be placed next to others in a sequence or under a repetition safely."""
        if not self._has_cycle_ref(node, cyclic) and not self.nullable(node):
            head = _separator_head(node)
            if head is not None:  # "," stays its own terminal (B4), the rest one terminal
                return "(" + _lark_regex(regex_escape(head.items[0].text)) + " " + self._lark(seq(*head.items[1:]), cyclic) + ")"
            self._check_size(node)
            return _lark_regex(self._regex(node, ()))
        if isinstance(node, Ref):
            if node.name not in cyclic:
                return self._lark(self.defs[node.name], cyclic)
            return _rule_name(node.name)
        if node == EMPTY:
            return '""'
        if isinstance(node, (Lit, Rx)):
            raise TypeError(f"unexpected empty leaf {node!r}")
        if isinstance(node, (Seq, Alt)) and self._chained(node, cyclic):
            return self._lark_chain(node, cyclic)
        if isinstance(node, Seq):
            return "(" + " ".join(self._lark(i, cyclic) for i in node.items) + ")"
        if isinstance(node, Alt):
            options = [o for o in node.options if o != EMPTY]
            if any(self._has_cycle_ref(o, cyclic) for o in options):
                with self._bodies_for(options, cyclic):
                    body = "(" + " | ".join(self._lark_beside_split(o, cyclic) for o in options) + ")"
            else:
                body = "(" + " | ".join(self._lark(o, cyclic) for o in options) + ")"
            return body + "?" if len(options) < len(node.options) else body
        if isinstance(node, Rep):
            return self._lark_rep(node, cyclic)
        raise TypeError(f"unknown node {node!r}")

    def _lark_beside_split(self, node: Node, cyclic: set[str]) -> str:
        """An option of an alternation whose other options are split at recursive values is split
        the same way at its own top level (each member, `{`, a discriminator key, `:`, its const,
        `}` a terminal or an optional group of its own), or where that would make too many
        alternatives, at its leading literals. Merged into one terminal, `"type":"panel"...}`
        outran a sibling's `"type"` and died at `"type":"c`, past where our lexer can go back:
        `{"type":"command"}` was refused. So are the members around a recursive one (a
        `contains` member beside optional ones): merged, `"kind":"app",` outran a sibling
        option's `"kind"` and `{"kind":"app"}` was refused. An option that is a reference is
        its definition's body here (written whole, `{"kind":"image"}` outran a sibling's `{`)."""
        node = self._dereferenced(node, cyclic)
        split = self._split_items(node, cyclic)
        if split is not None:
            return "(" + " ".join(self._lark_member(item, cyclic) for item in split[0]) + ")"
        items = self._flat_items(node)
        lits = self._leading_literals_group(items)
        if lits is not None:  # at least a leading optional member of literals: `("kind":"app",)?`
            written = " ".join(_lark_regex(regex_escape(i.text)) for i in lits)
            return f"(({written})? {self._lark_beside_split(seq(*items[1:]), cyclic)})"
        if self._has_cycle_ref(node, cyclic) or self.nullable(node):
            return self._lark(node, cyclic)
        rest = items
        lead = []
        while rest and isinstance(rest[0], Lit):
            lead.append(_lark_regex(regex_escape(rest.pop(0).text)))
        if not lead or (rest and self.nullable(seq(*rest))):  # a nullable rest would add alternatives: kept whole
            return self._lark(node, cyclic)
        return "(" + " ".join(lead + ([self._lark(seq(*rest), cyclic)] if rest else [])) + ")"

    def _dereferenced(self, node: Node, cyclic: set[str]) -> Node:
        """The body of a reference written inline (not a rule of its own), else `node`."""
        seen = set()
        while isinstance(node, Ref) and node.name not in cyclic and node.name not in seen:
            seen.add(node.name)
            node = self.defs[node.name]
        return node

    def _leading_literals_group(self, items: list[Node]) -> list[Lit] | None:
        """The literals of a leading optional group of literals followed by more items, or None."""
        first = items[0] if len(items) > 1 else None
        if not isinstance(first, Rep) or (first.min, first.max) != (0, 1):
            return None
        inner = self._flat_items(first.item)
        return inner if inner and all(isinstance(i, Lit) for i in inner) else None

    def _lark_member(self, item: Node, cyclic: set[str]) -> str:
        """One top-level item of a split option, as a sibling option holding the same members
        writes them: an alternation of member sequences option by option, an optional group
        item by item (merged, `("orientation":"any",)?"name":..` outran a sibling's `"orientation"`)."""
        if self._split_members(item, cyclic):
            return self._lark_split_options(item, cyclic)
        inner = self._optional_group(item, cyclic)
        if inner is not None:
            return "(" + " ".join(self._lark_member(i, cyclic) for i in inner) + ")?"
        return self._lark(item, cyclic)

    @_per_lark_call()
    def _member_alternatives(self, item: Node, cyclic: set[str]) -> int:
        """How many alternatives Lark makes of what `_lark_member(item)` writes."""
        if self._split_members(item, cyclic):
            with self._bodies_for(item.options, cyclic):
                return min(sum(self._beside_alternatives(o, cyclic) for o in item.options), MAX_LARK_ALTERNATIVES + 1)
        inner = self._optional_group(item, cyclic)
        if inner is not None:
            ways = 1
            for i in inner:
                ways = min(ways * self._member_alternatives(i, cyclic), MAX_LARK_ALTERNATIVES + 1)
            return ways + 1
        return self._lark_alternatives(item, cyclic)

    def _split_members(self, item: Node, cyclic: set[str]) -> bool:
        """Whether `_lark_member` writes the alternation `item` option by option: where some option
        is a sequence of members (`("orientation":..,)?"name":..` | `"orientation":..`), written
        whole, its longer way outran the shorter one's end; an alternation of single values
        (`"any"|"landscape"`) stays one terminal."""
        return (isinstance(item, Alt) and not self._has_cycle_ref(item, cyclic) and not self.nullable(item)
                and any(len(self._flat_items(self._dereferenced(o, cyclic))) > 1 for o in item.options))

    def _optional_group(self, item: Node, cyclic: set[str]) -> list[Node] | None:
        """The items of `item` where it is an optional group, not recursive, of several items or,
        where `_bodies` is set, of an alternation of member sequences (an object's optional
        body), else None."""
        if not isinstance(item, Rep) or (item.min, item.max) != (0, 1) or self._has_cycle_ref(item, cyclic):
            return None
        inner = self._flat_items(item.item)
        bodies = self.__dict__.get("_bodies") in (True, "auto")
        return inner if len(inner) > 1 or (bodies and inner and self._split_members(inner[0], cyclic)) else None

    def _lark_split_options(self, node: Alt, cyclic: set[str]) -> str:
        """An alternation with each option split as `_lark_beside_split` writes it (an atom)."""
        options = [o for o in node.options if o != EMPTY]
        with self._bodies_for(options, cyclic):
            body = "(" + " | ".join(self._lark_beside_split(o, cyclic) for o in options) + ")"
        return body + "?" if len(options) < len(node.options) else body

    @_per_lark_call()
    def _beside_alternatives(self, node: Node, cyclic: set[str]) -> int:
        """How many alternatives Lark makes of what `_lark_beside_split(node)` writes."""
        node = self._dereferenced(node, cyclic)
        split = self._split_items(node, cyclic)
        if split is not None:
            return split[1]
        items = self._flat_items(node)
        if self._leading_literals_group(items) is not None:
            return min(2 * self._beside_alternatives(seq(*items[1:]), cyclic), MAX_LARK_ALTERNATIVES + 1)
        return self._lark_alternatives(node, cyclic)

    def _flat_items(self, node: Node) -> list[Node]:
        items, todo = [], list(node.items) if isinstance(node, Seq) else [node]
        while todo:
            item = todo.pop(0)
            if isinstance(item, Seq):
                todo[:0] = item.items
            elif item != EMPTY:
                items.append(item)
        return items

    def _split_items(self, node: Node, cyclic: set[str]) -> tuple[list[Node], int] | None:
        """The top-level items `_lark_beside_split` writes one by one and the alternatives they
        make, or None: kept whole where it is nullable and not recursive, or past the budget
        `to_lark` sets for an option (at least BESIDE_SPLIT_ALTERNATIVES where it is not
        recursive; outside `to_lark`, a recursive option is never split)."""
        recursive = self._has_cycle_ref(node, cyclic)
        if not recursive and self.nullable(node):
            return None
        items = self._flat_items(node)
        if len(items) < 2:
            return None
        around = self.__dict__.get("_around", 0)
        budget = around if recursive else max(BESIDE_SPLIT_ALTERNATIVES, around)
        count = 1
        for item in items:
            count *= self._member_alternatives(item, cyclic)
            if count > budget:
                if "_merged" in self.__dict__:
                    self._merged = True
                return None
        return items, count

    @contextlib.contextmanager
    def _bodies_for(self, options: list[Node], cyclic: set[str]) -> Iterator[None]:
        """Within an alternation written option by option: where no enclosing one has decided,
        decide for it and everything inside whether optional bodies are split (`_bodies`), so
        that a member is written the same way in every option (`"kinds":{` then a merged body in
        one option and a split one in another: the merged terminal outran the split key)."""
        outer = self.__dict__.get("_bodies")
        if outer == "auto":
            self._bodies = self._split_bodies(options, cyclic)
        try:
            yield
        finally:
            if outer is not None:
                self._bodies = outer

    def _split_bodies(self, options: list[Node], cyclic: set[str]) -> bool:
        """Split optional bodies in these options unless some option, or one inside them, would
        then pass its budget and be merged whole: a member whose value is an object of optional
        members multiplies the alternatives by each of them, and merged whole, the members around
        it outran a sibling's (`{"orientation":"app","kinds2":{}}` was refused)."""
        outer, self._merged, self._bodies = self._merged, False, True
        for option in options:
            self._beside_alternatives(option, cyclic)
        merged, self._merged = self._merged, outer
        return not merged

    def _lark_rep(self, node: Rep, cyclic: set[str]) -> str:
        # Expanded into ?, * and copies so any Lark engine reads it (no ~ ranges).
        item = self._lark(node.item, cyclic)  # an atom
        copies = node.min + (1 if node.max is None else node.max - node.min)
        if self.__dict__.get("_split_above") is not None and copies > 1 and len(item) > SHARED_ITEM_CHARS:
            item = self._name_tail(item, self._lark_alternatives(node.item, cyclic))  # nested copies grew exponentially
        parts = [item] * node.min
        if node.max is None:
            parts.append(f"{item}*")
        elif node.max > node.min:  # up to n more: (item (item (item)?)?)?, written in one pass
            extra = node.max - node.min
            parts.append(f"({item} " * (extra - 1) + f"{item}?" + ")?" * (extra - 1))
        return "(" + " ".join(parts) + ")" if parts else '""'


_SEPARATORS = frozenset(",:{[")


def _repeat_alternatives(item: int, low: int, high: int, limit: int) -> int:
    """min(item**low * (1 + item + ... + item**(high - low)), limit), without the huge integers a
    large maxItems would make (a bound of 10,000 once took minutes)."""
    if item <= 1:
        return min(item ** low * (high - low + 1) if item == 1 else int(low == 0), limit)
    base = 1
    for _ in range(low):
        base *= item
        if base >= limit:
            return limit
    total, power = 0, 1
    for _ in range(high - low + 1):
        total += power
        power *= item
        if base * total >= limit:
            return limit
    return base * total


def _separator_head(node: Node) -> "Seq | None":
    """`node` if it is a sequence that starts with a one-character separator literal followed by
    more. Such a sequence must not become one terminal: our lexer backtracks one byte at most, so
    after `[1` the merged ',"k":1' (an optional member of an enclosing object, in the same LALR
    lookahead set) would swallow the array's ',' of `[1,"a"]` and die at `a`. A repeat a fixed
    number of times counts as that many copies (`(,"kind":..){1}` swallowed the ',' before a
    sibling's `"kinds2"`)."""
    if isinstance(node, Rep) and node.min == node.max and node.min >= 1:
        node = seq(*[node.item] * node.min)
    if isinstance(node, Seq) and len(node.items) > 1:
        first = node.items[0]
        if isinstance(first, Lit) and first.text in _SEPARATORS:
            return node
    return None


_LARK_REGEX_REWRITES = re.compile(r'\\(.)|["/]', re.DOTALL)  # an escape pair, or a bare quote or slash


def _lark_regex_rewrite(match: re.Match) -> str:
    char = match.group(1) if match.group(1) is not None else match.group(0)
    if char == '"':
        return "\\x22"
    if char == "/":
        return "\\/"
    return match.group(0)


def _lark_regex(regex: str) -> str:
    """A regex as a Lark /.../ literal. Lark's eval_escaping drops the backslash before any quote
    (so `\\\\"`, a literal backslash then a quote, would lose its backslash, B3): every quote,
    escaped or bare, is written \\x22, which Lark turns into a plain quote. Backslash pairs pass
    through unchanged and every bare '/' gets a backslash."""
    return "/" + _LARK_REGEX_REWRITES.sub(_lark_regex_rewrite, regex) + "/"


def regex_size(node: Node, memo: dict[int, int], defs: dict[str, Node] | None = None) -> int:
    """Length of `Grammar._regex(node)` (up to a few characters), linear in the DAG of nodes
    (`memo` by node identity). A Ref is followed through `defs`, or counts 1 without them; a Ref
    back to a definition being sized counts 0 (only acyclic parts are ever written out)."""
    known = memo.get(id(node))
    if known is not None:
        return known
    memo[id(node)] = 0  # guards a cycle through a Ref
    if isinstance(node, Lit):
        size = len(regex_escape(node.text))
    elif isinstance(node, Rx):
        size = len(node.pattern) + 4
    elif isinstance(node, Seq):
        size = sum(regex_size(i, memo, defs) for i in node.items)
    elif isinstance(node, Alt):
        size = 4 + sum(regex_size(o, memo, defs) + 1 for o in node.options)
    elif isinstance(node, Rep):
        size = 12 + regex_size(node.item, memo, defs)
    elif isinstance(node, Ref):
        size = 1 if defs is None else regex_size(defs[node.name], memo, defs)
    else:
        raise TypeError(f"unknown node {node!r}")
    memo[id(node)] = size
    return size


def _quantifier(lo: int, hi: int | None) -> str:
    if (lo, hi) == (0, 1):
        return "?"
    if hi is None:
        return "*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"
    return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def _refs(node: Node, defs: dict[str, Node] | None = None) -> set[str]:
    """Names `node` references: directly, or also transitively through `defs` when given.
    Each shared node is visited once (schemas expand to DAGs, exponentially large as trees)."""
    out: set[str] = set()
    seen: set[int] = set()
    todo = [node]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Ref):
            if defs is not None and node.name not in out:
                todo.append(defs[node.name])
            out.add(node.name)
        elif isinstance(node, Seq):
            todo.extend(node.items)
        elif isinstance(node, Alt):
            todo.extend(node.options)
        elif isinstance(node, Rep):
            todo.append(node.item)
    return out


def _rule_name(name: str) -> str:
    # readable and collision-free (two pointers may sanitize to the same text)
    return "r_" + "".join(c if c.isalnum() else "_" for c in name.lower()).strip("_") + f"_{zlib.crc32(name.encode()):08x}"
