"""`constrained-spec verify`: a statistical self-check that speculative constrained sampling is
distributed exactly like plain constrained sampling from the target.

On a toy model (`testing.ToyLM`) and a small grammar (`testing.ToyDFAGrammar`) whose complete
outputs can be enumerated, the exact probability of every output under non-speculative
constrained sampling is computed with `sampling.process_logits` (same sampling parameters, same
grammar mask). Then `samples` outputs are drawn through the speculative `Engine` with a proposer
that drafts from a perturbed copy of the model (so drafts are often rejected and the residual
path is exercised), and a chi-square goodness-of-fit test compares the counts with the exact
probabilities. Under exactness the p-value is uniform, so a run fails with probability `alpha`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .proposers.base import Draft, ProposalContext
from .sampling import SamplingParams, process_logits

__all__ = ["SelfCheckReport", "chi_square", "exact_distribution", "run_selfcheck", "ToyGreedyDraftProposer"]


@dataclass
class SelfCheckReport:
    samples: int
    categories: int
    statistic: float
    dof: int
    p_value: float
    alpha: float
    acceptance_rate: float
    elapsed_s: float

    @property
    def passed(self) -> bool:
        return self.p_value >= self.alpha

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (
            f"{verdict}: chi-square = {self.statistic:.2f} with {self.dof} degrees of freedom, "
            f"p-value = {self.p_value:.4f} (alpha = {self.alpha}); {self.samples} samples over "
            f"{self.categories} possible outputs, draft acceptance {self.acceptance_rate:.2f}, {self.elapsed_s:.1f} s"
        )


def chi_square(counts: Sequence[int], probs: Sequence[float], min_expected: float = 5.0) -> tuple[float, int, float]:
    """Pearson's goodness-of-fit test -> (statistic, degrees of freedom, p-value). Categories
    expected fewer than `min_expected` times are pooled into one bin (the test's usual rule)."""
    total = sum(counts)
    if total == 0 or len(counts) != len(probs):
        raise ValueError("chi_square needs non-empty counts and one probability per count")
    bins: list[tuple[float, float]] = []
    pooled_obs = pooled_exp = 0.0
    for observed, p in zip(counts, probs):
        expected = total * p
        if expected < min_expected:
            pooled_obs, pooled_exp = pooled_obs + observed, pooled_exp + expected
        else:
            bins.append((observed, expected))
    if pooled_exp > 0:
        bins.append((pooled_obs, pooled_exp))
    statistic = sum((o - e) ** 2 / e for o, e in bins)
    dof = len(bins) - 1
    if dof < 1:
        raise ValueError("too few categories for a chi-square test")
    # P(X >= statistic) for X ~ chi2(dof) is the regularized upper incomplete gamma Q(dof/2, x/2).
    p_value = float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64), torch.tensor(statistic / 2, dtype=torch.float64)))
    return statistic, dof, p_value


def exact_distribution(model: Callable, grammar, prompt: Sequence[int], params: SamplingParams, max_tokens: int) -> dict[tuple[int, ...], float]:
    """Probability of every complete output (ending in EOS) under plain constrained sampling.
    The grammar must make every output end within `max_tokens` tokens."""
    from .bitmask import bitmask_width

    probs: dict[tuple[int, ...], float] = {}
    for seq in grammar.complete_sequences(max_tokens):
        ids = torch.tensor([list(prompt) + list(seq)])  # [1, T]
        logits = model(ids)[0, len(prompt) - 1 : len(prompt) - 1 + len(seq)]  # [len(seq), V]
        matcher, total = grammar.matcher(), 1.0
        for j, token in enumerate(seq):
            mask = torch.zeros(1, bitmask_width(grammar.vocab_size), dtype=torch.int32)
            matcher.fill_bitmask(mask)
            row = process_logits(logits[j : j + 1], params, prompt_ids=prompt, output_ids=seq[:j], bitmask=mask)  # [1, V]
            total *= float(row[0, token])
            matcher.accept_token(token)
        probs[seq] = total
    return probs


