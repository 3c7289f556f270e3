"""The runner's self-check: cached decoding must reproduce a full forward, else a loud error.

A tiny random Llama (built from a config, no download) stands in for the real model; a runner
passing its cache under a keyword the model does not know reproduces the transformers < 5.24
failure (`cache=` silently ignored: every step runs without context)."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from constrained_spec import runner_check  # noqa: E402
from constrained_spec.runners import HFRunner  # noqa: E402


def tiny_llama(seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )
    return transformers.LlamaForCausalLM(config).eval()


def test_cache_keyword_is_the_one_the_forward_declares():
    keyword = runner_check.cache_keyword(tiny_llama())
    version = tuple(int(x) for x in transformers.__version__.split(".")[:2])
    assert keyword == ("cache" if version >= (5, 24) else "past_key_values")


def test_a_correct_runner_passes_once_per_model_and_dtype(monkeypatch):
    model = tiny_llama()
    calls = []
    real = runner_check.check_runner
    monkeypatch.setattr(runner_check, "check_runner", lambda *a, **k: calls.append(1) or real(*a, **k))
    HFRunner(model)
    HFRunner(model)
    assert len(calls) == 1  # the second runner over the same model reuses the result
    assert next(iter(runner_check._checked[model].values())) < 1e-4
    HFRunner(model, batched=False)
    assert len(calls) == 2  # the unbatched path is checked separately


def test_an_ignored_cache_keyword_fails_loudly_naming_the_versions(monkeypatch):
    monkeypatch.setattr("constrained_spec.runners.cache_keyword", lambda model: "kv_cache_the_model_ignores")
    with pytest.raises(runner_check.RunnerSelfCheckError, match=rf"transformers {transformers.__version__}") as info:
        HFRunner(tiny_llama(1))
    assert f"torch {torch.__version__}" in str(info.value) and "full forward" in str(info.value)


def test_the_check_leaves_no_state_behind():
    runner = HFRunner(tiny_llama(2))
    assert runner._states == {} and not runner._prefixes and runner.prefix_hits == 0


def test_the_static_runner_checks_itself_too(monkeypatch):
    from constrained_spec.engine_setup import make_runner

    model = tiny_llama(3)
    calls = []
    real = runner_check.check_runner
    monkeypatch.setattr(runner_check, "check_runner", lambda runner, *a, **k: calls.append(type(runner).__name__) or real(runner, *a, **k))
    make_runner(model, "static")
    assert calls == ["StaticRunner"]
    assert max(runner_check._checked[model].values()) < 1e-4
