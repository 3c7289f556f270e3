"""Sampling parameters and the one function that turns logits into probabilities.

Both sides of speculative decoding call `process_logits`: the draft model to get q, the target to
get p. Exactness needs p and q built by the same code, with the same grammar mask and with
history-dependent penalties seeing the draft prefix up to each position.

Order of operations (as vLLM and HF apply them): repetition penalty (prompt + output), presence and
frequency penalties (output only), logit bias, grammar mask and vocabulary limit, then temperature;
top-k, top-p and min-p filter the tempered distribution; softmax. Temperature 0 means greedy: a
one-hot row at the argmax of the processed logits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType

import torch

from .bitmask import apply_bitmask_
from .devices import upload

__all__ = ["SamplingParams", "process_logits", "filtered_logits", "history_tensors"]

# Field metadata: which fields `filtered_logits` / `process_logits` read ("processing"), and of
# those, which read the token history when not at their default ("history"). The engine batches
# requests by exactly these fields, so a field read by processing but not marked here would let
# unlike requests share one processing call (tests/test_sampling_fields.py holds the marks to the code).
_PROCESSING = {"processing": True}
_HISTORY = {"processing": True, "history": True}


@dataclass(frozen=True)
class SamplingParams:
    """Validated sampling parameters. Invalid values raise `ValueError` naming the field.

    top_k = 0 (or -1), top_p = 1 and min_p = 0 disable those filters.
    """

    temperature: float = field(default=1.0, metadata=_PROCESSING)
    top_k: int = field(default=0, metadata=_PROCESSING)
    top_p: float = field(default=1.0, metadata=_PROCESSING)
    min_p: float = field(default=0.0, metadata=_PROCESSING)
    repetition_penalty: float = field(default=1.0, metadata=_HISTORY)
    presence_penalty: float = field(default=0.0, metadata=_HISTORY)
    frequency_penalty: float = field(default=0.0, metadata=_HISTORY)
    logit_bias: Mapping[int, float] = field(default_factory=dict, metadata=_PROCESSING)
    seed: int | None = None
    max_tokens: int = 256
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        def check(ok: bool, name: str, why: str) -> None:
            if not ok:
                raise ValueError(f"SamplingParams.{name}={getattr(self, name)!r}: {why}")

        def is_number(value: object) -> bool:
            return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

        check(is_number(self.temperature) and self.temperature >= 0, "temperature", "must be a finite number >= 0 (0 = greedy)")
        check(isinstance(self.top_k, int) and not isinstance(self.top_k, bool) and self.top_k >= -1, "top_k", "must be an integer >= 1, or 0 / -1 to disable")
        check(is_number(self.top_p) and 0 < self.top_p <= 1, "top_p", "must be in (0, 1]")
        check(is_number(self.min_p) and 0 <= self.min_p < 1, "min_p", "must be in [0, 1)")
        check(is_number(self.repetition_penalty) and self.repetition_penalty > 0, "repetition_penalty", "must be > 0 (1 = off)")
        check(is_number(self.presence_penalty) and -2 <= self.presence_penalty <= 2, "presence_penalty", "must be in [-2, 2]")
        check(is_number(self.frequency_penalty) and -2 <= self.frequency_penalty <= 2, "frequency_penalty", "must be in [-2, 2]")
        check(self.seed is None or (isinstance(self.seed, int) and not isinstance(self.seed, bool) and self.seed >= 0), "seed", "must be None or an integer >= 0")
        check(isinstance(self.max_tokens, int) and not isinstance(self.max_tokens, bool) and self.max_tokens >= 1, "max_tokens", "must be an integer >= 1")
        check(isinstance(self.logit_bias, Mapping), "logit_bias", "must be a mapping token_id -> bias")
        bias = {}
        for token, value in self.logit_bias.items():
            try:
                token_id = int(token)  # JSON objects carry token ids as strings
            except (TypeError, ValueError):
                token_id = -1
            check(token_id >= 0, "logit_bias", f"key {token!r} is not a token id >= 0")
            check(is_number(value) and -100 <= value <= 100, "logit_bias", f"bias for token {token!r} must be in [-100, 100]")
            bias[token_id] = float(value)
        object.__setattr__(self, "logit_bias", MappingProxyType(bias))
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
        check(all(isinstance(s, str) and s for s in stop), "stop", "must be a string or a sequence of non-empty strings")
        object.__setattr__(self, "stop", stop)
        object.__setattr__(self, "top_k", 0 if self.top_k == -1 else self.top_k)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def needs_history(self) -> bool:
        """Does processing read the prompt / output tokens (a history penalty is on)?"""
        return any(getattr(self, f.name) != f.default for f in fields(self) if f.metadata.get("history"))

    def processing_key(self) -> tuple:
        """The values of every field processing reads: requests with equal keys may share one
        `process_logits` call (their rows differ only through logits, mask and history)."""
        return tuple(_hashable(getattr(self, f.name)) for f in fields(self) if f.metadata.get("processing"))

    def replace(self, **changes: object) -> "SamplingParams":
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        values["logit_bias"] = dict(values["logit_bias"])
        values.update(changes)
        return SamplingParams(**values)


def _hashable(value: object) -> object:
    return tuple(sorted(value.items())) if isinstance(value, Mapping) else value


def _output_counts(rows: int, vocab: int, output_ids: Sequence[int], draft_ids: Sequence[int], device: torch.device) -> torch.Tensor:
    """Token counts of the output so far as seen by each row: row j sees output + draft[:j]. `[rows, V]`."""
    counts = torch.zeros(rows, vocab, dtype=torch.float32, device=device)
    if len(output_ids):
        counts += torch.bincount(torch.as_tensor(list(output_ids), dtype=torch.long), minlength=vocab)[:vocab].to(device, torch.float32)
    for j in range(1, rows):
        counts[j:, draft_ids[j - 1]] += 1
    return counts


def history_tensors(
    histories: Sequence[tuple[Sequence[int], Sequence[int], Sequence[int]]],
    vocab: int,
    device: torch.device | str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row penalty history for many requests at once, for `output_counts` / `prompt_mask`.

    histories: one `(prompt_ids, output_ids, draft_ids)` per request; request i owns
    `len(draft_ids) + 1` consecutive rows, row j seeing output + draft[:j] (as `_output_counts`).
    Returns (output_counts float `[rows, V]`, prompt_mask bool `[rows, V]`).
    """
    count_idx: list[int] = []
    prompt_idx: list[int] = []
    row = 0
    for prompt, output, draft in histories:
        k = len(draft)
        for j in range(k + 1):
            base = (row + j) * vocab
            count_idx.extend(base + t for t in output)
            count_idx.extend(base + t for t in draft[:j])
            prompt_idx.extend(base + t for t in prompt)
        row += k + 1
    # Only the token ids cross to the device; the [rows, V] tables are built there (index_add_,
    # not bincount, which would read the largest id back to the host on CUDA).
    size = row * vocab
    flat = upload(torch.tensor(count_idx + prompt_idx, dtype=torch.long), device)  # [n_counts + n_prompt]
    counts = torch.zeros(size, dtype=torch.float32, device=device)
    counts.index_add_(0, flat[: len(count_idx)], torch.ones(len(count_idx), device=device))
    prompt_mask = torch.zeros(size, dtype=torch.bool, device=device)
    prompt_mask[flat[len(count_idx) :]] = True
    return counts.view(row, vocab), prompt_mask.view(row, vocab)


