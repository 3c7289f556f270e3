"""Speculative constrained decoding vs plain constrained decoding vs transformers + xgrammar.

JSON generation with the default model (SmolLM2-135M-Instruct) on CPU, one request at a time,
for a fixed set of schemas and prompts. For each temperature and each configuration it prints
tokens/s, the mean accepted length (tokens emitted per target forward) and the speed ratio
against our own non-speculative constrained decoding ("none") and against transformers'
`generate` with xgrammar's logits processor, all measured in the same run.

    python benchmarks/bench_speculative.py            # full: 4 tasks x 2 rounds x T in {0, 1}
    python benchmarks/bench_speculative.py --smoke    # 1 short task, T = 0, none/auto/xgrammar

Each configuration gets a fresh engine and runs the task list `--rounds` times: the suffix
proposer learns from earlier outputs, so round 1 is its cold start; the table covers all rounds.
Other processes on the machine change absolute numbers; ratios within one run are what count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass

import torch

TASKS = [
    (
        "person",
        "Extract the person from this text as JSON with keys name, age, city, email.\n\n"
        "Text: Our new colleague Maria Gonzalez (41) moved here from Valencia last spring. "
        "You can reach her at maria.gonzalez@example.org.",
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"}, "email": {"type": "string"}},
            "required": ["name", "age", "city", "email"],
        },
    ),
    (
        "order",
        "Extract the order as JSON with keys order_id, customer, items (each with product and quantity) and total.\n\n"
        "Order A-1043 from Tom Becker: 2 x USB-C cable, 1 x laptop stand, 3 x notebook. Total: 58.90 EUR.",
        {
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
        },
    ),
    (
        "tool_call",
        "You can call the tools get_weather(location, unit) and search_web(query). Answer with a JSON tool call "
        "with keys tool and arguments.\n\nUser: What's the weather like in Berlin right now, in celsius?",
        {
            "type": "object",
            "properties": {
                "tool": {"enum": ["get_weather", "search_web"]},
                "arguments": {
                    "type": "object",
                    "properties": {"location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
                    "required": ["location", "unit"],
                },
            },
            "required": ["tool", "arguments"],
        },
    ),
    (
        "movie",
        "Describe a famous science fiction movie as JSON with keys title, year, genre, director and main_actors.",
        {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "year": {"type": "integer"},
                "genre": {"enum": ["science fiction", "drama", "comedy", "action"]},
                "director": {"type": "string"},
                "main_actors": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            },
            "required": ["title", "year", "genre", "director", "main_actors"],
        },
    ),
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

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    @property
    def mean_accepted(self) -> float:
        return self.tokens / self.steps if self.steps else 0.0


def prompt_ids(tokenizer, text: str) -> list[int]:
    messages = [{"role": "user", "content": text}]
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])


def run_ours(loaded, vocabulary, config: str, tasks, temperature: float, rounds: int, max_tokens: int, max_draft: int) -> tuple[Row, list[str]]:
    from constrained_spec.engine_setup import build_engine
    from constrained_spec.grammar import compile_json_schema
    from constrained_spec.sampling import SamplingParams

    engine = build_engine(loaded, draft=config, max_draft_tokens=max_draft, vocabulary=vocabulary)
    row, texts = Row(config, temperature), []
    for r in range(rounds):
        for i, (_, text, schema) in enumerate(tasks):
            grammar = compile_json_schema(schema, vocabulary)  # cached after the first call
            params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=1000 * r + i)
            ids = prompt_ids(loaded.tokenizer, text)
            start = time.perf_counter()
            (out,) = engine.generate([ids], params, grammar)
            row.seconds += time.perf_counter() - start
            row.tokens += len(out.token_ids)
            row.steps += out.stats.steps
            row.drafted += out.stats.drafted
            row.accepted += out.stats.accepted
            texts.append(out.text or "")
    return row, texts


def run_xgrammar(loaded, tasks, temperature: float, rounds: int, max_tokens: int) -> tuple[Row, list[str]]:
    """The baseline a user would pick instead: HF generate + xgrammar's logits processor."""
    import xgrammar
    from xgrammar.contrib.hf import LogitsProcessor

    tokenizer, model = loaded.tokenizer, loaded.model
    info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=loaded.logits_width)
    compiler = xgrammar.GrammarCompiler(info)
    row, texts = Row("transformers+xgrammar", temperature), []
    for r in range(rounds):
        for i, (_, text, schema) in enumerate(tasks):
            compiled = compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))
            ids = torch.tensor([prompt_ids(tokenizer, text)])
            sampling = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if temperature > 0 else dict(do_sample=False)
            torch.manual_seed(1000 * r + i)
            start = time.perf_counter()
            with torch.no_grad():
                out = model.generate(
                    ids, max_new_tokens=max_tokens, logits_processor=[LogitsProcessor(compiled)], pad_token_id=tokenizer.eos_token_id, **sampling
                )
            row.seconds += time.perf_counter() - start
            new = out[0, ids.shape[1] :].tolist()
            new = [t for t in new if t != tokenizer.eos_token_id]
            row.tokens += len(new)
            row.steps += len(new) + 1  # one forward per token (EOS included)
            texts.append(tokenizer.decode(new))
    return row, texts


