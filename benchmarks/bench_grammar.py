"""Grammar backends side by side: compile time and per-token mask time on the SmolLM2 vocabulary.

    python benchmarks/bench_grammar.py            # full run (a few minutes on 2 cores)
    python benchmarks/bench_grammar.py --smoke    # one schema, a few tokens (used by the tests)

For each JSON schema, a fixed valid instance is tokenized with the real tokenizer (the "generated
path"); every backend fills a mask at each step and advances along it. Peers (xgrammar,
llguidance, outlines-core's own Guide) are measured in the same run when installed. Prints
p50/p99/max per-token mask time and the ratio of ours against each peer. Every backend must walk
the whole path: a rejected token raises (xgrammar's accept_token reports it by returning False;
it gets our compact separators). "compile" includes outlines-core's own Index build.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch

SCHEMAS = {
    "person": ({"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer", "minimum": 0, "maximum": 150}, "email": {"type": "string", "format": "email"}}, "required": ["name", "age"]},
               {"name": "Ada Lovelace", "age": 36, "email": "ada@example.org"}),
    "order": ({"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}, "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}, "required": ["sku", "qty"]}, "maxItems": 5}, "status": {"enum": ["new", "paid", "shipped"]}}, "required": ["id", "items", "status"]},
              {"id": "0b9f3c2e-1d4a-4f5b-9c8d-7e6f5a4b3c2d", "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-22", "qty": 1}], "status": "paid"}),
}


class _Clock:
    """Wall and process-CPU seconds of a block (CPU time is what a busy shared machine distorts least)."""

    def __enter__(self) -> "_Clock":
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def _times(fill: Callable[[], None], advance: Callable[[int], None], path: list[int]) -> list[float]:
    out = []
    for token in path:
        start = time.perf_counter()
        fill()
        out.append(time.perf_counter() - start)
        advance(token)
    return out


def ours(backend: str, schema: dict, vocab, path: list[int]) -> tuple[float, list[float]]:
    from constrained_spec.bitmask import new_bitmask
    from constrained_spec.grammar import compile_json_schema
    from constrained_spec.grammar.compiler import clear_cache

    clear_cache()
    with _Clock() as clock:
        matcher = compile_json_schema(schema, vocab, backend=backend).matcher()
    bm = new_bitmask(1, vocab.size)
    return clock, _times(lambda: matcher.fill_bitmask(bm), matcher.accept_token, path)


def xgrammar_peer(schema: dict, tokenizer, path: list[int]) -> tuple[float, list[float]]:
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer))
    with _Clock() as clock:  # our compact form: no spaces
        compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))
    matcher = xgr.GrammarMatcher(compiled)
    bm = xgr.allocate_token_bitmask(1, info.vocab_size)

    def advance(token: int) -> None:  # xgrammar reports a rejected token by returning False
        if not matcher.accept_token(token):
            raise RuntimeError(f"xgrammar rejected token {token} on the valid path")

    times = _times(lambda: matcher.fill_next_token_bitmask(bm), advance, path)
    if not matcher.is_terminated():
        raise RuntimeError("xgrammar did not terminate after EOS at the end of the path")
    return clock, times


def outlines_peer(schema: dict, vocab, path: list[int]) -> tuple[float, list[float]]:
    import outlines_core

    from constrained_spec.grammar.regex_backend import _outlines_vocabulary

    with _Clock() as clock:
        regex = outlines_core.json_schema.build_regex_from_schema(json.dumps(schema), r"")
        guide = outlines_core.Guide(outlines_core.Index(regex, _outlines_vocabulary(vocab)))
    mask = torch.zeros((vocab.size + 31) // 32, dtype=torch.int32)
    fill = lambda: guide.write_mask_into(mask.data_ptr(), mask.numel(), mask.element_size())  # noqa: E731
    return clock, _times(fill, lambda t: guide.advance(t), path)


def _row(name: str, clock: _Clock, times: list[float]) -> dict:
    ms = sorted(t * 1e3 for t in times)
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    row = {"backend": name, "compile_ms": clock.wall * 1e3, "compile_cpu_ms": clock.cpu * 1e3, "p50_ms": statistics.median(ms), "p99_ms": p99, "max_ms": ms[-1]}
    print(f"  {name:<22} compile {row['compile_ms']:8.1f} ms (cpu {row['compile_cpu_ms']:8.1f})   mask p50 {row['p50_ms']:7.3f}  p99 {row['p99_ms']:7.3f}  max {row['max_ms']:7.3f} ms")
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one schema, first 8 tokens, no peers")
    args = parser.parse_args(argv)

    from constrained_spec.grammar import Vocabulary
    from constrained_spec.models import load_model

    tokenizer = load_model(verbose=False).tokenizer
    vocab = Vocabulary.from_tokenizer(tokenizer)
    rows = []
    for name, (schema, instance) in list(SCHEMAS.items())[: 1 if args.smoke else None]:
        path = tokenizer.encode(json.dumps(instance, separators=(",", ":"))) + [vocab.eos_token_id]
        path = path[:8] if args.smoke else path
        print(f"schema {name!r}: {len(path)} tokens along the path")
        runs = [("ours (outlines-core)", lambda: ours("default", schema, vocab, path))]
        if not args.smoke:
            runs += [("ours (llguidance)", lambda: ours("llguidance", schema, vocab, path)),
                     ("xgrammar", lambda: xgrammar_peer(schema, tokenizer, path)),
                     ("outlines-core Guide", lambda: outlines_peer(schema, vocab, path[:-1]))]
        results = {}
        for label, run in runs:
            try:
                results[label] = _row(label, *run())
            except ImportError as exc:
                print(f"  {label:<22} skipped: {exc}")
        base = results["ours (outlines-core)"]
        for label, row in results.items():
            if label != "ours (outlines-core)":
                print(f"  time ratio ours/{label} (>1: ours slower): p50 x{base['p50_ms'] / row['p50_ms']:.2f}  p99 x{base['p99_ms'] / row['p99_ms']:.2f}")
        rows += [dict(r, schema=name) for r in results.values()]
    return rows


if __name__ == "__main__":
    main()
