"""The server against what users actually send (issue 15): lone surrogates, prompts beyond the
model's context, deep schemas, and a fuzz test (random bytes, random JSON, random schemas and
sampling values): always an OpenAI-format answer, never a 500 or a hang. A live server over the
tiny random model from `constrained_spec.testing` (context 96 tokens)."""

import json
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@pytest.fixture(scope="module")
def tiny_server(tiny_model_folder):
    from constrained_spec.api import Generator
    from constrained_spec.server.app import BackgroundServer, ServerConfig, create_app

    generator = Generator(tiny_model_folder, verbose=False, draft="none")
    config = ServerConfig(max_tokens_limit=16, default_max_tokens=8, max_n=2, max_request_bytes=300_000)
    with BackgroundServer(create_app(generator, config)) as server:
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            yield client, generator.model_name


def _post(client, body: bytes | dict):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post("/chat/completions", content=data, headers={"content-type": "application/json"})


def _assert_openai_answer(response):
    assert response.status_code in (200, 400, 404, 413, 429), (response.status_code, response.text[:300])
    body = response.json()
    if response.status_code != 200:
        error = body["error"]
        assert set(error) >= {"message", "type", "param", "code"} and "Traceback" not in error["message"]
    return body


def test_lone_surrogate_in_a_message_is_a_400(tiny_server):
    client, model = tiny_server
    raw = b'{"model": "%s", "messages": [{"role": "user", "content": "a\\ud800b"}]}' % model.encode()
    response = _post(client, raw)
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]  # pydantic's JSON reader refuses it first
    assert "not valid UTF-8" in message or "hex escape" in message, message
    response = _post(client, b'{"model": "%s", "messages": [{"role": "user", "content": "a\xffb"}]}' % model.encode())
    assert response.status_code == 400, response.text


def test_prompt_beyond_the_context_is_context_length_exceeded(tiny_server):
    client, model = tiny_server
    response = _post(client, {"model": model, "messages": [{"role": "user", "content": "x" * 200_000}], "max_tokens": 4})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "context_length_exceeded"
    response = _post(client, {"model": model, "messages": [{"role": "user", "content": "x" * 85}], "max_tokens": 16})
    assert response.status_code == 400 and response.json()["error"]["code"] == "context_length_exceeded"


@pytest.mark.parametrize("depth", [500, 2000])
def test_deep_schema_is_a_400_or_works(tiny_server, depth):
    client, model = tiny_server
    schema = '{"type":"object","properties":{"a":' * depth + '{"type":"integer"}' + '},"required":["a"]}' * depth
    raw = ('{"model": "%s", "max_tokens": 2, "messages": [{"role": "user", "content": "x"}], '
           '"response_format": {"type": "json_schema", "json_schema": {"name": "deep", "schema": %s}}}') % (model, schema)
    _assert_openai_answer(_post(client, raw.encode()))


_json_leaf = st.none() | st.booleans() | st.integers(-3, 20) | st.floats(allow_nan=True) | st.text(max_size=6)
_json = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
_schema = st.recursive(
    st.sampled_from([{"type": "integer"}, {"type": "string", "maxLength": 2}, {"enum": ["a", 1]}, {"type": "nope"}, {}, True]),
    lambda inner: st.builds(lambda p: {"type": "object", "properties": p}, st.dictionaries(st.sampled_from("ab"), inner, max_size=2)),
    max_leaves=3,
)
_sampling = st.fixed_dictionaries({}, optional={
    "temperature": st.sampled_from([0, 0.7, -1, 3, 1e308, "hot", None]),
    "top_p": st.sampled_from([0, 0.5, 1, 2, None]),
    "max_tokens": st.sampled_from([1, 4, 0, -5, 10**12, 2.5]),
    "seed": st.sampled_from([0, 7, -1, 2**80]),
    "n": st.sampled_from([1, 2, 0, 100]),
    "stop": st.sampled_from(["}", ["a", ""], 5, None]),
    "logit_bias": st.sampled_from([{"5": 3}, {"x": 1}, {"3": 1e9}]),
})


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    kind=st.sampled_from(["bytes", "json", "request"]),
    raw=st.binary(max_size=40),
    value=_json,
    content=st.text(max_size=20),
    schema=_schema,
    fmt=st.sampled_from([None, "json_object", "json_schema"]),
    sampling=_sampling,
)
def test_fuzz_server(tiny_server, kind, raw, value, content, schema, fmt, sampling):
    client, model = tiny_server
    if kind == "bytes":
        body: bytes | dict = raw
    elif kind == "json":
        body = json.dumps(value).encode()
    else:
        body = {"model": model, "messages": [{"role": "user", "content": content}], **sampling}
        if fmt == "json_object":
            body["response_format"] = {"type": "json_object"}
        elif fmt == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
        body.setdefault("max_tokens", 4)
    start = time.perf_counter()
    _assert_openai_answer(_post(client, body))
    assert time.perf_counter() - start < 60
