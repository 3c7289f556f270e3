"""Grammar automata: constraints compiled to token bitmasks, with per-request matchers."""

from .protocol import CompiledGrammar, GrammarError, GrammarMatcher

__all__ = ["CompiledGrammar", "GrammarError", "GrammarMatcher"]
