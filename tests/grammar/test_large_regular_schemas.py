"""Regular schemas too large for the regex path (compiler.REGEX_PATH_MAX_CHARS) compile on our
Lark engine written part by part (Grammar.to_lark's `split_above`), exactly: outlines-core would
index their regex state by state over the whole vocabulary (catalog-info: over 150 s), and past
MAX_REGEX_CHARS they were refused. Recursive schemas are written part by part first where that
shrinks their Lark text (compiler._recursive_on_lark), whole otherwise, each writing the other's
fallback."""

from __future__ import annotations

import itertools

import pytest

from constrained_spec.grammar import compile_json_schema, compiler
from constrained_spec.grammar.compiler import compile_ir
from constrained_spec.grammar.json_ir import GrammarTooLarge
from constrained_spec.grammar.json_schema import schema_to_grammar
from constrained_spec.grammar.lark_engine import LarkGrammar

from schema_oracle import engine_of
from test_json_schema_keywords import BYTES, _valid, _walk

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def _wide_object(count: int) -> dict:
    """An object of `count` optional members of distinct kinds (enums, bounded strings, integer
    ranges, arrays of enums), `p0` required."""
    kinds = [
        lambda i: {"enum": [f"{w}{i}" for w in WORDS]},
        lambda i: {"type": "string", "maxLength": 3 + i % 4},
        lambda i: {"type": "integer", "minimum": -i, "maximum": 10 * i + 5},
        lambda i: {"type": "array", "items": {"enum": WORDS[: 2 + i % 5]}, "maxItems": 3},
    ]
    return {"type": "object", "additionalProperties": False, "required": ["p0"],
            "properties": {f"p{i}": kinds[i % 4](i) for i in range(count)}}


def test_a_large_regular_schema_compiles_on_the_lark_engine_exactly(monkeypatch):
    # (a lower limit, so that the schema stays small enough to compile in a second or two)
    monkeypatch.setattr(compiler, "REGEX_PATH_MAX_CHARS", 4_000)
    schema = _wide_object(44)
    assert len(schema_to_grammar(schema).to_regex()) > compiler.REGEX_PATH_MAX_CHARS
    compiled = compile_json_schema(schema, BYTES, backend="native")
    assert isinstance(engine_of(compiled), LarkGrammar)
    values = {0: ['"alpha0"', '"beta0"', '"alpha1"', "1"], 1: ['"ab"', '"abcd"', '""', "2"], 2: ["-2", "25", "26", "-3", '"x"'],
              3: ['["alpha","beta"]', '["alpha","alpha","alpha"]', "[]", '["gamma"]', '["alpha","alpha","alpha","alpha"]']}
    texts = []
    for i, j in itertools.combinations([0, 1, 2, 3, 22, 23, 42, 43], 2):
        for vi, vj in itertools.product(values[i % 4], values[j % 4]):
            texts.append("{" + f'"p{i}":{vi},"p{j}":{vj}' + "}")
    texts += ['{"p0":"alpha0"}', "{}", '{"p0":"alpha0","p44":1}', '{"p0":"alpha0",']
    accepted = 0
    for text in texts:
        valid = _valid(schema, text)
        assert _walk(compiled, schema, text) == valid, text
        accepted += valid
    assert 0 < accepted < len(texts)
    assert not _walk(compiled, schema, '{"p1":"a","p0":"alpha0"}')  # keys out of declared order: not written so


