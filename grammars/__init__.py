"""Bundled Lark grammars, installed as `constrained_spec.grammars` (package data).

`load_bundled_grammar("json")` returns the grammar text; pass it to
`constrained_spec.grammar.lark_engine.compile_lark` (or the generic `compile`).
"""

from __future__ import annotations

from importlib import resources

__all__ = ["bundled_grammar_names", "load_bundled_grammar"]


def bundled_grammar_names() -> list[str]:
    """Names of the bundled grammars (file names without `.lark`), sorted."""
    files = resources.files(__name__).iterdir()
    return sorted(f.name[: -len(".lark")] for f in files if f.name.endswith(".lark"))


def load_bundled_grammar(name: str) -> str:
    """The text of bundled grammar `name`; unknown names raise ValueError listing the known ones."""
    names = bundled_grammar_names()
    if name not in names:
        raise ValueError(f"unknown bundled grammar {name!r}; available: {', '.join(names)}")
    return resources.files(__name__).joinpath(f"{name}.lark").read_text(encoding="utf-8")
