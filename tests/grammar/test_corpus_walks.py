"""Seeded random walks over every schema of the benchmark corpus that compiles (SmolLM2's
vocabulary, the default backend): no state without an allowed token (a sampler's dead end), and
every walk that ends (EOS taken where allowed, with probability 1/2) is valid per jsonschema with
format checks. One walk of up to 96 tokens a schema, tokens drawn uniformly among the allowed
ones or (one step in two) among the shortest allowed; seed 0."""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import numpy as np

from constrained_spec.bitmask import new_bitmask
from constrained_spec.grammar import GrammarError, compile_json_schema
from constrained_spec.grammar.compiler import clear_cache

CORPUS = Path(__file__).parents[2] / "benchmarks" / "schema_corpus"


def test_walks_on_every_compiled_corpus_schema(smollm2_tokenizer, smollm2_vocab):
    vocab, rng = smollm2_vocab, random.Random(0)
    lengths = np.array([len(b) if b else 1 << 20 for b in vocab.token_bytes] + [1 << 20] * (vocab.size - len(vocab.token_bytes)))
    mask = new_bitmask(1, vocab.size)
    compiled_n = finished = 0
    for path in sorted(CORPUS.glob("*.json")):
        schema = json.loads(path.read_text())["schema"]
        clear_cache()
        try:
            compiled = compile_json_schema(schema, vocab)
        except GrammarError:
            continue
        compiled_n += 1
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        matcher, tokens = compiled.matcher(), []
        while len(tokens) < 96:
            matcher.fill_bitmask(mask)
            bits = np.unpackbits(mask.numpy()[0].view(np.uint8), bitorder="little")[: vocab.size]
            allowed = np.flatnonzero(bits)
            assert allowed.size, f"{path.name}: dead end after {smollm2_tokenizer.decode(tokens)!r}"
            choices = allowed[allowed != vocab.eos_token_id]
            if bits[vocab.eos_token_id] and (rng.random() < 0.5 or not choices.size):
                text = smollm2_tokenizer.decode(tokens)
                assert validator.is_valid(json.loads(text)), f"{path.name}: invalid output {text!r}"
                finished += 1
                break
            if rng.random() < 0.5:
                choices = choices[lengths[choices] == lengths[choices].min()]
            token = int(choices[rng.randrange(choices.size)])
            matcher.accept_token(token)
            tokens.append(token)
    print(f"{compiled_n} schemas walked, {finished} walks finished")
    assert compiled_n >= 150 and finished >= 10, (compiled_n, finished)
