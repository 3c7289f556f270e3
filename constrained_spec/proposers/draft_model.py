"""A draft model: any causal LM sharing the target's tokenizer samples the draft.

Each draft token x_j is drawn from q_j = `process_logits` of the draft model's logits with the
request's own sampling params, the history `output + draft[:j]` and the grammar mask of that
position (a forked matcher advanced along the draft), so q's support lies inside the tokens the
grammar allows, exactly like p's. The q rows go back in `Draft.probs` for the rejection rule.
Greedy requests (T = 0) get the argmax chain: deterministic, so returned as one-hot (probs None).

The model runs through a runner (`constrained_spec.runners`): an HF model gets a KV cache per
request, reused across steps (the accepted prefix stays cached, the rest is rolled back); a plain
callable `fn(input_ids [B, T]) -> logits [B, T, V]` is re-run on the whole context.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import torch

from ..bitmask import new_bitmask
from ..sampling import process_logits
from .base import Draft, ProposalContext

__all__ = ["DraftModelProposer"]


def _make_runner(model: Any) -> Any:
    from ..runners import CallableRunner, HFRunner

    if hasattr(model, "score") and hasattr(model, "rollback"):
        return model  # already a runner
    if hasattr(model, "get_output_embeddings"):
        return HFRunner(model)
    if callable(model):
        return CallableRunner(model, vocab_size=getattr(model, "vocab_size", None))
    raise TypeError(f"draft model must be an HF causal LM, a runner or a callable, got {type(model).__name__}")


class DraftModelProposer:
    """`model`: HF causal LM, runner, or callable. `vocab_size`: width of the q rows (the target's
    logits width; default: the draft model's). `vocab_limit`: ids >= this are never drafted.
    `max_requests`: KV caches kept (least recently used ones are freed)."""

    name = "draft_model"

    def __init__(self, model: Any, *, vocab_size: int | None = None, vocab_limit: int | None = None, max_requests: int = 16) -> None:
        if max_requests < 1:
            raise ValueError(f"max_requests={max_requests}: must be >= 1")
        self.runner = _make_runner(model)
        self.vocab_size = vocab_size
        self.vocab_limit = vocab_limit
        self.max_requests = max_requests
        self._fed: OrderedDict[str, list[int]] = OrderedDict()  # tokens in each request's runner context

    def _next_logits(self, request_id: str, seq: list[int]) -> torch.Tensor:
        """Logits `[V]` after `seq`, feeding the runner only what its context lacks."""
        fed = self._fed.get(request_id)
        if fed is None:
            if len(self._fed) >= self.max_requests:
                old, _ = self._fed.popitem(last=False)
                self.runner.release(old)
            self.runner.start(request_id, [])
            fed = self._fed[request_id] = []
        self._fed.move_to_end(request_id)
        common = 0
        limit = min(len(fed), len(seq) - 1)  # feed at least one token to get its logits
        while common < limit and fed[common] == seq[common]:
            common += 1
        self.runner.rollback(request_id, len(fed) - common)
        (rows,) = self.runner.score([(request_id, seq[common:])])
        fed[common:] = seq[common:]
        return rows[-1]

    def _fit_width(self, logits: torch.Tensor) -> torch.Tensor:
        width = self.vocab_size or logits.shape[-1]
        if logits.shape[-1] >= width:
            return logits[:width]
        return torch.cat([logits, logits.new_full((width - logits.shape[-1],), float("-inf"))])

    def propose(self, context: ProposalContext, max_tokens: int) -> Draft:
        matcher = context.matcher.fork() if context.matcher is not None else None
        if max_tokens <= 0 or (matcher is not None and matcher.is_terminated()) or len(context.prompt_ids) + len(context.output_ids) == 0:
            return Draft(source=self.name)
        params, history = context.params, [*context.output_ids]
        seq = [*context.prompt_ids, *history]
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        bitmask = new_bitmask(1, matcher.vocab_size) if matcher is not None else None
        while len(tokens) < max_tokens:
            logits = self._fit_width(self._next_logits(context.request_id, seq).float())[None]  # [1, V]
            if matcher is not None:
                matcher.fill_bitmask(bitmask, 0)
            q = process_logits(logits, params, context.prompt_ids, history, bitmask=bitmask, vocab_limit=self.vocab_limit)[0]  # [V]
            token = int(q.argmax()) if params.greedy else self._draw(q, context.generator)
            tokens.append(token)
            rows.append(q)
            history.append(token)
            seq.append(token)
            if matcher is not None:
                matcher.accept_token(token)
                if matcher.is_terminated():
                    break
        probs = None if params.greedy else torch.stack(rows)  # [k, V]
        return Draft(token_ids=tokens, probs=probs, source=self.name)

    @staticmethod
    def _draw(q: torch.Tensor, generator: torch.Generator | None) -> int:
        """One token from q `[V]` with the request's draft generator, on the generator's device
        (torch.multinomial needs both on one device; the engine's draft generators live on the CPU,
        where the other proposers sample too)."""
        where = generator.device if generator is not None else q.device
        return int(torch.multinomial(q.to(where), 1, generator=generator))

    def observe(self, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> None:
        """The draft model does not learn; finished requests' caches age out of the LRU."""