def filtered_logits(
    logits: torch.Tensor,
    params: SamplingParams,
    prompt_ids: Sequence[int] = (),
    output_ids: Sequence[int] = (),
    draft_ids: Sequence[int] = (),
    bitmask: torch.Tensor | None = None,
    vocab_limit: int | None = None,
    *,
    output_counts: torch.Tensor | None = None,
    prompt_mask: torch.Tensor | None = None,
    check_rows: bool = True,
) -> torch.Tensor:
    """Every processing step except the final temperature + softmax. Returns new float32 logits
    `[rows, V]` (untempered) with -inf on every token that p must give zero probability.

    logits: `[rows, V]` raw model logits; row j is the position after output + draft[:j].
    bitmask: int32 `[rows, ceil(V/32)]` grammar mask for the same rows, or None.
    vocab_limit: tokens >= this id are never sampled (model embedding wider than the tokenizer).
    output_counts / prompt_mask: per-row history given directly (float `[rows, V]` counts of
    output + draft prefix, bool `[rows, V]` prompt tokens; see `history_tensors`) instead of the
    id lists, so rows of many requests sharing params are processed in one call.
    check_rows: raise when a row allows no token. It reads the result back to the host, a device
    sync on CUDA, so the engine turns it off there and checks within its one sync per step.
    A Triton kernel given these logits and `params.temperature` computes the same p.
    """
    if logits.ndim != 2:
        raise ValueError(f"logits must be [rows, V], got shape {tuple(logits.shape)}")
    rows, vocab = logits.shape
    if output_counts is None and rows > len(draft_ids) + 1:
        raise ValueError(f"{rows} logit rows need at least {rows - 1} draft ids, got {len(draft_ids)}")
    out = logits.to(torch.float32).clone()
    device = out.device

    if params.needs_history and output_counts is None:
        output_counts = _output_counts(rows, vocab, output_ids, draft_ids, device)
    if params.repetition_penalty != 1.0:
        seen = output_counts > 0
        if prompt_mask is not None:
            seen |= prompt_mask
        elif len(prompt_ids):
            seen[:, torch.as_tensor(list(prompt_ids), dtype=torch.long, device=device)] = True
        penalized = torch.where(out > 0, out / params.repetition_penalty, out * params.repetition_penalty)
        out = torch.where(seen, penalized, out)
    if params.presence_penalty or params.frequency_penalty:
        out -= params.frequency_penalty * output_counts + params.presence_penalty * (output_counts > 0).float()
    if params.logit_bias:
        if max(params.logit_bias) >= vocab:
            raise ValueError(f"logit_bias names token {max(params.logit_bias)}, beyond the vocabulary of {vocab}")
        ids = upload(torch.tensor(list(params.logit_bias.keys()), dtype=torch.long), device)
        out[:, ids] += upload(torch.tensor(list(params.logit_bias.values()), dtype=torch.float32), device)
    if bitmask is not None:
        apply_bitmask_(out, bitmask)
    if vocab_limit is not None and vocab_limit < vocab:
        out[:, vocab_limit:] = float("-inf")
    if check_rows and not torch.isfinite(out.max(dim=-1).values).all():
        raise ValueError("a row has no allowed token: the grammar mask (or vocabulary limit) forbids every token")
    if params.greedy:
        return out

    tempered = out / params.temperature
    if params.top_k and params.top_k < vocab:
        kth = torch.topk(tempered, params.top_k, dim=-1).values[:, -1:]
        out = out.masked_fill(tempered < kth, float("-inf"))
        tempered = tempered.masked_fill(tempered < kth, float("-inf"))
    if params.top_p < 1.0 or params.min_p > 0.0:
        probs = torch.softmax(tempered, dim=-1)
        drop = torch.zeros_like(probs, dtype=torch.bool)
        if params.top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            # Keep the smallest prefix whose mass reaches top_p: drop a token when the mass
            # strictly before it already reaches top_p. The top token is always kept.
            mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
            drop_sorted = mass_before >= params.top_p
            drop_sorted[:, 0] = False
            drop |= torch.zeros_like(drop).scatter(-1, order, drop_sorted)
        if params.min_p > 0.0:
            drop |= probs < params.min_p * probs.max(dim=-1, keepdim=True).values
        out = out.masked_fill(drop, float("-inf"))
    return out


def process_logits(
    logits: torch.Tensor,
    params: SamplingParams,
    prompt_ids: Sequence[int] = (),
    output_ids: Sequence[int] = (),
    draft_ids: Sequence[int] = (),
    bitmask: torch.Tensor | None = None,
    vocab_limit: int | None = None,
    *,
    output_counts: torch.Tensor | None = None,
    prompt_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Raw logits `[rows, V]` -> final probability rows `[rows, V]` (float32, each sums to 1).

    Row j is the distribution after `prompt + output + draft[:j]`; see `filtered_logits` for the
    arguments. Greedy (temperature 0) rows are one-hot at the argmax.
    """
    out = filtered_logits(logits, params, prompt_ids, output_ids, draft_ids, bitmask, vocab_limit, output_counts=output_counts, prompt_mask=prompt_mask)
    if params.greedy:
        return torch.nn.functional.one_hot(out.argmax(dim=-1), out.shape[-1]).to(torch.float32)
    return torch.softmax(out / params.temperature, dim=-1)
