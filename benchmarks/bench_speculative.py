"""Speculative constrained decoding vs plain constrained decoding vs transformers + xgrammar.

JSON generation with the default model (SmolLM2-135M-Instruct) on CPU, one request at a time,
for a fixed set of schemas and prompts. For each temperature and each configuration it prints
tokens/s, the mean accepted length (tokens emitted per target forward) and the speed ratio
against our own non-speculative constrained decoding ("none") and against transformers'
`generate` with xgrammar's logits processor, all measured in the same run.

    python benchmarks/bench_speculative.py            # full: 12 requests x T in {0, 1}
    python benchmarks/bench_speculative.py --smoke    # 1 short task, T = 0, none/auto/xgrammar

Each configuration gets a fresh engine per temperature and round and runs the 12 requests (4
schemas x 3 different inputs) in order: the suffix and forced proposers learn from earlier
requests, as in a server, but no request repeats an earlier one. Requests of all configurations
are interleaved (task by task), so load from other processes on the machine hits them alike.
`--rounds N` replicates the whole run N times (fresh engines, new seeds); tok/s is pooled over
rounds and each ratio is the median of the per-round ratios, which a burst of load in one
round cannot move much.

Per step, the table splits our engine's time into the forward (`runner.score`: the model and the
runner's own bookkeeping) and the engine's host work (everything else: grammar masks, proposers,
processing logits, rejection sampling, commits). Goal: host work under 1 ms per step for a single
request. `--runner static|hf` picks the model runner (default: auto, the static-cache runner).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field

import torch

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"}, "email": {"type": "string"}},
    "required": ["name", "age", "city", "email"],
}
ORDER = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "customer": {"type": "string"},
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"product": {"type": "string"}, "quantity": {"type": "integer"}}, "required": ["product", "quantity"]},
        },
        "total": {"type": "number"},
    },
    "required": ["order_id", "customer", "items", "total"],
}
TOOL_CALL = {  # one object shape per tool: the tool name decides the arguments
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "tool": {"const": "get_weather"},
                "arguments": {
                    "type": "object",
                    "properties": {"location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
                    "required": ["location", "unit"],
                },
            },
            "required": ["tool", "arguments"],
        },
        {
            "type": "object",
            "properties": {
                "tool": {"const": "search_web"},
                "arguments": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
            },
            "required": ["tool", "arguments"],
        },
    ]
}
MOVIE = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "year": {"type": "integer"},
        "genre": {"enum": ["science fiction", "drama", "comedy", "action"]},
        "director": {"type": "string"},
        "main_actors": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["title", "year", "genre", "director", "main_actors"],
}
_PERSON = "Extract the person from this text as JSON with keys name, age, city, email.\n\nText: "
_ORDER = "Extract the order as JSON with keys order_id, customer, items (each with product and quantity) and total.\n\n"
_TOOLS = ("You can call the tools get_weather(location, unit) and search_web(query). Answer with a JSON tool call "
          "with keys tool and arguments.\n\nUser: ")
_MOVIE = "Describe a famous {} movie as JSON with keys title, year, genre, director and main_actors."

# Three requests per schema, each with its own input: a server sees the same schemas again and
# again with new data, so the learning proposers (suffix tree, forced spellings) may learn the
# structure from earlier requests, but no request repeats an earlier one.
TASKS = [
    ("person", _PERSON + "Our new colleague Maria Gonzalez (41) moved here from Valencia last spring. "
     "You can reach her at maria.gonzalez@example.org.", PERSON),
    ("order", _ORDER + "Order A-1043 from Tom Becker: 2 x USB-C cable, 1 x laptop stand, 3 x notebook. Total: 58.90 EUR.", ORDER),
    ("tool_call", _TOOLS + "What's the weather like in Berlin right now, in celsius?", TOOL_CALL),
    ("movie", _MOVIE.format("science fiction"), MOVIE),
    ("person2", _PERSON + "Contact: Dr. Kenji Watanabe, 57, lives in Osaka and answers mail at k.watanabe@uni-osaka.jp.", PERSON),
    ("order2", _ORDER + "Invoice B-2210, customer Lisa Novak. Items: 1 x desk lamp, 4 x AA battery pack. Total: 31.50 EUR.", ORDER),
    ("tool_call2", _TOOLS + "Can you search the web for the opening hours of the Louvre museum?", TOOL_CALL),
    ("movie2", _MOVIE.format("action"), MOVIE),
    ("person3", _PERSON + "Signed up today: Priya Raman, age 29, from Chennai; email priya.raman@mailbox.in.", PERSON),
    ("order3", _ORDER + "Order C-0077 placed by Jonas Berg: 3 x coffee mug, 2 x tea towel, 1 x teapot. Total: 64.00 EUR.", ORDER),
    ("tool_call3", _TOOLS + "How cold is it in Toronto today? Please use fahrenheit.", TOOL_CALL),
    ("movie3", _MOVIE.format("comedy"), MOVIE),
]

CONFIGS = ["none", "forced", "ngram", "suffix", "auto"]


@dataclass
class Row:
    config: str
    temperature: float
    tokens: int = 0
    seconds: float = 0.0
    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    forward_s: float = 0.0  # inside runner.score (our engine only)

    vs_none: list[float] = field(default_factory=list)  # per round: tok/s / none's tok/s
    vs_xgrammar: list[float] = field(default_factory=list)

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def add(self, other: "Row") -> None:
        self.tokens += other.tokens
        self.seconds += other.seconds
        self.steps += other.steps
        self.drafted += other.drafted
        self.accepted += other.accepted
        self.forward_s += other.forward_s

    @property
    def mean_accepted(self) -> float:
        return self.tokens / self.steps if self.steps else 0.0

    @property
    def forward_ms(self) -> float:
        return 1000 * self.forward_s / self.steps if self.steps else 0.0

    @property
    def host_ms(self) -> float:
        return 1000 * (self.seconds - self.forward_s) / self.steps if self.steps else 0.0


class TimedRunner:
    """Wraps an engine's runner: adds the seconds spent in `score` (the forward) to `row`."""

    def __init__(self, runner) -> None:
        self.runner, self.row = runner, None

    def __getattr__(self, name: str):
        return getattr(self.runner, name)

    def score(self, batch):
        start = time.perf_counter()
        out = self.runner.score(batch)
        if out and out[0].is_cuda:  # the forward is asynchronous there: count it here, not in the host work
            torch.cuda.synchronize(out[0].device)
        if self.row is not None:
            self.row.forward_s += time.perf_counter() - start
        return out