def test_a_large_regex_goes_to_llguidances_lazy_regex_engine_on_the_default_backend():
    """A regular grammar whose regex passes compiler.REGEX_INDEX_MAX_CHARS: outlines-core's index
    (every state's mask at compile) took 3-5 s on two JSONSchemaBench schemas; the default backend
    gives the regex to llguidance's lazy regex engine, native keeps the index. Here a wide object
    with propertyNames (which llguidance's JSON schema does not read, so our compiler writes it):
    both engines accept exactly the valid texts (jsonschema); a group counted past
    LAZY_REPEAT_MAX stays on the index (llguidance's lexer budget), a class counted does not."""
    from constrained_spec.grammar.llguidance_backend import LLGuidanceGrammar
    from constrained_spec.grammar.regex_backend import CompiledRegex

    schema = dict(_wide_object(20), propertyNames={"pattern": "^p[0-9]+$"})
    assert len(schema_to_grammar(schema).to_regex()) > compiler.REGEX_INDEX_MAX_CHARS
    lazy = compile_json_schema(schema, BYTES)
    indexed = compile_json_schema(schema, BYTES, backend="native")
    assert isinstance(engine_of(lazy), LLGuidanceGrammar) and isinstance(engine_of(indexed), CompiledRegex)
    texts = ['{"p0":"alpha0"}', '{"p0":"alpha0","p1":"abc","p2":-2,"p3":["alpha"]}', '{"p0":"beta0","p14":-14,"p15":[]}',
             '{"p0":"alpha1"}', '{"p1":"ab"}', '{"p0":"alpha0","p2":-3}', '{"p0":"alpha0","p3":["zeta"]}', "{}",
             '{"p0":"alpha0","p1":"abcdefgh"}', '{"p0":"alpha0",', '{"p0":"alpha0","p20":1}']
    accepted = 0
    for text in texts:
        valid = _valid(schema, text)
        assert _walk(lazy, schema, text) == valid == _walk(indexed, schema, text), text
        accepted += valid
    assert 0 < accepted < len(texts)
    words = dict(schema, properties={f"p{i}": {"type": "string", "pattern": "^(ab|cd){1,150}$"} for i in range(48)})
    assert len(schema_to_grammar(words).to_regex()) > compiler.REGEX_INDEX_MAX_CHARS
    assert isinstance(compile_ir(schema_to_grammar(words), BYTES), CompiledRegex)  # (the IR's engines: llguidance takes these schemas whole)
    classes = dict(schema, properties={f"p{i}": {"type": "string", "maxLength": 150} for i in range(60)})
    assert len(schema_to_grammar(classes).to_regex()) > compiler.REGEX_INDEX_MAX_CHARS
    assert isinstance(compile_ir(schema_to_grammar(classes), BYTES), LLGuidanceGrammar)


def test_a_regular_schema_past_the_regex_limit_compiles():
    """Arrays of arrays of a wide object, referenced 30 times: the regex would pass
    MAX_REGEX_CHARS (refused before); the definition is one Lark rule, written once."""
    schema = {"type": "object", "additionalProperties": False, "$defs": {"item": _wide_object(40)},
              "properties": {f"k{i}": {"type": "array", "items": {"type": "array", "items": {"$ref": "#/$defs/item"}}} for i in range(30)}}
    grammar = schema_to_grammar(schema)
    assert not grammar.cyclic_names()
    with pytest.raises(GrammarTooLarge):
        grammar.to_regex()
    compiled = compile_json_schema(schema, BYTES, backend="native")
    assert isinstance(engine_of(compiled), LarkGrammar)
    for text in ('{"k3":[[{"p0":"alpha0","p2":7}],[]]}', '{"k29":[]}', "{}"):
        assert _walk(compiled, schema, text) and _valid(schema, text), text
    for text in ('{"k3":[[{"p2":7}]]}', '{"k3":[{"p0":"alpha0"}]}', '{"k30":[]}'):
        assert not _walk(compiled, schema, text) and not _valid(schema, text), text



# ---- recursive grammars: whole or split first (compiler._recursive_on_lark) --------------------


def _recursive_with_shared_definition(references: int) -> dict:
    """A tree whose nodes hold `references` members of one large definition (a wide object):
    written whole, each member repeats the definition's regex; split, it is one rule."""
    return {"$defs": {"item": _wide_object(30),
                      "node": {"type": "object", "additionalProperties": False,
                               "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
                                              **{f"m{i}": {"$ref": "#/$defs/item"} for i in range(references)}}}},
            "$ref": "#/$defs/node"}


