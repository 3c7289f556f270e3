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


def test_call_cut_by_max_tokens_comes_back_in_tool_calls_with_length():
    """Never the internal call text as content: complete calls and the cut one in tool_calls."""
    choice = ChoiceOutput(0, _decode, EOS, (), plan_tools([WEATHER], "required", True))
    _feed(choice, ['[{"name":"get_weather","arguments":{"city":"Rome"}},{"name":"get_weather","arguments":{"ci'], finish="length")
    content, calls, reason = choice.final()
    assert content is None and reason == "length" and len(calls) == 2
    assert calls[0]["function"]["arguments"] == '{"city": "Rome"}' and calls[1]["function"]["arguments"] == '{"ci'
    early = ChoiceOutput(0, _decode, EOS, (), plan_tools([WEATHER], "auto", True))
    _feed(early, ["<tool_c"], finish="length")
    assert early.final() == (None, None, "length")


def test_streamed_calls_are_sent_once_each_when_whole_with_stable_ids():
    choice = ChoiceOutput(0, _decode, EOS, (), plan_tools([WEATHER], "auto", True))
    one = '{"name":"get_weather","arguments":{"city":"Rome"}}'
    sent = []
    for piece, last in (("<tool_call>[", False), (one[:20], False), (one[20:] + ",", False), (one, False), ("]</tool_call>", True)):
        text = choice.text if choice.token_ids else ""
        ids = [ord(c) for c in text + piece] + ([EOS] if last else [])
        choice.update(SimpleNamespace(token_ids=ids, finished=last, finish_reason="stop" if last else None, stats=None))
        sent.append(choice.calls_delta())
    assert [len(s) for s in sent] == [0, 0, 1, 1, 0]  # a call is sent as soon as its object closes
    assert [c["id"] for c in choice.final()[1]] == [sent[2][0]["id"], sent[3][0]["id"]]
