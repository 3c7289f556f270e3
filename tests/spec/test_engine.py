"""The speculative loop on toy models: validity, greedy equality, reproducibility, stopping, errors."""

from __future__ import annotations

import threading

import pytest
import torch

from constrained_spec.runners import CallableRunner
from constrained_spec.sampling import SamplingParams
from constrained_spec.speculative import Engine
from constrained_spec.testing import TOY_TOKENS, ToyLM
from spec_toys import EOS, V, GrammarWalkProposer, RandomOneHotProposer, ToyDraftModelProposer, braces_grammar, list_grammar, small_grammar

PROMPTS = [[6, 7], [1], [2, 3, 4, 5], [8, 9, 10]]  # ragged


def engine(proposer=None, model=None, **kw) -> Engine:
    return Engine(CallableRunner(model or ToyLM(V, seed=3)), eos_token_id=EOS, proposer=proposer, **kw)


def accepted_by(grammar, tokens) -> bool:
    m = grammar.matcher()
    for t in tokens + [EOS]:
        if m.validate_tokens([t]) != 1:
            return False
        m.accept_token(t)
    return True


@pytest.mark.parametrize("proposer", [None, RandomOneHotProposer(), GrammarWalkProposer(), ToyDraftModelProposer(ToyLM(V, seed=3).perturbed())])
def test_outputs_are_grammar_valid(proposer):
    grammar = small_grammar()
    params = SamplingParams(temperature=1.2, max_tokens=30, seed=1)
    outs = engine(proposer).generate(PROMPTS * 4, params, grammar)
    for out in outs:
        assert out.finished
        if out.finish_reason == "stop":
            assert accepted_by(grammar, out.token_ids), out.token_ids
        else:
            assert out.finish_reason == "length" and len(out.token_ids) == 30


def real_proposers():
    from constrained_spec.proposers import ChainProposer, DraftModelProposer, ForcedProposer, NgramProposer, SuffixProposer

    encode = lambda text: [TOY_TOKENS.index(ch) for ch in text]  # noqa: E731  single-character spelling
    return [
        ChainProposer([ForcedProposer(encode), NgramProposer(min_n=1), SuffixProposer()]),
        DraftModelProposer(ToyLM(V, seed=3).perturbed()),
    ]


@pytest.mark.parametrize("proposer", [RandomOneHotProposer(), GrammarWalkProposer(), ToyDraftModelProposer(ToyLM(V, seed=3).perturbed())] + real_proposers())
@pytest.mark.parametrize("grammar", [None, small_grammar(), braces_grammar(), list_grammar()])
def test_greedy_equals_non_speculative(proposer, grammar):
    params = SamplingParams(temperature=0, max_tokens=12, repetition_penalty=1.3)
    plain = engine(None).generate(PROMPTS, params, grammar)
    spec = engine(proposer, max_draft_tokens=5).generate(PROMPTS, params, grammar)
    assert [o.token_ids for o in spec] == [o.token_ids for o in plain]
    assert [o.finish_reason for o in spec] == [o.finish_reason for o in plain]


def test_seeded_request_ignores_batch_composition():
    proposer = ToyDraftModelProposer(ToyLM(V, seed=3).perturbed())
    params = SamplingParams(temperature=1.0, top_k=6, max_tokens=10, seed=1234)
    alone = engine(proposer).generate([PROMPTS[2]], params, small_grammar())[0]
    others = [SamplingParams(temperature=0.8, max_tokens=7, seed=s) for s in range(3)]
    batch = engine(proposer).generate([PROMPTS[0], PROMPTS[1], PROMPTS[2], PROMPTS[3]], [others[0], others[1], params, others[2]], small_grammar())
    assert batch[2].token_ids == alone.token_ids


def test_max_tokens_reports_length_and_drafts_fit_the_budget():
    params = [SamplingParams(temperature=1.0, max_tokens=3, seed=s) for s in range(20)]
    grammar = small_grammar()
    outs = engine(GrammarWalkProposer(), max_draft_tokens=8, adaptive=False).generate([[1]] * 20, params, grammar)
    for out in outs:
        sampled = len(out.token_ids) + (out.finish_reason == "stop")
        assert sampled <= 3
        if out.finish_reason == "length":
            assert len(out.token_ids) == 3
    assert any(o.finish_reason == "length" for o in outs)


def test_stop_string_truncates_text():
    """Greedy output is 'babac'; the stop string 'ab' spans two tokens and ends inside 'ba'."""
    decode = lambda ids: "".join(TOY_TOKENS[i] for i in ids)  # noqa: E731
    params = SamplingParams(temperature=0, max_tokens=40, stop=("ab",))
    out = engine(GrammarWalkProposer(), decode=decode).generate([[1]], params, small_grammar())[0]
    full = decode(engine(None, decode=decode).generate([[1]], params.replace(stop=()), small_grammar())[0].token_ids)
    assert "ab" in full, "test premise: greedy output contains the stop string"
    assert out.finish_reason == "stop" and out.text == full[: full.index("ab")]
    assert "ab" in decode(out.token_ids) and "ab" not in decode(out.token_ids[:-1])


