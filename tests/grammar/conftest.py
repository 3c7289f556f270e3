"""Shared fixtures for grammar tests: the real SmolLM2 tokenizer and vocabulary (loaded once)."""

from __future__ import annotations

import pytest


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
