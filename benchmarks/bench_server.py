"""Load check of the OpenAI-compatible server on 127.0.0.1 only.

    python benchmarks/bench_server.py                 # starts a server on the default model
    python benchmarks/bench_server.py --clients 4 --duration 60 --max-tokens 24
    python benchmarks/bench_server.py --base-url http://127.0.0.1:8000/v1   # an already running server
    python benchmarks/bench_server.py --smoke         # a few seconds, for the test suite

N clients (the real `openai` async client) send requests in a loop for a bounded time: a mix of
JSON-schema outputs, required tool calls and plain text. Every output is checked (JSON against
its schema, tool arguments against the tool's schema). Then one client does the same alone, the
peer measured in the same run: the ratio shows what serving requests together buys over one at
a time. Reports throughput, p50/p99 latency, errors (goal 0) and invalid outputs (goal 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24}},
                   "required": ["city"], "additionalProperties": False}}}
PROMPTS = ["Ada Lovelace was 36.", "Alan Turing died at 41.", "Grace Hopper lived to 85.", "Linus is 54 years old."]


@dataclass
class Phase:
    latencies: list[float] = field(default_factory=list)
    tokens: int = 0
    errors: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def summary(self, name: str) -> dict[str, Any]:
        done = len(self.latencies)
        lat = sorted(self.latencies)
        pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")  # noqa: E731
        return {"phase": name, "requests": done, "req_per_s": done / self.elapsed if self.elapsed else 0.0,
                "tok_per_s": self.tokens / self.elapsed if self.elapsed else 0.0,
                "p50_s": statistics.median(lat) if lat else float("nan"), "p99_s": pick(0.99),
                "errors": len(self.errors), "invalid": len(self.invalid)}


def _request(kind: int, i: int, model: str, max_tokens: int) -> dict[str, Any]:
    prompt = PROMPTS[i % len(PROMPTS)]
    base = {"model": model, "max_tokens": max_tokens, "seed": i}
    if kind == 0:
        return base | {"messages": [{"role": "user", "content": f"Extract the person: {prompt}"}],
                       "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}}
    if kind == 1:
        return base | {"messages": [{"role": "user", "content": f"Weather in city number {i % 7}?"}],
                       "tools": [WEATHER], "tool_choice": "required"}
    return base | {"messages": [{"role": "user", "content": f"Say something about: {prompt}"}]}


def _check(kind: int, completion: Any) -> str | None:
    """None if the output is valid, else why not. Outputs cut by max_tokens are not checked."""
    import jsonschema

    choice = completion.choices[0]
    if choice.finish_reason == "length":
        return None
    try:
        if kind == 0:
            jsonschema.validate(json.loads(choice.message.content), PERSON)
        elif kind == 1:
            if choice.finish_reason != "tool_calls" or not choice.message.tool_calls:
                return f"expected tool_calls, got {choice.finish_reason}"
            for call in choice.message.tool_calls:
                jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])
    except Exception as exc:  # invalid JSON or schema violation: count it
        return f"{type(exc).__name__}: {exc}"
    return None


async def _client_loop(client: Any, model: str, phase: Phase, stop_at: float, offset: int, max_tokens: int) -> None:
    i = offset
    while time.monotonic() < stop_at:
        kind = i % 3
        start = time.monotonic()
        try:
            completion = await client.chat.completions.create(**_request(kind, i, model, max_tokens))
        except Exception as exc:  # counted as an error, the load goes on
            phase.errors.append(f"{type(exc).__name__}: {exc}")
        else:
            phase.latencies.append(time.monotonic() - start)
            phase.tokens += completion.usage.completion_tokens
            problem = _check(kind, completion)
            if problem:
                phase.invalid.append(problem)
        i += 1000


async def _run_phase(base_url: str, clients: int, duration: float, max_tokens: int) -> Phase:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=max(120.0, duration * 4))
    model = (await client.models.list()).data[0].id
    phase = Phase()
    start = time.monotonic()
    await asyncio.gather(*(_client_loop(client, model, phase, start + duration, c, max_tokens) for c in range(clients)))
    phase.elapsed = time.monotonic() - start
    await client.close()
    return phase


def _run(base_url: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    together = asyncio.run(_run_phase(base_url, args.clients, args.duration, args.max_tokens))
    alone = asyncio.run(_run_phase(base_url, 1, args.duration, args.max_tokens))
    rows = [together.summary(f"{args.clients} clients"), alone.summary("1 client")]
    for problem in (together.errors + alone.errors + together.invalid + alone.invalid)[:5]:
        print(f"  problem: {problem}", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per phase")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--base-url", help="an already running server (127.0.0.1 only); default: start one")
    parser.add_argument("--draft", default="auto", help="proposer of the server started here")
    parser.add_argument("--smoke", action="store_true", help="2 clients, 3 s per phase, 4 tokens")
    args = parser.parse_args(argv)
    if args.smoke:
        args.clients, args.duration, args.max_tokens = 2, 3.0, 4
    if args.base_url and not args.base_url.startswith(("http://127.0.0.1", "http://localhost")):
        parser.error("--base-url must point at 127.0.0.1: this load check never leaves the machine")
    if args.base_url:
        rows = _run(args.base_url, args)
    else:
        from constrained_spec.api import Generator
        from constrained_spec.server.app import BackgroundServer, create_app

        with BackgroundServer(create_app(Generator(draft=args.draft, verbose=False))) as server:
            rows = _run(server.base_url, args)
    for row in rows:
        print(f"{row['phase']:>10}: {row['requests']} requests, {row['req_per_s']:.3f} req/s, {row['tok_per_s']:.2f} tok/s, "
              f"p50 {row['p50_s']:.2f} s, p99 {row['p99_s']:.2f} s, errors {row['errors']}, invalid {row['invalid']}")
    ratio = rows[0]["tok_per_s"] / rows[1]["tok_per_s"] if rows[1]["tok_per_s"] else float("nan")
    print(f"throughput ratio, {args.clients} clients together / 1 client alone: {ratio:.2f}x")
    print(json.dumps({"rows": rows, "ratio": ratio}))
    return 0 if all(r["errors"] == 0 and r["invalid"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