def test_abort_and_thread_safe_add():
    eng = engine(RandomOneHotProposer())
    params = SamplingParams(temperature=1.0, max_tokens=50)
    ids = []
    threads = [threading.Thread(target=lambda: ids.append(eng.add_request([1, 2], params))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 8
    running = [o.request_id for o in eng.step() if not o.finished]  # unseeded: one may end at once
    eng.abort(running[0])
    outs = {o.request_id: o for o in eng.step()}
    assert outs[running[0]].finished and outs[running[0]].finish_reason == "abort"
    while eng.has_unfinished():
        eng.step()


def test_stats_are_consistent():
    proposer = GrammarWalkProposer()
    out = engine(proposer, adaptive=False, max_draft_tokens=4).generate([[1]], SamplingParams(temperature=0.7, max_tokens=20, seed=5), braces_grammar())[0]
    s = out.stats
    assert s.steps >= 1 and s.drafted == sum(s.drafted_per_position) and s.accepted == sum(s.accepted_per_position)
    assert s.generated_tokens == len(out.token_ids) + (out.finish_reason == "stop")
    assert s.generated_tokens == s.accepted + s.steps - (s.generated_tokens < s.accepted + s.steps)
    assert 0 <= s.acceptance_rate <= 1 and s.mean_accepted_length >= 1
    assert set(s.to_dict()) >= {"acceptance_rate", "mean_accepted_length", "tokens_per_second", "acceptance_per_position"}


def test_bad_input_errors():
    eng = engine()
    with pytest.raises(ValueError, match="prompt_ids must not be empty"):
        eng.add_request([], SamplingParams())
    with pytest.raises(ValueError, match="stop strings need the engine's `decode`"):
        eng.add_request([1], SamplingParams(stop=("x",)))
    eng.add_request([1], SamplingParams(), request_id="x")
    with pytest.raises(ValueError, match="already in use"):
        eng.add_request([1], SamplingParams(), request_id="x")
    with pytest.raises(ValueError, match="max_draft_tokens must be an integer >= 0"):
        engine(max_draft_tokens=-1)


@pytest.mark.parametrize("proposer", [None, ToyDraftModelProposer(ToyLM(V, seed=3).perturbed()), GrammarWalkProposer()])
@pytest.mark.parametrize("params", [
    SamplingParams(temperature=1.3, top_k=6, repetition_penalty=1.2, max_tokens=14, seed=5),
    SamplingParams(temperature=0, presence_penalty=0.5, max_tokens=14),
])
def test_logprobs_match_an_independent_computation(proposer, params):
    """Each emitted token's log-prob (drafts accepted or not) equals log p recomputed from the
    model's own forward over prompt + output, with the same grammar mask and processing
    (greedy: the processed distribution at temperature 1)."""
    from constrained_spec.bitmask import new_bitmask
    from constrained_spec.sampling import process_logits

    model, grammar = ToyLM(V, seed=3), small_grammar()
    outs = engine(proposer, model=model, max_draft_tokens=4).generate(PROMPTS, [params] * len(PROMPTS), grammar)
    assert all(o.logprobs is None for o in outs)  # off unless asked for
    spec = engine(proposer, model=model, max_draft_tokens=4)
    prompts = PROMPTS * 3
    ids = [spec.add_request(p, params.replace(seed=i) if not params.greedy else params, grammar, logprobs=2) for i, p in enumerate(prompts)]
    final = {}
    while len(final) < len(ids):
        final.update({o.request_id: o for o in spec.step() if o.finished})
    checked = 0
    for prompt, request_id in zip(prompts, ids):
        out = final[request_id]
        assert [e.token_id for e in out.logprobs] == out.token_ids
        matcher = grammar.matcher()
        for j, entry in enumerate(out.logprobs):
            context = torch.tensor([prompt + out.token_ids[:j]])
            logits = model(context)[0, -1:]  # [1, V]
            mask = new_bitmask(1, matcher.vocab_size)
            matcher.fill_bitmask(mask, 0)
            reference = params if not params.greedy else params.replace(temperature=1.0)
            p = process_logits(logits, reference, prompt, out.token_ids[:j], bitmask=mask)[0]  # [V]
            assert entry.logprob == pytest.approx(float(torch.log(p[entry.token_id])), abs=1e-4)
            top = torch.topk(torch.log(p), 2)
            assert [t for t, _ in entry.top] == top.indices.tolist() or sorted(v for _, v in entry.top) == pytest.approx(sorted(top.values.tolist()), abs=1e-4)
            matcher.accept_token(entry.token_id)
            checked += 1
    assert checked > 20
    if proposer is not None:  # drafts were accepted: their tokens' log-probs are checked too
        assert sum(final[i].stats.accepted for i in ids) > 0


def test_a_second_owner_stepping_at_once_is_refused():
    eng = engine(RandomOneHotProposer())
    eng.add_request([1, 2], SamplingParams(max_tokens=5, seed=0))
    eng._stepping.acquire()  # as if another thread were inside step()
    try:
        with pytest.raises(RuntimeError, match="one owner"):
            eng.step()
    finally:
        eng._stepping.release()
    assert eng.step()  # the owner's own step runs