def prompt_ids(tokenizer, text: str) -> list[int]:
    messages = [{"role": "user", "content": text}]
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])


def run_ours(engine, loaded, vocabulary, task, temperature: float, seed: int, max_tokens: int, row: Row) -> str:
    """One request through our engine; adds its numbers to `row`, returns the text."""
    from constrained_spec.grammar import compile_json_schema
    from constrained_spec.sampling import SamplingParams

    _, text, schema = task
    grammar = compile_json_schema(schema, vocabulary, closed_objects=True)  # declared keys only, like xgrammar strict mode; cached
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=seed)
    ids = prompt_ids(loaded.tokenizer, text)
    if not isinstance(engine.runner, TimedRunner):
        engine.runner = TimedRunner(engine.runner)
    engine.runner.row = row
    start = time.perf_counter()
    (out,) = engine.generate([ids], params, grammar)
    row.seconds += time.perf_counter() - start
    engine.runner.row = None
    row.tokens += len(out.token_ids)
    row.steps += out.stats.steps
    row.drafted += out.stats.drafted
    row.accepted += out.stats.accepted
    return out.text or ""


class XGrammarBaseline:
    """The baseline a user would pick instead: HF generate + xgrammar's logits processor."""

    def __init__(self, loaded) -> None:
        import xgrammar

        self.loaded = loaded
        info = xgrammar.TokenizerInfo.from_huggingface(loaded.tokenizer, vocab_size=loaded.logits_width)
        self.compiler = xgrammar.GrammarCompiler(info)

    def run(self, task, temperature: float, seed: int, max_tokens: int, row: Row) -> str:
        from xgrammar.contrib.hf import LogitsProcessor

        tokenizer, model = self.loaded.tokenizer, self.loaded.model
        _, text, schema = task
        compiled = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))
        ids = torch.tensor([prompt_ids(tokenizer, text)], device=model.device)
        sampling = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if temperature > 0 else dict(do_sample=False)
        torch.manual_seed(seed)
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=max_tokens, logits_processor=[LogitsProcessor(compiled)], pad_token_id=tokenizer.eos_token_id, **sampling)
        row.seconds += time.perf_counter() - start
        new = [t for t in out[0, ids.shape[1] :].tolist() if t != tokenizer.eos_token_id]
        row.tokens += len(new)
        row.steps += len(new) + 1  # one forward per token (EOS included)
        return tokenizer.decode(new)


