"""A minimal agent loop against the constrained_spec server through the standard `openai` client:
the model calls a tool (with arguments that always validate), gets its result, and answers with a
validated pydantic object.

    constrained-spec serve --port 8000            # in one terminal
    python examples/agent_client.py               # in another (or --base-url ...)

Any agent framework that takes an OpenAI `base_url` works the same way: point it at
http://127.0.0.1:8000/v1 with any api_key (see examples/agents_sdk_agent.py).
"""

from __future__ import annotations

import argparse
import json

from openai import OpenAI
from pydantic import BaseModel, Field

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"],
                       "additionalProperties": False},
    },
}]


def get_weather(city: str) -> dict:
    """The tool itself (a stand-in for a real API)."""
    return {"city": city, "temperature_c": 21, "sky": "sunny"}


class Forecast(BaseModel):
    city: str = Field(max_length=30)
    summary: str = Field(max_length=40)


def main(base_url: str = "http://127.0.0.1:8000/v1") -> dict:
    client = OpenAI(base_url=base_url, api_key="unused")
    model = client.models.list().data[0].id
    messages = [{"role": "user", "content": "What is the weather in Paris right now?"}]

    # 1. The model calls the tool: tool_choice "required" makes the reply a call ("auto", the
    #    default, lets the model choose between a call and text).
    reply = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, tool_choice="required",
                                           temperature=0, max_tokens=60)
    message = reply.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    calls = []
    for call in message.tool_calls or []:
        arguments = json.loads(call.function.arguments)  # always valid for the tool's schema
        result = get_weather(**arguments)
        calls.append({"name": call.function.name, "arguments": arguments, "result": result})
        print(f"tool call: {call.function.name}({call.function.arguments}) -> {result}")
        messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})

    # 2. The final answer, as a validated pydantic object.
    final = client.chat.completions.parse(model=model, messages=messages, response_format=Forecast, temperature=0, max_tokens=50)
    answer = final.choices[0].message.parsed
    print("answer:", answer)
    print("speculation:", final.model_extra.get("constrained_spec"))
    return {"calls": calls, "answer": answer}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    main(parser.parse_args().base_url)
