"""Optional members around recursive values, written right-nested for Lark (json_ir `Chain`).

Inline, n optional members in one rule make 2^n Lark alternatives (refused past 20,000: a
recursive object with 21 optional properties was refused). Each tail of members is now a rule of
its own. These tests check the language is unchanged (differential against jsonschema), that the
LALR tables have no shift/reduce conflict (Lark resolves one silently as a shift, which would
refuse valid objects), and that what is still too large is refused by name.
"""

from __future__ import annotations

import json
import logging
import random

import pytest

from constrained_spec.grammar import compile_json_schema
from constrained_spec.grammar.compiler import clear_cache
from constrained_spec.grammar.json_schema import schema_to_grammar

from test_json_schema_keywords import BYTES, _valid, _walk

VALUES = {"integer": ({"type": "integer"}, [1, -20], ["s", 1.5]), "string": ({"type": "string"}, ["s", ""], [2, None]),
          "enum": ({"enum": ["a", "b"]}, ["a", "b"], ["c", 1]), "array": ({"type": "array", "items": {"type": "integer"}}, [[], [3, 4]], [["x"], {}])}


def _recursive_object(rng: random.Random, n: int) -> tuple[dict, dict]:
    """A schema with n plain members and one or two recursive ones, some required, open or closed;
    and, per member, how to draw a valid or an invalid value."""
    names = [f"m{i}" for i in range(n)]
    kinds = {name: rng.choice(list(VALUES)) for name in names}
    props: dict = {name: VALUES[kinds[name]][0] for name in names}
    for kid in rng.sample(["kid", "next"], rng.randint(1, 2)):
        props[kid] = {"$ref": "#"}
        kinds[kid] = "self"
    order = list(props)
    rng.shuffle(order)
    schema: dict = {"type": "object", "properties": {k: props[k] for k in order}}
    plain = [k for k in order if kinds[k] != "self"]
    required = rng.sample(plain, rng.choice([0, 0, 1, 2]))
    if required:
        schema["required"] = required
    if rng.random() < 0.5:
        schema["additionalProperties"] = False
    return schema, kinds


def _draw(rng: random.Random, schema: dict, kinds: dict, depth: int, wrong: bool) -> dict:
    out = {}
    for key in schema["properties"]:
        if key in schema.get("required", ()) or rng.random() < 0.35:
            if kinds[key] == "self":
                out[key] = _draw(rng, schema, kinds, depth + 1, False) if depth < 2 else {}
            else:
                out[key] = rng.choice(VALUES[kinds[key]][1])
    if wrong:
        plain = [k for k in out if kinds[k] != "self"]
        if plain and rng.random() < 0.7:
            key = rng.choice(plain)
            out[key] = rng.choice(VALUES[kinds[key]][2])
        else:
            out["zz"] = 1  # undeclared: valid exactly when the object is open
    return out


def _shift_reduce_conflicts(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "lark" and "Shift/Reduce" in r.getMessage()]


def test_generated_recursive_objects_with_many_optional_members_match_jsonschema(caplog):
    """Differential (seeded; 12 schemas of 12-30 plain members beside 1-2 recursive ones, 0-2
    required, open or closed; 60 instances each, in declared order, a third of them mutated):
    the matcher accepts exactly what jsonschema calls valid (undeclared keys aside: a recursive
    schema's open objects are generated closed, a documented narrowing), and Lark's tables for
    every grammar have no shift/reduce conflict."""
    rng = random.Random(11)
    checked = accepted = 0
    wrong: list[str] = []
    for _ in range(12):
        schema, kinds = _recursive_object(rng, rng.randint(12, 30))
        clear_cache()
        with caplog.at_level(logging.DEBUG, logger="lark"):
            compiled = compile_json_schema(schema, BYTES, closed_objects=False, backend="native")
        assert not _shift_reduce_conflicts(caplog), json.dumps(schema)
        caplog.clear()
        free_extras = schema_to_grammar(schema).free_extras  # recursive: undeclared keys not generated (logged)
        assert not free_extras
        for i in range(60):
            instance = _draw(rng, schema, kinds, 0, wrong=i % 3 == 2)
            text = json.dumps(instance, separators=(",", ":"))
            valid = _valid(schema, text) and "zz" not in instance
            if _walk(compiled, schema, text) != valid:
                wrong.append(f"{json.dumps(schema)}: {'refuses' if valid else 'accepts'} {text}")
            checked += 1
            accepted += valid
    assert not wrong, f"{len(wrong)} verdicts differ, e.g. " + "\n".join(wrong[:3])
    assert checked == 720 and 400 < accepted < 700, accepted


