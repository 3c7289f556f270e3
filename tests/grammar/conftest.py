"""Shared fixtures for grammar tests: the real SmolLM2 tokenizer and vocabulary (loaded once).
The JSON-Schema-Test-Suite's remote documents (what refRemote.json references at
http://localhost:1234/) are registered for every test here: nothing is fetched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from constrained_spec.grammar import register_schema

REMOTES = Path(__file__).parent.parent / "data" / "json_schema_test_suite" / "remotes"
for _remote in REMOTES.rglob("*.json"):
    register_schema("http://localhost:1234/" + _remote.relative_to(REMOTES).as_posix(), json.loads(_remote.read_text()))


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    from transformers import AutoTokenizer

    from constrained_spec.models import DEFAULT_MODEL, cache_dir

    folder = cache_dir() / f"{DEFAULT_MODEL}-float32"
    if (folder / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(folder, local_files_only=True)
    from constrained_spec.models import load_model

    return load_model(verbose=False).tokenizer


@pytest.fixture(scope="session")
def smollm2_vocab(smollm2_tokenizer):
    from constrained_spec.grammar.vocabulary import Vocabulary

    return Vocabulary.from_tokenizer(smollm2_tokenizer)
