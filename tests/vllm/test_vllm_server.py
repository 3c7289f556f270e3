"""The OpenAI client against vLLM's own server with our structured-output backend and our
proposers (one server per session): JSON schema, tool calls, streaming, regex and Lark, bad
constraints as 400s, and speculation actually accepting our drafts. Every output is checked."""

import json
import re

import httpx
import jsonschema
import pytest

SERVED_NAME = "smollm2"  # the --served-model-name of conftest.vllm_server

pytestmark = pytest.mark.vllm

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"}},
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["location", "unit"],
            "additionalProperties": False,
        },
    },
}
EXTRACT = "Extract the person as JSON: Maria Garcia is 34 years old and lives in Valencia."


@pytest.fixture(scope="module")
def client(vllm_server):
    from openai import OpenAI

    return OpenAI(base_url=vllm_server + "/v1", api_key="unused", timeout=300)


def _spec_counter(base: str, name: str) -> float:
    text = httpx.get(base + "/metrics", timeout=10).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name) and not line.startswith("#"))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_json_schema_outputs_are_valid(client, temperature):
    response = client.chat.completions.create(
        model=SERVED_NAME, messages=[{"role": "user", "content": EXTRACT}], temperature=temperature, seed=7, n=1 if temperature == 0 else 3, max_tokens=80,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}},
    )  # fmt: skip
    for choice in response.choices:
        assert choice.finish_reason == "stop", choice.message.content
        jsonschema.validate(json.loads(choice.message.content), PERSON)


def test_named_tool_call_arguments_follow_the_tool_schema(client):
    response = client.chat.completions.create(
        model=SERVED_NAME, messages=[{"role": "user", "content": "What is the weather in Paris, in celsius?"}],
        tools=[WEATHER_TOOL], tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=60, temperature=0,
    )  # fmt: skip
    (call,) = response.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER_TOOL["function"]["parameters"])


def test_streamed_json_is_valid_when_joined(client):
    stream = client.chat.completions.create(
        model=SERVED_NAME, messages=[{"role": "user", "content": EXTRACT}], temperature=1.0, seed=3, max_tokens=80, stream=True,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}},
    )  # fmt: skip
    pieces = [chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices]
    assert len([p for p in pieces if p]) > 1  # really streamed
    jsonschema.validate(json.loads("".join(pieces)), PERSON)


def test_regex_and_lark_through_vllms_structured_outputs(client):
    dates = client.completions.create(
        model=SERVED_NAME, prompt="Apollo 11 landed on the moon on", max_tokens=20, temperature=1.0, seed=1, n=2,
        extra_body={"structured_outputs": {"regex": r" [0-9]{4}-[0-9]{2}-[0-9]{2}"}},
    )  # fmt: skip
    for choice in dates.choices:
        assert re.fullmatch(r" [0-9]{4}-[0-9]{2}-[0-9]{2}", choice.text), choice.text
    lark = 'start: "(" expr ")"\nexpr: NUM | NUM "+" expr\nNUM: /[0-9]+/'
    sums = client.completions.create(
        model=SERVED_NAME, prompt="A sum of small numbers in parentheses:", max_tokens=30, temperature=1.0, seed=2, n=2,
        extra_body={"structured_outputs": {"grammar": lark}},
    )  # fmt: skip
    for choice in sums.choices:
        assert choice.finish_reason == "stop" and re.fullmatch(r"\([0-9]+(\+[0-9]+)*\)", choice.text), choice.text


def test_unsupported_constraint_is_a_400(client):
    from openai import BadRequestError

    with pytest.raises(BadRequestError, match="constrained_spec backend"):
        client.completions.create(model=SERVED_NAME, prompt="x", max_tokens=5, extra_body={"structured_outputs": {"grammar": 'root ::= "a"'}})


def test_our_proposers_drafts_are_accepted(client, vllm_server):
    before = _spec_counter(vllm_server, "vllm:spec_decode_num_accepted_tokens_total")
    for seed in range(2):  # the second request also drafts from the first's output (suffix tree)
        response = client.chat.completions.create(
            model=SERVED_NAME, messages=[{"role": "user", "content": EXTRACT}], temperature=0, seed=seed, max_tokens=80,
            response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}},
        )  # fmt: skip
        jsonschema.validate(json.loads(response.choices[0].message.content), PERSON)
    accepted = _spec_counter(vllm_server, "vllm:spec_decode_num_accepted_tokens_total") - before
    drafts = _spec_counter(vllm_server, "vllm:spec_decode_num_drafts_total")
    assert drafts > 0 and accepted >= 10, (drafts, accepted)  # forced keys and copied values are accepted
