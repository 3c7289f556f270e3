"""Tool plans: which tools may be called, the reply grammar (calls, text or JSON content), parsing."""

import json
import re

import jsonschema
import pytest
from lark import Lark
from lark.exceptions import LarkError

from constrained_spec.server.protocol import ApiError, ChatMessage, NamedToolChoice, Tool
from constrained_spec.server.tools import (
    TOOL_CALL_CLOSE, TOOL_CALL_OPEN, ContentFormat, constraint_grammar, parse_calls, plan_tools, render_messages, split_auto_output,
)

WEATHER = Tool.model_validate({"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}})
TIME = Tool.model_validate({"type": "function", "function": {"name": "get_time"}})


def test_default_choice_is_auto_with_tools_and_none_without():
    assert plan_tools([WEATHER], None, True).mode == "auto"
    assert plan_tools(None, None, True).mode == "none"


def _regex(plan, content=ContentFormat()):
    """The reply grammar as a Python regex (the IR's regex reads the same in Python and Rust)."""
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
    objects = Lark(constraint_grammar(plan_tools([WEATHER], "auto", True), ContentFormat("json_object")).to_lark(), parser="earley")
    objects.parse('{"a":[1,{"b":null}]}')  # recursive: the Lark form; raises if not accepted
    objects.parse(call)
    with pytest.raises(LarkError):
        objects.parse("[1]")


def test_required_with_response_format_is_calls_only():
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    regex = _regex(plan_tools([WEATHER], "required", True), ContentFormat("json_schema", schema))
    assert regex.fullmatch('[{"name":"get_weather","arguments":{"city":"Oslo"}}]') and not regex.fullmatch('{"answer":1}')


def test_unsupported_schemas_are_400_naming_the_field():
    bad_tool = Tool.model_validate({"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}}})
    with pytest.raises(ApiError) as info:
        constraint_grammar(plan_tools([bad_tool], "required", True), ContentFormat())
    assert info.value.param == "tools" and "does not resolve" in info.value.message and "'f'" in info.value.message
    with pytest.raises(ApiError) as info:
        constraint_grammar(plan_tools([WEATHER], "auto", True), ContentFormat("json_schema", {"type": "nonsense"}))
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
