"""Grammar automata: constraints compiled to token bitmasks, with per-request matchers.

`compile(...)` is the one entry point (regex, JSON schema, JSON object, choices, Lark grammar;
backend "default" = outlines-core + our Lark engine, or "llguidance"). Optional backends are
imported only when asked for.
"""

from .compiler import (
    compile,
    compile_choices,
    compile_grammar,
    compile_json_object,
    compile_json_schema,
    compile_regex,
)
from .json_refs import register_schema
from .protocol import CompiledGrammar, GrammarError, GrammarMatcher
from .vocabulary import Vocabulary

__all__ = [
    "CompiledGrammar",
    "GrammarError",
    "GrammarMatcher",
    "Vocabulary",
    "compile",
    "compile_choices",
    "compile_grammar",
    "compile_json_object",
    "compile_json_schema",
    "compile_regex",
    "register_schema",
]
