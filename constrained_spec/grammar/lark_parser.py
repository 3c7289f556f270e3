"""Lark's LALR(1) parse table, stepped on immutable state stacks.

A parser configuration is a tuple of LALR state ids (no values: we only need to know whether a
terminal sequence can be parsed), so it is hashable (a cache key), free to copy, and a rollback
is just keeping the old tuple. Stepping follows Lark's `ParserState.feed_token` exactly.

`LALR_PLUGINS` makes Lark build the same table faster (see `_IndexedAnalyzer`).
"""

from __future__ import annotations

from collections import defaultdict

import lark
from lark.exceptions import GrammarError as LarkGrammarError
from lark.grammar import NonTerminal, Rule
from lark.parsers.grammar_analysis import LR0ItemSet, RulePtr
from lark.parsers.lalr_analysis import LALR_Analyzer, Shift
from lark.parsers.lalr_parser import LALR_Parser, _Parser

__all__ = ["LALR_PLUGINS", "LalrTable"]

Stack = tuple[int, ...]
END = "$END"


class LalrTable:
    def __init__(self, parse_table, start: str) -> None:
        # states[s][symbol] = (True, next_state) for a shift, (False, (origin, size)) for a reduce.
        self.states: dict[int, dict[str, tuple[bool, object]]] = {}
        for s, actions in parse_table.states.items():
            row: dict[str, tuple[bool, object]] = {}
            for sym, (action, arg) in actions.items():
                if action is Shift:
                    row[str(sym)] = (True, arg)
                else:
                    row[str(sym)] = (False, (str(arg.origin.name), len(arg.expansion)))
            self.states[s] = row
        self.start: Stack = (parse_table.start_states[start],)
        self.end_state: int = parse_table.end_states[start]

    @classmethod
    def from_lark(cls, parser, start: str) -> "LalrTable":
        """The table of a `lark.Lark(..., parser="lalr")`, reached through Lark's public
        interactive parser (its `parser_state.parse_conf`), not its private parser chain."""
        return cls(parser.parse_interactive(start=start).parser_state.parse_conf.parse_table, start)

    def symbols(self, state: int) -> list[str]:
        """Symbols with an action in this LALR state (terminals among them are what Lark's
        contextual lexer offers there)."""
        return list(self.states[state])

    def feed(self, stack: Stack, term: str) -> Stack | None:
        """The stack after shifting `term` (with the reductions before it), or None if invalid."""
        states = self.states
        while True:
            act = states[stack[-1]].get(term)
            if act is None:
                return None
            shift, arg = act
            if shift:
                return stack + (arg,)
            origin, size = arg
            if size:
                stack = stack[:-size]
            stack = stack + (states[stack[-1]][origin][1],)

    def accepts_end(self, stack: Stack) -> bool:
        """True when the input may end here (Lark's feed of $END reaches the end state)."""
        states = self.states
        while True:
            act = states[stack[-1]].get(END)
            if act is None or act[0]:
                return False
            origin, size = act[1]
            if size:
                stack = stack[:-size]
            stack = stack + (states[stack[-1]][origin][1],)
            if stack[-1] == self.end_state:
                return True


