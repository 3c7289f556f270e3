"""Request parsing: strict types, OpenAI-style error messages naming the bad field."""

import json

import pytest

from constrained_spec.server.protocol import ApiError, chunk_body, completion_body, parse_request


def _body(**fields):
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    base.update(fields)
    return json.dumps(base).encode()


def test_valid_request_keeps_fields_and_ignores_unknown_ones():
    req = parse_request(_body(temperature=0, max_completion_tokens=5, stop="x", user="u", metadata={"a": 1},
                              response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object"}}}))
    assert req.temperature == 0 and req.requested_max_tokens == 5 and req.stops == ("x",)
    assert req.response_format.json_schema.schema_ == {"type": "object"}


@pytest.mark.parametrize(
    "body, message, param",
    [
        (b"{not json", "not valid JSON", None),
        (b"", "request body is empty", None),
        (b"[1, 2]", "must be a JSON object", None),
        (_body(temperature="0.5"), "invalid value for 'temperature'", "temperature"),
        (_body(temperature=3), "less than or equal to 2", "temperature"),
        (_body(n=0), "invalid value for 'n'", "n"),
        (_body(stop=5), "invalid value for 'stop'", "stop"),
        (_body(stop=["a", "b", "c", "d", "e"]), "at most 4", "stop"),
        (_body(messages=[]), "at least 1 item", "messages"),
        (_body(messages=[{"role": "wizard", "content": "x"}]), "invalid value for 'messages.0.role'", "messages.0.role"),
        (_body(tool_choice="sometimes"), "invalid value for 'tool_choice'", "tool_choice"),
        (_body(response_format={"type": "json_schema"}), "needs a 'json_schema' object", "response_format"),
        (json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(), "'model': Field required", "model"),
    ],
)
def test_bad_requests_are_400_naming_the_field(body, message, param):
    with pytest.raises(ApiError) as info:
        parse_request(body)
    assert info.value.status == 400 and info.value.type == "invalid_request_error"
    assert message in info.value.message
    assert info.value.param == param


def test_content_parts_are_joined():
    req = parse_request(_body(messages=[{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]))
    assert req.messages[0].text == "ab"


def test_response_bodies_have_openai_shape():
    body = completion_body("id1", "m", [], {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}, {"speculation": []})
    assert body["object"] == "chat.completion" and body["constrained_spec"] == {"speculation": []}
    chunk = chunk_body("id1", "m", 5, [{"index": 0, "delta": {}}])
    assert chunk["object"] == "chat.completion.chunk" and chunk["created"] == 5 and "usage" not in chunk


def test_default_max_tokens_is_the_remaining_context_and_limits_name_the_field():
    from types import SimpleNamespace

    from constrained_spec.server.app import ChatService, ServerConfig
    from constrained_spec.server.protocol import ApiError, ChatRequest

    def max_tokens(config, **body):
        service = SimpleNamespace(context_length=8192, config=config)
        req = ChatRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}], **body})
        return ChatService._max_tokens(service, req, 192)

    assert max_tokens(ServerConfig()) == 8000  # no max_tokens: the rest of the context
    assert max_tokens(ServerConfig(max_tokens_limit=512)) == 512
    assert max_tokens(ServerConfig(), max_completion_tokens=7) == 7
    with pytest.raises(ApiError) as info:
        max_tokens(ServerConfig(), max_tokens=8001)
    assert info.value.param == "max_tokens" and info.value.code == "context_length_exceeded"
