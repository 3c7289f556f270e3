"""CallableRunner: scoring appends to the context, rollback removes, ragged batches are padded
without changing any row (the toy model is causal)."""

from __future__ import annotations

import pytest
import torch

from constrained_spec.runners import CallableRunner
from constrained_spec.testing import ToyLM


def test_score_rollback_and_ragged_batch_match_full_forward():
    model = ToyLM(12, seed=0)
    runner = CallableRunner(model)
    runner.start("a", [1, 2, 3])
    runner.start("b", [4])
    first = runner.score([("a", [5, 6, 7]), ("b", [8])])
    assert [tuple(x.shape) for x in first] == [(3, 12), (1, 12)]
    torch.testing.assert_close(first[0], model(torch.tensor([[1, 2, 3, 5, 6, 7]]))[0, 3:])
    torch.testing.assert_close(first[1], model(torch.tensor([[4, 8]]))[0, 1:])
    runner.rollback("a", 2)
    assert runner.context("a") == [1, 2, 3, 5]
    again = runner.score([("a", [9, 10])])[0]
    torch.testing.assert_close(again, model(torch.tensor([[1, 2, 3, 5, 9, 10]]))[0, 4:])
    runner.release("a")
    with pytest.raises(KeyError):
        runner.context("a")


def test_runner_errors():
    runner = CallableRunner(ToyLM(12))
    runner.start("a", [1])
    with pytest.raises(ValueError, match="already started"):
        runner.start("a", [1])
    with pytest.raises(ValueError, match="at least one new token"):
        runner.score([("a", [])])
    with pytest.raises(ValueError, match="cannot roll back 5 of 1 tokens"):
        runner.rollback("a", 5)
    bad = CallableRunner(lambda ids: torch.zeros(ids.shape[0], 12), vocab_size=12)
    bad.start("x", [1])
    with pytest.raises(ValueError, match="model returned logits of shape"):
        bad.score([("x", [2])])