def print_table(rows: list[Row]) -> None:
    print(f"\n{'T':>3}  {'config':<22} {'tokens':>6} {'tok/s':>7} {'mean acc. len':>13} {'draft acc.':>10} {'vs none':>8} {'vs xgr':>7}")
    for temperature in sorted({r.temperature for r in rows}):
        group = [r for r in rows if r.temperature == temperature]
        base = next((r for r in group if r.config == "none"), None)
        xgr = next((r for r in group if r.config == "transformers+xgrammar"), None)
        for r in group:
            acc = f"{r.accepted / r.drafted:.2f}" if r.drafted else "-"
            vs_none = f"{r.tok_s / base.tok_s:.2f}x" if base and base.tok_s else "-"
            vs_xgr = f"{r.tok_s / xgr.tok_s:.2f}x" if xgr and xgr.tok_s else "-"
            print(f"{temperature:>3g}  {r.config:<22} {r.tokens:>6} {r.tok_s:>7.1f} {r.mean_accepted:>13.2f} {acc:>10} {vs_none:>8} {vs_xgr:>7}")


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="1 short task, T = 0, configs none/auto + xgrammar (for the test)")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the task list per configuration")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--max-draft", type=int, default=8, help="most draft tokens per step")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--configs", nargs="+", default=CONFIGS, help=f"subset of {CONFIGS}")
    parser.add_argument("--no-xgrammar", action="store_true", help="skip the transformers + xgrammar baseline")
    parser.add_argument("--show", action="store_true", help="print the generated texts")
    args = parser.parse_args(argv)
    tasks, configs, temperatures, rounds, max_tokens = TASKS, args.configs, args.temperatures, args.rounds, args.max_tokens
    if args.smoke:
        tasks, configs, temperatures, rounds, max_tokens = TASKS[2:3], ["none", "auto"], [0.0], 1, 24
    unknown = set(configs) - set(CONFIGS)
    if unknown:
        parser.error(f"unknown configs {sorted(unknown)}; choose from {CONFIGS}")

    from constrained_spec.engine_setup import make_vocabulary
    from constrained_spec.models import load_model

    loaded = load_model(verbose=False)
    vocabulary = make_vocabulary(loaded)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"model {loaded.name}, torch threads {torch.get_num_threads()}, load average {load:.1f}, "
          f"{len(tasks)} tasks x {rounds} rounds, max_tokens {max_tokens}, max_draft {args.max_draft}", flush=True)
    run_ours(loaded, vocabulary, "none", tasks, 0.0, 1, 8, args.max_draft)  # warm up: grammar caches, kernels
    rows: list[Row] = []
    for temperature in temperatures:
        for config in configs:
            row, texts = run_ours(loaded, vocabulary, config, tasks, temperature, rounds, max_tokens, args.max_draft)
            rows.append(row)
            print(f"  T={temperature:g} {config:<8} {row.tok_s:6.1f} tok/s, mean accepted length {row.mean_accepted:.2f}", flush=True)
            if args.show:
                print("    " + "\n    ".join(texts))
        if not args.no_xgrammar:
            row, texts = run_xgrammar(loaded, tasks, temperature, rounds, max_tokens)
            rows.append(row)
            print(f"  T={temperature:g} transformers+xgrammar {row.tok_s:6.1f} tok/s", flush=True)
            if args.show:
                print("    " + "\n    ".join(texts))
    print_table(rows)
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
