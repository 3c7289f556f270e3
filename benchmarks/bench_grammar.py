"""JSON-schema engines side by side on a corpus of real-world schemas (SmolLM2 vocabulary).

    python benchmarks/bench_grammar.py                  # whole corpus, every engine
    python benchmarks/bench_grammar.py --stride 3       # every 3rd schema of the corpus
    python benchmarks/bench_grammar.py --engines xgrammar,llguidance --save peers.json   # some engines, rows saved
    python benchmarks/bench_grammar.py --table ours.json peers.json                     # one table from saved rows
    python benchmarks/bench_grammar.py --smoke          # one schema, ours only, 8 tokens (used by the tests)
    python benchmarks/bench_grammar.py --file-order schemastore/   # SchemaStore's fixtures in their own key order
    python benchmarks/bench_grammar.py --maskbench jsonschemabench/maskbench/data --stride 10   # JSONSchemaBench's schemas and tests

Corpus: benchmarks/schema_corpus/ (see its MANIFEST.tsv: 150 SchemaStore schemas with their test
fixtures as valid instances and negative fixtures + mutations as invalid ones, and 15 of our own
function-calling schemas). Every instance is one compact text, keys in schema order;
`--file-order CHECKOUT` (a checkout of SchemaStore/schemastore, or any folder holding its
`src/test/`) writes each valid SchemaStore fixture with its keys in the order of its own file
instead (the same value: kept only where it loads equal to the corpus text).

Engines: ours with the default backend (outlines-core regex path or our Lark engine, whichever
compile() picks) and with the llguidance backend; xgrammar and llguidance themselves (compact
separators; xgrammar with strict_mode=False so an absent additionalProperties means "open", as
in JSON Schema; llguidance with the model's own tokenizer and its default forcing). Each instance
is tokenized by SmolLM2's tokenizer and walked through the engine's mask: accepted iff every
token's bit is set and EOS's bit is set at the end. Reported per engine: schemas compiled (a
refusal or an error counts as not compiled; compile is cut off after --compile-timeout s where
the engine returns to Python), valid instances accepted (% of all valid instances, refused schemas
included), invalid instances accepted (count: must be 0), compile time median / p90 / max over
compiled schemas (wall, and the median in process CPU time, which a busy machine distorts less;
xgrammar may use several threads), and mask fill time p50 / p99 along the valid instances. Timings on a shared
machine are noisy: compare engines within one run (the ratio lines), not across runs.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import signal
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

CORPUS = Path(__file__).parent / "schema_corpus"
SMOKE_SCHEMA = "own-fc-get-weather.json"


def load_corpus(limit: int | None = None, stride: int = 1) -> list[tuple[str, dict]]:
    files = sorted(CORPUS.glob("*.json"))[::stride][:limit]
    return [(f.name, json.loads(f.read_text())) for f in files]


def load_maskbench(folder: Path, limit: int | None = None, stride: int = 1) -> list[tuple[str, dict]]:
    """JSONSchemaBench's mask benchmark data (github.com/guidance-ai/jsonschemabench,
    maskbench/data/*.json: a schema and its tests, each `{"data", "valid"}`): the schemas that
    have tests, every K-th, as corpus entries; each test written compact, keys in its file's order."""
    entries = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        tests = (data.get("tests") or []) if isinstance(data, dict) else []
        tests = [t for t in tests if isinstance(t, dict) and "data" in t and isinstance(t.get("valid"), bool)]  # others judge nothing
        if tests and "schema" in data:
            instances = [{"valid": t["valid"], "text": json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False)} for t in tests]
            entries.append((path.name, {"schema": data["schema"], "instances": instances}))
    return entries[::stride][:limit]


def in_file_order(corpus: list[tuple[str, dict]], checkout: Path) -> int:
    """Rewrite each valid SchemaStore fixture of `corpus` (in place) with its keys in the order
    of its own file under `checkout` (JSON, YAML or TOML); returns how many texts changed."""
    import tomllib

    import yaml  # PyYAML: SchemaStore writes many fixtures as YAML

    changed = 0
    for _, entry in corpus:
        for instance in entry["instances"]:
            path = checkout / instance["origin"]
            if not instance["valid"] or not instance["origin"].startswith("src/test/") or not path.is_file():
                continue
            raw = path.read_text(encoding="utf-8")
            data = json.loads(raw) if path.suffix == ".json" else tomllib.loads(raw) if path.suffix == ".toml" else yaml.safe_load(raw)
            text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str)
            if text != instance["text"] and json.loads(text) == json.loads(instance["text"]):
                instance["text"] = text
                changed += 1
    return changed


class _Timeout(BaseException):
    """BaseException, so no engine's `except Exception` turns the cut-off into a compile error."""


def _with_timeout(seconds: float, fn: Callable[[], Any]) -> Any:
    """Run fn; raise _Timeout if it is still in Python code after `seconds` (Rust calls finish)."""

    def fire(*_: object) -> None:
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def load_vocabulary() -> tuple[Any, Any]:
    """SmolLM2's tokenizer (from the converted model's cache, else through a model load) and our Vocabulary of it."""
    from transformers import AutoTokenizer

    from constrained_spec.grammar import Vocabulary
    from constrained_spec.models import DEFAULT_MODEL, cache_dir, load_model

    folder = cache_dir() / f"{DEFAULT_MODEL}-float32"
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True) if (folder / "tokenizer.json").is_file() else load_model(verbose=False).tokenizer
    return tokenizer, Vocabulary.from_tokenizer(tokenizer)


def _bit(mask: torch.Tensor, token: int) -> bool:
    return bool((int(mask[0, token // 32]) >> (token % 32)) & 1)


# ---- engines: compile(schema) -> state; walk(state, ids) -> (accepted, mask fill seconds) ------


class Ours:
    def __init__(self, backend: str, vocab) -> None:
        from constrained_spec.bitmask import new_bitmask

        self.name = f"ours ({backend})"
        self.backend, self.vocab = backend, vocab
        self.mask = new_bitmask(1, vocab.size)
        self.path_of: dict[int, str] = {}

    def compile(self, schema: dict) -> Any:
        from constrained_spec.grammar import compile_json_schema
        from constrained_spec.grammar.compiler import clear_cache

        clear_cache()
        return compile_json_schema(schema, self.vocab, backend=self.backend)

    def path(self, compiled: Any) -> str:
        from constrained_spec.grammar.lark_engine import LarkGrammar
        from constrained_spec.grammar.regex_backend import CompiledRegex

        while hasattr(compiled, "inner"):  # under the uniqueItems / repeated-keys wrappers
            compiled = compiled.inner
        return "regex" if isinstance(compiled, CompiledRegex) else "Lark" if isinstance(compiled, LarkGrammar) else "llguidance"

    def walk(self, compiled: Any, ids: list[int]) -> tuple[bool, list[float]]:
        from constrained_spec.grammar import GrammarError

        matcher, times = compiled.matcher(), []
        try:
            for token in ids:
                start = time.perf_counter()
                matcher.fill_bitmask(self.mask)
                times.append(time.perf_counter() - start)
                if not _bit(self.mask, token):
                    return False, times
                matcher.accept_token(token)
            matcher.fill_bitmask(self.mask)
        except GrammarError:  # a mask the engine could not compute (raised, not a silent EOS): not accepted
            return False, times
        return _bit(self.mask, self.vocab.eos_token_id), times


class XGrammar:
    name = "xgrammar"

    def __init__(self, tokenizer, vocab) -> None:
        import xgrammar as xgr

        self.xgr, self.eos = xgr, vocab.eos_token_id
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab.size)
        self.compiler = xgr.GrammarCompiler(info, cache_enabled=False)
        self.mask = xgr.allocate_token_bitmask(1, info.vocab_size)
        self.version = importlib.metadata.version("xgrammar")

    def compile(self, schema: dict) -> Any:
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"), strict_mode=False)

    def path(self, compiled: Any) -> str:
        return self.name

    def walk(self, compiled: Any, ids: list[int]) -> tuple[bool, list[float]]:
        matcher, times = self.xgr.GrammarMatcher(compiled), []
        for token in ids:
            start = time.perf_counter()
            matcher.fill_next_token_bitmask(self.mask)
            times.append(time.perf_counter() - start)
            if not _bit(self.mask, token) or not matcher.accept_token(token):
                return False, times
        matcher.fill_next_token_bitmask(self.mask)
        return _bit(self.mask, self.eos), times


class LLGuidance:
    name = "llguidance"

    def __init__(self, tokenizer, vocab) -> None:
        import llguidance
        import llguidance.hf
        from llguidance.torch import allocate_token_bitmask, fill_next_token_bitmask

        self.llg, self.fill, self.eos = llguidance, fill_next_token_bitmask, vocab.eos_token_id
        self.tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab.size)
        self.mask = allocate_token_bitmask(1, vocab.size)
        self.version = importlib.metadata.version("llguidance")

    def compile(self, schema: dict) -> Any:
        options = {"item_separator": ",", "key_separator": ":", "whitespace_flexible": False}
        grammar = self.llg.LLMatcher.grammar_from_json_schema(schema, overrides=options)
        matcher = self.llg.LLMatcher(self.tokenizer, grammar, log_level=0)  # compiles the grammar
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        return grammar

    def path(self, compiled: Any) -> str:
        return self.name

    def walk(self, compiled: Any, ids: list[int]) -> tuple[bool, list[float]]:
        matcher, times = self.llg.LLMatcher(self.tokenizer, compiled, log_level=0), []
        for token in ids:
            if matcher.is_stopped():
                return False, times
            start = time.perf_counter()
            self.fill(matcher, self.mask, 0)
            times.append(time.perf_counter() - start)
            if not _bit(self.mask, token) or not matcher.consume_token(token):
                return False, times
        if matcher.is_stopped():
            return matcher.is_accepting(), times
        self.fill(matcher, self.mask, 0)
        return _bit(self.mask, self.eos), times


# ---- the run ------------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def measure(engine, corpus: list[tuple[str, dict]], encode: Callable[[str], list[int] | None], compile_timeout: float, max_tokens: int | None,
            progress: bool = False, again: bool = False) -> dict:
    compiled_n, compile_s, compile_cpu, masks, masks_by_path, masks_again = 0, [], [], [], {}, []
    valid_ok = valid_n = invalid_ok = invalid_n = 0
    failures: list[str] = []
    for name, entry in corpus:
        instances = [(i["valid"], encode(i["text"])) for i in entry["instances"]]
        instances = [(v, ids) for v, ids in instances if ids is not None]
        valid_n += sum(v for v, _ in instances)
        invalid_n += sum(not v for v, _ in instances)
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            compiled = _with_timeout(compile_timeout, lambda: engine.compile(entry["schema"]))
        except (Exception, _Timeout) as exc:  # a refusal, an engine error or a timeout: not compiled
            reason = f"timeout after {compile_timeout:g} s" if isinstance(exc, _Timeout) else str(exc).splitlines()[0][:100] if str(exc) else ""
            failures.append(f"{name}: {type(exc).__name__}: {reason}")
            continue
        compile_s.append(time.perf_counter() - start)
        compile_cpu.append(time.process_time() - start_cpu)
        compiled_n += 1
        if progress:
            print(f"    {engine.name}: {name} compiled in {compile_s[-1] * 1e3:.0f} ms", flush=True)
        path = engine.path(compiled)
        for valid, ids in instances:
            ids = ids[:max_tokens] if max_tokens else ids
            accepted, times = engine.walk(compiled, ids)
            if valid:
                valid_ok += accepted
                masks += times
                masks_by_path.setdefault(path, []).extend(times)
                if again:  # the same walk on a fresh matcher: what re-serving a schema meets
                    masks_again += engine.walk(compiled, ids)[1]
                if not accepted:
                    failures.append(f"{name}: valid instance refused")
            else:
                invalid_ok += accepted
                if accepted:
                    failures.append(f"{name}: INVALID instance accepted")
    return {
        "backend": engine.name, "schemas": len(corpus), "compiled": compiled_n,
        "valid_accepted": valid_ok, "valid_total": valid_n, "invalid_accepted": invalid_ok, "invalid_total": invalid_n,
        "compile_median_ms": statistics.median(compile_s) * 1e3 if compile_s else float("nan"),
        "compile_p90_ms": _percentile(compile_s, 0.9) * 1e3, "compile_max_ms": max(compile_s, default=float("nan")) * 1e3,
        "compile_cpu_median_ms": statistics.median(compile_cpu) * 1e3 if compile_cpu else float("nan"),
        "p50_ms": _percentile(masks, 0.5) * 1e3, "p99_ms": _percentile(masks, 0.99) * 1e3,
        "by_path": {p: (len(t), _percentile(t, 0.5) * 1e6, _percentile(t, 0.99) * 1e6) for p, t in masks_by_path.items()},
        "again": (len(masks_again), _percentile(masks_again, 0.5) * 1e6, _percentile(masks_again, 0.99) * 1e6) if masks_again else None,
        "failures": failures,
    }  # fmt: skip


def print_table(rows: list[dict]) -> None:
    print("| engine | schemas compiled | valid accepted | invalid accepted | compile median / p90 / max (wall) | compile median (CPU) | mask p50 / p99 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['backend']} | {r['compiled']} / {r['schemas']} ({100 * r['compiled'] / r['schemas']:.0f}%) "
              f"| {100 * r['valid_accepted'] / max(1, r['valid_total']):.1f}% ({r['valid_accepted']}/{r['valid_total']}) "
              f"| {r['invalid_accepted']} / {r['invalid_total']} "
              f"| {r['compile_median_ms']:.1f} / {r['compile_p90_ms']:.0f} / {r['compile_max_ms']:.0f} ms "
              f"| {r.get('compile_cpu_median_ms', float('nan')):.1f} ms "
              f"| {r['p50_ms'] * 1e3:.1f} / {r['p99_ms'] * 1e3:.0f} us |")  # fmt: skip
    for r in rows:
        for path, (n, p50, p99) in sorted(r["by_path"].items()):
            if path != r["backend"]:
                print(f"  {r['backend']}, {path} path: {n} masks, mask p50 {p50:.1f} us, p99 {p99:.0f} us")
        if r.get("again"):
            n, p50, p99 = r["again"]
            print(f"  {r['backend']}, each valid instance walked again: {n} masks, mask p50 {p50:.1f} us, p99 {p99:.0f} us")
    peers = {r["backend"]: r for r in rows}
    for ours in (r for r in rows if r["backend"].startswith("ours")):
        for peer in ("xgrammar", "llguidance"):
            if peer in peers:
                p = peers[peer]
                print(f"  ratio {ours['backend']} / {peer} (>1: ours slower): compile median x{ours['compile_median_ms'] / p['compile_median_ms']:.2f} "
                      f"(CPU x{ours.get('compile_cpu_median_ms', float('nan')) / p.get('compile_cpu_median_ms', float('nan')):.2f}), "
                      f"mask p50 x{ours['p50_ms'] / p['p50_ms']:.2f}, p99 x{ours['p99_ms'] / p['p99_ms']:.2f}")  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one schema, ours only, first 8 tokens of each instance")
    parser.add_argument("--limit", type=int, default=None, help="only the first N schemas of the corpus")
    parser.add_argument("--compile-timeout", type=float, default=30.0, help="seconds before a compile counts as failed")
    parser.add_argument("--stride", type=int, default=1, help="every K-th schema of the corpus")
    parser.add_argument("--names", default=None, help="only these schemas (comma-separated file names of the corpus)")
    parser.add_argument("--engines", default="ours-default,ours-native,xgrammar,llguidance", help="comma-separated subset")
    parser.add_argument("--save", type=Path, default=None, help="write the rows as JSON")
    parser.add_argument("--table", type=Path, nargs="+", default=None, help="print one table from rows saved by --save")
    parser.add_argument("--failures", action="store_true", help="progress per schema; list every schema an engine did not compile or got wrong")
    parser.add_argument("--file-order", type=Path, default=None, metavar="CHECKOUT",
                        help="a SchemaStore checkout: valid fixtures with their keys in their files' order")
    parser.add_argument("--again", action="store_true",
                        help="walk each valid instance a second time on a fresh matcher of the same grammar and report those masks too")
    parser.add_argument("--maskbench", type=Path, default=None, metavar="DATA",
                        help="instead of our corpus: JSONSchemaBench's maskbench/data folder (schemas with valid and invalid tests)")
    args = parser.parse_args(argv)
    if (args.limit is not None and args.limit < 1) or args.stride < 1:
        parser.error("--limit and --stride must be at least 1")
    if args.table:
        rows = [row for path in args.table for row in json.loads(path.read_text())]
        print_table(rows)
        return rows

    tokenizer, vocab = load_vocabulary()

    def encode(text: str) -> list[int] | None:
        ids = tokenizer.encode(text, add_special_tokens=False)
        pieces = [vocab.token_bytes[i] for i in ids]
        return ids if None not in pieces and b"".join(pieces) == text.encode() else None

    if args.smoke:
        corpus = [(SMOKE_SCHEMA, json.loads((CORPUS / SMOKE_SCHEMA).read_text()))]
        engines = [Ours("default", vocab)]
    else:
        if args.maskbench is not None and not args.maskbench.is_dir():
            parser.error(f"--maskbench: {args.maskbench} is not a folder (a checkout's maskbench/data)")
        corpus = load_maskbench(args.maskbench, args.limit, args.stride) if args.maskbench else load_corpus(args.limit, args.stride)
        if args.names is not None:
            wanted = args.names.split(",")
            missing = sorted(set(wanted) - {name for name, _ in corpus})
            if missing:
                parser.error(f"--names: not in the corpus: {', '.join(missing)}")
            corpus = [(name, entry) for name, entry in corpus if name in wanted]
        if args.file_order is not None:
            if not (args.file_order / "src" / "test").is_dir():
                parser.error(f"--file-order: {args.file_order} holds no src/test/ (a SchemaStore checkout)")
            print(f"{in_file_order(corpus, args.file_order)} valid fixtures written in their files' key order")
        makers = {"ours-default": lambda: Ours("default", vocab), "ours-native": lambda: Ours("native", vocab),
                  "ours-llguidance": lambda: Ours("llguidance", vocab),
                  "xgrammar": lambda: XGrammar(tokenizer, vocab), "llguidance": lambda: LLGuidance(tokenizer, vocab)}  # fmt: skip
        engines = []
        for name in args.engines.split(","):
            if name not in makers:
                parser.error(f"unknown engine {name!r}; choose from {', '.join(makers)}")
            try:
                engines.append(makers[name]())
            except ImportError as exc:
                print(f"{name}: skipped ({exc})")
    print(f"{len(corpus)} schemas, {sum(len(e['instances']) for _, e in corpus)} instances; SmolLM2 tokenizer")
    rows = []
    for engine in engines:
        row = measure(engine, corpus, encode, args.compile_timeout, 8 if args.smoke else None, progress=args.failures, again=args.again)
        print(f"  {row['backend']}: compiled {row['compiled']}/{row['schemas']}, mask p50 {row['p50_ms'] * 1e3:.1f} us, p99 {row['p99_ms'] * 1e3:.0f} us", flush=True)
        if args.failures:
            for line in row["failures"]:
                print(f"    {line}")
        rows.append(row)
    versions = ", ".join(f"{e.name} {e.version}" for e in engines if hasattr(e, "version"))
    print(f"\nversions: {versions or 'no peers'}")
    print_table(rows)
    if args.save:
        args.save.write_text(json.dumps(rows))
    return rows


if __name__ == "__main__":
    main()
