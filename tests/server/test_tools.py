"""Tool plans: which tools may be called, the calls schema, the text-or-call regex, parsing."""

import json
import re

import jsonschema
import pytest

from constrained_spec.server.protocol import ApiError, ChatMessage, NamedToolChoice, Tool
from constrained_spec.server.tools import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, parse_calls, plan_tools, render_messages, split_auto_output

WEATHER = Tool.model_validate({"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}})
TIME = Tool.model_validate({"type": "function", "function": {"name": "get_time"}})


def test_default_choice_is_auto_with_tools_and_none_without():
    assert plan_tools([WEATHER], None, True).mode == "auto"
    assert plan_tools(None, None, True).mode == "none"


def test_required_schema_accepts_only_valid_calls():
    plan = plan_tools([WEATHER, TIME], "required", True)
    ok = [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {}}]
    jsonschema.validate(ok, plan.schema)
    for bad in ([], [{"name": "get_weather", "arguments": {}}], [{"name": "nope", "arguments": {}}]):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, plan.schema)


def test_parallel_false_allows_one_call():
    plan = plan_tools([WEATHER, TIME], "required", False)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{"name": "get_time", "arguments": {}}] * 2, plan.schema)


def test_named_choice_restricts_to_that_tool():
    plan = plan_tools([WEATHER, TIME], NamedToolChoice.model_validate({"type": "function", "function": {"name": "get_time"}}), True)
    assert plan.mode == "required" and [t.function.name for t in plan.tools] == ["get_time"]
    assert "get_weather" not in plan.system_prompt


@pytest.mark.parametrize(
    "tools, choice, message",
    [
        ([WEATHER], NamedToolChoice.model_validate({"type": "function", "function": {"name": "missing"}}), "names function 'missing', which is not in tools"),
        (None, "required", "needs a non-empty 'tools' list"),
        ([WEATHER, WEATHER], "auto", "two tools have the same name"),
    ],
)
def test_bad_tool_choices_are_400(tools, choice, message):
    with pytest.raises(ApiError) as info:
        plan_tools(tools, choice, True)
    assert info.value.status == 400 and message in info.value.message


def test_auto_regex_is_text_not_starting_with_lt_or_a_marked_call():
    regex = re.compile(plan_tools([WEATHER], "auto", True).regex)
    call = TOOL_CALL_OPEN + '[{"name":"get_weather","arguments":{"city":"Oslo"}}]' + TOOL_CALL_CLOSE
    for text in ("", "Hello!", "x<tool_call>y", "a\n<b>", call):
        assert regex.fullmatch(text), text
    for text in ("<", "<b>bold</b>", TOOL_CALL_OPEN, TOOL_CALL_OPEN + '[{"name":"get_weather","arguments":{}}]' + TOOL_CALL_CLOSE):
        assert not regex.fullmatch(text), text


def test_parse_calls_returns_openai_tool_calls_and_rejects_invalid():
    plan = plan_tools([WEATHER], "required", True)
    calls = parse_calls('[{"name": "get_weather", "arguments": {"city": "Rome"}}]', plan)
    assert calls[0]["type"] == "function" and calls[0]["id"].startswith("call_")
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Rome"}
    with pytest.raises(jsonschema.ValidationError):
        parse_calls('[{"name": "get_weather", "arguments": {"town": "Rome"}}]', plan)


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
    assert out[2] == {"role": "assistant", "content": TOOL_CALL_OPEN + '[{"name": "get_weather", "arguments": {"city": "Oslo"}}]' + TOOL_CALL_CLOSE}
    assert out[3] == {"role": "tool", "content": "sunny"}
