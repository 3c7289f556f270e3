"""Differential tests: every JSON-schema matcher against `jsonschema`, on the real tokenizer.

For the JSON-Schema-Test-Suite cases and a seeded hypothesis family of schemas (schema_strategies)
we take valid instances (the suite's, or drawn by hypothesis-jsonschema) and mutated ones (dropped
key, wrong type, out-of-range number, extra key, broken string, duplicated key, character edits),
write each in the canonical form (schema_oracle.canonical_text) and feed it, with SmolLM2's own
tokenization and with a random split into vocabulary tokens, to each engine:
  - "regex": outlines-core's DFA (what compile() picks for a non-recursive schema),
  - "lark": our Lark engine (what compile() picks for a recursive one; for a non-recursive schema
    it is compiled explicitly from the same grammar IR, so both paths see every schema),
  - "lark-split": for every other non-recursive schema in place of "lark", and beside it for
    every other recursive one, the Lark engine on the grammar written part by part (what
    compile() picks for a regular grammar too large for the regex path, and first for a
    recursive one the split writing shrinks), every composite part past SPLIT_ABOVE characters split,
  - "llguidance": the llguidance adapter,
  - "default": the default backend, where it hands llguidance a rewritten schema (else it is
    one of the above); its closed-objects rewrite is checked to only narrow (test_closed_rewrite_narrows).
At every token boundary EOS must be allowed exactly where the text so far is a valid instance
(strict on soundness; for completeness wherever that prefix is in canonical form), and the packed
mask must agree with validate_tokens. A schema an engine refuses (GrammarError) is counted and
skipped: refusal is allowed, a compiled schema must be exact.

CONSTRAINED_SPEC_FULL=1 runs many more hypothesis examples, instances and random splits.
Compiler bugs found here are listed in KNOWN_BUGS (each naming its reproducer) until fixed.
"""

from __future__ import annotations

import json
import os
import random
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from constrained_spec.grammar import GrammarError, compile_json_schema
from constrained_spec.grammar.compiler import clear_cache, lark_of_ir
from constrained_spec.grammar.json_schema import ONE_OF_NARROWED, schema_to_grammar
from constrained_spec.grammar.json_terminals import FORMAT_PATTERNS
from constrained_spec.grammar.json_unevaluated import unevaluated_as_additional
from constrained_spec.grammar.llguidance_backend import LLGuidanceGrammar, compile_llguidance
from constrained_spec.grammar.llguidance_schema import NEGATION_NARROWED, llguidance_schema
from constrained_spec.grammar.regex_backend import CompiledRegex
from constrained_spec.grammar.unique_items import UniqueItemsGrammar

from schema_oracle import (Oracle, TokenIndex, check_walk, dumps_escaping_keys, engine_of, generation_schema, mutations, normalize_numbers,
                           positional_text, text_mutations, walk)
from schema_strategies import CLOSED_NODE_UNIONS, NEGATED_OBJECTS, NODE_DECLARED_UNIONS, SCHEMAS, TAGGED_UNIONS

FULL = os.environ.get("CONSTRAINED_SPEC_FULL") == "1"
SUITE = Path(__file__).parent.parent / "data" / "json_schema_test_suite"
SUITE_FILES = sorted(p.name for p in SUITE.glob("*.json"))
SPLIT_ABOVE = 40  # regex characters: past this, a part of a split grammar is not one terminal
REPRODUCER = {"type": "object", "properties": {"a": {"type": "string"}, "b": {}}, "required": ["b"]}

# Compiler bugs reported in /work/notes/schema-bugs.md (schema, text, expected, got) and not fixed
# on main yet. OPEN_BUGS: the reproducer test skips (naming the bug) only while it still fails.
# KNOWN_BUGS: suite (file, case description) -> the bug; for a completeness bug (B2) the case's
# soundness is still checked. Both fail once the bug no longer reproduces, so they cannot go stale.
# CLOSED_OBJECTS_BUG: while set, generated object schemas get an explicit additionalProperties.
B1 = "B1: Lark path, unparenthesised alternation: {'a':'x','b':1 accepted as complete (issue 11 reproducer)"
B2 = "B2: additionalProperties absent is treated as false ({'type':'object'} refuses {\"k\":1})"
B3 = "B3: Lark path, a key with a quote loses its backslash ({\"a\"b\":1} refused, {\"a\"b\":1 with a bare quote accepted)"
B4 = "B4: Lark path, a merged ',\"k\":' terminal blocks ',' + string in a free-form value ({\"v\":[1,\"a\"]} refused)"
B5 = "B5: not {required: [k]} admitted non-objects, which satisfy `required` vacuously (1 and [] accepted)"
B6 = "B6: llguidance, a key spelled with \\u escapes passed as undeclared ({\"\\u0061\":\"x\"} accepted where a must be an integer)"
B7 = ("B7: Lark path written part by part, two terminals of one lexer context match the same text (a literal key's and "
      "the free-key regex of a union's other branch: `\"b\"`; two branches' free-key regexes excluding different names): "
      "Lark's lexer keeps one, the other branch is lost ({\"b\":\"\",\"kind\":\"text\"} refused; compile() splits only "
      "parts over 2,000 characters)")
