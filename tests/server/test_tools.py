"""Tool plans: which tools may be called, the reply grammar (calls, text or JSON content), parsing."""

import json
from pathlib import Path
import re

import jsonschema
import pytest
from lark import Lark
from lark.exceptions import LarkError

from constrained_spec.grammar import Vocabulary
from constrained_spec.grammar import compile as compile_grammar
from constrained_spec.server.app import ChatService
from constrained_spec.server.protocol import ApiError, ChatMessage, NamedToolChoice, Tool
from constrained_spec.server.tools import (
    TOOL_CALL_CLOSE, TOOL_CALL_OPEN, ContentFormat, calls_schema, constraint_grammar, parse_calls, plan_tools, render_messages,
    split_auto_output,
)

WEATHER = Tool.model_validate({"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}})
TIME = Tool.model_validate({"type": "function", "function": {"name": "get_time"}})


def test_default_choice_is_auto_with_tools_and_none_without():
    assert plan_tools([WEATHER], None, True).mode == "auto"
    assert plan_tools(None, None, True).mode == "none"


BYTES = Vocabulary([bytes([i]) for i in range(256)] + [None], 256)  # one token per byte: a walk reads the text


class _Generator:
    """What ChatService._compile reads of a Generator: vocabulary and JSON-schema options."""

    vocabulary, backend, closed_objects = BYTES, "default", True

    def compile_constraint(self, **spec):
        spec = {"json_schema" if k == "schema" else k: v for k, v in spec.items()}
        options = {"closed_objects": True} if "json_schema" in spec else {}
        return compile_grammar(**spec, vocab=BYTES, **options)


def _reply_grammar(plan, content=ContentFormat(), backend="default"):
    """The reply's compiled grammar, as the server builds it."""
    service = ChatService.__new__(ChatService)
    service.generator = _Generator()
    service.generator.backend = backend
    return service._compile(plan, content)


class _Walk:
    """fullmatch(text): whether the grammar accepts exactly `text` (walked byte by byte, then EOS)."""

    def __init__(self, grammar):
        self.grammar = grammar

    def fullmatch(self, text):
        matcher = self.grammar.matcher()
        data = list(text.encode())
        if matcher.validate_tokens(data) < len(data):
            return False
        for token in data:
            matcher.accept_token(token)
        return matcher.is_accepting() and matcher.validate_tokens([256]) == 1


def _regex(plan, content=ContentFormat()):
    """The reply grammar, compiled as the server compiles it (tools.calls_schema), as a matcher."""
    return _Walk(_reply_grammar(plan, content))


def _ir_regex(plan, content=ContentFormat()):
    """The IR path's grammar (tools whose references are not local pointers) as a Python regex."""
    return re.compile(constraint_grammar(plan, content).to_regex())


def test_required_grammar_accepts_only_valid_calls():
    regex = _regex(plan_tools([WEATHER, TIME], "required", True))
    assert regex.fullmatch('[{"name":"get_weather","arguments":{"city":"Paris"}},{"name":"get_time","arguments":{}}]')
    for bad in ("[]", '[{"name":"get_weather","arguments":{}}]', '[{"name":"nope","arguments":{}}]',
                '[{"name":"get_time","arguments":{"x":1}}]'):
        assert not regex.fullmatch(bad), bad


def test_parallel_false_allows_exactly_one_call():
    regex = _regex(plan_tools([WEATHER, TIME], "required", False))
    one = '{"name":"get_time","arguments":{}}'
    assert regex.fullmatch(f"[{one}]") and not regex.fullmatch(f"[{one},{one}]")


def test_each_tool_resolves_its_own_refs():
    """Pydantic-style parameters with $defs: each tool's $ref resolves inside its own schema."""
    def tool(name, inner):
        return Tool.model_validate({"type": "function", "function": {"name": name, "parameters": {
            "type": "object", "properties": {"v": {"$ref": "#/$defs/V"}}, "required": ["v"], "additionalProperties": False,
            "$defs": {"V": inner}}}})
    regex = _regex(plan_tools([tool("a", {"type": "integer"}), tool("b", {"type": "boolean"})], "required", True))
    assert regex.fullmatch('[{"name":"a","arguments":{"v":3}},{"name":"b","arguments":{"v":true}}]')
    assert not regex.fullmatch('[{"name":"a","arguments":{"v":true}}]')
    assert not regex.fullmatch('[{"name":"b","arguments":{"v":3}}]')


def test_auto_with_response_format_is_calls_or_schema_content():
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"], "additionalProperties": False}
    regex = _regex(plan_tools([WEATHER], "auto", True), ContentFormat("json_schema", schema))
    call = TOOL_CALL_OPEN + '[{"name":"get_weather","arguments":{"city":"Oslo"}}]' + TOOL_CALL_CLOSE
    assert regex.fullmatch(call) and regex.fullmatch('{"answer":42}')
    for bad in ("Hello", '{"answer":"x"}', "", '[{"name":"get_weather","arguments":{"city":"Oslo"}}]'):
        assert not regex.fullmatch(bad), bad
    objects = _Walk(_reply_grammar(plan_tools([WEATHER], "auto", True), ContentFormat("json_object")))
    assert objects.fullmatch('{"a":[1,{"b":null}]}') and objects.fullmatch(call)
    assert not objects.fullmatch("[1]") and not objects.fullmatch('{"a":1,"a":2}')
    ir_objects = Lark(constraint_grammar(plan_tools([WEATHER], "auto", True), ContentFormat("json_object")).to_lark(), parser="earley")
    ir_objects.parse('{"a":[1,{"b":null}]}')  # the IR path: recursive, the Lark form; raises if not accepted
    ir_objects.parse(call)
    with pytest.raises(LarkError):
        ir_objects.parse("[1]")


def test_required_with_response_format_is_calls_only():
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    regex = _regex(plan_tools([WEATHER], "required", True), ContentFormat("json_schema", schema))
    assert regex.fullmatch('[{"name":"get_weather","arguments":{"city":"Oslo"}}]') and not regex.fullmatch('{"answer":1}')


def test_unsupported_schemas_are_400_naming_the_field():
    bad_tool = Tool.model_validate({"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}}})
    for build in (_reply_grammar, constraint_grammar):
        with pytest.raises(ApiError) as info:
            build(plan_tools([bad_tool], "required", True), ContentFormat())
        assert info.value.param == "tools" and "does not resolve" in info.value.message and "'f'" in info.value.message, info.value.message
        with pytest.raises(ApiError) as info:
            build(plan_tools([WEATHER], "auto", True), ContentFormat("json_schema", {"type": "nonsense"}))
        assert info.value.param == "response_format"


def test_named_choice_restricts_to_that_tool():
    plan = plan_tools([WEATHER, TIME], NamedToolChoice.model_validate({"type": "function", "function": {"name": "get_time"}}), True)
    assert plan.mode == "required" and [t.function.name for t in plan.tools] == ["get_time"]
    assert "get_weather" not in plan.system_prompt


@pytest.mark.parametrize(
    "tools, choice, message",
    [
        ([WEATHER], NamedToolChoice.model_validate({"type": "function", "function": {"name": "missing"}}), "names function 'missing', which is not in tools"),
        (None, "required", "tool_choice 'required' needs a non-empty 'tools' list"),
        (None, NamedToolChoice.model_validate({"type": "function", "function": {"name": "f"}}), "tool_choice naming function 'f' needs"),
        ([WEATHER, WEATHER], "auto", "two tools have the same name"),
    ],
)
def test_bad_tool_choices_are_400(tools, choice, message):
    with pytest.raises(ApiError) as info:
        plan_tools(tools, choice, True)
    assert info.value.status == 400 and message in info.value.message


def test_auto_grammar_is_text_not_starting_with_lt_or_a_marked_call():
    regex = _regex(plan_tools([WEATHER], "auto", True))
    call = TOOL_CALL_OPEN + '[{"name":"get_weather","arguments":{"city":"Oslo"}}]' + TOOL_CALL_CLOSE
    for text in ("", "Hello!", "x<tool_call>y", "a\n<b>", call):
        assert regex.fullmatch(text), text
    for text in ("<", "<b>bold</b>", TOOL_CALL_OPEN, TOOL_CALL_OPEN + '[{"name":"get_weather","arguments":{}}]' + TOOL_CALL_CLOSE):
        assert not regex.fullmatch(text), text


def test_parse_calls_returns_openai_tool_calls_and_rejects_invalid():
    plan = plan_tools([WEATHER], "required", True)
    calls = parse_calls('[{"name":"get_weather","arguments":{"city":"Rome"}}]', plan)
    assert calls[0]["type"] == "function" and calls[0]["id"].startswith("call_")
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Rome"}
    with pytest.raises(jsonschema.ValidationError):
        parse_calls('[{"name":"get_weather","arguments":{"town":"Rome"}}]', plan)
    with pytest.raises(ValueError):
        parse_calls('[{"name":"get_weather","arguments":{"city":"Rome"}}', plan)


def test_parse_calls_of_a_cut_array_keeps_complete_calls_and_the_cut_one():
    plan = plan_tools([WEATHER, TIME], "required", True)
    one = '{"name":"get_weather","arguments":{"city":"Rome"}}'
    cut = parse_calls(f'[{one},{{"name":"get_time","arguments":{{"tz', plan, complete=False)
    assert [c["function"]["name"] for c in cut] == ["get_weather", "get_time"]
    assert json.loads(cut[0]["function"]["arguments"]) == {"city": "Rome"} and cut[1]["function"]["arguments"] == '{"tz'
    assert [c["function"]["name"] for c in parse_calls(f'[{one},{{"name":"get_ti', plan, complete=False)] == ["get_weather"]
    assert parse_calls("", plan, complete=False) == [] and parse_calls("[", plan, complete=False) == []


def test_split_auto_output():
    assert split_auto_output("hi") == ("hi", None)
    assert split_auto_output(TOOL_CALL_OPEN + "[1]" + TOOL_CALL_CLOSE) == (None, "[1]")


def test_history_renders_calls_and_results_and_adds_tools_prompt():
    plan = plan_tools([WEATHER], "auto", True)
    messages = [ChatMessage.model_validate(m) for m in [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]]
    out = render_messages(messages, plan)
    assert out[0]["role"] == "system" and out[0]["content"].startswith("Be brief.") and "get_weather" in out[0]["content"]
    assert out[2] == {"role": "assistant", "content": TOOL_CALL_OPEN + '[{"name":"get_weather","arguments":{"city":"Oslo"}}]' + TOOL_CALL_CLOSE}
    assert out[3] == {"role": "tool", "content": "sunny"}


# -- the calls array through the JSON-schema backend ------------------------------------------

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "schema_corpus"


def test_tool_schemas_only_the_default_backend_takes_are_served():
    """`unevaluatedProperties` (our compiler refuses it; the default backend reads it as
    additionalProperties where nothing else evaluates keys) and a `oneOf` of object shapes: 400
    through the IR path before, now compiled like a response_format."""
    shaped = Tool.model_validate({"type": "function", "function": {"name": "draw", "parameters": {
        "type": "object", "properties": {"shape": {"oneOf": [
            {"type": "object", "properties": {"r": {"type": "number"}}, "required": ["r"], "additionalProperties": False},
            {"type": "object", "properties": {"w": {"type": "number"}, "h": {"type": "number"}}, "required": ["w", "h"],
             "additionalProperties": False}]}, "label": {"type": "string"}},
        "required": ["shape"], "unevaluatedProperties": False}}})
    plan = plan_tools([shaped, WEATHER], "required", True)
    with pytest.raises(ApiError, match="unevaluatedProperties"):
        constraint_grammar(plan, ContentFormat())
    walk = _regex(plan)
    assert walk.fullmatch('[{"name":"draw","arguments":{"shape":{"r":1.5},"label":"c"}},{"name":"get_weather","arguments":{"city":"A"}}]')
    assert walk.fullmatch('[{"name":"draw","arguments":{"shape":{"w":1,"h":2}}}]')
    for bad in ('[{"name":"draw","arguments":{"shape":{"r":1},"x":1}}]', '[{"name":"draw","arguments":{"shape":{"w":1}}}]',
                '[{"name":"draw","arguments":{"label":"c"}}]'):
        assert not walk.fullmatch(bad), bad


def test_tools_with_anchor_refs_take_the_ir_path():
    """A `$ref` to an `$anchor` cannot move under `$defs` with its tool: each tool stays its own document."""
    anchored = Tool.model_validate({"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"v": {"$ref": "#num"}}, "required": ["v"], "additionalProperties": False,
        "$defs": {"n": {"$anchor": "num", "type": "integer"}}}}})
    plan = plan_tools([anchored], "required", True)
    assert calls_schema(plan) is None
    walk = _regex(plan)
    assert walk.fullmatch('[{"name":"f","arguments":{"v":3}}]') and not walk.fullmatch('[{"name":"f","arguments":{"v":"x"}}]')


def _corpus_tools():
    """The benchmark corpus' function-calling schemas with their valid and invalid instances."""
    for path in sorted(CORPUS.glob("own-fc-*.json")):
        entry = json.loads(path.read_text())
        yield path.stem.removeprefix("own-fc-"), entry["schema"], entry["instances"]


@pytest.mark.parametrize("mode", ["required", "auto"])
def test_calls_accept_exactly_what_the_schema_alone_accepts(mode):
    """Differential: every corpus function-calling schema as a tool; each instance as a call
    (alone, and after another tool's call) is accepted iff the schema's own grammar accepts the
    instance, and never where jsonschema refuses it."""
    entries = list(_corpus_tools())
    tools = [Tool.model_validate({"type": "function", "function": {"name": name, "parameters": schema}}) for name, schema, _ in entries]
    walk = _regex(plan_tools(tools, mode, True))
    open_, close = (TOOL_CALL_OPEN, TOOL_CALL_CLOSE) if mode == "auto" else ("", "")
    other = '{"name":"get-weather","arguments":{"location":"Oslo"}}'
    checked = 0
    for name, schema, instances in entries:
        alone = _Walk(compile_grammar(json_schema=schema, vocab=BYTES, closed_objects=True))
        for instance in instances:
            text = instance["text"]
            try:
                json.loads(text)
            except json.JSONDecodeError:
                continue
            expected = alone.fullmatch(text)
            if expected:
                jsonschema.validate(json.loads(text), schema)
            call = f'{{"name":{json.dumps(name)},"arguments":{text}}}'
            assert walk.fullmatch(f"{open_}[{call}]{close}") == expected, (name, text)
            assert walk.fullmatch(f"{open_}[{other},{call}]{close}") == expected, (name, text)
            checked += 1
    assert checked > 100
