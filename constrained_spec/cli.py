"""The command line: `constrained-spec` (also `python -m constrained_spec`).

    constrained-spec json --schema person.json --prompt "Extract: Ada Lovelace, 36" | jq .name
    constrained-spec regex '[0-9]{4}-[0-9]{2}-[0-9]{2}' --prompt "When did Apollo 11 land?"
    constrained-spec grammar arithmetic --prompt "Write an expression equal to 12"
    constrained-spec batch requests.jsonl > results.jsonl
    constrained-spec verify

The output alone goes to stdout; progress (model load, grammar compile, a live count while a long
generation runs on a terminal) and stats go to stderr. Input (options, prompt, constraint) is
checked before the model loads. Exit codes: 0 complete and valid, 2 bad input (one `error:` line
on stderr; for `batch`, any line that could not run), 3 output incomplete (max tokens reached
before the constraint was satisfied), 1 anything unexpected.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .engine_setup import RUNNER_NAMES
from .grammar.compiler import BACKENDS as GRAMMAR_BACKENDS

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_ERROR", "EXIT_BAD_INPUT", "EXIT_INCOMPLETE"]

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_INCOMPLETE = 0, 1, 2, 3


class BadInput(ValueError):
    """Raised for input problems found by the CLI itself (exit code 2)."""


def _add_generation_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompt", help="the prompt text; read from stdin when omitted or '-'")
    p.add_argument("--system", help="system prompt (the chat template's default otherwise)")
    p.add_argument("--model", default=None, help="local Hugging Face model folder, or a model id in the local HF cache (default: SmolLM2-135M-Instruct)")
    p.add_argument("--draft", default="auto", help="proposer: auto|forced|ngram|suffix|none or a draft model folder (default auto)")
    p.add_argument("--backend", default="default", choices=GRAMMAR_BACKENDS, help="grammar backend")
    p.add_argument("--open-objects", action="store_true",
                   help="JSON schemas: also generate keys an absent additionalProperties allows (default: declared keys only)")
    p.add_argument("--runner", default="auto", choices=RUNNER_NAMES, help="model runner: auto (static KV cache for Llama models), static, hf (transformers)")
    p.add_argument("--temperature", type=float, default=1.0, help="0 = greedy (default 1.0)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0, help="0 = off")
    p.add_argument("--seed", type=int, default=None, help="makes sampling reproducible")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--stream", action="store_true", help="print the output as it is generated")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress or stats on stderr")
    p.add_argument("--progress", action="store_true", help="show generation progress on stderr even when it is not a terminal")
    _add_device_options(p)


def _add_device_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda or cuda:N (default auto)")
    p.add_argument("--dtype", default="auto", help="auto (float32), float32, bfloat16 or float16 (default auto)")


def _devices(args: argparse.Namespace) -> tuple[Any, Any]:
    """--device / --dtype checked before anything loads (a DeviceError is bad input: exit 2)."""
    from .devices import resolve_device, resolve_dtype

    return resolve_device(args.device), resolve_dtype(args.dtype)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="constrained-spec",
        description="Grammar-constrained generation with exact speculative decoding.",
        epilog="exit codes: 0 valid output, 2 bad input, 3 incomplete output (max tokens), 1 other errors",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"constrained-spec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("json", help="generate JSON (for a schema, a pydantic model, or any object)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--schema", metavar="FILE", help="JSON schema file, or '-' for stdin")
    source.add_argument("--pydantic", metavar="MODULE:CLASS", help="a pydantic model, e.g. myapp.models:Person")
    p.add_argument("--no-schema-in-prompt", action="store_true", help="do not show the schema to the model")
    _add_ref_option(p)
    _add_generation_options(p)
    p = sub.add_parser("regex", help="generate text matching a regular expression")
    p.add_argument("pattern")
    _add_generation_options(p)
    p = sub.add_parser("grammar", help="generate text in a Lark grammar (bundled name or .lark file)")
    p.add_argument("grammar", help="a bundled grammar name, a .lark file, or Lark grammar text")
    _add_generation_options(p)
    p = sub.add_parser("choice", help="pick one of several strings")
    p.add_argument("choices", nargs="+")
    _add_generation_options(p)
    p = sub.add_parser("batch", help="run a JSONL file of requests (one per line; results as JSONL on stdout)")
    p.add_argument("requests", metavar="FILE", help="JSONL file of requests, or '-' for stdin (see constrained_spec/batch.py)")
    p.add_argument("--no-schema-in-prompt", action="store_true", help="default for lines without schema_in_prompt")
    _add_ref_option(p)
    _add_generation_options(p)
    p = sub.add_parser("verify", help="statistical self-check: speculative == plain constrained sampling")
    p.add_argument("--samples", type=int, default=None, help="number of sampled sequences (default 20000; 300 per engine with --engine vllm)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--alpha", type=float, default=0.001, help="significance level (default 0.001)")
    p.add_argument("--engine", choices=("toy", "vllm"), default="toy", help="toy: our engine on a toy model; vllm: vLLM with our plugin vs without speculation")
    p.add_argument("--case", choices=("enum", "free-text"), default="enum", help="with --engine vllm: enum (whole outputs of a short grammar) or free-text (output lengths of a 4-string JSON object)")
    p = sub.add_parser("serve", help="OpenAI-compatible HTTP server (needs the [server] extra)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--model", default=None, help="a local Hugging Face model folder (default: SmolLM2-135M-Instruct)")
    p.add_argument("--draft", default="auto", help="proposer: auto, forced, ngram, suffix, none, or a draft model folder")
    p.add_argument("--max-tokens-limit", type=int, default=None, help="largest max_tokens a request may ask for (default: the model's context)")
    p.add_argument("--max-in-flight", type=int, default=64, help="engine requests in flight before answering 429")
    p.add_argument("--runner", default="auto", choices=RUNNER_NAMES, help="model runner: auto (static KV cache for Llama models), static, hf (transformers)")
    _add_ref_option(p)
    _add_device_options(p)
    return parser


def _add_ref_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ref", action="append", default=[], metavar="URI=FILE",
                   help="a document JSON schemas' $refs name (repeatable; nothing is fetched; JSON Schema meta-schemas are built in)")


def _register_refs(refs: Sequence[str]) -> None:
    """--ref URI=FILE: each file registered as the document `$ref`s to URI reach."""
    from .grammar import register_schema
    from .schemas import load_schema_file

    for ref in refs:
        uri, equals, file = ref.partition("=")
        if not (uri and equals and file):
            raise BadInput(f"--ref takes URI=FILE (the URI the schema's $ref names, a JSON schema file), got {ref!r}")
        register_schema(uri, load_schema_file(file))


def _log(message: str, quiet: bool) -> None:
    if not quiet:
        print(f"[constrained_spec] {message}", file=sys.stderr, flush=True)


def _read_prompt(args: argparse.Namespace) -> str:
    from .inputs import check_text, read_stdin_text

    if args.prompt is not None and args.prompt != "-":
        return check_text(args.prompt, "--prompt")
    if getattr(args, "schema", None) == "-":
        raise BadInput("the schema is read from stdin, so give the prompt with --prompt")
    if sys.stdin.isatty():
        raise BadInput("no prompt: pass --prompt TEXT or pipe the prompt into stdin")
    return read_stdin_text("the prompt on stdin")


def _constraint(args: argparse.Namespace) -> dict[str, Any]:
    from .schemas import import_object, load_schema_file

    if args.command == "json":
        _register_refs(args.ref)
        if args.schema is not None:
            return {"schema": load_schema_file(args.schema)}
        if args.pydantic is not None:
            return {"schema": import_object(args.pydantic)}
        return {"json_object": True}
    if args.command == "regex":
        return {"regex": args.pattern}
    if args.command == "grammar":
        # A file only when it is one (or is named *.lark): Lark text such as `start: /[a-z]+/`
        # contains '/' too.
        path = Path(args.grammar).expanduser() if "\n" not in args.grammar and len(args.grammar) < 4096 else None
        if path is not None and path.is_file():
            try:
                return {"grammar": path.read_text(encoding="utf-8")}
            except UnicodeDecodeError as exc:
                raise BadInput(f"grammar file {args.grammar} is not valid UTF-8: byte at offset {exc.start}") from None
        if args.grammar.endswith(".lark"):
            raise BadInput(f"grammar file not found: {args.grammar}")
        return {"grammar": args.grammar}
    return {"choices": list(args.choices)}


def _format_stats(result: Any) -> str:
    s = result.stats
    parts = [f"{len(result.token_ids)} tokens", f"finish={result.finish_reason}"]
    if s.get("elapsed_s"):
        parts.append(f"{s['elapsed_s']:.2f} s")
    if s.get("tokens_per_second"):
        parts.append(f"{s['tokens_per_second']:.1f} tok/s")
    if s.get("mean_accepted_length") is not None:
        parts.append(f"mean accepted length {s['mean_accepted_length']:.2f}")
    if s.get("acceptance_rate") is not None and s.get("drafted"):
        parts.append(f"acceptance {s['acceptance_rate']:.2f} of {s['drafted']} drafted")
    return ", ".join(parts)


def _make_generator(args: argparse.Namespace) -> Any:
    from . import api

    if args.quiet:  # transformers draws its own weight-loading progress bar
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    device, dtype = _devices(args)
    return api.Generator(args.model, draft=args.draft, backend=args.backend, closed_objects=not args.open_objects, verbose=not args.quiet, runner=args.runner, device=device, dtype=dtype)


def _progress_wanted(args: argparse.Namespace) -> bool:
    return not args.quiet and (args.progress or sys.stderr.isatty())


class _Progress:
    """A live line on stderr while generating: rewritten in place on a terminal, one line a
    second otherwise (when forced with --progress)."""

    def __init__(self, what: str) -> None:
        self.what, self.start, self.shown = what, time.perf_counter(), 0.0
        self.tty = sys.stderr.isatty()

    def update(self, done: str) -> None:
        now = time.perf_counter()
        if now - self.shown < (0.2 if self.tty else 1.0):
            return
        self.shown = now
        line = f"[constrained_spec] {self.what}: {done}, {now - self.start:.1f} s"
        sys.stderr.write(f"\r{line}\x1b[K" if self.tty else line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.tty and self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _run_generation(args: argparse.Namespace) -> int:
    from .api import check_request
    from .sampling import SamplingParams

    quiet = args.quiet
    # Everything that can be checked without the model is checked first: bad input fails fast.
    params = SamplingParams(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed, max_tokens=args.max_tokens)
    _devices(args)  # bad --device / --dtype fail before anything loads
    constraint = _constraint(args)
    prompt = _read_prompt(args)
    check_request(prompt, system_prompt=args.system, **constraint)
    generator = _make_generator(args)
    options = dict(params=params, system_prompt=args.system, **constraint)
    if args.command == "json":
        options["schema_in_prompt"] = not args.no_schema_in_prompt
    if args.stream or _progress_wanted(args):
        stream = generator.stream(prompt, **options)
        progress = None if args.stream else _Progress("generating")
        written = 0
        try:
            for delta in stream:
                written += len(delta)
                if progress is None:
                    sys.stdout.write(delta)
                    sys.stdout.flush()
                else:
                    progress.update(f"{written} characters")
        finally:
            if progress is not None:
                progress.close()
        result = stream.result
        sys.stdout.write(("" if args.stream else result.text) + "\n")
    else:
        result = generator.generate(prompt, **options)
        sys.stdout.write(result.text + "\n")
    sys.stdout.flush()
    _log(_format_stats(result), quiet)
    if result.incomplete:
        print(f"error: the output is incomplete ({result.finish_reason}): raise --max-tokens (now {params.max_tokens})", file=sys.stderr)
        return EXIT_INCOMPLETE
    return EXIT_OK


def _run_batch(args: argparse.Namespace) -> int:
    from .api import check_request
    from .batch import parse_requests, run_requests
    from .inputs import read_stdin_text
    from .sampling import SamplingParams

    defaults = SamplingParams(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed, max_tokens=args.max_tokens)
    _devices(args)  # bad --device / --dtype fail before anything loads
    if args.requests == "-":
        text = read_stdin_text("the requests on stdin")
    else:
        path = Path(args.requests).expanduser()
        if not path.is_file():
            raise BadInput(f"requests file not found: {args.requests}")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise BadInput(f"requests file {args.requests} is not valid UTF-8: byte at offset {exc.start}") from None
    lines = text.splitlines()
    requests, records = parse_requests(lines, defaults, check_request)
    for r in requests:
        if args.no_schema_in_prompt and "schema_in_prompt" not in json.loads(lines[r.line - 1]):
            r.schema_in_prompt = False
    if requests:
        generator = _make_generator(args)
        progress = _Progress("batch") if _progress_wanted(args) else None
        total = len(requests)
        done = run_requests(generator, requests, None if progress is None else lambda n: progress.update(f"{n}/{total} requests done"))
        if progress is not None:
            progress.close()
        records.update(done)
    for line in sorted(records):
        sys.stdout.write(json.dumps(records[line], ensure_ascii=False) + "\n")
    sys.stdout.flush()
    failed = sum("error" in r for r in records.values())
    incomplete = sum(bool(r.get("incomplete")) for r in records.values())
    _log(f"batch: {len(records)} requests, {failed} failed, {incomplete} incomplete", args.quiet)
    if failed:
        print(f"error: {failed} of {len(records)} requests could not run (see their error records)", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_INCOMPLETE if incomplete else EXIT_OK


def _run_verify(args: argparse.Namespace) -> int:
    if args.samples is None:
        args.samples = 300 if args.engine == "vllm" else 20000
    if args.samples < 100:
        raise BadInput(f"--samples must be at least 100, got {args.samples}")
    if not 0 < args.alpha < 1:
        raise BadInput(f"--alpha must be in (0, 1), got {args.alpha}")
    if args.engine == "vllm":  # a subprocess in the vLLM Python: see constrained_spec/vllm/exactness.py
        from .vllm.exactness import run_vllm_check
        from .vllm.runtime import VllmUnavailable

        try:
            report, _ = run_vllm_check(samples=args.samples, seed=args.seed, alpha=args.alpha, case=args.case, log=lambda m: print(m, file=sys.stderr, flush=True))
        except VllmUnavailable as exc:
            raise BadInput(str(exc)) from exc
        print(report.summary())
        return EXIT_OK if report.passed else EXIT_ERROR
    from .selfcheck import run_selfcheck

    report = run_selfcheck(samples=args.samples, seed=args.seed, alpha=args.alpha, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(report.summary())
    return EXIT_OK if report.passed else EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script passes it to sys.exit)."""
    parser = build_parser()
    args = parser.parse_args(argv)  # usage errors exit with code 2 (argparse)
    from .grammar.protocol import GrammarError
    from .inputs import one_line
    from .schemas import OutputValidationError

    try:
        if args.command == "verify":
            return _run_verify(args)
        if args.command == "serve":  # imported lazily: fastapi is an optional extra
            device, dtype = _devices(args)  # bad options are named before anything is imported
            try:
                from .server.app import ServerConfig, serve
            except ModuleNotFoundError as exc:
                print(f"error: serve needs the server extra ({exc.name} is missing): pip install 'constrained_spec[server]'", file=sys.stderr)
                return EXIT_ERROR
            _register_refs(args.ref)
            config = ServerConfig(max_tokens_limit=args.max_tokens_limit, max_in_flight=args.max_in_flight)
            serve(args.host, args.port, args.model, draft=args.draft, config=config, runner=args.runner, device=device, dtype=dtype)
            return EXIT_OK
        if args.command == "batch":
            _register_refs(args.ref)
            return _run_batch(args)
        return _run_generation(args)
    except OutputValidationError as exc:  # a bug, not the user's input
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except (ValueError, GrammarError, FileNotFoundError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RecursionError:  # deep input that a checker did not catch: still one clear line
        print("error: the input is nested too deeply (Python's recursion limit)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