B8 = ("B8: Lark path, a union's option that is a reference to a regular definition was written as one terminal beside split "
      "siblings: `{\"kind\":\"image\"}` outran a sibling's `{` ({\"kind\":\"text\"} refused; found once the oracle counted "
      "union members' keys as declared)")
B9 = ("B9: required-keys tracker, a key's escape bytes were dropped (`q\\\"t` read as `qt`): {\"q\\\"t\":0} accepted as complete where "
      "`qt` is required, {\"qt\":0,\"q\\\"t\":0} refused where `q\"t` is")
B10 = ("B10: uniqueItems tracker, the same dropped escape bytes: the array under `q\\\"t` was taken for the one under `qt` "
       "({\"q\\\"t\":[1,1]} accepted with uniqueItems on `q\"t`)")
B11 = ("B11: Lark path, whole writing too (B7's cause where no part is split): two union branches give one key's value "
       "string terminals that overlap (`^\\d+$` up to 8 characters, and any string): the lexer keeps one, the other branch "
       "is lost ({\"name\":\"123\",\"kind\":\"text\"} refused; the native backend writes this schema on the Lark path; "
       "found by the tagged-union family)")
B12 = ("B12: Lark path written part by part, two union branches write the same text at different grains (one a key "
       "alone, `\"id\"`, the other that key with what follows in one longer terminal): longest-match lexing takes the "
       "longer one and the branch whose lexeme ends at the key's quote is lost ({\"id\":9,\"kind\":\"text\",...} refused; "
       "compile() splits only parts over 2,000 characters; found by CONSTRAINED_SPEC_FULL's node-declared family once "
       "every_match fixed B7 and B11)")
OPEN_BUGS: set[str] = set()
CLOSED_OBJECTS_BUG = None
KNOWN_BUGS: dict[tuple[str, str], str] = {}


