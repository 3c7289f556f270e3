"""Lark's LALR(1) table, built over integers.

Lark builds its table from `RulePtr`/`LR0ItemSet` objects whose hashing and equality are Python
methods (`Symbol.__hash__`, `Rule.__eq__`), millions of calls for the grammars our JSON-schema
compiler writes (chains of optional members: minecraft-predicate, 10,521 states, 3 of its 5 s
to compile). Here symbols, rules, items and states are integers and lookahead sets are bit sets;
the construction is Lark's own, step for step (LR(0) item sets, DeRemer and Pennello's reads,
includes and lookback relations, Lark's conflict rules), so the table is Lark's: the same actions
state for state, Lark's `Rule` objects in its reduce actions
(tests/grammar/test_lark_parser.py compares whole tables with Lark's, renumbered alike).
"""

from __future__ import annotations

from lark.exceptions import GrammarError as LarkGrammarError
from lark.grammar import NonTerminal, Rule, Terminal
from lark.parsers.lalr_analysis import IntParseTable, Reduce, Shift
from lark.utils import logger

__all__ = ["lalr_table", "nullable_nonterminals"]


def lalr_table(parser_conf, strict: bool = False) -> IntParseTable:
    """The LALR(1) table Lark's `LALR_Analyzer(parser_conf).compute_lalr()` builds (not debug)."""
    rules = list(parser_conf.rules)
    if len(rules) != len(set(rules)):
        twice = sorted({str(rule) for rule in rules if rules.count(rule) > 1})
        raise LarkGrammarError("Rules defined twice: " + ", ".join(twice))
    roots = {start: Rule(NonTerminal("$root_" + start), [NonTerminal(start)]) for start in parser_conf.start}
    grammar = _Grammar(rules + list(roots.values()))
    for expansion in grammar.expansion:
        for sym in expansion:
            if grammar.is_rule_name[sym] and not grammar.by_origin.get(sym):
                raise LarkGrammarError(f"Using an undefined rule: {grammar.symbols[sym]}")
    lr0 = _Lr0(grammar, {start: grammar.base[grammar.rule_id[root]] for start, root in roots.items()})
    lookaheads = _lookaheads(grammar, lr0, _nullable_ids(grammar))
    return _table(grammar, lr0, lookaheads, roots, strict)


