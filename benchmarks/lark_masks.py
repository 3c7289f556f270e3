"""Per-mask cost of the Lark engine on the bundled grammars, against a model forward and xgrammar.

    python benchmarks/lark_masks.py            # SmolLM2's 49k vocabulary (tokenizer from the cache)
    python benchmarks/lark_masks.py --smoke    # tiny toy vocabulary, seconds; what the test runs

For each bundled grammar a valid text is tokenized and the mask is filled before every token:
"cold" is the first request on a freshly compiled grammar (token tables built on first use),
"warm" a second request on the same compiled grammar (how a server reuses it). Printed ratios
are per-mask p50 / p99 against xgrammar's JSON mask measured in the same run (json row only)
and against a ~55 ms forward of the default model (ENVIRONMENT.md).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from constrained_spec.bitmask import new_bitmask
from constrained_spec.grammar.lark_engine import compile_lark
from constrained_spec.grammar.vocabulary import Vocabulary
from constrained_spec.grammars import load_bundled_grammar

FORWARD_MS = 55.0
TEXTS = {
    "json": '{"name": "Alice", "age": 30, "tags": ["a", "b"], "nested": {"x": [1, 2.5e3, true, null]}}',
    "arithmetic": "1 + 2*x - f(3, y)^2 / (4 - -z) * sqrt(a_1 + 0.5)",
    "sql": "SELECT a, b AS c, count(*) FROM t JOIN u ON t.id = u.id WHERE a > 1 AND b LIKE '%x%' ORDER BY a DESC LIMIT 10;",
    "tool_call": '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}</tool_call>',
}


def _pass(grammar, ids: list[int], vocab_size: int) -> np.ndarray:
    m = grammar.matcher()
    mask = new_bitmask(1, vocab_size)
    times = []
    for tok in ids + [None]:
        t0 = time.perf_counter()
        m.fill_bitmask(mask)
        times.append(time.perf_counter() - t0)
        if tok is not None:
            m.accept_token(tok)
    assert m.is_accepting(), "benchmark text must be accepted"
    return np.array(times) * 1e3


def _xgrammar_json_ms(tokenizer, ids: list[int]) -> np.ndarray | None:
    try:
        import xgrammar as xgr
    except ImportError:
        return None
    info = xgr.TokenizerInfo.from_huggingface(tokenizer)
    compiled = xgr.GrammarCompiler(info).compile_builtin_json_grammar()
    m = xgr.GrammarMatcher(compiled)
    mask = xgr.allocate_token_bitmask(1, info.vocab_size)
    times = []
    for tok in ids:
        t0 = time.perf_counter()
        m.fill_next_token_bitmask(mask)
        times.append(time.perf_counter() - t0)
        m.accept_token(tok)
    return np.array(times) * 1e3


def _stats(ms: np.ndarray) -> str:
    return f"p50 {np.percentile(ms, 50):6.2f}  p99 {np.percentile(ms, 99):7.2f}  max {ms.max():7.2f} ms"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="toy vocabulary, no tokenizer, seconds")
    args = ap.parse_args(argv)
    tokenizer = None
    if args.smoke:
        pieces = sorted({ch for text in TEXTS.values() for ch in text} | {"<tool_call>", '{"', '":', '",', "SELECT", " FROM"})
        vocab = Vocabulary.from_tokens(["<eos>"] + pieces, eos_token_id=0)
        index = {p: i + 1 for i, p in enumerate(pieces)}
        encode = lambda text: [index[ch] for ch in text]  # noqa: E731 - char-level tokenization
        texts = {k: v[:40] if k == "arithmetic" else v for k, v in TEXTS.items()}
    else:
        from transformers import AutoTokenizer

        from constrained_spec.models import cache_dir, load_model

        folder = cache_dir() / "SmolLM2-135M-Instruct-float32"
        tokenizer = AutoTokenizer.from_pretrained(str(folder)) if folder.is_dir() else load_model().tokenizer
        vocab = Vocabulary.from_tokenizer(tokenizer)
        encode = tokenizer.encode
        texts = TEXTS
    print(f"vocabulary: {vocab.size} tokens; model forward ~{FORWARD_MS:.0f} ms")
    for name, text in texts.items():
        if args.smoke and name == "arithmetic":
            text = "1 + 2*x - f(3, y)^2 / (4 - -z)"
        ids = encode(text)
        t0 = time.perf_counter()
        grammar = compile_lark(load_bundled_grammar(name), vocab)
        compile_s = time.perf_counter() - t0
        cold = _pass(grammar, ids, vocab.size)
        warm = _pass(grammar, ids, vocab.size)
        print(f"{name:10s} compile {compile_s:5.2f} s, {len(ids)} tokens")
        print(f"  cold  {_stats(cold)}   p99/forward {np.percentile(cold, 99) / FORWARD_MS:.2f}")
        print(f"  warm  {_stats(warm)}   p99/forward {np.percentile(warm, 99) / FORWARD_MS:.3f}")
        if name == "json" and tokenizer is not None:
            xg = _xgrammar_json_ms(tokenizer, ids)
            if xg is not None:
                print(f"  xgrammar builtin JSON  {_stats(xg)}")
                print(f"  ratio ours/xgrammar p50: cold {np.percentile(cold, 50) / np.percentile(xg, 50):.1f}x,"
                      f" warm {np.percentile(warm, 50) / np.percentile(xg, 50):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
