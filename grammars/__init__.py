"""Bundled Lark grammars, installed as `constrained_spec.grammars` (package data)."""
