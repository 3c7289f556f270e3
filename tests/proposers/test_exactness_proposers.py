"""Each proposer, run through the speculative Engine, leaves the output distribution exactly that
of plain constrained sampling from the target.

Toy target (`testing.ToyLM`) and a small JSON-like DFA grammar with forced stretches (`{"`, `"}`)
whose complete outputs are enumerable; the exact distribution comes from
`selfcheck.exact_distribution`. All four proposers run chained, each asked when those before it have
nothing (every one is checked to have drafted > 100 tokens), so one-hot drafts, dense draft-model
drafts and mixed drafts (one-hot rows, then dense q rows) are all verified. (A separate run
without the draft model also passed; it is left out to keep the suite short on 2 cores.) N = 20,000 seeded requests per proposer, Pearson chi-square
(`selfcheck.chi_square`, cells expected < 5 pooled), alpha = 0.001: under exactness a
parametrization fails with probability 0.001. Requests run in waves so the suffix proposer learns
from earlier outputs mid-run, as it would in a server.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from constrained_spec.proposers import ChainProposer, DraftModelProposer, ForcedProposer, NgramProposer, SuffixProposer
from constrained_spec.runners import CallableRunner
from constrained_spec.sampling import SamplingParams
from constrained_spec.selfcheck import chi_square, exact_distribution
from constrained_spec.speculative import Engine
from constrained_spec.testing import TOY_TOKENS, ToyDFAGrammar, ToyLM

N, ALPHA, WAVES = 20_000, 0.001, 20
V, EOS = len(TOY_TOKENS), 0
A, B, C, AB, BA, LBRACE, RBRACE, QUOTE = 1, 2, 3, 4, 5, 6, 7, 8
TOKEN_BYTES = [None] + [t.encode() for t in TOY_TOKENS[1:]]
PROMPT = [LBRACE, QUOTE, AB, A, QUOTE, RBRACE, LBRACE, QUOTE, B]  # `{"aba"}{"b`: n-gram material


def toy_encode(text: str) -> list[int]:
    """Greedy longest-match tokenization over TOY_TOKENS."""
    ids, pos = [], 0
    while pos < len(text):
        token = max((i for i in range(1, V) if text.startswith(TOY_TOKENS[i], pos)), key=lambda i: len(TOY_TOKENS[i]))
        ids.append(token)
        pos += len(TOY_TOKENS[token])
    return ids


def grammar() -> ToyDFAGrammar:
    """`{"` X [Y] `"}` with X in {a, b, ab, ba} and Y in {a, b}: 12 outputs, forced at both ends."""
    transitions = {0: {LBRACE: 1}, 1: {QUOTE: 2}, 2: {A: 3, B: 3, AB: 3, BA: 3}, 3: {A: 4, B: 4, QUOTE: 5}, 4: {QUOTE: 5}, 5: {RBRACE: 6}}
    return ToyDFAGrammar(transitions, accepting=[6], vocab_size=V, eos_token_id=EOS, token_bytes=TOKEN_BYTES)


TARGET = ToyLM(V, seed=11, scale=1.0)


def proposers():
    draft = TARGET.perturbed(noise=0.8, seed=12)
    return {
        "all": ChainProposer([ForcedProposer(toy_encode, token_bytes=TOKEN_BYTES), NgramProposer(min_n=1), SuffixProposer(), DraftModelProposer(draft)]),  # mixed rows
    }


def _counting(propose, name, sources):
    def wrapped(context, max_tokens):
        draft = propose(context, max_tokens)
        sources[name] += len(draft)
        return draft

    return wrapped


@pytest.mark.parametrize("name", ["all"])
def test_proposer_keeps_the_target_distribution(name):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # toy tensors: threads only add overhead (and others share the cores)
    try:
        params = SamplingParams(temperature=0.9, top_k=4, repetition_penalty=1.2, max_tokens=10)
        g = grammar()
        exact = exact_distribution(TARGET, g, PROMPT, params, max_tokens=8)
        engine = Engine(CallableRunner(TARGET), eos_token_id=EOS, proposer=proposers()[name], max_draft_tokens=4)
        proposer = engine.proposer
        sources: Counter[str] = Counter()
        if isinstance(proposer, ChainProposer):  # record which members drafted
            for member in proposer.proposers:
                member.propose = _counting(member.propose, member.name, sources)
        counts: Counter[tuple[int, ...]] = Counter()
        drafted = accepted = 0
        for wave in range(WAVES):
            prompts = [PROMPT] * (N // WAVES)
            seeds = [params.replace(seed=wave * N + i) for i in range(N // WAVES)]
            for out in engine.generate(prompts, seeds, g):
                assert out.finish_reason == "stop"
                seq = tuple(out.token_ids) + (EOS,)
                assert seq in exact, f"{seq} is not in the grammar"
                counts[seq] += 1
                drafted += out.stats.drafted
                accepted += out.stats.accepted
    finally:
        torch.set_num_threads(threads)
    assert drafted > N, f"{name} drafted only {drafted} tokens: the test would not exercise it"
    assert all(sources[p] > 100 for p in name.replace("all", "forced+ngram+suffix+draft_model").split("+")), sources
    outputs = sorted(exact)
    statistic, dof, p_value = chi_square([counts[s] for s in outputs], [exact[s] for s in outputs])
    assert p_value >= ALPHA, f"{name}: chi-square {statistic:.1f} (dof {dof}), p = {p_value:.2g} < {ALPHA}; acceptance {accepted / drafted:.2f}"


def two_spellings_grammar() -> ToyDFAGrammar:
    """`{"ab` [a|b] `"}`: the forced text `{"ab` can be spelled `ab` or `a` `b` at its end, so the
    forced proposer learns two spellings and, at T > 0, drafts dense q rows over them."""
    transitions = {0: {LBRACE: 1}, 1: {QUOTE: 2}, 2: {AB: 4, A: 3}, 3: {B: 4}, 4: {A: 5, B: 5, QUOTE: 6}, 5: {QUOTE: 6}, 6: {RBRACE: 7}}
    return ToyDFAGrammar(transitions, accepting=[7], vocab_size=V, eos_token_id=EOS, token_bytes=TOKEN_BYTES)


def test_forced_dense_spelling_drafts_keep_the_target_distribution():
    """N = 20,000 seeded requests, chi-square at alpha = 0.001, as above; the forced proposer
    alone, with its sampled-spelling (dense q) drafts checked to have happened > 1000 times."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        params = SamplingParams(temperature=1.0, top_p=0.95, repetition_penalty=1.1, max_tokens=10)
        g = two_spellings_grammar()
        exact = exact_distribution(TARGET, g, PROMPT, params, max_tokens=8)
        forced = ForcedProposer(toy_encode, token_bytes=TOKEN_BYTES)
        dense = Counter()
        propose = forced.propose

        def counting(context, max_tokens):
            draft = propose(context, max_tokens)
            dense[draft.probs is not None] += 1
            return draft

        forced.propose = counting
        engine = Engine(CallableRunner(TARGET), eos_token_id=EOS, proposer=forced, max_draft_tokens=4, adaptive=False)
        counts: Counter[tuple[int, ...]] = Counter()
        for wave in range(WAVES):
            seeds = [params.replace(seed=wave * N + i) for i in range(N // WAVES)]
            for out in engine.generate([PROMPT] * (N // WAVES), seeds, g):
                seq = tuple(out.token_ids) + (EOS,)
                assert out.finish_reason == "stop" and seq in exact, f"{seq} is not in the grammar"
                counts[seq] += 1
    finally:
        torch.set_num_threads(threads)
    assert dense[True] > 1000, dense
    outputs = sorted(exact)
    statistic, dof, p_value = chi_square([counts[s] for s in outputs], [exact[s] for s in outputs])
    assert p_value >= ALPHA, f"chi-square {statistic:.1f} (dof {dof}), p = {p_value:.2g} < {ALPHA}"
