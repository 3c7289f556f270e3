"""What users actually send, through the Python API (issue 15): bad text, huge prompts, huge and
deep schemas, actionable errors, checks before the model loads, one shared model copy, cached
model ids. Runs on the tiny random model from `constrained_spec.testing` (no default model)."""

import json
import os
import time

import pytest

from constrained_spec import api
from constrained_spec.grammar import GrammarError
from constrained_spec.inputs import InvalidText, PromptTooLong

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.fixture(scope="module")
def tiny(tiny_model_folder):
    return api.Generator(tiny_model_folder, verbose=False, draft="none")


def _no_model_load(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(api, "default_generator", refuse)
    monkeypatch.setattr(api, "_load_shared", refuse)


# -- 1. invalid UTF-8 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"prompt": "a\ud800b"}, "the prompt"),
        ({"prompt": "a\udcffb"}, "the prompt"),  # a byte Python kept from argv (surrogateescape)
        ({"prompt": [{"role": "user", "content": "x\udfff"}]}, "message 0 content"),
        ({"prompt": "ok", "system_prompt": "\ud800"}, "the system prompt"),
        ({"prompt": "ok", "regex": "a\ud800"}, "regex"),
        ({"prompt": "ok", "choices": ["yes", "n\ud800"]}, "choices[1]"),
        ({"prompt": "ok", "grammar": 'start: "\ud800"'}, "grammar"),
        ({"prompt": "ok", "schema": {"enum": ["\ud800"]}}, "schema"),
    ],
)
def test_lone_surrogates_are_a_value_error_naming_the_field(kwargs, field, monkeypatch, tiny):
    prompt = kwargs.pop("prompt")
    _no_model_load(monkeypatch)
    with pytest.raises(InvalidText, match=f"{field.replace('[', '.').replace(']', '.')} is not valid UTF-8"):
        api.generate(prompt, **kwargs)  # refused before any model is loaded
    with pytest.raises(InvalidText):
        tiny.generate(prompt, max_tokens=2, **kwargs)  # and by a loaded Generator


# -- 2. prompt length against the model's context --------------------------------------------------


def test_prompt_plus_max_tokens_must_fit_the_context(tiny):
    assert tiny.context_length == 96
    fits = tiny.build_prompt("x" * 40, max_tokens=20)  # the tiny tokenizer: one token per byte
    assert len(fits) + 20 <= 96
    with pytest.raises(PromptTooLong, match="context of 96 tokens"):
        tiny.generate("x" * 40, max_tokens=60)
    with pytest.raises(PromptTooLong):
        tiny.generate_batch(["ok", "x" * 200], max_tokens=4)


def test_a_megabyte_prompt_is_refused_before_tokenizing(tiny, monkeypatch):
    def no_tokenizing(*args, **kwargs):
        raise AssertionError("a prompt this long should be refused from its length alone")

    monkeypatch.setattr(tiny.tokenizer, "apply_chat_template", no_tokenizing)
    start = time.perf_counter()
    with pytest.raises(PromptTooLong, match="at least"):
        tiny.generate("y" * 1_000_000, max_tokens=4)
    assert time.perf_counter() - start < 5  # generous: the check itself is O(length)


# -- 3. the schema hint stays bounded ---------------------------------------------------------------


def test_schema_hint_is_bounded_for_huge_schemas():
    from constrained_spec.chat import schema_instruction

    wide = {"type": "object", "properties": {f"field_{i}": {"type": "integer"} for i in range(10_000)}}
    hint = schema_instruction(wide)
    assert len(hint) < 1500 and "field_0" in hint and "more" in hint
    huge_enum = {"enum": [f"value number {i}" for i in range(10_000)]}
    assert len(schema_instruction(huge_enum)) < 1500
    deep = {"type": "array"}
    for _ in range(2000):
        deep = {"type": "array", "items": deep}
    assert schema_instruction(deep) == "Reply with JSON (array)."
    small = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}
    assert schema_instruction(small) == "Reply with a JSON object with the keys name and age."


def test_recursive_schema_hint_names_the_keys_and_the_recursion():
    """Issue 15 item 12: for a self-referencing pydantic model the hint was the whole schema
    dump, and at temperature 1 SmolLM2 nested `parent` until max_tokens (3 of 10 outputs at 200
    tokens, so a batch ran ~4x longer than its peers). It now names the keys and says what the
    recursive key holds."""
    from typing import Optional

    from pydantic import BaseModel

    from constrained_spec.chat import schema_instruction

    class Category(BaseModel):
        name: str
        parent: Optional["Category"] = None

    hint = schema_instruction(Category.model_json_schema())
    assert hint == "Reply with a JSON object with the keys name and parent; parent is null or an object with the same keys."


