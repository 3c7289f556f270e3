"""The agent frameworks, unmodified, against a live server on the default model: each is given
only a base_url. Assertions are on validity and shape (a typed final answer, valid tool
arguments, the event sequence), never on the small model's wisdom; max tokens stay small.

Framework versions are pinned in pyproject.toml's `test` extra."""

import asyncio
import json

import pytest
from pydantic import BaseModel, Field

pytestmark = pytest.mark.model

PROMPT = "What is the weather in Paris? Use the tool, then answer."
# With tools and a typed answer in one request, the small model answers in one turn here; told to
# use the tool it calls it again after every result until the turn limit (model wisdom, not shape).
ASK = "What is the weather in Paris?"


class City(BaseModel):
    name: str = Field(max_length=20)
    country: str = Field(max_length=20)


class Weather(BaseModel):
    city: str = Field(max_length=20)
    sky: str = Field(max_length=20)


def get_weather(city: str) -> str:
    """Current weather in a city."""
    return json.dumps({"city": city[:20], "sky": "sunny"})


# ---- LangChain -------------------------------------------------------------------------------


@pytest.fixture
def chat_model(live_server, model_id):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=live_server.base_url, api_key="unused", model=model_id, temperature=0, max_tokens=40,
                      max_retries=0, timeout=300)


@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode"])
def test_langchain_with_structured_output(chat_model, method):
    prompt = "Paris is the capital of France. Give the city and its country as JSON with keys name and country."
    city = chat_model.with_structured_output(City, method=method).invoke(prompt)
    assert isinstance(city, City)


def test_langchain_bind_tools_round_trip(chat_model):
    from langchain_core.messages import HumanMessage, ToolMessage

    reply = chat_model.bind_tools([get_weather], tool_choice="get_weather").invoke([HumanMessage(PROMPT)])
    assert len(reply.tool_calls) >= 1 and not reply.invalid_tool_calls
    call = reply.tool_calls[0]
    assert call["name"] == "get_weather" and isinstance(call["args"]["city"], str)
    final = chat_model.bind_tools([get_weather]).invoke(
        [HumanMessage(PROMPT), reply, ToolMessage(get_weather(**call["args"]), tool_call_id=call["id"])])
    assert final.content or final.tool_calls


@pytest.mark.parametrize("strategy", ["tool", "provider"])
def test_langchain_create_agent_structured_response(chat_model, strategy):
    from langchain.agents import create_agent
    from langchain.agents.structured_output import ProviderStrategy, ToolStrategy

    fmt = ToolStrategy(Weather) if strategy == "tool" else ProviderStrategy(Weather)
    agent = create_agent(model=chat_model.bind(max_tokens=60), tools=[get_weather], response_format=fmt)
    state = agent.invoke({"messages": [{"role": "user", "content": PROMPT}]}, {"recursion_limit": 12})
    assert isinstance(state["structured_response"], Weather)


# ---- OpenAI Agents SDK -------------------------------------------------------------------------


def _sdk_agent(live_server, model_id, kind):
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, OpenAIResponsesModel, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=live_server.base_url, api_key="unused", max_retries=0, timeout=300)
    model_class = OpenAIChatCompletionsModel if kind == "chat" else OpenAIResponsesModel
    return Agent(name="weather", instructions="Answer questions about the weather.", tools=[function_tool(get_weather)],
                 output_type=Weather, model=model_class(model=model_id, openai_client=client),
                 model_settings=ModelSettings(temperature=0, max_tokens=60))


@pytest.mark.parametrize("kind", ["chat", "responses"])
def test_agents_sdk_tools_and_output_type(live_server, model_id, kind):
    from agents import Runner

    result = asyncio.run(Runner.run(_sdk_agent(live_server, model_id, kind), ASK, max_turns=4))
    assert isinstance(result.final_output, Weather)


@pytest.mark.parametrize("kind", ["chat", "responses"])
def test_agents_sdk_streaming(live_server, model_id, kind):
    from agents import Runner

    async def run():
        result = Runner.run_streamed(_sdk_agent(live_server, model_id, kind), ASK, max_turns=4)
        kinds = [event.type async for event in result.stream_events()]
        return result, kinds

    result, kinds = asyncio.run(run())
    assert isinstance(result.final_output, Weather) and "raw_response_event" in kinds


# ---- pydantic-ai ---------------------------------------------------------------------------------


@pytest.mark.parametrize("output", ["tool", "native"])
def test_pydantic_ai_output_with_tools(live_server, model_id, output):
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.usage import UsageLimits
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(model_id, provider=OpenAIProvider(base_url=live_server.base_url, api_key="unused"))
    agent = Agent(model, output_type=Weather if output == "tool" else NativeOutput(Weather), tools=[get_weather],
                  model_settings={"temperature": 0, "max_tokens": 60}, retries=2)
    assert isinstance(agent.run_sync(ASK, usage_limits=UsageLimits(request_limit=4)).output, Weather)


# ---- openai: responses.parse -----------------------------------------------------------------------


def test_responses_parse(client, model_id):
    response = client.responses.parse(model=model_id, input="Paris is the capital of France. Give the city and its country.",
                                      text_format=City, temperature=0, max_output_tokens=40)
    assert response.status == "completed" and isinstance(response.output_parsed, City)
    assert response.usage.output_tokens > 0


def test_responses_stream_disconnect_frees_the_slot(live_server, model_id):
    import time

    import httpx

    health = live_server.base_url.removesuffix("/v1") + "/health"
    body = {"model": model_id, "input": "Write a long story.", "max_output_tokens": 400, "stream": True}
    with httpx.stream("POST", live_server.base_url + "/responses", json=body, timeout=60) as response:
        for line in response.iter_lines():
            if line.startswith("data:") and "output_text.delta" in line:
                break  # text is flowing: hang up
    deadline = time.monotonic() + 30
    while httpx.get(health).json()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert httpx.get(health).json()["in_flight"] == 0
