"""Exactness: the speculative engine's outputs are distributed exactly like plain constrained
sampling from the target, at T in {0.7, 1.0, 1.5} with top-k, top-p and a repetition penalty
active, in ragged batches (two prompts of different lengths interleaved, draft lengths varying per
request), including outputs cut by max_tokens. Proposers: the real one-hot chain (forced strings,
n-gram, suffix tree; each must draft), a toy draft model (dense q), and a random one-hot proposer
that also drafts forbidden tokens (the loop's cuts). The real `DraftModelProposer` is held to the
same test in tests/proposers/test_exactness_proposers.py.

Each test: N = 20,000 seeded requests through one engine, Pearson chi-square over (prompt, outcome)
cells against the enumerated exact distribution, alpha = 0.001 (cells expected < 5 pooled). Under
exactness each parametrization fails with probability 0.001; the seeds make every run identical.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from constrained_spec.proposers import ChainProposer, ForcedProposer, NgramProposer, SuffixProposer
from constrained_spec.runners import CallableRunner
from constrained_spec.sampling import SamplingParams
from constrained_spec.selfcheck import chi_square
from constrained_spec.speculative import Engine
from constrained_spec.testing import TOY_TOKENS, ToyLM
from exact import exact_outcomes
from spec_toys import EOS, V, RandomOneHotProposer, ToyDraftModelProposer, list_grammar

N, ALPHA = 20_000, 0.001
PROMPTS = [[6, 1, 7, 6, 2, 10, 11, 4, 7], [6, 4, 7]]  # '{a}{b, ab}' and '{ab}': ragged, n-gram material
TARGET = ToyLM(V, seed=21, scale=1.2)


def toy_encode(text: str) -> list[int]:
    """Greedy longest-match tokenization over TOY_TOKENS (for the forced-string proposer)."""
    ids, pos = [], 0
    while pos < len(text):
        token = max((i for i in range(1, V) if text.startswith(TOY_TOKENS[i], pos)), key=lambda i: len(TOY_TOKENS[i]))
        ids.append(token)
        pos += len(TOY_TOKENS[token])
    return ids


def make_proposer(name: str):
    if name == "random-one-hot":  # ours: drafts forbidden tokens too, random lengths
        return RandomOneHotProposer()
    if name == "forced+ngram+suffix":
        return ChainProposer([ForcedProposer(toy_encode), NgramProposer(min_n=1), SuffixProposer()])
    if name == "toy-draft-model":  # ours: dense q, memoized per prefix so 20k requests are cheap
        return ToyDraftModelProposer(TARGET.perturbed(noise=0.6, seed=22), memoize=True)
    raise KeyError(name)


def run_engine(proposer_name: str, params: SamplingParams, grammar) -> tuple[Counter, Counter]:
    """N seeded requests through one engine. Returns (outcome counts, drafted tokens per source)."""
    proposer = make_proposer(proposer_name)
    sources: Counter = Counter()
    for member in getattr(proposer, "proposers", [proposer]):  # count what each member drafts
        member.propose = _counting(member, sources)
    engine = Engine(CallableRunner(TARGET), eos_token_id=EOS, proposer=proposer, max_draft_tokens=3)
    counts: Counter = Counter()
    waves = 4  # later waves let the suffix proposer learn from earlier outputs
    per_wave = N // waves
    for wave in range(waves):
        prompts = [PROMPTS[i % 2] for i in range(per_wave)]
        seeded = [params.replace(seed=wave * per_wave + i) for i in range(per_wave)]
        for prompt, out in zip(prompts, engine.generate(prompts, seeded, grammar)):
            counts[(tuple(prompt), tuple(out.token_ids), out.finish_reason)] += 1
    return counts, sources


def _counting(member, sources: Counter):
    propose = member.propose

    def wrapped(context, max_tokens):
        draft = propose(context, max_tokens)
        sources[member.name] += len(draft)
        return draft

    return wrapped


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # toy tensors: threads only add overhead on shared cores
    yield
    torch.set_num_threads(threads)


CASES = [(name, t) for name in ("forced+ngram+suffix", "toy-draft-model") for t in (0.7, 1.0, 1.5)] + [("random-one-hot", 1.0)]


@pytest.mark.parametrize("proposer_name,temperature", CASES)
def test_speculative_matches_exact_distribution(proposer_name, temperature):
    grammar = list_grammar()
    params = SamplingParams(temperature=temperature, top_k=6, top_p=0.95, repetition_penalty=1.3, max_tokens=6)
    counts, sources = run_engine(proposer_name, params, grammar)
    assert sources and all(n > N // 20 for n in sources.values()), f"some proposer barely drafted: {dict(sources)}"
    assert any(reason == "length" for _, _, reason in counts), "test premise: some outputs hit max_tokens"
    assert_exact(counts, grammar, params)


def assert_exact(counts: Counter, grammar, params: SamplingParams) -> None:
    """Every outcome possible, and the counts of both prompts' outcomes (N // 2 each) pass
    Pearson's chi-square against the enumerated distribution at ALPHA."""
    expected = {}
    for prompt in PROMPTS:
        for (tokens, reason), p in exact_outcomes(TARGET, grammar, prompt, params, EOS).items():
            expected[(tuple(prompt), tokens, reason)] = p * (N // 2)
    impossible = [key for key in counts if key not in expected]
    assert not impossible, f"outputs outside the grammar / support: {impossible[:5]}"
    keys = list(expected)  # both prompts' outcomes: expected counts sum to N
    total = sum(expected.values())
    stat, dof, p_value = chi_square([counts.get(k, 0) for k in keys], [expected[k] / total for k in keys])
    assert dof >= 10, f"too few cells ({dof + 1}) for a meaningful test"
    assert p_value >= ALPHA, f"chi-square {stat:.1f} on {dof} dof, p = {p_value:.2g} < {ALPHA}"


@pytest.mark.parametrize("proposer_name,temperature", [("forced+ngram+suffix", 1.0), ("random-one-hot", 0.7)])
def test_mask_and_temperature_only_matches_exact_distribution(proposer_name, temperature, monkeypatch):
    """Requests that only mask and scale, with one-hot drafts, are verified on the CPU by
    `rejection.sampled_verify` (p and the draw over each row's allowed tokens, its own random
    stream): the same chi-square test (N = 20,000, alpha = 0.001) through that path."""
    import constrained_spec.speculative as speculative

    calls = Counter()
    fast = speculative.sampled_verify

    def counted(*args, **kwargs):
        calls["sampled_verify"] += 1
        return fast(*args, **kwargs)

    monkeypatch.setattr(speculative, "sampled_verify", counted)
    grammar = list_grammar()
    params = SamplingParams(temperature=temperature, max_tokens=6)
    counts, sources = run_engine(proposer_name, params, grammar)
    assert calls["sampled_verify"] > 0 and sources
    assert_exact(counts, grammar, params)