def test_forty_recursive_optional_members_compile_right_nested(monkeypatch):
    """40 optional recursive members: inline, 2^40 alternatives (refused before); right-nested,
    one rule per tail. What still passes Lark's total is refused by name."""
    from constrained_spec.grammar import json_ir

    schema = {"type": "object", "properties": {f"p{i}": {"$ref": "#"} for i in range(40)}, "additionalProperties": False}
    text = schema_to_grammar(schema).to_lark()
    assert text.count("\nt_") == 39  # one rule per tail (p1.., p2.., ..., p39)
    compiled = compile_json_schema(schema, BYTES, closed_objects=False, backend="native")
    for instance, ok in [({}, True), ({"p0": {}, "p39": {"p3": {}}}, True), ({"p7": {"p1": {}, "p2": {}}, "p8": {}}, True),
                         ({"p1": 1}, False), ({"p40": {}}, False), ({"p2": {"p41": {}}}, False)]:
        assert _walk(compiled, schema, json.dumps(instance, separators=(",", ":"))) == ok, instance
    monkeypatch.setattr(json_ir, "MAX_LARK_TOTAL_ALTERNATIVES", 20)
    with pytest.raises(json_ir.GrammarTooLarge, match="limit 20"):
        schema_to_grammar(schema).to_lark()


def test_chains_only_where_inline_would_be_large():
    """A few optional members around recursion are still written inline (the forms the
    lexer-overrun regressions were fixed on); the chain starts past CHAIN_ABOVE alternatives."""
    small = {"type": "object", "properties": {"a": {"type": "integer"}, "kid": {"$ref": "#"}, "b": {"type": "string"}}}
    assert "\nt_" not in schema_to_grammar(small).to_lark()
    big = {"type": "object", "properties": {**{f"a{i}": {"type": "integer"} for i in range(8)}, "kid": {"$ref": "#"}}, "required": ["a0"]}
    assert "\nt_" in schema_to_grammar(big).to_lark()


def test_overlapping_branches_fall_back_to_inline():
    """Two recursive branches with the same optional keys: after `{"a0":1` both tails can end on
    `}`, two different rules to reduce (Lark: reduce/reduce). The compiler then writes the grammar
    inline, as before chains, where both branches are alternatives of one rule."""
    import lark

    def branch(last: str, kind: str) -> dict:
        return {"type": "object", "additionalProperties": False,
                "properties": {**{f"a{i}": {"type": "integer"} for i in range(5)}, "kid": {"$ref": "#"}, last: {"type": kind}}}

    schema = {"anyOf": [branch("x", "string"), branch("y", "integer")]}
    grammar = schema_to_grammar(schema)
    with pytest.raises(lark.exceptions.GrammarError, match="Reduce/Reduce"):
        lark.Lark(grammar.to_lark(), parser="lalr")
    assert "\nt_" not in grammar.to_lark(chains=False)
    clear_cache()
    compiled = compile_json_schema(schema, BYTES, closed_objects=False, backend="native")
    for instance in [{"a0": 1, "x": "s"}, {"a1": 1, "y": 2}, {"a0": 1, "kid": {"a2": 1, "y": 1}}, {"a4": 1}, {},
                     {"x": "s", "y": 1}, {"a0": "s"}, {"kid": {"x": 1}}, {"a5": 1}]:
        text = json.dumps(instance, separators=(",", ":"))
        assert _walk(compiled, schema, text) == _valid(schema, text), text


def test_bounded_repeats_near_recursion_keep_their_text_and_counts():
    """Bounded repeats on the Lark path are now written in one pass and counted without the huge
    integers of item**k (both were quadratic in the bound: SchemaStore's workflows.json spent 287 s
    there before being refused, 2.9 s now; timed by benchmarks/sweep_schemas.py, not here). What
    must not change: the count equals the closed form (capped), the text is the nested optional
    form `(x (x (x x?)?)?)`, and a recursive tree with `maxItems` matches jsonschema."""
    from constrained_spec.grammar.json_ir import Grammar, Lit, Ref, Rep, _repeat_alternatives, alt, seq

    for item in range(4):
        for low in range(4):
            for high in range(low, low + 5):
                for limit in (1, 9, 10**6):
                    assert _repeat_alternatives(item, low, high, limit) == min(item**low * sum(item**k for k in range(high - low + 1)), limit)
    assert _repeat_alternatives(3, 2, 10**6, 20_001) == 20_001 and _repeat_alternatives(1, 0, 10**6, 10**9) == 10**6 + 1
    text = Grammar(Ref("t"), {"t": alt(Lit("x"), seq(Lit("["), Rep(Ref("t"), 1, 4), Lit("]")))}).to_lark()  # t: x | "[" t{1,4} "]"
    rule = text.split()[1]
    assert f"({rule} ({rule} ({rule} {rule}?)?)?)" in text, text
    tree = {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 3}}, "required": ["v"]}
    clear_cache()
    compiled = compile_json_schema(tree, BYTES, backend="native")
    valid = [{"v": 1}, {"v": 1, "kids": []}, {"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4}, {"v": 5}, {"v": 6}]}]}]
    invalid = [{"v": 1, "kids": [{"v": 2}] * 4}, {"kids": []}, {"v": 1, "kids": [{"v": 2, "kids": [{"v": 1}] * 4}]}]
    for instance in valid + invalid:
        text = json.dumps(instance, separators=(",", ":"))
        assert _walk(compiled, tree, text) == (instance in valid) == _valid(tree, text), text