class _IndexedAnalyzer(LALR_Analyzer):
    """Lark's LALR(1) analysis with its includes/lookback step indexed, the same relations.

    Lark scans a state's whole closure for every nonterminal transition out of it, and the
    closure again for each finished rule: quadratic in closure size, with Python `Symbol.__eq__`
    per comparison. Grammars from large JSON schemas have closures of thousands of items (chains
    of optional members): clang-format's schema spent 76 of 90 s there. Here each state's items
    are grouped by rule origin, once, and a rule's finished item is not searched for: the state
    reached from its start item over its whole expansion holds it (LR(0) goto). The same sets come out
    (tests/grammar/test_lark_parser.py compares whole tables with Lark's own)."""

    def __init__(self, parser_conf, debug: bool = False, strict: bool = False) -> None:
        # Not GrammarAnalyzer's setup: besides what LALR reads (the LR(0) rules and start item
        # sets, the nullable nonterminals) it computes FIRST and FOLLOW for Earley, a fixpoint
        # that rescans every prefix and suffix of every rule each pass (claude-code's split
        # schema grammars: 1.4 of 1.9 s in Lark). Lark's two checks on the rules are kept.
        self.debug, self.strict = debug, strict
        self._expanded: dict = {}  # nonterminal -> its LR(0) start items (expand_rule)
        rules = list(parser_conf.rules)
        if len(rules) != len(set(rules)):
            twice = sorted({str(rule) for rule in rules if rules.count(rule) > 1})
            raise LarkGrammarError("Rules defined twice: " + ", ".join(twice))
        roots = {start: Rule(NonTerminal("$root_" + start), [NonTerminal(start)]) for start in parser_conf.start}
        lr0_rules = rules + list(roots.values())
        self.lr0_rules_by_origin: dict = {}
        for rule in lr0_rules:
            self.lr0_rules_by_origin.setdefault(rule.origin, []).append(rule)
        for rule in lr0_rules:
            for symbol in rule.expansion:
                if not symbol.is_term and symbol not in self.lr0_rules_by_origin:
                    raise LarkGrammarError(f"Using an undefined rule: {symbol}")
        self.lr0_start_states = {start: LR0ItemSet([RulePtr(root, 0)], self.expand_rule(root.origin, self.lr0_rules_by_origin))
                                 for start, root in roots.items()}
        self.NULLABLE = _nullable(rules)
        self.nonterminal_transitions = []
        self.directly_reads = defaultdict(set)
        self.reads = defaultdict(set)
        self.includes = defaultdict(set)
        self.lookback = defaultdict(set)

    def expand_rule(self, source_rule, rules_by_origin=None):
        """Lark's closure of a nonterminal's start items, remembered per nonterminal: Lark redoes
        the breadth-first expansion for every kernel item of every new LR(0) state (callers
        only read the set)."""
        if rules_by_origin is not self.lr0_rules_by_origin:
            return super().expand_rule(source_rule, rules_by_origin)
        got = self._expanded.get(source_rule)
        if got is None:
            got = self._expanded[source_rule] = super().expand_rule(source_rule, rules_by_origin)
        return got

    def compute_includes_lookback(self) -> None:
        nullable, reads = self.NULLABLE, self.reads
        by_origin: dict = {}  # state -> {origin: [items of that origin, closure order]}
        nullable_from: dict = {}  # rule -> where the nullable tail of its expansion starts

        def items_of(state) -> dict:
            groups = by_origin.get(state)
            if groups is None:
                groups = by_origin[state] = {}
                for rp in state.closure:
                    groups.setdefault(rp.rule.origin, []).append(rp)
            return groups

        for nt in self.nonterminal_transitions:
            state, nonterminal = nt
            includes = []
            lookback = self.lookback[nt]
            for rp in items_of(state).get(nonterminal, ()):
                expansion = rp.rule.expansion
                tail = nullable_from.get(rp.rule)
                if tail is None:
                    tail = len(expansion)
                    while tail and expansion[tail - 1] in nullable:
                        tail -= 1
                    nullable_from[rp.rule] = tail
                state2 = state
                for i in range(rp.index, len(expansion)):
                    nt2 = (state2, expansion[i])
                    state2 = state2.transitions[expansion[i]]
                    if i + 1 >= tail and nt2 in reads:  # what follows expansion[i] can be empty
                        includes.append(nt2)
                if rp.index == 0:  # state2, reached over the whole expansion, holds rp's rule finished
                    lookback.add((state2, rp.rule))
            for nt2 in includes:
                self.includes[nt2].add(nt)


def _nullable(rules: list) -> set:
    """Nonterminals that derive the empty string: a rule's origin is, once every symbol of its
    expansion is (terminals never are). Each rule is rechecked only when a symbol it waits on
    becomes nullable."""
    waiting: dict = {}  # symbol -> rules with that symbol still to be shown nullable
    missing: dict = {}  # rule index -> how many of its expansion's symbols are not yet nullable
    nullable: set = set()
    ready = []
    for i, rule in enumerate(rules):
        symbols = list(rule.expansion)
        if any(symbol.is_term for symbol in symbols):
            continue
        missing[i] = len(symbols)
        for symbol in symbols:
            waiting.setdefault(symbol, []).append(i)
        if not symbols:
            ready.append(rule.origin)
    while ready:
        symbol = ready.pop()
        if symbol in nullable:
            continue
        nullable.add(symbol)
        for i in waiting.get(symbol, ()):
            missing[i] -= 1
            if missing[i] == 0:
                ready.append(rules[i].origin)
    return nullable


class _IndexedLalrParser(LALR_Parser):
    """`LALR_Parser` built by `_IndexedAnalyzer` (Lark's `LALR_Parser` plugin slot)."""

    def __init__(self, parser_conf, debug: bool = False, strict: bool = False) -> None:
        analysis = _IndexedAnalyzer(parser_conf, debug=debug, strict=strict)
        analysis.compute_lalr()
        self._parse_table = analysis.parse_table
        self.parser_conf = parser_conf
        self.parser = _Parser(analysis.parse_table, parser_conf.callbacks, debug)


def _analysis_checked(version: str) -> bool:
    """The Lark releases whose analysis `_IndexedAnalyzer` was compared against (1.2 and 1.3:
    their lalr_analysis.py differ in one error message). Others build with Lark's own: slower,
    never a different table."""
    return version.split(".")[:2] in (["1", "2"], ["1", "3"])


# pass as `lark.Lark(..., _plugins=LALR_PLUGINS)` (the hook lark-cython uses)
LALR_PLUGINS = {"LALR_Parser": _IndexedLalrParser} if _analysis_checked(lark.__version__) else {}
