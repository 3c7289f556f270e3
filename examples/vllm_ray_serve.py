"""Many vLLM replicas, each with this project's backend and proposers, behind one Ray Serve route.

Ray Serve spreads the replicas over a Ray cluster's nodes and routes each HTTP request to one of
them; every replica loads our plugin through vLLM's entry point, as a single server does. Run it in
the vLLM environment (`ray[serve]` installed there):

    .venv-vllm/bin/pip install "ray[serve]==2.60.0"
    # a cluster: a head node, then `ray start --address HEAD:6379` on every other node
    # (two "nodes" on one machine here, one core each)
    .venv-vllm/bin/ray start --head --num-cpus 1 --port 6379
    .venv-vllm/bin/ray start --address 127.0.0.1:6379 --num-cpus 1
    .venv-vllm/bin/python examples/vllm_ray_serve.py --address auto --replicas 2 --requests 16
    .venv-vllm/bin/ray stop

The deployment answers POST /v1/chat/completions (messages, response_format json_schema,
temperature, max_tokens, seed: the subset the structured-output path needs). The script deploys it,
sends `--requests` concurrent requests, validates every answer against its schema and prints
tokens/s and which node served each. `--no-speculation` leaves our proposers out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

try:
    from ray import serve
    from starlette.requests import Request
    from starlette.responses import JSONResponse
except ImportError as exc:  # run in a Python without Ray Serve
    sys.exit(f"{exc}: this example needs Ray Serve next to vLLM: .venv-vllm/bin/pip install \"ray[serve]==2.60.0\"")

PERSON = json.loads((Path(__file__).parent / "schemas" / "person.json").read_text())
TEXTS = [
    "Our new colleague Maria Gonzalez (41) moved here from Valencia; she works as a nurse.",
    "Contact: Dr. Kenji Watanabe, 57, a professor of physics in Osaka.",
    "Signed up today: Priya Raman, age 29, software engineer from Chennai.",
    "Jonas Berg, 35, has run the bakery on the corner since 2015.",
]


@serve.deployment(ray_actor_options={"num_cpus": 1})
class StructuredChat:
    """One vLLM engine with our structured-output backend (and, by default, our proposers)."""

    def __init__(self, model: str, speculation: bool) -> None:
        from vllm import AsyncEngineArgs, AsyncLLMEngine
        from vllm.plugins import load_general_plugins

        load_general_plugins()  # registers the backend name before the config is checked
        options: dict = dict(model=model, dtype="float32", max_model_len=2048, enforce_eager=True,
                             structured_outputs_config={"backend": "constrained_spec"})
        if speculation:
            from constrained_spec.vllm.proposer import PROPOSER_PATH

            options["speculative_config"] = {"method": "custom_class", "model": PROPOSER_PATH, "num_speculative_tokens": 4}
        self.engine = AsyncLLMEngine.from_engine_args(AsyncEngineArgs(**options))
        self.served = 0

    async def __call__(self, request: Request) -> dict | JSONResponse:
        import ray
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        try:  # a malformed request is the client's error (400), not a server traceback
            body = await request.json()
            form = body.get("response_format") or {}
            if form.get("type") != "json_schema" or "schema" not in form.get("json_schema", {}):
                raise ValueError("this example serves response_format json_schema only")
            prompt = self.engine.get_tokenizer().apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
            params = SamplingParams(temperature=float(body.get("temperature", 1.0)), max_tokens=int(body.get("max_tokens", 128)),
                                    seed=body.get("seed"), structured_outputs=StructuredOutputsParams(json=form["json_schema"]["schema"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return _bad_request(f"{type(exc).__name__}: {exc}")
        self.served += 1
        request_id = f"{os.getpid()}-{self.served}"
        from vllm.exceptions import VLLMClientError

        final = None
        try:
            async for output in self.engine.generate(prompt, params, request_id):
                final = output
        except VLLMClientError as exc:  # e.g. a schema our backend refuses, by keyword and pointer
            return _bad_request(str(exc))
        completion = final.outputs[0]
        return {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": completion.text}, "finish_reason": completion.finish_reason}],
            "usage": {"prompt_tokens": len(final.prompt_token_ids), "completion_tokens": len(completion.token_ids)},
            "served_by": {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()},
        }


def _bad_request(message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, status_code=400)


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default=None, help="a running Ray cluster ('auto'); default: a local one")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--model", default=None, help="a local HF model folder (default: SmolLM2-135M-Instruct, converted)")
    parser.add_argument("--no-speculation", action="store_true")
    parser.add_argument("--port", type=int, default=8000, help="Serve's HTTP port")
    args = parser.parse_args()

    import jsonschema
    import ray

    from constrained_spec.vllm.runtime import model_folder, vllm_env

    # offline, a small KV cache, caches under ours; each replica's engine finds its own cores
    env = {k: v for k, v in vllm_env(threads=1).items() if k.startswith(("VLLM_", "HF_", "TRANSFORMERS_", "TORCHINDUCTOR_", "TOKENIZERS_"))}
    env.update(VLLM_CPU_OMP_THREADS_BIND="nobind", OMP_NUM_THREADS="1", VLLM_LOGGING_LEVEL=os.environ.get("VLLM_LOGGING_LEVEL", "WARNING"))
    ray.init(address=args.address, runtime_env={"env_vars": env}, log_to_driver=False)  # replica logs: /tmp/ray/session_latest/logs
    print(f"Ray nodes: {len([n for n in ray.nodes() if n['Alive']])}, CPUs: {ray.cluster_resources().get('CPU', 0):g}", file=sys.stderr)
    started = time.perf_counter()
    app = StructuredChat.options(num_replicas=args.replicas).bind(str(model_folder(args.model)), not args.no_speculation)
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    serve.run(app, route_prefix="/v1/chat/completions")
    print(f"{args.replicas} replica(s) ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)

    url = f"http://127.0.0.1:{args.port}/v1/chat/completions"
    bodies = [{"messages": [{"role": "user", "content": f"Extract the person as JSON: {TEXTS[i % len(TEXTS)]}"}],
               "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}},
               "temperature": args.temperature, "max_tokens": args.max_tokens, "seed": i} for i in range(args.requests)]
    post(url, {**bodies[0], "max_tokens": 1})  # compiles the schema on one replica before timing
    refused = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "^(a)\\1$"}}}  # a backreference
    for what, bad in [("without a json_schema", {"messages": bodies[0]["messages"]}),
                      ("with a schema the backend refuses", {**bodies[0], "response_format": refused})]:
        try:  # requests the deployment cannot serve get a 400 with the reason
            post(url, bad)
            print(f"a request {what}: accepted", file=sys.stderr)
        except urllib.error.HTTPError as exc:
            print(f"a request {what}: HTTP {exc.code} {json.loads(exc.read())['error']['message'][:200]}")
    started = time.perf_counter()
    with ThreadPoolExecutor(args.requests) as pool:
        answers = list(pool.map(lambda body: post(url, body), bodies))
    seconds = time.perf_counter() - started
    valid = cut = 0
    for answer in answers:
        try:
            choice = answer["choices"][0]
            if choice["finish_reason"] == "length":  # stopped by max_tokens: a prefix, not checked
                cut += 1
                continue
            jsonschema.validate(json.loads(choice["message"]["content"]), PERSON)
            valid += choice["finish_reason"] == "stop"
        except (ValueError, KeyError, jsonschema.ValidationError):
            print("not valid:", json.dumps(answer)[:300], file=sys.stderr)
    tokens = sum(a.get("usage", {}).get("completion_tokens", 0) for a in answers)
    nodes = Counter(a.get("served_by", {}).get("node", "?")[:8] for a in answers)
    print(f"replicas {args.replicas}, speculation {'off' if args.no_speculation else 'on'}, T = {args.temperature:g}: "
          f"{args.requests} requests in {seconds:.1f} s, {tokens} tokens, {tokens / seconds:.1f} tok/s, "
          f"valid {valid}/{args.requests} ({cut} cut by --max-tokens), served by node {dict(nodes)}")
    serve.shutdown()


if __name__ == "__main__":
    main()