# -- 4 (surface side). deep schemas: a clean error or a result, never a RecursionError --------------


def _deep_schema(depth: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


@pytest.mark.parametrize("depth", [500, 3000])
def test_deep_schema_is_a_clean_error_or_works(depth, tiny, monkeypatch):
    try:
        api.check_request("x", schema=_deep_schema(depth))
    except ValueError as exc:  # GrammarError included
        assert "\n" not in str(exc)
    try:
        tiny.generate("x", schema=_deep_schema(depth), max_tokens=2)
    except ValueError as exc:
        assert "\n" not in str(exc)
    try:
        text = '{"type":"object","properties":{"a":' * depth + '{"type":"integer"}' + '},"required":["a"]}' * depth
        tiny.generate("x", schema=text, max_tokens=2)  # as a JSON string
    except ValueError as exc:
        assert "\n" not in str(exc)


# -- 6. json_object mode: no duplicate keys -----------------------------------------------------------


def test_json_object_rejects_duplicate_keys():
    from constrained_spec.grammar import compile
    from constrained_spec.testing import toy_vocabulary

    vocab = toy_vocabulary()
    ids = {t: i for i, t in enumerate(vocab.token_bytes) if t}
    for text in ('{"a":{},"a":{}}', '{"b":{"a":{},"a":{}}}'):
        matcher = compile(json_object=True, vocab=vocab).matcher()
        accepted = 0
        for ch in text:
            if matcher.validate_tokens([ids[ch.encode()]]) == 0:
                break
            matcher.accept_token(ids[ch.encode()])
            accepted += 1
        assert accepted < len(text) or not matcher.is_accepting(), text


# -- 9. actionable errors --------------------------------------------------------------------------


def test_root_schema_error_names_the_root():
    for schema in ({"type": "integer", "minimum": 5, "maximum": 1}, {"enum": []}, {"type": "string", "minLength": 5, "maxLength": 2},
                   {"type": "array", "minItems": 3, "maxItems": 1}):
        with pytest.raises(GrammarError) as info:
            api.check_request("x", schema=schema)
        message = str(info.value)
        assert type(info.value) is GrammarError, f"an internal exception class leaked: {type(info.value).__name__}"
        assert " at / " in message and "allows no value" in message, message


def test_bad_regex_names_a_position(monkeypatch):
    _no_model_load(monkeypatch)
    with pytest.raises(GrammarError, match="position 3"):
        api.generate("x", regex="abc[d-")
    with pytest.raises(GrammarError, match="lookahead is not supported .at position 1."):
        api.generate("x", regex="a(?=b)")


def test_lark_errors_are_one_line(tiny, monkeypatch):
    bad = 'start: item+\nitem: "a" | undefined_rule\n'
    with pytest.raises(GrammarError) as info:
        tiny.compile_constraint(grammar=bad)
    assert "\n" not in str(info.value) and "undefined_rule" in str(info.value)
    _no_model_load(monkeypatch)
    with pytest.raises(GrammarError) as info:
        api.generate("x", grammar="start: (")
    assert "\n" not in str(info.value)


def test_schema_file_path_as_schema_gets_a_hint(tmp_path):
    path = tmp_path / "person.json"
    path.write_text(json.dumps(SCHEMA))
    with pytest.raises(ValueError, match="looks like a file path.*load_schema_file"):
        api.check_request("x", schema=str(path))
    with pytest.raises(ValueError, match="looks like a file path"):
        api.check_request("x", schema="schemas/missing.json")


# -- 10. checked before the model loads; one shared model -----------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"temperature": -1}, "temperature"),
        ({"stop": 5}, "bad sampling parameter"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"regex": "("}, "invalid regex"),
        ({"grammar": "no_such_bundled_grammar"}, "unknown bundled grammar"),
        ({"schema": {"type": "strng"}}, "invalid JSON schema"),
        ({"schema": {"type": "string", "pattern": "(?<=a)b"}}, "unsupported|lookbehind"),
        ({"schema": {"type": "object", "anyOf": [{"properties": {"a": {}}}, {"required": ["b"]}], "unevaluatedProperties": False}}, "unevaluatedProperties"),
        ({"choices": []}, "choices"),
        ({"regex": "a", "choices": ["b"]}, "exactly one constraint"),
    ],
)
def test_bad_input_is_refused_before_loading(kwargs, message, monkeypatch):
    _no_model_load(monkeypatch)
    with pytest.raises(ValueError, match=message):
        api.generate("a prompt", **kwargs)