def print_table(rows: list[Row]) -> None:
    """tok/s pooled over rounds; ratios: the median over rounds of the per-round ratio."""
    print(f"\n{'T':>3}  {'config':<22} {'tokens':>6} {'tok/s':>7} {'mean acc. len':>13} {'draft acc.':>10} {'vs none':>8} {'vs xgr':>7} {'fwd ms/step':>11} {'host ms/step':>12}")
    for r in sorted(rows, key=lambda r: r.temperature):
        acc = f"{r.accepted / r.drafted:.2f}" if r.drafted else "-"
        vs_none = f"{statistics.median(r.vs_none):.2f}x" if r.vs_none else "-"
        vs_xgr = f"{statistics.median(r.vs_xgrammar):.2f}x" if r.vs_xgrammar else "-"
        fwd, host = (f"{r.forward_ms:.1f}", f"{r.host_ms:.2f}") if r.forward_s else ("-", "-")
        print(f"{r.temperature:>3g}  {r.config:<22} {r.tokens:>6} {r.tok_s:>7.1f} {r.mean_accepted:>13.2f} {acc:>10} {vs_none:>8} {vs_xgr:>7} {fwd:>11} {host:>12}")


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="1 short task, T = 0, configs none/auto + xgrammar (for the test)")
    parser.add_argument("--rounds", type=int, default=1, help="independent replications (fresh engines, new seeds); ratios are their median")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--max-draft", type=int, default=8, help="most draft tokens per step")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--configs", nargs="+", default=CONFIGS, help=f"subset of {CONFIGS}")
    parser.add_argument("--tasks", nargs="+", default=[t[0] for t in TASKS], help="subset of the task names")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="model weights (every configuration uses the same)")
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda or cuda:N")
    parser.add_argument("--no-xgrammar", action="store_true", help="skip the transformers + xgrammar baseline")
    parser.add_argument("--show", action="store_true", help="print the generated texts")
    parser.add_argument("--runner", default="auto", choices=["auto", "static", "hf"], help="model runner of our engine (default auto: static cache)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    tasks = [t for t in TASKS if t[0] in args.tasks]
    if len(tasks) != len(set(args.tasks)):
        parser.error(f"unknown tasks in {args.tasks}; choose from {[t[0] for t in TASKS]}")
    configs, temperatures, rounds, max_tokens = args.configs, args.temperatures, args.rounds, args.max_tokens
    if args.smoke:
        tasks, configs, temperatures, rounds, max_tokens = TASKS[2:3], ["none", "auto"], [0.0], 1, 24
    unknown = set(configs) - set(CONFIGS)
    if unknown:
        parser.error(f"unknown configs {sorted(unknown)}; choose from {CONFIGS}")
    if rounds < 1 or max_tokens < 1:
        parser.error(f"--rounds and --max-tokens must be >= 1, got {rounds} and {max_tokens}")

    from constrained_spec.engine_setup import make_vocabulary
    from constrained_spec.models import load_model

    from constrained_spec.devices import DeviceError, resolve_device

    try:
        device = resolve_device(args.device)
    except DeviceError as exc:
        parser.error(str(exc))
    loaded = load_model(dtype=getattr(torch, args.dtype), verbose=False, device=device)
    vocabulary = make_vocabulary(loaded)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"model {loaded.name} ({args.dtype} on {device}), torch threads {torch.get_num_threads()}, load average {load:.1f}, "
          f"{len(tasks)} tasks x {rounds} rounds, max_tokens {max_tokens}, max_draft {args.max_draft}", flush=True)
    from constrained_spec.engine_setup import build_engine

    warm = build_engine(loaded, draft="none", vocabulary=vocabulary, runner=args.runner)
    for task in tasks:  # warm up: grammar caches, kernels
        run_ours(warm, loaded, vocabulary, task, 0.0, 0, 8, Row("warmup", 0.0))
    # Each configuration and temperature once more, untimed: on CUDA their first steps compile
    # Triton kernel variants and capture CUDA graph shapes (seconds), which one timed round of a
    # few requests would otherwise average in (the first GPU check's round 1 ran 40x slower).
    for config in configs:
        engine = build_engine(loaded, draft=config, max_draft_tokens=args.max_draft, vocabulary=vocabulary, runner=args.runner)
        for temperature in temperatures:
            for task in tasks[:2]:
                run_ours(engine, loaded, vocabulary, task, temperature, 0, 24, Row("warmup", temperature))
    xgr = None if args.no_xgrammar else XGrammarBaseline(loaded)
    rows: list[Row] = []
    for temperature in temperatures:
        names = configs + (["transformers+xgrammar"] if xgr is not None else [])
        group = {c: Row(c, temperature) for c in names}
        for r in range(rounds):
            # Each round is an independent replication: fresh engines (cold proposers), new
            # seeds. Requests interleave across configurations, so load from other processes
            # hits every configuration alike; per-round ratios are robust to bursts of it.
            engines = {c: build_engine(loaded, draft=c, max_draft_tokens=args.max_draft, vocabulary=vocabulary, runner=args.runner) for c in configs}
            this = {c: Row(c, temperature) for c in names}
            for i, task in enumerate(tasks):
                seed = 1000 * r + i
                for c in configs:
                    text = run_ours(engines[c], loaded, vocabulary, task, temperature, seed, max_tokens, this[c])
                    if args.show:
                        print(f"  [{c}] {text}")
                if xgr is not None:
                    text = xgr.run(task, temperature, seed, max_tokens, this["transformers+xgrammar"])
                    if args.show:
                        print(f"  [xgrammar] {text}")
            for c, row in this.items():
                group[c].add(row)
                if "none" in this and this["none"].tok_s:
                    group[c].vs_none.append(row.tok_s / this["none"].tok_s)
                if xgr is not None and this["transformers+xgrammar"].tok_s:
                    group[c].vs_xgrammar.append(row.tok_s / this["transformers+xgrammar"].tok_s)
                host = f", host work {row.host_ms:.2f} ms/step next to a {row.forward_ms:.1f} ms forward" if row.forward_s else ""
                print(f"  T={temperature:g} round {r + 1} {c:<22} {row.tok_s:6.1f} tok/s, mean accepted length {row.mean_accepted:.2f}{host}", flush=True)
        rows.extend(group.values())
    print_table(rows)
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