class _Grammar:
    """Symbols, rules and items as integers. An item (rule r, dot d) is `base[r] + d`."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        self.symbols: list = []  # id -> lark Symbol
        ids: dict = {}
        self.rule_id = {rule: r for r, rule in enumerate(rules)}

        def sid(symbol) -> int:
            key = (symbol.is_term, symbol.name)
            if key not in ids:
                ids[key] = len(self.symbols)
                self.symbols.append(symbol)
            return ids[key]

        self.origin = [sid(rule.origin) for rule in rules]
        self.expansion = [tuple(sid(s) for s in rule.expansion) for rule in rules]
        self.end = sid(Terminal("$END"))  # the end of input: in no rule, read after the start symbol
        self.is_rule_name = [not s.is_term for s in self.symbols]
        self.by_origin: dict[int, list[int]] = {}
        for r, origin in enumerate(self.origin):
            self.by_origin.setdefault(origin, []).append(r)
        self.base: list[int] = []
        self.item_rule: list[int] = []
        self.item_next: list[int] = []  # the symbol after the dot, -1 where the rule is finished
        for r, expansion in enumerate(self.expansion):
            self.base.append(len(self.item_rule))
            self.item_rule += [r] * (len(expansion) + 1)
            self.item_next += [*expansion, -1]
        self._groups: dict[int, dict[int, set[int]]] = {}

    def groups(self, symbol: int) -> dict[int, set[int]]:
        """Lark's `expand_rule(symbol)`: the start items of every rule reachable from `symbol`
        through first symbols, grouped by the symbol after the dot, each advanced past it."""
        got = self._groups.get(symbol)
        if got is None:
            got = self._groups[symbol] = {}
            seen, todo = {symbol}, [symbol]
            while todo:
                for r in self.by_origin.get(todo.pop(), ()):
                    first = self.item_next[self.base[r]]
                    if first >= 0:
                        got.setdefault(first, set()).add(self.base[r] + 1)
                        if self.is_rule_name[first] and first not in seen:
                            seen.add(first)
                            todo.append(first)
        return got


class _Lr0:
    """The LR(0) item sets, by kernel: `kernels[s]` (sorted items) and `goto[s][symbol]`."""

    def __init__(self, grammar: _Grammar, start_items: dict[str, int]) -> None:
        self.kernels: list[tuple[int, ...]] = []
        self.goto: list[dict[int, int]] = []
        index: dict[tuple[int, ...], int] = {}

        def state(kernel: tuple[int, ...]) -> int:
            got = index.get(kernel)
            if got is None:
                got = index[kernel] = len(self.kernels)
                self.kernels.append(kernel)
                self.goto.append({})
            return got

        self.start = {name: state((item,)) for name, item in start_items.items()}
        item_next, is_rule_name = grammar.item_next, grammar.is_rule_name
        done = 0
        while done < len(self.kernels):
            moves: dict[int, set[int]] = {}
            expanded = set()
            for item in self.kernels[done]:
                symbol = item_next[item]
                if symbol >= 0:
                    moves.setdefault(symbol, set()).add(item + 1)
                    if is_rule_name[symbol] and symbol not in expanded:
                        expanded.add(symbol)
                        for sym, items in grammar.groups(symbol).items():
                            moves.setdefault(sym, set()).update(items)
            goto = self.goto[done]
            for symbol, items in moves.items():
                goto[symbol] = state(tuple(sorted(items)))
            done += 1


def _lookaheads(grammar: _Grammar, lr0: _Lr0, nullable: set[int]) -> dict[tuple[int, int], int]:
    """(state, rule) -> the bit set of terminals (by symbol id) on which the rule is reduced in
    that state: DeRemer and Pennello's Read and Follow sets over nonterminal transitions, with
    Lark's includes relation (every item of the nonterminal's rules in the state's closure)."""
    is_rule_name, goto = grammar.is_rule_name, lr0.goto
    width = len(grammar.symbols)
    transitions = [s * width + x for s, moves in enumerate(goto) for x in moves if is_rule_name[x]]  # nonterminal ones, as ints
    directly: dict[int, int] = {}
    reads: dict[int, list[int]] = {}
    for t in transitions:
        after = goto[t // width][t % width]
        bits = 0
        for x in goto[after]:
            if not is_rule_name[x]:
                bits |= 1 << x
        directly[t] = bits
        reads[t] = [after * width + x for x in goto[after] if x in nullable]
    for state in lr0.start.values():
        for item in lr0.kernels[state]:
            directly[state * width + grammar.item_next[item]] |= 1 << grammar.end
    read = _digraph(transitions, reads, directly)

    # tail[r]: the first position from which the rest of rule r's expansion can be empty
    tail = []
    for expansion in grammar.expansion:
        k = len(expansion)
        while k and expansion[k - 1] in nullable:
            k -= 1
        tail.append(k)
    includes: dict[int, list[int]] = {t: [] for t in transitions}
    lookback: dict[int, list[tuple[int, int]]] = {}
    item_rule, base, by_origin, expansions = grammar.item_rule, grammar.base, grammar.by_origin, grammar.expansion
    for t in transitions:
        state, nonterminal = divmod(t, width)
        starts = [base[r] for r in by_origin[nonterminal]]
        starts += [item for item in lr0.kernels[state] if grammar.origin[item_rule[item]] == nonterminal]
        backs = lookback.setdefault(t, [])
        for item in starts:
            r = item_rule[item]
            expansion, dot, last = expansions[r], item - base[r], tail[r]
            at = state
            for i in range(dot, len(expansion)):
                symbol = expansion[i]
                if is_rule_name[symbol] and i + 1 >= last:  # what follows it in the rule can be empty
                    includes[at * width + symbol].append(t)
                at = goto[at][symbol]
            if dot == 0:
                backs.append((at, r))
    follow = _digraph(transitions, includes, read)
    out: dict[tuple[int, int], int] = {}
    for t, backs in lookback.items():
        for key in backs:
            out[key] = out.get(key, 0) | follow[t]
    return out


def _digraph(nodes: list[int], relation: dict[int, list[int]], initial: dict[int, int]) -> dict[int, int]:
    """F(x) = initial(x) | F(y) for every y that x relates to, bit sets: the textbook digraph
    (a strongly connected component shares one set), iterative (relations run thousands deep)."""
    low: dict[int, int] = dict.fromkeys(nodes, 0)  # 0 unvisited, -1 done, else a stack position
    out: dict[int, int] = {}
    stack: list[int] = []
    for root in nodes:
        if low[root]:
            continue
        stack.append(root)
        low[root] = len(stack)
        out[root] = initial[root]
        work = [(root, len(stack), iter(relation[root]))]
        while work:
            x, position, edges = work[-1]
            y = next(edges, None)
            if y is not None:
                if low[y] == 0:
                    stack.append(y)
                    low[y] = len(stack)
                    out[y] = initial[y]
                    work.append((y, len(stack), iter(relation[y])))
                    continue
                if 0 < low[y] < low[x]:
                    low[x] = low[y]
                out[x] |= out[y]
                continue
            work.pop()
            if low[x] == position:  # x roots a component: its members share its set
                while True:
                    z = stack.pop()
                    low[z] = -1
                    out[z] = out[x]
                    if z == x:
                        break
            if work:  # what x gathered flows to the node that reached it
                parent = work[-1][0]
                if 0 < low[x] < low[parent]:
                    low[parent] = low[x]
                out[parent] |= out[x]
    return out


def _table(grammar: _Grammar, lr0: _Lr0, lookaheads: dict[tuple[int, int], int], roots: dict[str, Rule], strict: bool) -> IntParseTable:
    """Lark's `compute_lalr1_states`: shifts (and gotos) for every transition, reductions on
    their lookaheads; a reduce/reduce conflict goes to the rule of higher priority or is refused,
    a shift/reduce one is a shift (refused under `strict`)."""
    symbols, rules = grammar.symbols, grammar.rules
    reductions: dict[int, dict[int, list[int]]] = {}  # state -> terminal -> rules
    for (state, r), bits in lookaheads.items():
        row = reductions.setdefault(state, {})
        while bits:  # each set bit, lowest first
            low = bits & -bits
            row.setdefault(low.bit_length() - 1, []).append(r)
            bits ^= low
    states: dict[int, dict[str, tuple]] = {}
    collisions = []
    for state, goto in enumerate(lr0.goto):
        actions = {symbols[x].name: (Shift, target) for x, target in goto.items()}
        for x, candidates in reductions.get(state, {}).items():
            if len(candidates) > 1:
                ranked = sorted(((rules[r].options.priority or 0, r) for r in candidates), key=lambda p: p[0], reverse=True)
                if ranked[0][0] > ranked[1][0]:
                    candidates = [ranked[0][1]]
                else:
                    collisions.append((symbols[x], [rules[r] for r in candidates]))
                    continue
            rule = rules[candidates[0]]
            name = symbols[x].name
            if name in actions:
                if strict:
                    raise LarkGrammarError(f"Shift/Reduce conflict for terminal {name}. [strict-mode]\n * {rule}\n")
                logger.debug("Shift/Reduce conflict for terminal %s: (resolving as shift)", name)
                logger.debug(" * %s", rule)
            else:
                actions[name] = (Reduce, rule)
        states[state] = actions
    if collisions:
        raise LarkGrammarError("\n\n".join("Reduce/Reduce collision in %s between the following rules: %s"
                                           % (la, "".join("\n\t- " + str(r) for r in colliding)) for la, colliding in collisions))
    ends = {start: lr0.goto[lr0.start[start]][grammar.expansion[grammar.rule_id[root]][0]] for start, root in roots.items()}
    return IntParseTable(states, dict(lr0.start), ends)


def _nullable_ids(grammar: _Grammar) -> set[int]:
    names = {symbol.name for symbol in nullable_nonterminals(grammar.rules)}
    return {x for x, symbol in enumerate(grammar.symbols) if not symbol.is_term and symbol.name in names}


def nullable_nonterminals(rules: list) -> set:
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