def test_schemas_the_default_backend_takes_pass_the_check_before_loading(monkeypatch):
    """The check before loading is the real compile (llguidance first) over a byte vocabulary:
    it once ran our compiler alone and refused what llguidance takes (here a leading lookahead
    and an untyped oneOf told apart by a property)."""
    _no_model_load(monkeypatch)
    from constrained_spec.inputs import check_constraint

    kind = lambda c: {"properties": {"type": {"const": c}}, "required": ["type"], "additionalProperties": False}  # noqa: E731
    for schema in ({"type": "string", "pattern": "^(?!\\.)(?!\\./).+"}, {"oneOf": [kind("A"), kind("B")]}):
        check_constraint(schema=schema)


def test_generators_share_one_loaded_model(tiny_model_folder):
    first = api.Generator(tiny_model_folder, verbose=False, draft="none")
    second = api.Generator(tiny_model_folder, verbose=False)
    assert first.loaded is second.loaded  # one copy of the weights


# -- 11. a model id from the local Hugging Face cache, offline ------------------------------------------


def _fake_hub_cache(root, repo_id, folder):
    """The HF hub cache layout: models--org--name/{refs/main, snapshots/<commit>/...}."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for file in os.listdir(folder):
        os.symlink(os.path.join(folder, file), snapshot / file)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return snapshot


def test_model_id_resolves_from_the_local_hf_cache(tiny_model_folder, tmp_path, monkeypatch):
    from constrained_spec.models import resolve_model_folder

    snapshot = _fake_hub_cache(tmp_path, "tiny-org/tiny-model", tiny_model_folder)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_model_folder("tiny-org/tiny-model") == snapshot
    gen = api.Generator("tiny-org/tiny-model", verbose=False, draft="none")
    assert gen.model_name == "tiny-org/tiny-model"
    with pytest.raises(FileNotFoundError, match="neither a local folder nor in the local Hugging Face cache"):
        resolve_model_folder("tiny-org/not-downloaded")


# -- fuzz: random text, JSON, schemas and sampling values: a Result or a ValueError, bounded time ------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_text = st.text(st.characters(codec="utf-8") | st.sampled_from(["\ud800", "\udcff", "(", "{", "/", "\n"]), max_size=10)
_json_leaf = st.none() | st.booleans() | st.integers(-2, 9) | st.floats(allow_nan=True) | _text
_json = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3), max_leaves=5)
_schema = st.recursive(
    st.sampled_from([{"type": "integer", "maximum": 3}, {"type": "string", "maxLength": 2}, {"enum": ["a", 1]}, {"type": "wrong"}, {}, {"const": None}]),
    lambda inner: st.builds(lambda p, r: {"type": "object", "properties": p, "required": r}, st.dictionaries(st.sampled_from("ab"), inner, max_size=2), st.sampled_from([[], ["a"]]))
    | st.builds(lambda i: {"type": "array", "items": i, "maxItems": 2}, inner),
    max_leaves=4,
)
_constraint = st.one_of(
    st.builds(lambda s: {"schema": s}, _schema | _json),
    st.builds(lambda r: {"regex": r}, _text),
    st.builds(lambda g: {"grammar": g}, _text | st.sampled_from(["arithmetic", 'start: "a"+', "start: /[0-9]/"])),
    st.builds(lambda c: {"choices": c}, st.lists(_text, max_size=3) | _json),
    st.just({"json_object": True}),
    st.just({}),
)
_sampling = st.dictionaries(
    st.sampled_from(["temperature", "top_p", "top_k", "min_p", "seed", "max_tokens", "stop", "repetition_penalty", "logit_bias", "bogus"]),
    st.sampled_from([0, 1, -1, 0.5, 2, 1e300, float("nan"), None, "x", [], {"1": 2}, ("a",), True]),
    max_size=3,
)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(prompt=_text | _json, constraint=_constraint, sampling=_sampling)
def test_fuzz_api(tiny, prompt, constraint, sampling):
    start = time.perf_counter()
    sampling = {"max_tokens": 3, **sampling}
    try:
        result = tiny.generate(prompt, **constraint, **sampling)
    except ValueError as exc:  # GrammarError, InvalidText, PromptTooLong: all ValueErrors
        assert str(exc) and "\n" not in str(exc).strip(), exc
    else:
        assert isinstance(result, api.Result)
    assert time.perf_counter() - start < 60
