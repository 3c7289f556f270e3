"""A small agent built with the OpenAI Agents SDK, served by constrained_spec: a tool and a typed
final answer (`output_type`). Both model classes work; the only change from using OpenAI is the
client's base_url. Every tool call the model makes carries valid arguments and the final answer
always parses, because the server constrains the reply to "tool calls or JSON of the output type".

    constrained-spec serve --port 8000            # in one terminal
    python examples/agents_sdk_agent.py           # in another (or --base-url ..., --responses)

(The default 135M model often answers this question directly, without calling the tool.)
"""

from __future__ import annotations

import argparse
import asyncio

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI
from pydantic import BaseModel, Field


class Weather(BaseModel):
    city: str = Field(max_length=30)
    sky: str = Field(max_length=30)


@function_tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f'{{"city": "{city[:30]}", "sky": "sunny"}}'


def build_agent(base_url: str, model: str, responses: bool = False) -> Agent:
    set_tracing_disabled(True)  # traces would be sent to OpenAI
    client = AsyncOpenAI(base_url=base_url, api_key="unused")
    model_class = OpenAIResponsesModel if responses else OpenAIChatCompletionsModel
    return Agent(name="weather", instructions="Answer questions about the weather.", tools=[get_weather],
                 output_type=Weather, model=model_class(model=model, openai_client=client),
                 model_settings=ModelSettings(temperature=0, max_tokens=80))


def main(base_url: str = "http://127.0.0.1:8000/v1", responses: bool = False) -> Weather:
    from openai import OpenAI

    model = OpenAI(base_url=base_url, api_key="unused").models.list().data[0].id
    result = asyncio.run(Runner.run(build_agent(base_url, model, responses), "What is the weather in Paris?", max_turns=4))
    for item in result.new_items:
        print(type(item).__name__, getattr(item, "raw_item", None))
    print("final output:", repr(result.final_output))
    return result.final_output


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    parser.add_argument("--responses", action="store_true", help="use the Responses API model class")
    args = parser.parse_args()
    main(args.base_url, args.responses)
