"""Lark's LALR(1) parse table, stepped on immutable state stacks.

A parser configuration is a tuple of LALR state ids (no values: we only need to know whether a
terminal sequence can be parsed), so it is hashable (a cache key), free to copy, and a rollback
is just keeping the old tuple. Stepping follows Lark's `ParserState.feed_token` exactly.
"""

from __future__ import annotations

from lark.parsers.lalr_analysis import Shift

__all__ = ["LalrTable"]

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
