"""Shared fixtures for tests/spec: toy grammars and simple proposers of our own.

The proposers here are only for testing the loop; the real ones live in constrained_spec.proposers.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from constrained_spec.proposers.base import Draft, ProposalContext
from constrained_spec.sampling import process_logits
from constrained_spec.bitmask import new_bitmask
from constrained_spec.testing import TOY_TOKENS, ToyDFAGrammar, ToyLM

V = len(TOY_TOKENS)  # 12
EOS = 0
A, B, C, AB, BA, LBRACE, RBRACE = 1, 2, 3, 4, 5, 6, 7


def small_grammar() -> ToyDFAGrammar:
    """( a | b | ab )  ( a | ba )*  [ c ]  — with several tokenizations of the same text, accepting
    after the first group. Complete sequences up to 5 tokens (EOS included): a few dozen."""
    transitions = {
        0: {A: 1, B: 1, AB: 1},
        1: {A: 1, BA: 1, C: 2},
    }
    token_bytes = [None] + [t.encode() for t in TOY_TOKENS[1:]]
    return ToyDFAGrammar(transitions, accepting=[1, 2], vocab_size=V, eos_token_id=EOS, token_bytes=token_bytes)


def braces_grammar() -> ToyDFAGrammar:
    """'{' then one of a/b/c then '}' then EOS: forced tokens at both ends."""
    token_bytes = [None] + [t.encode() for t in TOY_TOKENS[1:]]
    transitions = {0: {LBRACE: 1}, 1: {A: 2, B: 2, C: 2, AB: 2}, 2: {A: 2, RBRACE: 3}}
    return ToyDFAGrammar(transitions, accepting=[3], vocab_size=V, eos_token_id=EOS, token_bytes=token_bytes)


def list_grammar() -> ToyDFAGrammar:
    """'{' (a | b | ab) ( 'a' | ', ' (a | b | ab) )* '}' — forced '{', forced ' ' after ',', and
    ambiguous spellings (a b vs ab). The only accepting state is after '}'."""
    COMMA, SPACE = 10, 11
    token_bytes = [None] + [t.encode() for t in TOY_TOKENS[1:]]
    transitions = {0: {LBRACE: 1}, 1: {A: 2, B: 2, AB: 2}, 2: {A: 2, COMMA: 3, RBRACE: 4}, 3: {SPACE: 1}}
    return ToyDFAGrammar(transitions, accepting=[4], vocab_size=V, eos_token_id=EOS, token_bytes=token_bytes)


class RandomOneHotProposer:
    """Drafts a random-length sequence of pseudo-random tokens. Deterministic in the context (the
    rule for one-hot drafts): its randomness is seeded from the request's tokens, never drawn
    from the step's generators. Drafts may contain forbidden tokens (the loop must cut them)."""

    name = "random-one-hot"

    def __init__(self, vocab: int = V, salt: int = 0) -> None:
        self.vocab = vocab
        self.salt = salt

    def propose(self, context: ProposalContext, max_tokens: int) -> Draft:
        key = hash((self.salt, tuple(context.prompt_ids), tuple(context.output_ids))) % 2**31
        gen = torch.Generator().manual_seed(key)
        length = int(torch.randint(0, max_tokens + 1, (1,), generator=gen))
        tokens = torch.randint(0, self.vocab, (length,), generator=gen).tolist()
        return Draft(token_ids=tokens, source=self.name)

    def observe(self, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> None:
        pass


class GrammarWalkProposer:
    """One-hot drafts that follow the grammar: the lowest allowed non-EOS token each time (high
    acceptance on grammars with forced tokens)."""

    name = "grammar-walk"

    def propose(self, context: ProposalContext, max_tokens: int) -> Draft:
        if context.matcher is None:
            return Draft(source=self.name)
        m = context.matcher.fork()
        grammar = m.grammar
        tokens: list[int] = []
        while len(tokens) < max_tokens and not m.is_terminated():
            allowed = grammar.allowed(m._states[-1])
            token = allowed[0]
            tokens.append(token)
            m.accept_token(token)
        return Draft(token_ids=tokens, source=self.name, num_forced=0)

    def observe(self, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> None:
        pass


class ToyDraftModelProposer:
    """Samples drafts from a toy draft model, with q built by `process_logits` under the same params,
    the draft prefix as history, and the grammar mask of each position (the dense-draft rule)."""

    name = "toy-draft-model"

    def __init__(self, model: ToyLM, memoize: bool = False) -> None:
        self.model = model
        # q is a deterministic function of (params, prompt, history, grammar state), so a
        # memoized draft model is the same draft model, only cheaper: it lets 20k-request
        # distribution tests afford a dense proposer.
        self._memo: dict | None = {} if memoize else None

    def _q(self, context: ProposalContext, history: list[int], matcher) -> torch.Tensor:
        key = None
        if self._memo is not None:
            state = tuple(matcher._states) if matcher is not None else None
            pr = context.params  # every field process_logits reads (not the seed)
            knobs = (pr.temperature, pr.top_k, pr.top_p, pr.min_p, pr.repetition_penalty, pr.presence_penalty, pr.frequency_penalty, tuple(sorted(pr.logit_bias.items())))
            key = (knobs, tuple(context.prompt_ids), tuple(history), state)
            if key in self._memo:
                return self._memo[key]
        logits = self.model(torch.tensor([list(context.prompt_ids) + history]))[0, -1:]  # [1, V]
        mask = None
        if matcher is not None:
            mask = new_bitmask(1, matcher.vocab_size)
            matcher.fill_bitmask(mask, 0)
        # history for penalties: output + draft so far; only the last row is computed
        q = process_logits(logits, context.params, context.prompt_ids, history, (), mask)[0]  # [V]
        if key is not None:
            self._memo[key] = q
        return q

    def propose(self, context: ProposalContext, max_tokens: int) -> Draft:
        m = context.matcher.fork() if context.matcher is not None else None
        tokens: list[int] = []
        rows = []
        for _ in range(max_tokens):
            if m is not None and m.is_terminated():
                break
            q = self._q(context, list(context.output_ids) + tokens, m)
            token = int(torch.multinomial(q, 1, generator=context.generator))
            tokens.append(token)
            rows.append(q)
            if m is not None:
                m.accept_token(token)
            if token == EOS:
                break
        probs = torch.stack(rows) if rows else None
        return Draft(token_ids=tokens, probs=probs, source=self.name)

    def observe(self, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> None:
        pass
