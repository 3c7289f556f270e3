"""Every error case answers OpenAI's error format with a clear message, through the real client
(or raw httpx where the client cannot send the bad input). No generation runs here."""

import httpx
import openai
import pytest

pytestmark = pytest.mark.model

MESSAGES = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def _error(info):
    body = info.value.body
    assert set(body) >= {"message", "type", "param", "code"}, body  # the client unwraps {"error": ...}
    assert "Traceback" not in body["message"]
    return body


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-17", messages=MESSAGES, max_tokens=1)
    body = _error(info)
    assert body["code"] == "model_not_found" and "'gpt-17' does not exist" in body["message"]


@pytest.mark.parametrize(
    "kwargs, message, param",
    [
        ({"temperature": "hot"}, "invalid value for 'temperature'", "temperature"),
        ({"messages": [{"role": "user", "content": 12}]}, "invalid value for 'messages.0.content'", "messages.0.content"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "send_email"}}},
         "names function 'send_email', which is not in tools", "tool_choice"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}}},
         "invalid or unsupported schema", "response_format"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "(?<=a)b"}}}},
         "unsupported regex construct", "response_format"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}}}],
          "tool_choice": "required"}, "does not resolve", "tools"),
        ({"max_tokens": 100_000}, "above this server's limit of 512", "max_tokens"),
        ({"n": 50}, "n=50 is above this server's limit", "n"),
        ({"top_logprobs": 2}, "top_logprobs needs logprobs: true", "top_logprobs"),
        ({"logprobs": True, "top_logprobs": 50}, "invalid value for 'top_logprobs'", "top_logprobs"),
    ],
)
def test_bad_requests_are_400(client, model_id, kwargs, message, param):
    kwargs = {"messages": MESSAGES, "max_tokens": 4, **kwargs}
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=model_id, **kwargs)
    body = _error(info)
    assert message in body["message"] and body["param"] == param and body["type"] == "invalid_request_error"


def test_malformed_json_and_oversized_bodies(live_server):
    url = live_server.base_url + "/chat/completions"
    response = httpx.post(url, content=b'{"model": "default", "messages": [', headers={"content-type": "application/json"})
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]["message"]
    response = httpx.post(url, content=b"x" * 300_000)
    assert response.status_code == 413 and "larger than this server's limit" in response.json()["error"]["message"]


def test_unknown_route_is_openai_404(live_server):
    response = httpx.get(live_server.base_url + "/completions-nope")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_models_list_and_retrieve(client, model_id):
    assert model_id == "SmolLM2-135M-Instruct"
    assert client.models.retrieve(model_id).id == model_id
