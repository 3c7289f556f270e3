"""/v1/responses without a model: request mapping onto chat completions, clean 400s naming the
field, output items, and the streamed event sequence from a scripted choice."""

import asyncio
import json
from types import SimpleNamespace

import pytest

from constrained_spec.server.output import ChoiceOutput
from constrained_spec.server.protocol import ApiError
from constrained_spec.server.responses import output_items, parse_responses_request, stream_events, to_chat_request
from constrained_spec.server.tools import plan_tools

TOOL = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def _parse(**body):
    return parse_responses_request(json.dumps({"model": "default", **body}).encode())


def test_input_items_become_chat_messages():
    req = _parse(instructions="Be brief.", tools=[TOOL], tool_choice={"type": "function", "name": "get_weather"},
                 max_output_tokens=30, text={"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}}},
                 input=[{"role": "user", "content": "Weather?"},
                        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"Oslo"}', "id": "fc_1", "status": "completed"},
                        {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": '{"city":"Rome"}'},
                        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
                        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok", "annotations": []}]}])
    chat = to_chat_request(req)
    assert [m.role for m in chat.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert [c.id for c in chat.messages[2].tool_calls] == ["c1", "c2"] and chat.messages[3].tool_call_id == "c1"
    assert chat.max_tokens == 30 and chat.tool_choice.function.name == "get_weather"
    assert chat.response_format.type == "json_schema" and chat.tools[0].function.name == "get_weather"


@pytest.mark.parametrize("body, param", [
    ({"input": "hi", "previous_response_id": "resp_1"}, "previous_response_id"),
    ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools.0"),
    ({"input": [{"type": "reasoning", "summary": []}]}, "input"),
    ({"input": "hi", "max_output_tokens": "many"}, "max_output_tokens"),
    ({"input": "hi", "include": ["reasoning.encrypted_content"]}, "include"),
])
def test_unsupported_or_bad_fields_are_400_naming_the_field(body, param):
    with pytest.raises(ApiError) as info:
        _parse(**body)
    assert info.value.status == 400 and (info.value.param or "").startswith(param.split(".")[0]), info.value.param
    assert param.split(".")[0] in info.value.message


def test_output_items_message_and_calls():
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    items = output_items(None, [call, dict(call, id="call_2", function={"name": "f", "arguments": '{"a'})], "length")
    assert [(i["type"], i["status"]) for i in items] == [("function_call", "completed"), ("function_call", "incomplete")]
    assert items[0]["call_id"] == "call_1" and items[0]["arguments"] == '{"a": 1}'
    (message,) = output_items("hello", None, "stop")
    assert message["type"] == "message" and message["content"][0] == {"type": "output_text", "text": "hello", "annotations": [], "logprobs": []}


def _events(req, pieces, plan):
    choice = ChoiceOutput(0, lambda ids: "".join(chr(i) for i in ids), 0, (), plan)

    async def updates():
        text = ""
        for i, piece in enumerate(pieces):
            text += piece
            last = i == len(pieces) - 1
            choice.update(SimpleNamespace(token_ids=[ord(c) for c in text] + ([0] if last else []), finished=last,
                                          finish_reason="stop" if last else None, stats=None))
            yield choice

    async def collect():
        return [e async for e in stream_events(updates(), req, "m", 5)]

    out = []
    for raw in asyncio.run(collect()):
        kind, data = raw.split("\n")[:2]
        body = json.loads(data.removeprefix("data: "))
        assert kind == "event: " + body["type"]
        out.append(body)
    assert [e["sequence_number"] for e in out] == list(range(len(out)))
    return out


def test_streamed_text_event_sequence():
    events = _events(_parse(input="hi"), ["Hel", "lo"], plan_tools(None, None, True))
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed"]
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == "Hello"
    done = events[-1]["response"]
    assert done["status"] == "completed" and done["output"][0]["content"][0]["text"] == "Hello"
    assert done["usage"]["input_tokens"] == 5 and done["usage"]["output_tokens"] == 5


def test_streamed_call_event_sequence():
    from constrained_spec.server.protocol import Tool

    tool = Tool.model_validate({"type": "function", "function": {"name": "get_weather", "parameters": TOOL["parameters"]}})
    events = _events(_parse(input="hi", tools=[TOOL]), ["<tool_call>[", '{"name":"get_weather","arguments":{"city":"Oslo"}}', "]</tool_call>"],
                     plan_tools([tool], "auto", True))
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    item = events[-1]["response"]["output"][0]
    assert item["type"] == "function_call" and item["name"] == "get_weather" and json.loads(item["arguments"]) == {"city": "Oslo"}
