"""ChoiceOutput: stream deltas hold back stop-string prefixes, "auto" output is routed by its first
character, complete calls become validated tool_calls."""

from types import SimpleNamespace

from constrained_spec.server.protocol import Tool
from constrained_spec.server.output import ChoiceOutput
from constrained_spec.server.tools import plan_tools

WEATHER = Tool.model_validate({"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})
EOS = 0


def _feed(choice, pieces, finish="stop"):
    """Feed text pieces as one-character "tokens" (id = ord); returns the stream deltas."""
    text, deltas = "", []
    for i, piece in enumerate(pieces):
        text += piece
        last = i == len(pieces) - 1
        ids = [ord(c) for c in text] + ([EOS] if last and finish == "stop" else [])
        choice.update(SimpleNamespace(token_ids=ids, finished=last, finish_reason=finish if last else None, stats=None))
        deltas.append(choice.content_delta())
        if choice.finished:
            break
    return deltas


def _decode(ids):
    return "".join(chr(i) for i in ids)


def test_stop_string_is_held_back_and_cut():
    choice = ChoiceOutput(0, _decode, EOS, ["END"], plan_tools(None, None, True))
    deltas = _feed(choice, ["ab", "cE", "N", "Dxyz"])
    assert "".join(deltas) == "abc" and choice.stop_hit and choice.final() == ("abc", None, "stop")


def test_auto_text_streams_and_call_is_buffered_then_validated():
    plan = plan_tools([WEATHER], "auto", True)
    text = ChoiceOutput(0, _decode, EOS, (), plan)
    assert "".join(_feed(text, ["Hi", " there"])) == "Hi there" and text.final()[2] == "stop"
    call = ChoiceOutput(1, _decode, EOS, (), plan)
    deltas = _feed(call, ["<tool_call>", '[{"name":"get_weather",', '"arguments":{"city":"Oslo"}}]', "</tool_call>"])
    content, calls, reason = call.final()
    assert deltas == ["", "", "", ""] and content is None and reason == "tool_calls"
    assert calls[0]["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}


def test_call_cut_by_max_tokens_is_content_with_length():
    choice = ChoiceOutput(0, _decode, EOS, (), plan_tools([WEATHER], "required", True))
    _feed(choice, ['[{"name":"get_'], finish="length")
    assert choice.final() == ('[{"name":"get_', None, "length")