class ToyGreedyDraftProposer:
    """One-hot drafts: the draft model's greedy path through the grammar. A deterministic
    function of the context, as base.py requires of one-hot proposers."""

    name = "toy-greedy-draft"

    def __init__(self, draft_model: Callable) -> None:
        self.draft_model = draft_model
        self._cache: dict[tuple, list[int]] = {}  # the self-check repeats few contexts many times

    def propose(self, context: ProposalContext, max_tokens: int) -> Draft:
        if context.matcher is None:
            return Draft(source=self.name)
        key = (tuple(context.prompt_ids), tuple(context.output_ids), context.params.repetition_penalty, max_tokens)
        if key not in self._cache:
            self._cache[key] = self._greedy_path(context, max_tokens)
        return Draft(token_ids=list(self._cache[key]), source=self.name)

    def _greedy_path(self, context: ProposalContext, max_tokens: int) -> list[int]:
        from .bitmask import bitmask_width
        matcher = context.matcher.fork()
        ids = list(context.prompt_ids) + list(context.output_ids)
        tokens: list[int] = []
        for _ in range(max_tokens):
            if matcher.is_terminated():
                break
            logits = self.draft_model(torch.tensor([ids + tokens]))[0, -1:].float()  # [1, V]
            mask = torch.zeros(1, bitmask_width(matcher.vocab_size), dtype=torch.int32)
            matcher.fill_bitmask(mask)
            token = int(process_logits(logits, context.params.replace(temperature=0), bitmask=mask).argmax())
            tokens.append(token)
            matcher.accept_token(token)
        return tokens

    def observe(self, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> None:
        pass


def _toy_grammar(vocab_size: int, eos: int):
    from .testing import ToyDFAGrammar

    # Outputs of 1 to 3 tokens before EOS, with several branches at every step.
    transitions = {0: {1: 1, 2: 1, 4: 1}, 1: {3: 2, 5: 2, 1: 2, 6: 3}, 2: {1: 3, 2: 3}}
    return ToyDFAGrammar(transitions, accepting={1, 2, 3}, vocab_size=vocab_size, eos_token_id=eos)


def run_selfcheck(samples: int = 20000, seed: int = 0, alpha: float = 0.001, log: Callable[[str], None] | None = None) -> SelfCheckReport:
    """Draw `samples` outputs through the speculative engine and test them against the exact
    distribution (chi-square at `alpha`). Temperature 0.9, top-k 6, top-p 0.95 and repetition
    penalty 1.2 are active, so every processing step is part of the check."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # toy-sized tensors: extra threads only add synchronization cost
    try:
        return _run(samples, seed, alpha, log)
    finally:
        torch.set_num_threads(threads)


def _run(samples: int, seed: int, alpha: float, log: Callable[[str], None] | None) -> SelfCheckReport:
    from .runners import CallableRunner
    from .speculative import Engine
    from .testing import ToyLM

    start = time.perf_counter()
    target = ToyLM(seed=seed, scale=0.8)
    grammar = _toy_grammar(target.vocab_size, eos=0)
    prompt = [1, 6, 2]
    base = SamplingParams(temperature=0.9, top_k=6, top_p=0.95, repetition_penalty=1.2, max_tokens=8)
    exact = exact_distribution(target, grammar, prompt, base, max_tokens=4)
    if log:
        log(f"exact distribution over {len(exact)} outputs; sampling {samples} through the speculative engine ...")
    engine = Engine(CallableRunner(target), eos_token_id=0, proposer=ToyGreedyDraftProposer(target.perturbed(noise=1.0, seed=seed + 1)), max_draft_tokens=3, adaptive=False)
    for i in range(samples):
        engine.add_request(prompt, base.replace(seed=seed * samples + i), grammar=grammar)
    counts: Counter[tuple[int, ...]] = Counter()
    drafted = accepted = 0
    while engine.has_unfinished():
        for out in engine.step():
            if out.finished:
                seq = tuple(out.token_ids) + ((0,) if out.finish_reason == "stop" else ())  # EOS is not in token_ids
                if seq not in exact:
                    raise AssertionError(f"the engine produced {seq}, which the grammar does not allow")
                counts[seq] += 1
                stats = out.stats.to_dict()
                drafted += stats.get("drafted", 0)
                accepted += stats.get("accepted", 0)
    outputs = sorted(exact)
    statistic, dof, p_value = chi_square([counts[s] for s in outputs], [exact[s] for s in outputs])
    return SelfCheckReport(samples, len(outputs), statistic, dof, p_value, alpha, accepted / max(drafted, 1), time.perf_counter() - start)
