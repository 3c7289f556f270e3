"""Tool-call selection: the model picks one of several functions and fills its arguments; the
schema (a union of the tools) guarantees a well-formed call.

    python examples/tool_call.py
"""


from typing import Literal, Union

from pydantic import BaseModel, Field

from constrained_spec import Generator


class GetWeather(BaseModel):
    tool: Literal["get_weather"]
    city: str = Field(max_length=30)


class SearchWeb(BaseModel):
    tool: Literal["search_web"]
    query: str = Field(max_length=60)


class SendEmail(BaseModel):
    tool: Literal["send_email"]
    to: str = Field(max_length=40)
    subject: str = Field(max_length=40)


class Call(BaseModel):
    call: Union[GetWeather, SearchWeb, SendEmail]


SYSTEM = (
    "You call tools. get_weather(city) gives the weather in a city. search_web(query) searches "
    "the web. send_email(to, subject) sends an email. Answer with the one tool call that serves the request."
)


def main(generator: Generator | None = None) -> list[BaseModel]:
    generator = generator or Generator()
    requests = ["What's the weather like in Paris?", "Send an email to bob@example.com with the subject 'Meeting moved'."]
    results = generator.generate_batch(requests, schema=Call, system_prompt=SYSTEM, temperature=0, max_tokens=60)
    for request, result in zip(requests, results):
        print(f"{request!r} -> {result.value!r}")
    return [r.value for r in results]


if __name__ == "__main__":
    main()