class Harness:
    """Compiles a schema on every engine and checks texts against the oracle."""

    def __init__(self, tokenizer, vocab, random_splits: int) -> None:
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.index = TokenIndex(vocab)
        self.random_splits = random_splits
        self.stats: Counter = Counter()

    @staticmethod
    def oracle(schema) -> Oracle:
        """jsonschema on `schema`; completeness is checked inside what the compiler documents it
        generates (generation_schema)."""
        rewrite_narrowed: dict[str, str] = {}
        generated = unevaluated_as_additional(schema)  # (exact: what both backends are given)
        try:
            llguidance_schema(generated, closed_objects=False, narrowed=rewrite_narrowed)
        except (GrammarError, RecursionError):
            pass
        if NEGATION_NARROWED in rewrite_narrowed.values():
            return Oracle(schema, soundness_only=True)  # the default backend leaves inexpressible ways to fail out
        try:
            grammar = schema_to_grammar(generated)
        except (GrammarError, RecursionError):  # (remote references, resolved by compile() only): the narrowest reading
            return Oracle(schema, generation_schema(generated, True))
        if any(why.startswith(ONE_OF_NARROWED) for why in grammar.narrowed.values()):
            return Oracle(schema, soundness_only=True)  # which values each branch keeps is the compiler's choice
        free = grammar.free_extras  # False: closed (recursive, or over the open-objects budget)
        if free and "uniqueItems" in json.dumps(generated):  # compile() writes uniqueItems arrays its own way: recursive there?
            try:
                free = schema_to_grammar(generated, unique_items=[]).free_extras
            except (GrammarError, RecursionError):
                free = False
        return Oracle(schema, generation_schema(generated, not free))

    def engines(self, schema, both_lark: bool = False) -> dict:
        """Every engine that compiles `schema`; both Lark writings with `both_lark`."""
        # compile()'s cache would keep the last 128 schemas' grammars: a 1.2 KB tagged union's
        # regex index took 1.45 GB, and a worker holding many such grammars was killed (OOM)
        clear_cache()
        engines = {}
        try:
            default = compile_json_schema(schema, self.vocab, backend="native")
            name = "regex" if isinstance(engine_of(default), CompiledRegex) else "lark"
            engines[name] = default
            if name == "regex":  # the same regex on llguidance's lazy regex engine (the default
                # backend's past compiler.REGEX_INDEX_MAX_CHARS), here at every size
                try:  # (refused, the default backend indexes it: compiler._regular)
                    lazy = compile_llguidance("regex", engine_of(default).pattern, self.vocab)
                    engines["regex-lazy"] = UniqueItemsGrammar(lazy, self.vocab, schema) if isinstance(default, UniqueItemsGrammar) else lazy
                except GrammarError:
                    self.stats["refused regex-lazy"] += 1
            # the same grammar on the Lark path (uniqueItems on top as there): for a regular
            # schema whole, or for every other schema written part by part, as a regular grammar
            # too large for the regex path is (compiler.REGEX_PATH_MAX_CHARS), at a small enough
            # size that every composite part is split; for a recursive one ("lark" is then
            # compile()'s own writing) split so, every other schema
            unique: list[str] = []
            generated = unevaluated_as_additional(schema)
            grammar = schema_to_grammar(generated, unique_items=unique)
            if grammar.free_extras == schema_to_grammar(generated).free_extras:  # else another language (the oracle's is the regex one's)
                odd = zlib.crc32(json.dumps(schema, sort_keys=True).encode()) % 2
                if name == "regex":
                    splits = [None, SPLIT_ABOVE] if both_lark else [SPLIT_ABOVE if odd else None]
                else:
                    splits = [SPLIT_ABOVE] if both_lark or odd else []
                for split in splits:
                    lark_name = "lark-split" if split else "lark"
                    try:
                        lark = lark_of_ir(grammar, self.vocab, split)
                    except GrammarError:
                        self.stats[f"refused {lark_name}"] += 1
                    else:
                        engines[lark_name] = UniqueItemsGrammar(lark, self.vocab, schema) if unique else lark
        except GrammarError:
            self.stats["refused ours"] += 1
        except RecursionError as exc:  # a crash is a bug too: report it as one
            raise AssertionError(f"compiling {json.dumps(schema)} crashed: {exc!r}") from exc
        try:
            engines["llguidance"] = compile_json_schema(schema, self.vocab, backend="llguidance")
        except GrammarError:
            self.stats["refused llguidance"] += 1
        # the default backend is one of the two, except where it hands llguidance a rewritten
        # schema (date/time formats as our patterns): then it is checked as an engine of its own
        try:
            default = compile_json_schema(schema, self.vocab)
        except GrammarError:
            default = None
        if isinstance(engine_of(default), LLGuidanceGrammar) and (
                "llguidance" not in engines or engine_of(default).grammar != engine_of(engines["llguidance"]).grammar):
            engines["default"] = default
        for name in engines:
            self.stats[f"compiled {name}"] += 1
        return engines

    def canonical_ids(self, data: bytes) -> list[int] | None:
        ids = self.tokenizer.encode(data.decode("utf-8"), add_special_tokens=False)
        tokens = self.vocab.token_bytes
        return ids if all(tokens[i] is not None for i in ids) and b"".join(tokens[i] for i in ids) == data else None

    def check(self, oracle: Oracle, engines: dict, text: str, rng: random.Random) -> list[str]:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: not a text a model can write
            return []
        splits = [("bpe", self.canonical_ids(data))] + [("random", self.index.random_tokenization(data, rng)) for _ in range(self.random_splits)]
        if splits[0][1] is None:
            self.stats["texts the model cannot write"] += 1
        problems = []
        for name, compiled in engines.items():
            for kind, ids in splits:
                if ids is None:
                    continue
                self.stats["walks"] += 1
                try:
                    result = walk(compiled, ids, self.vocab.token_bytes, self.vocab.eos_token_id, check_mask=kind == "bpe")
                    found = check_walk(oracle, data, result)
                except AssertionError as exc:
                    found = [str(exc)]
                if b"\x7f" in data and name in ("llguidance", "default"):  # llguidance never writes a raw DEL (README, Limitations)
                    found = [p for p in found if p.startswith("EOS allowed")]
                    self.stats["raw DEL on llguidance (soundness only)"] += 1
                problems += [f"[{name}, {kind} tokens] {p}" for p in found]
        return problems

    def texts(self, oracle: Oracle, value, rng: random.Random, count: int) -> list[str]:
        """The canonical text of `value`, its instance-order text, and mutated variants (one
        with its keys spelled through `\\u` escapes)."""
        def written(v) -> str:  # canonical where the oracle knows the key order
            try:
                return oracle.canonical_text(v)
            except ValueError:
                return json.dumps(v, separators=(",", ":"), ensure_ascii=False)

        text = written(value)
        out = [text, json.dumps(value, separators=(",", ":"), ensure_ascii=False)]
        mutated = mutations(value, rng, count)
        out += [written(v) for v in mutated]
        out += [dumps_escaping_keys(v) for v in [value, *mutated[:1]] if isinstance(v, dict) and v]
        out += text_mutations(text, value, rng, max(1, count // 2))
        return list(dict.fromkeys(out))


@pytest.fixture(scope="module")
def harness(smollm2_tokenizer, smollm2_vocab) -> Harness:
    return Harness(smollm2_tokenizer, smollm2_vocab, random_splits=3 if FULL else 1)


def _report(schema, problems: list[str]) -> str:
    shown = "\n  ".join(problems[:8])
    return f"schema {json.dumps(schema, ensure_ascii=False)}: {len(problems)} disagreement(s) with jsonschema:\n  {shown}"


# bug -> (schema, values whose canonical and mutated texts are checked, extra raw texts)
REPRODUCERS = {
    B1: (REPRODUCER, [{"a": "x", "b": 1}, {"b": 1}, {"b": {"c": [1, None]}}, {"a": "x"}, {"a": 1, "b": 1}], ['{"a":"x","b":1', '"b":1}', '{"a":"x","b":1}}']),
    B3: ({"type": "object", "properties": {"a\"b": {"type": "integer"}}, "required": ["a\"b"], "additionalProperties": False}, [{"a\"b": 1}], ['{"a"b":1}']),
    B4: ({"type": "object", "properties": {"v": {}, "k": {"type": "integer"}}, "required": ["v"], "additionalProperties": False},
         [{"v": [1, "a"]}, {"v": {"a": 1, "b": 2}}, {"v": 1, "k": 2}], []),
    B5: ({"not": {"required": ["a"]}}, [{}, {"b": 1}], ["1", '"x"', "[]", "null"]),
    B7: ({"required": ["kind"], "anyOf": [
        {"type": "object", "properties": {"b": {"enum": [""]}, "kind": {"enum": ["text"]}}, "required": ["kind", "b"], "additionalProperties": False},
        {"type": "object", "properties": {"kind": {"const": "image"}}, "required": ["kind"]}]},
         [{"b": "", "kind": "text"}, {"b": "", "kind": "image"}], []),
    B6: ({"type": "object", "properties": {"a": {"type": "integer"}, "b\"": {"type": "integer"}}, "patternProperties": {"^c": {"type": "integer"}},
          "additionalProperties": {"type": "string"}}, [{"a": 1, "x": "y"}, {"b\"": 2, "cd": 3}],
         ['{"\\u0061":"x"}', '{"\\u0061":1}', '{"b\\u0022":"x"}', '{"\\u0063d":"x"}', '{"\\/":"x"}', '{"a\\/b":"x"}', '{"\\"":"x"}']),
    B9: ({"type": "object", "additionalProperties": {"const": 0}, "required": ["qt", "q\"t"]}, [{"qt": 0, "q\"t": 0}, {"q\"t": 0, "qt": 0}],
         ['{"q\\"t":0}', '{"qt":0}', '{"qt":0,"q\\"t":0}', '{"q\\u0022t":0,"qt":0}']),
    B10: ({"type": "object", "properties": {"qt": {"type": "array"}, "q\"t": {"type": "array", "uniqueItems": True}}},
          [{"q\"t": [1, 2], "qt": [1, 1]}], ['{"q\\"t":[1,1]}', '{"qt":[1,1]}', '{"q\\"t":[1,2]}']),
    B11: ({"anyOf": [{"properties": {"name": {"type": "string", "maxLength": 8, "pattern": "^\\d+$"}, "kind": {"enum": ["text"]}}, "required": ["kind", "name"]},
                     {"properties": {"name": {"type": "string"}, "kind": {"const": "image"}}, "required": ["kind", "name"]}]},
          [{"name": "123", "kind": "text"}, {"name": "abc", "kind": "image"}], []),
    B12: ({"type": "object", "properties": {"id": {"type": "integer"}, "kind": {"type": "string"}, "meta": {"type": "string"}}, "required": ["kind"],
           "anyOf": [{"$ref": "#/$defs/b0"}, {"type": "object", "properties": {"kind": {"const": "image"}, "a": {"type": "string", "format": "date"}},
                                               "required": ["kind", "a"]}],
           "$defs": {"b0": {"properties": {"name": {"type": ["string", "null"]}, "id": {"type": "number", "minimum": 9}, "kind": {"enum": ["text"]},
                                           "b": {"type": "null"}}, "required": ["kind", "id"]}}},
          [{"id": 9, "kind": "text", "meta": "abc", "name": "abc", "b": None}, {"id": 9, "kind": "image", "a": "2020-01-01"}], []),
    B8: ({"anyOf": [{"type": "object", "properties": {"kind": {"enum": ["text"]}}, "required": ["kind"]}, {"$ref": "#/$defs/b1"},
                    {"properties": {"kind": {"enum": ["audio!"]}}, "required": ["kind"], "additionalProperties": True}],
          "$defs": {"b1": {"type": "object", "properties": {"kind": {"const": "image"}}, "required": ["kind"], "additionalProperties": True}}},
         [{"kind": "text"}, {"kind": "image"}, {"kind": "audio!"}, "x"], ['{"kind":"image"}', '{"kind":"text"}']),
}


@pytest.mark.parametrize("bug", list(REPRODUCERS), ids=lambda b: b.split(":")[0])
def test_bug_reproducers(harness, bug):
    """Each compiler bug found here stays as a reproducer (B1 is issue 11's grouping bug: on the
    Lark path `{"a":"x","b":1` was accepted as complete). While a bug is in OPEN_BUGS the test
    checks that it still reproduces and skips naming it; once fixed it must be exact."""
    schema, values, raw = REPRODUCERS[bug]
    oracle, engines = harness.oracle(schema), harness.engines(schema, both_lark=True)
    assert "lark" in engines and "lark-split" in engines
    rng = random.Random(11)
    problems = []
    for value in values:
        for text in harness.texts(oracle, value, rng, 4):
            problems += harness.check(oracle, engines, text, rng)
    for text in raw:
        problems += harness.check(oracle, engines, text, rng)
    if bug in OPEN_BUGS:
        assert problems, f"{bug} no longer reproduces: remove it from OPEN_BUGS"
        pytest.skip(f"{bug}: still reproduces ({len(problems)} disagreements)")
    assert not problems, _report(schema, problems)


@pytest.mark.parametrize("name", SUITE_FILES)
def test_json_schema_test_suite(harness, name):
    rng = random.Random(name)
    compiled_cases, problems, known = 0, [], Counter()
    for case in json.loads((SUITE / name).read_text()):
        oracle, engines = harness.oracle(case["schema"]), harness.engines(case["schema"])
        if not engines:
            continue
        compiled_cases += 1
        bug = KNOWN_BUGS.get((name, case["description"]))
        for test in case["tests"]:
            count = 2 if test["valid"] or FULL else 0
            for text in harness.texts(oracle, test["data"], rng, count):
                for problem in harness.check(oracle, engines, text, rng):
                    if bug is None or (bug == B2 and "not a valid instance" in problem):
                        problems.append(f"{case['description']!r}: {problem}")
                    else:
                        known[case["description"]] += 1
    assert compiled_cases > 0
    assert not problems, f"{name}: {len(problems)} disagreement(s):\n  " + "\n  ".join(problems[:12])
    stale = [d for (f, d) in KNOWN_BUGS if f == name and not known[d]]
    assert not stale, f"{name}: KNOWN_BUGS entries that no longer fail (fixed: remove them): {stale}"


def _unrolled(schema, root, depth: int = 3):
    """`schema` with local $refs replaced by their targets, `depth` deep, then by `false`: a
    non-recursive subset hypothesis-jsonschema can draw from (it cannot follow recursion)."""
    if isinstance(schema, list):
        return [_unrolled(s, root, depth) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/"):
        if depth == 0:
            return False
        target = root
        for part in schema["$ref"][2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        resolved = _unrolled(target, root, depth - 1)
        return {"allOf": [resolved, _unrolled(rest, root, depth)]} if rest else resolved
    return {k: (v if k in ("const", "enum", "$defs") else _unrolled(v, root, depth)) for k, v in schema.items() if k != "$defs"}


def _closed(schema):
    """Every object schema without additionalProperties gets `false` (see CLOSED_OBJECTS_BUG)."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k in ("const", "enum") else _closed(v)) for k, v in schema.items()}
    if "properties" in out:
        out["properties"] = {k: _closed(v) for k, v in schema["properties"].items()}
    if (schema.get("type") == "object" or "properties" in schema) and "additionalProperties" not in schema:
        out["additionalProperties"] = False
    return out


def _reset_hypothesis_jsonschema() -> None:
    """hypothesis-jsonschema 0.23 hands out its shared TRUTHY ({}) as a default schema and later
    writes into it (`names["type"] = "string"` in object_schema), so one schema poisons every
    later draw (`assert min_size == 0` on plain objects): restore the two constants in place."""
    from hypothesis_jsonschema import _canonicalise

    _canonicalise.TRUTHY.clear()
    _canonicalise.FALSEY.clear()
    _canonicalise.FALSEY["not"] = {}


def _valid_instances(schema, data, count: int) -> list:
    """Instances drawn by hypothesis-jsonschema (if it cannot read a schema: plain JSON values,
    most of them invalid, which the oracle judges like any other)."""
    from hypothesis.errors import InvalidArgument
    from hypothesis_jsonschema import from_schema

    _reset_hypothesis_jsonschema()
    try:
        strategy = from_schema(_unrolled(schema, schema))
        return [data.draw(strategy) for _ in range(count)]
    except (InvalidArgument, AssertionError):  # AssertionError: its own, on e.g. `maxProperties: 0` items
        leaves = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4)
        values = st.recursive(leaves, lambda c: st.lists(c, max_size=2) | st.dictionaries(st.sampled_from(["a", "b", "v", "p"]), c, max_size=2), max_leaves=4)
        return [data.draw(values) for _ in range(count)]


def _over_generated_schemas(examples: int, schemas: st.SearchStrategy = SCHEMAS):
    """Runs the decorated check(schema, data) over `examples` schemas of a seeded family."""
    def wrap(check):
        return settings(max_examples=examples, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
                        suppress_health_check=list(HealthCheck))(given(schema=schemas, data=st.data())(check))

    return wrap


def _checked_draws(harness, schema, engines: dict, data, seen: Counter, draws: int, variants: int) -> tuple[Oracle, random.Random, list, list[str]]:
    """Valid instances drawn for `schema`, each checked on `engines` as written canonically, as
    drawn and mutated (`variants`): (the oracle, the schema's seeded rng, the values, the problems)."""
    oracle, rng = harness.oracle(schema), random.Random(json.dumps(schema, sort_keys=True))
    values, problems = _valid_instances(schema, data, draws), []
    for value in values:
        seen["valid draws"] += oracle.is_valid(value)
        for text in harness.texts(oracle, value, rng, variants):
            problems += harness.check(oracle, engines, text, rng)
    return oracle, rng, values, problems


def test_generated_schemas(harness):
    examples = 400 if FULL else 120
    seen: Counter = Counter()

    @_over_generated_schemas(examples)
    def run(schema, data):
        seen["schemas"] += 1
        if CLOSED_OBJECTS_BUG:
            schema = _closed(schema)
        engines = harness.engines(schema)
        if not engines:
            return
        seen["compiled"] += 1
        problems = _checked_draws(harness, schema, engines, data, seen, 3 if FULL else 2, 4 if FULL else 2)[3]
        assert not problems, _report(schema, problems)

    run()
    print(f"generated schemas: {dict(seen)}; engines: {dict(harness.stats)}")
    # the family must exercise the engines, not be refused wholesale
    assert seen["compiled"] >= examples // 3, seen
    assert seen["valid draws"] >= examples // 2, seen
    # the default backend's lazy regex engine, checked wherever the regex path is
    assert 0 < harness.stats["compiled regex"] <= 2 * harness.stats["compiled regex-lazy"], dict(harness.stats)


def test_negated_object_schemas(harness):
    """oneOf of overlapping object branches and not of an object schema, compiled as one anyOf
    branch per way to fail the negated object: exact on every engine that compiles them."""
    examples = 150 if FULL else 30
    seen: Counter = Counter()

    @_over_generated_schemas(examples, NEGATED_OBJECTS)
    def run(schema, data):
        seen["schemas"] += 1
        engines = {name: e for name, e in harness.engines(schema).items() if name in ("regex", "lark", "lark-split")}  # our compiler's
        if not engines:
            return
        seen["compiled"] += 1
        problems = _checked_draws(harness, schema, engines, data, seen, 3, 3)[3]
        assert not problems, _report(schema, problems)

    run()
    print(f"negated objects: {dict(seen)}")
    assert seen["compiled"] >= examples // 2 and seen["valid draws"] >= examples // 2, seen


# plain values, one of which fits each leaf schema of the family (a pattern, a format, bounds):
# strings first, then numbers smallest first
_PLAIN_VALUES = ["abc", "b", "a", "Abc", "ab", "", "x y", "foo", "bar", "123", "a1", "123-4567", "a@b.co", "a@b1", "2024-01-02",
                 "2024-01-02T03:04:05Z", "2024-01-02T03:04:05+00:00", "03:04:05Z", "03:04:05+00:00", "1.2.3.4", "example.com", "a1.example.com",
                 "http://a.b/c", "http://a.b/1", "12345678-1234-1234-1234-123456789abc", "12345678-1234-1234-1234-123456789012", "/a", "/a/1",
                 *sorted(range(-100, 101), key=abs), 0.5, 1.25, 2.5, -0.5, True, False, None]


def _branch_instances(schema) -> list[tuple[Any, dict, dict]]:
    """One instance per branch of a tagged union (at the root or under "v"), as (the whole value,
    the branch's object, the branch): every key the branch declares, with its first constant or
    the first plain value its schema takes (a required key none fits: no instance). Built from
    the branches so that every compiled schema exercises the reorderings (whole-schema draws take
    their shape from hypothesis's seed: with one family of them the check went unused), and with
    values the compiler writes."""
    under_v = "v" in schema.get("properties", {})
    node = schema["properties"]["v"] if under_v else schema
    union = node.get("anyOf", node.get("oneOf"))
    if not isinstance(union, list):
        return []
    branches = [schema["$defs"][b["$ref"].rsplit("/", 1)[1]] if "$ref" in b else b for b in union]
    branches = [b for b in branches if "properties" in b]  # a `{"type": "null"}` branch: no object to reorder
    if "properties" in node:  # the node declares keys: copies only where they go into every branch (open ones)
        if any("additionalProperties" in b for b in branches):
            return []
        # under a closed node each instance holds its branch's keys only (aiproj's kinds; the
        # compiler's reading of the open branches closes them: generation_schema)
        closed = node.get("additionalProperties", True) is False
        branches = [_with_node_keys(node, b, branch_keys_only=closed) for b in branches]
    instances = []
    for branch in branches:
        target = {}
        for name, leaf in branch["properties"].items():
            fits = Oracle(leaf).is_valid
            parts = leaf.get("allOf", [leaf]) if isinstance(leaf, dict) else []  # a key the node and the branch declare: both
            listed = [v for part in parts if isinstance(part, dict) for v in ([part["const"]] if "const" in part else part.get("enum", []))]
            value = next((v for v in [*listed, *_PLAIN_VALUES] if fits(v)), fits)
            if value is not fits:
                target[name] = value
            elif name in branch["required"]:
                break
        else:
            instances.append(({"v": target} if under_v else target, target, branch))
    return instances


def _with_node_keys(node: dict, branch: dict, branch_keys_only: bool = False) -> dict:
    """A union branch with its node's declared and required keys: the node's keys first (one both
    declare takes both schemas), then the branch's (the object the branch's instances are of);
    `branch_keys_only`: of the node's keys only those the branch declares."""
    props = {n: v for n, v in node["properties"].items() if not branch_keys_only or n in branch["properties"]}
    for name, leaf in branch["properties"].items():
        props[name] = {"allOf": [props[name], leaf]} if name in props else leaf
    return {"properties": props, "required": list(dict.fromkeys([*node.get("required", []), *branch["required"]]))}


def _tagged_orders(value, target: dict, branch: dict) -> list[str]:
    """`value` (its object `target` of `branch`, from _branch_instances) written in the key orders
    the default backend adds for the branch (json_key_order._orders): `kind` first, then the other
    required keys, then the optional ones, each as declared; and the required keys first."""
    names = [n for n in branch["properties"] if n in target]
    required = [n for n in names if n in branch["required"]]
    optional = [n for n in names if n not in required]
    texts = []
    for order in (["kind", *(n for n in required if n != "kind"), *optional], [*required, *optional]):
        written = {n: target[n] for n in order}
        texts.append(positional_text(normalize_numbers(written if target is value else {**value, "v": written})))
    return list(dict.fromkeys(texts))


def _check_tagged_orders(harness, default, engines: dict, oracle: Oracle, rng: random.Random, instances: list, seen: Counter) -> list[str]:
    """Each branch's instance (_branch_instances) in the added orders: exact on `engines`, and
    accepted by the `default` backend wherever the compiler writes its values (its documented
    narrowings aside)."""
    problems = []
    for value, target, branch in instances:
        if not oracle.is_valid(value):
            seen["branch instances invalid"] += 1  # a value drawn for its key, invalid as a whole (oneOf overlap, a sibling)
            continue
        generated = not oracle.soundness_only and (oracle.generated is None or oracle.generated.is_valid(value))
        declared = oracle.canonical_text(value)
        for text in _tagged_orders(value, target, branch):
            problems += harness.check(oracle, engines, text, rng)
            ids = harness.canonical_ids(text.encode())
            if ids is None or not generated:
                continue
            seen["reordered"] += 1
            seen["moved (not the declared order)"] += text != declared
            result = walk(default, ids, harness.vocab.token_bytes, harness.vocab.eos_token_id, check_mask=False)
            if result.refused_at is not None or not result.eos_at[-1][1]:
                problems.append(f"[default] valid {text} (a branch's added key order) refused")
    return problems


def _check_tagged_unions(harness, schemas, examples: int) -> Counter:
    """Each schema of `schemas` (a seeded family): drawn instances exact on every engine, and each
    branch's instance in the added key orders (_check_tagged_orders); the counts seen."""
    seen: Counter = Counter()

    @_over_generated_schemas(examples, schemas)
    def run(schema, data):
        seen["schemas"] += 1
        engines = harness.engines(schema)
        if not engines:
            return
        seen["compiled"] += 1
        oracle, rng, values, problems = _checked_draws(harness, schema, engines, data, seen, 2, 3)
        under_v = "v" in schema.get("properties", {})  # the union is the value of key `v` (it is required there)
        seen["null unions drawn"] += sum((v.get("v", 0) if under_v and isinstance(v, dict) else v) is None for v in values)
        if "default" in engines:
            instances = _branch_instances(schema)
            node = schema["properties"]["v"] if "v" in schema.get("properties", {}) else schema
            seen["instances of branches merged with their node's keys"] += len(instances) if "properties" in node else 0
            problems += _check_tagged_orders(harness, engines["default"], engines, oracle, rng, instances, seen)
        assert not problems, _report(schema, problems)

    run()
    return seen


def test_tagged_unions(harness):
    """Unions of objects told apart by a required key's constant, which the default backend also
    writes kind first and required keys first (json_key_order._discriminator_first): exact on
    every engine, and the default backend accepts each branch's instance in each of those orders."""
    examples = 150 if FULL else 40
    seen = _check_tagged_unions(harness, TAGGED_UNIONS, examples)
    print(f"tagged unions: {dict(seen)}")
    # the added orders are walked, some not the declared one (the default backend is its own
    # engine only where it writes copies, or formats as its patterns): a moved text is refused
    # without the copies (test_tagged_unions_without_the_copies_fail). 8-39 moved texts over the
    # families seen while writing this (hypothesis derives the family from this source).
    assert seen["compiled"] >= examples // 2 and seen["moved (not the declared order)"] >= examples // 8, seen


def test_tagged_unions_whose_node_declares_keys(harness):
    """The same where the union's node declares keys itself and requires the kind, its branches
    open (Glaive's tools): the default backend writes each branch merged with the node's keys
    (json_key_order._spreads), so each merged branch is also written kind first and required
    keys first; exact on every engine, and those orders accepted. Its power on a fixed schema:
    test_key_order.py::test_union_node_keys_go_into_its_branches (the mutation there)."""
    examples = 60 if FULL else 20
    seen = _check_tagged_unions(harness, NODE_DECLARED_UNIONS, examples)
    print(f"unions whose node declares keys: {dict(seen)}")
    assert seen["compiled"] >= examples // 2 and seen["instances of branches merged with their node's keys"] >= examples, seen
    assert seen["moved (not the declared order)"] >= examples // 4, seen


def test_tagged_unions_under_a_closed_node(harness):
    """The same where the union's node is closed and declares every key its branches declare,
    beside a `{"type": "null"}` branch or not (aiproj's Authentication): the default backend
    spreads the node into each branch, closed (json_key_order._spreads), and writes each kind
    first and required keys first; exact on every engine, nulls among the draws, and those orders
    accepted. Its power on a fixed schema: test_key_order.py::
    test_closed_union_node_keys_go_into_its_branches_beside_a_null."""
    examples = 90 if FULL else 30
    seen = _check_tagged_unions(harness, CLOSED_NODE_UNIONS, examples)
    print(f"unions under a closed node: {dict(seen)}")
    assert seen["compiled"] >= examples // 2 and seen["instances of branches merged with their node's keys"] >= examples, seen
    assert seen["null unions drawn"] >= 1, seen
    assert seen["moved (not the declared order)"] >= examples // 4, seen


def test_tagged_unions_without_the_copies_fail(harness, monkeypatch):
    """The reordering check has power: with json_key_order's union copies switched off, a branch
    declared with `kind` last is refused when written kind first."""
    from constrained_spec.grammar import json_key_order

    schema = {"anyOf": [{"type": "object", "properties": {"a": {"type": "integer"}, "kind": {"const": "text"}}, "required": ["a", "kind"]},
                        {"type": "object", "properties": {"b": {"type": "boolean"}, "kind": {"const": "image"}}, "required": ["kind"]}]}
    instances = [(value, value, branch) for value, branch in zip([{"a": 1, "kind": "text"}, {"b": True, "kind": "image"}], schema["anyOf"])]
    oracle, seen = harness.oracle(schema), Counter()

    def refusals() -> list[str]:
        clear_cache()  # compile() keeps the grammar it made with the copies
        problems = _check_tagged_orders(harness, compile_json_schema(schema, harness.vocab), {}, oracle, random.Random(0), instances, seen)
        return [p for p in problems if "added key order) refused" in p]

    assert refusals() == []
    assert seen["moved (not the declared order)"] == 2, seen  # kind first for both branches
    monkeypatch.setattr(json_key_order, "_discriminator_first", lambda spec: None)
    try:
        found = refusals()
    finally:
        monkeypatch.undo()
        clear_cache()
    assert found == ['[default] valid {"kind":"text","a":1} (a branch\'s added key order) refused',
                     '[default] valid {"kind":"image","b":true} (a branch\'s added key order) refused']


_FORMAT_OF_PATTERN = {f"^(?:{p})$": f for f, p in FORMAT_PATTERNS.items()}


def _formats_back(schema):
    """`schema` with our format patterns as `format` again: hypothesis-jsonschema draws formats
    well and a 3,800-character regex (format regex) next to maxLength badly."""
    if isinstance(schema, list):
        return [_formats_back(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: v if k in ("const", "enum") else _formats_back(v) for k, v in schema.items()}
    if isinstance(out.get("pattern"), str) and out["pattern"] in _FORMAT_OF_PATTERN:
        out["format"] = _FORMAT_OF_PATTERN[out.pop("pattern")]
    return out


def test_closed_rewrite_narrows():
    """What the default backend hands llguidance under closed_objects=True admits only instances
    the original schema admits: instances drawn from the rewritten schema, judged by jsonschema
    on the original."""
    examples = 200 if FULL else 80
    seen: Counter = Counter()

    @_over_generated_schemas(examples)
    def run(schema, data):
        seen["schemas"] += 1
        closed = llguidance_schema(schema, closed_objects=True)
        if closed is None:
            return
        seen["rewritten"] += 1
        original = Oracle(schema)
        for value in _valid_instances(_formats_back(closed), data, 3):  # judged on `closed` itself below
            if Oracle(closed).is_valid(value):
                seen["drawn"] += 1
                assert original.is_valid(value), f"{json.dumps(value)} fits the closed rewrite of {json.dumps(schema)} but not the schema"

    run()
    print(f"closed rewrite: {dict(seen)}")
    assert seen["rewritten"] >= examples // 3 and seen["drawn"] >= examples // 2, seen
