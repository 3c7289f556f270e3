"""Lark's LALR(1) parse table, stepped on immutable state stacks.

A parser configuration is a tuple of LALR state ids (no values: we only need to know whether a
terminal sequence can be parsed), so it is hashable (a cache key), free to copy, and a rollback
is just keeping the old tuple. Stepping follows Lark's `ParserState.feed_token` exactly.

`LALR_PLUGINS` makes Lark build the same table faster (lalr_construction.py).
"""

from __future__ import annotations

import lark
from lark.parsers.lalr_analysis import Shift
from lark.parsers.lalr_parser import LALR_Parser, _Parser

from .lalr_construction import lalr_table

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


class _IndexedLalrParser(LALR_Parser):
    """`LALR_Parser` whose table `lalr_construction` builds (Lark's `LALR_Parser` plugin slot);
    Lark's own analysis where its debug table (keyed by item sets) is asked for."""

    def __init__(self, parser_conf, debug: bool = False, strict: bool = False) -> None:
        if debug:
            super().__init__(parser_conf, debug=debug, strict=strict)
            return
        self._parse_table = lalr_table(parser_conf, strict)
        self.parser_conf = parser_conf
        self.parser = _Parser(self._parse_table, parser_conf.callbacks, debug)


def _analysis_checked(version: str) -> bool:
    """The Lark releases whose analysis `lalr_construction` was compared against (1.2 and 1.3:
    their lalr_analysis.py differ in one error message). Others build with Lark's own: slower,
    never a different table."""
    return version.split(".")[:2] in (["1", "2"], ["1", "3"])


# pass as `lark.Lark(..., _plugins=LALR_PLUGINS)` (the hook lark-cython uses)
LALR_PLUGINS = {"LALR_Parser": _IndexedLalrParser} if _analysis_checked(lark.__version__) else {}