def _writings_tried(monkeypatch, refuse_split: bool = False) -> list:
    compiler.clear_cache()  # (compiled grammars are cached by schema)
    tried = []
    real = compiler.lark_of_ir

    def spy(grammar, vocab, split_above=None, text=None):
        tried.append(split_above)
        if refuse_split and split_above is not None:
            raise compiler.GrammarError("invalid Lark grammar: Reduce/Reduce collision (as the test asks)")
        assert text is None or text == grammar.to_lark(split_above=split_above)
        return real(grammar, vocab, split_above, text)

    monkeypatch.setattr(compiler, "lark_of_ir", spy)
    return tried


def test_a_recursive_grammar_repeating_a_large_definition_is_written_split_first(monkeypatch):
    schema = _recursive_with_shared_definition(4)
    grammar = schema_to_grammar(schema)
    assert len(grammar.to_lark(split_above=compiler.TERMINAL_MAX_CHARS)) <= compiler.SPLIT_FIRST_SHARE * len(grammar.to_lark())
    tried = _writings_tried(monkeypatch)
    compiled = compile_json_schema(schema, BYTES, backend="native")
    assert tried == [compiler.TERMINAL_MAX_CHARS] and isinstance(engine_of(compiled), LarkGrammar)
    for text in ('{"children":[{"m3":{"p0":"beta0","p2":7}}],"m0":{"p0":"alpha0"}}', "{}", '{"children":[{},{"children":[]}]}'):
        assert _walk(compiled, schema, text) and _valid(schema, text), text
    for text in ('{"m0":{}}', '{"m4":{"p0":"alpha0"}}', '{"children":[{},{},{}]}', '{"m1":{"p0":"alpha0","p2":99}}'):
        assert not _walk(compiled, schema, text) and not _valid(schema, text), text


def test_a_split_writing_refused_leaves_the_whole_one(monkeypatch):
    schema = _recursive_with_shared_definition(4)
    tried = _writings_tried(monkeypatch, refuse_split=True)
    compiled = compile_json_schema(schema, BYTES, backend="native")
    assert tried == [compiler.TERMINAL_MAX_CHARS, None] and isinstance(engine_of(compiled), LarkGrammar)
    assert _walk(compiled, schema, '{"children":[{}],"m2":{"p0":"alpha0"}}')


def test_a_recursive_grammar_the_split_does_not_shrink_is_written_whole_first(monkeypatch):
    schema = {"$defs": {"node": {"type": "object", "additionalProperties": False,
                                 "properties": {"name": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
              "$ref": "#/$defs/node"}
    tried = _writings_tried(monkeypatch)
    compiled = compile_json_schema(schema, BYTES, backend="native")
    assert tried == [None] and isinstance(engine_of(compiled), LarkGrammar)
    assert _walk(compiled, schema, '{"name":"a","kids":[{"kids":[]}]}') and not _walk(compiled, schema, '{"kids":{}}')


def test_a_recursive_grammar_neither_writing_fits_is_refused_without_writing_it_again(monkeypatch):
    """Both writings over Lark's alternatives limit: the whole writing's error, at once (each
    writing of SchemaStore's helm-testsuite took ~4 s, and lark_of_ir wrote both again)."""
    from constrained_spec.grammar import json_ir

    schema = _recursive_with_shared_definition(4)
    tried = _writings_tried(monkeypatch)
    monkeypatch.setattr(json_ir, "MAX_LARK_TOTAL_ALTERNATIVES", 3)
    grammar = schema_to_grammar(schema)
    with pytest.raises(GrammarTooLarge) as expected:
        grammar.to_lark()
    with pytest.raises(GrammarTooLarge):  # (the split writing too)
        grammar.to_lark(split_above=compiler.TERMINAL_MAX_CHARS)
    with pytest.raises(GrammarTooLarge) as refused:
        compile_json_schema(schema, BYTES, backend="native")
    assert str(refused.value) == str(expected.value) and tried == []
