"""The speculative loop: exact grammar-constrained speculative decoding for a batch of requests.

One `Engine.step()` does, for every unfinished request:
1. propose up to g draft tokens (g from the adaptive policy), cut to what the grammar allows;
2. advance the matcher along the draft once, filling the k + 1 bitmask rows (one per draft
   position plus the bonus position);
3. score `[last committed token] + draft` with the runner: k + 1 logit rows in one forward;
4. turn logits into p with `sampling.process_logits` (penalties see the draft prefix, the same
   rows mask the target) and verify with the exact rejection sampler;
5. commit the accepted drafts plus the recovered/bonus token, roll the matcher and the runner
   back to the committed state, and stop on EOS / grammar end / stop string / max_tokens.

Exactness: each step emits tokens distributed exactly as target sampling from the committed
prefix (rejection.py proves the rule). Whatever decides the draft (its length, the proposer) is
fixed before the step's random numbers are drawn, and cuts only ever drop positions *after* a
drafted token based on the tokens up to it, so the induction over steps holds.

Token accounting: `max_tokens` counts every sampled token, EOS included; EOS is not put in
`token_ids`. A request stopped by max_tokens reports finish_reason "length" (incomplete).

Log-probs (opt-in per request, `add_request(..., logprobs=n)`): for every emitted token, accepted
draft or not, its log-probability under the processed target distribution p it was verified
against (grammar mask, penalties, bias, temperature, top-k/p, min-p applied), and the n most
likely tokens of that p. Greedy requests (temperature 0) have a one-hot p; they report the
processed distribution at temperature 1 instead. Requests that do not ask pay nothing.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import torch

from .bitmask import bitmask_width, new_bitmask, pack_allowed, unpack_bitmask
from .detokenizer import Detokenizer
from .devices import upload
from .grammar.protocol import CompiledGrammar, GrammarMatcher
from .proposers.base import Draft, ProposalContext, Proposer
from .rejection import draw_randomness, greedy_verify, rejection_sample, sampled_verify
from .runners import Runner
from .sampling import SamplingParams, filtered_logits, history_tensors
from .spec_stats import DraftLengthPolicy, SpecStats

__all__ = ["Engine", "RequestOutput", "SpecStats", "TokenLogprob", "check_draft_limit"]

_DRAFT_SEED_OFFSET = 0x9E3779B97F4A7C15  # draft randomness: a stream separate from verification


@dataclass
class RequestOutput:
    """One request's state after a step. `token_ids`: everything generated so far (no EOS);
    `new_token_ids`: this step's delta. With the engine's `decode`: `text_delta` is the new text
    safe to show (held back while it could begin a stop string or ends in an unfinished
    character), and `text` the whole output (cut before a stop string) once finished."""

    request_id: str
    prompt_ids: list[int]
    token_ids: list[int]
    new_token_ids: list[int]
    finished: bool
    finish_reason: str | None  # "stop", "length", "abort" or None while running
    stats: SpecStats
    text: str | None = None
    text_delta: str = ""
    logprobs: list[TokenLogprob] | None = None  # aligned with token_ids, when asked for


@dataclass(frozen=True)
class TokenLogprob:
    """An emitted token's log-probability under p, and the `top` most likely (token, log p)."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass
class _Request:
    request_id: str
    prompt_ids: list[int]
    params: SamplingParams
    matcher: GrammarMatcher | None
    verify_gen: torch.Generator
    draft_gen: torch.Generator
    policy: DraftLengthPolicy
    max_draft_tokens: int  # this request's cap on drafts per step (0: no speculation)
    last_token: int  # committed but not yet in the runner's context
    output_ids: list[int] = field(default_factory=list)
    sampled: int = 0  # tokens sampled so far, EOS included (what max_tokens bounds)
    stats: SpecStats = field(default_factory=SpecStats)
    started_at: float = 0.0
    finish_reason: str | None = None
    detokenizer: Detokenizer | None = None  # with the engine's decode: text and stop strings
    top_logprobs: int | None = None  # None: no log-probs; n: the emitted token's and the top n
    logprobs: list[TokenLogprob] = field(default_factory=list)  # one per output token
    pending_logprobs: list[TokenLogprob] = field(default_factory=list)  # this step's, one per drawn token


@dataclass
class _Planned:
    """One request's draft for this step. `valid`: leading draft tokens the grammar accepts
    (a dense draft may end with one forbidden token, which verification always rejects)."""

    draft: Draft
    valid: int
    bitmask: torch.Tensor | None = None  # int32 [k + 1, W]


def check_draft_limit(value: object) -> int:
    """`max_draft_tokens`: an integer >= 0 (0: no speculation); ValueError otherwise."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"max_draft_tokens must be an integer >= 0, got {value!r}")
    return value


class Engine:
    """Batched exact speculative decoding. See the module docstring for the loop.

    runner: a `runners.Runner`. proposer: drafts tokens (None: plain constrained sampling through
    the same loop). vocabulary_limit: tokens >= this id are never sampled. decode: token ids ->
    text, needed for stop strings. max_draft_tokens: the most drafts per step. adaptive: choose
    the draft length per request from its acceptance (spec_stats.DraftLengthPolicy).
    kernel: the rejection kernel (`kernels.KERNELS`): "auto" uses Triton on CUDA tensors, "torch"
    never, "triton" always. On the CPU, "auto" verifies sampled requests that only mask and
    scale over their allowed tokens (`rejection.sampled_verify`: exact, its own random stream);
    "torch" keeps the reference sampler and the kernel's random stream (the same tokens as
    "triton" for a seed). (Grammar backends are chosen when compiling a grammar.)
    device: where per-request verification generators live (default: the runner's `device`, else
    the CPU); draft generators stay on the CPU, where proposers sample.

    One owner steps an engine (`step` / `generate`): a `scheduler.Scheduler` for a Generator, or
    code that holds the engine alone. `add_request` and `abort` may come from any thread; a
    `step` while another step runs raises instead of corrupting the requests' state.
    """

    def __init__(
        self,
        runner: Runner,
        *,
        eos_token_id: int,
        proposer: Proposer | None = None,
        vocabulary_limit: int | None = None,
        decode: Callable[[list[int]], str] | None = None,
        max_draft_tokens: int = 8,
        adaptive: bool = True,
        kernel: str = "auto",
        kernel_backend: None = None,
        policy_factory: Callable[[int], DraftLengthPolicy] | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        check_draft_limit(max_draft_tokens)
        from .kernels import check_kernel  # torch only; Triton is imported when a kernel runs

        if kernel_backend is not None:
            raise TypeError("Engine(kernel_backend=...) is now Engine(kernel=...)")
        check_kernel(kernel)
        self.runner = runner
        self.eos_token_id = eos_token_id
        self.proposer = proposer
        self.vocabulary_limit = vocabulary_limit
        self.decode = decode
        self.max_draft_tokens = max_draft_tokens
        self.adaptive = adaptive
        self.kernel = kernel
        self.policy_factory = policy_factory or (lambda k: DraftLengthPolicy(k))
        # Where the verification random numbers are drawn: the model's device (the runner's
        # `device` when it has one), so no V-wide row crosses the bus.
        self.device = torch.device(device if device is not None else getattr(runner, "device", "cpu"))
        self._requests: dict[str, _Request] = {}
        self._incoming: list[_Request] = []
        self._incoming_ids: set[str] = set()
        self._aborts: set[str] = set()
        self._lock = threading.Lock()
        self._stepping = threading.Lock()  # held by the one step in progress
        self._ids = itertools.count()

    # ---- requests (thread-safe; take effect at the next step) ----

    def add_request(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        grammar: CompiledGrammar | None = None,
        request_id: str | None = None,
        *,
        max_draft_tokens: int | None = None,
        logprobs: int | None = None,
    ) -> str:
        """Queue a request for the next step; returns its id. `max_draft_tokens` caps its drafts
        per step (None: the engine's; 0: no speculation, plain constrained sampling). logprobs:
        None (off), or n >= 0 to get each emitted token's log-prob and the n most likely
        alternatives (see the module docstring)."""
        prompt = [int(t) for t in prompt_ids]
        limit = self.max_draft_tokens if max_draft_tokens is None else check_draft_limit(max_draft_tokens)
        if not prompt:
            raise ValueError("prompt_ids must not be empty (the model needs at least one token to condition on)")
        if not isinstance(params, SamplingParams):
            raise TypeError(f"params must be SamplingParams, got {type(params).__name__}")
        if logprobs is not None and (not isinstance(logprobs, int) or isinstance(logprobs, bool) or logprobs < 0):
            raise ValueError(f"logprobs must be None or an integer >= 0, got {logprobs!r}")
        if params.logit_bias and max(params.logit_bias) >= self.runner.vocab_size:
            raise ValueError(f"logit_bias names token {max(params.logit_bias)}, beyond the vocabulary of {self.runner.vocab_size}")
        if params.stop and self.decode is None:
            raise ValueError("stop strings need the engine's `decode` function (Engine(..., decode=...))")
        seed = params.seed if params.seed is not None else int(torch.randint(0, 2**62, (1,)))
        request = _Request(
            request_id=request_id if request_id is not None else f"req-{next(self._ids)}-{uuid.uuid4().hex[:8]}",
            prompt_ids=prompt,
            params=params,
            matcher=grammar.matcher() if grammar is not None else None,
            verify_gen=torch.Generator(device=self.device).manual_seed(seed),
            draft_gen=torch.Generator().manual_seed((seed + _DRAFT_SEED_OFFSET) % 2**63),
            policy=self.policy_factory(limit),
            max_draft_tokens=limit,
            last_token=prompt[-1],
            top_logprobs=logprobs,
            detokenizer=Detokenizer(self.decode, params.stop, self.eos_token_id) if self.decode is not None else None,
        )
        with self._lock:
            if request.request_id in self._requests or request.request_id in self._incoming_ids:
                raise ValueError(f"request id {request.request_id!r} is already in use")
            self._incoming.append(request)
            self._incoming_ids.add(request.request_id)
        return request.request_id

    def abort(self, request_id: str) -> None:
        """Stop a request at the next step (finish_reason "abort"); unknown ids are ignored."""
        with self._lock:
            self._aborts.add(request_id)

    def has_unfinished(self) -> bool:
        with self._lock:
            return bool(self._requests or self._incoming)

    # ---- the loop ----

    def step(self) -> list[RequestOutput]:
        """One speculative step for every unfinished request; returns their outputs."""
        if not self._stepping.acquire(blocking=False):
            raise RuntimeError("Engine.step() while another step runs: an engine has one owner (scheduler.Scheduler)")
        try:
            return self._step()
        finally:
            self._stepping.release()

    def _step(self) -> list[RequestOutput]:
        with self._lock:
            incoming, self._incoming = self._incoming, []
            self._incoming_ids = set()
            aborts, self._aborts = self._aborts, set()
        now = time.perf_counter()
        for request in incoming:
            self.runner.start(request.request_id, request.prompt_ids[:-1])
            request.started_at = now
            self._requests[request.request_id] = request
        outputs = []
        for request_id in aborts:
            request = self._requests.get(request_id)
            if request is not None:
                request.finish_reason = "abort"
                outputs.append(self._finish(request, []))
        active = list(self._requests.values())
        if not active:
            return outputs

        plans = [self._plan(r) for r in active]  # 1 + 2: drafts and mask rows
        logits = self.runner.score([(r.request_id, [r.last_token] + p.draft.token_ids) for r, p in zip(active, plans)])  # 3
        emitted, num_accepted, target, target_is_p = self._verify(active, plans, logits)  # 4
        start = 0
        for request, plan, tokens, m in zip(active, plans, emitted, num_accepted):  # 5
            rows = len(plan.draft) + 1
            if request.top_logprobs is not None:
                self._record_logprobs(request, target[start : start + rows], target_is_p, tokens)
            start += rows
            outputs.append(self._commit(request, plan, tokens, m))
        return outputs

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams | Sequence[SamplingParams],
        grammars: Sequence[CompiledGrammar | None] | CompiledGrammar | None = None,
    ) -> list[RequestOutput]:
        """Run `prompts` to completion; returns their final outputs in order."""
        count = len(prompts)
        params_list = [params] * count if isinstance(params, SamplingParams) else list(params)
        grammar_list = list(grammars) if isinstance(grammars, (list, tuple)) else [grammars] * count
        if len(params_list) != count or len(grammar_list) != count:
            raise ValueError(f"{count} prompts need as many params and grammars (got {len(params_list)} and {len(grammar_list)})")
        ids = [self.add_request(p, sp, g) for p, sp, g in zip(prompts, params_list, grammar_list)]
        final: dict[str, RequestOutput] = {}
        wanted = set(ids)
        while wanted - final.keys():
            for out in self.step():
                if out.finished and out.request_id in wanted:
                    final[out.request_id] = out
        return [final[i] for i in ids]

    # ---- the pieces of a step ----

    def _plan(self, r: _Request) -> _Planned:
        """Ask the proposer for a draft, cut it to what may be verified, and fill its mask rows."""
        budget = r.params.max_tokens - r.sampled - 1  # k drafts emit up to k + 1 tokens
        k = min(r.policy.choose() if self.adaptive and r.max_draft_tokens else r.max_draft_tokens, budget)
        draft = Draft()
        if self.proposer is not None and k > 0:
            context = ProposalContext(request_id=r.request_id, prompt_ids=r.prompt_ids, output_ids=r.output_ids, params=r.params, matcher=r.matcher, generator=r.draft_gen)
            draft = self.proposer.propose(context, k)
        tokens = [int(t) for t in draft.token_ids[:k]]
        vocab = self.runner.vocab_size
        if any(not 0 <= t < vocab for t in tokens):
            raise ValueError(f"proposer {draft.source or type(self.proposer).__name__!r} drafted a token outside [0, {vocab})")
        dense = draft.probs is not None
        valid = r.matcher.validate_tokens(tokens) if r.matcher is not None else len(tokens)
        # One-hot drafts are deterministic, so any cut is exact. A sampled (dense) draft keeps its
        # first forbidden token: verification rejects it with the exact residual.
        keep = min(len(tokens), valid + 1) if dense else valid
        if self.eos_token_id in tokens[:keep]:  # nothing follows EOS
            keep = tokens.index(self.eos_token_id) + 1
        tokens = tokens[:keep]
        valid = min(valid, keep)
        bitmask = None
        if r.matcher is not None:
            bitmask, keep = self._mask_rows(r.matcher, tokens, valid)
            tokens, valid = tokens[:keep], min(valid, keep)
        probs = draft.probs[: len(tokens)] if dense else None
        if probs is not None and probs.shape != (len(tokens), vocab):
            raise ValueError(f"draft probs must be [{len(tokens)}, {vocab}], got {tuple(probs.shape)}")
        cut = Draft(token_ids=tokens, probs=probs, source=draft.source, num_forced=min(draft.num_forced, len(tokens)))
        return _Planned(draft=cut, valid=valid, bitmask=bitmask)

    @staticmethod
    def _mask_rows(matcher: GrammarMatcher, tokens: list[int], valid: int) -> tuple[torch.Tensor, int]:
        """Advance the matcher along the valid drafts, filling one mask row per position. Rows
        the target can never be asked about (after a forbidden or terminating token) allow all.
        The draft is cut after a token that terminates the grammar. Returns (bitmask [k + 1, W],
        kept draft length); the matcher is left advanced by min(valid, kept) tokens."""
        bitmask = new_bitmask(len(tokens) + 1, matcher.vocab_size, allow_all=True)  # [k + 1, W]
        for j in range(len(tokens) + 1):
            if matcher.is_terminated():  # draft j - 1 ended the grammar: cut what follows
                return bitmask[: j + 1], j
            matcher.fill_bitmask(bitmask, j)
            if j == valid:
                break
            matcher.accept_token(tokens[j])
        return bitmask, len(tokens)

    def _verify(self, active: list[_Request], plans: list[_Planned], logits: list[torch.Tensor]) -> tuple[list[list[int]], list[int], torch.Tensor | None, bool]:
        """Process every request's k + 1 rows and run the rejection sampler on the batch.
        Returns (tokens per request, accepted drafts per request, the target rows [D + B, V]
        (None on the greedy fast path, where no request reads them), whether non-greedy rows hold
        p itself rather than its processed logits).

        Device traffic per step: one upload of the packed grammar bitmask, one of the draft ids and
        offsets, the dense q rows (already on the device for a draft model there), and one read
        back of the result (the step's only host sync; the "no allowed token" check rides on it)."""
        vocab = logits[0].shape[-1]
        device = logits[0].device
        use_kernel = self.kernel == "triton" or (self.kernel == "auto" and device.type == "cuda")
        counts = [len(p.draft) for p in plans]
        bitmask = self._step_bitmask(plans, vocab, device)  # [D + B, W] or None
        fast = None
        mask_only = device.type == "cpu" and all(_kernel_only(r.params) and r.top_logprobs is None for r in active)
        if mask_only and not use_kernel and all(r.params.greedy for r in active):
            # T = 0, mask only: the masked argmax read from the raw rows, up to the first
            # rejection (the same tokens as the processed rows give, ~1 ms less per step)
            fast = greedy_verify(logits, bitmask, [p.draft.token_ids for p in plans])
        elif mask_only and self.kernel == "auto" and bitmask is not None and all(p.draft.probs is None for p in plans):
            # sampled, mask and temperature only, one-hot drafts: p over each row's allowed
            # tokens only, one uniform for the draw (no V-wide pass; its own random stream)
            fast = sampled_verify(logits, bitmask, [p.draft.token_ids for p in plans],
                                  [0.0 if r.params.greedy else r.params.temperature for r in active], [r.verify_gen for r in active])
        if fast is not None:
            emitted, accepted, ok = fast
            if not ok:
                raise ValueError("a row has no allowed token: the grammar mask (or vocabulary limit) forbids every token")
            return emitted, accepted, None, False
        target, row_ok = self._target_rows(active, plans, logits, bitmask, fused=use_kernel)  # [D + B, V], [D + B]
        ids_and_offsets = upload(torch.tensor(
            [t for p in plans for t in p.draft.token_ids] + [0, *itertools.accumulate(counts)], dtype=torch.long
        ), device)  # [D + B + 1]: one upload
        draft_ids, cu = ids_and_offsets[: sum(counts)], ids_and_offsets[sum(counts) :]  # [D], [B + 1]
        draft_probs = None
        if any(p.draft.probs is not None for p in plans):
            rows, start = [], 0
            for p, k in zip(plans, counts):  # one-hot drafts become one-hot q rows: the same rule
                q = p.draft.probs
                if q is None:  # scatter, not one_hot (which checks its input on the host)
                    q = torch.zeros(k, vocab, device=device).scatter_(1, draft_ids[start : start + k, None], 1.0)
                rows.append(upload(q, device).float())
                start += k
            draft_probs = torch.cat(rows)  # [D, V]
        greedy_flags = [r.params.greedy for r in active]
        randomness = draw_randomness([r.verify_gen for r in active], counts, vocab, device, greedy=greedy_flags)
        if use_kernel:  # fused mask + temperature + rejection (kernels/); same numbers, same tokens
            from .kernels import rejection_sample_logits

            temperature = upload(torch.tensor([r.params.temperature for r in active], dtype=torch.float32), device)  # [B]
            out, num_accepted = rejection_sample_logits(
                target, bitmask, temperature, draft_ids, cu, draft_probs, randomness,
                kernel="triton" if self.kernel == "triton" else "auto", max_num_draft_tokens=max(counts),
            )
        else:
            greedy = upload(torch.tensor(greedy_flags, dtype=torch.bool), device)  # [B]
            out, num_accepted = rejection_sample(target, draft_ids, cu, draft_probs, randomness, greedy)
        # The one host sync of the step: tokens, accepted counts and the row check together.
        batch, width = out.shape
        result = torch.cat([out.flatten(), num_accepted.to(out.dtype), (~row_ok).sum().to(out.dtype)[None]]).tolist()
        if result[-1]:
            raise ValueError("a row has no allowed token: the grammar mask (or vocabulary limit) forbids every token")
        rows_out = [result[b * width : (b + 1) * width] for b in range(batch)]
        accepted = result[batch * width : batch * width + batch]
        return [row[: m + 1] for row, m in zip(rows_out, accepted)], accepted, target, not use_kernel

    def _step_bitmask(self, plans: list[_Planned], vocab: int, device: torch.device) -> torch.Tensor | None:
        """Every row's grammar mask, packed `[D + B, W]`, uploaded once. The vocabulary limit is
        folded in (its tokens' bits cleared), so the kernel applies both. None when there is
        neither a grammar nor a limit below the logits' width."""
        limited = self.vocabulary_limit is not None and self.vocabulary_limit < vocab
        if all(p.bitmask is None for p in plans) and not limited:
            return None
        width = bitmask_width(vocab)
        parts = [_fit_width(p.bitmask, len(p.draft) + 1, width) for p in plans]
        packed = parts[0].contiguous() if len(parts) == 1 else torch.cat(parts)  # [D + B, W] (a plan's rows are its own)
        if limited:
            packed &= _limit_words(self.vocabulary_limit, width)
        return upload(packed, device)

    def _target_rows(
        self, active: list[_Request], plans: list[_Planned], logits: list[torch.Tensor], bitmask: torch.Tensor | None, fused: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows the sampler reads, and whether each row allows a token (bool `[D + B]`).

        Torch path: p for every row through `process_logits` (greedy rows: the processed logits,
        same argmax). Fused path (kernel): the raw logits for requests that only mask and scale
        (the kernel applies the bitmask and the temperature itself); requests with top-k / top-p /
        min-p / penalties / logit bias take the slower path through the untempered
        `filtered_logits` first (applying the mask there again is harmless). One call per group
        of requests with equal processing parameters (rows are independent given their history)."""
        vocab = logits[0].shape[-1]
        device = logits[0].device
        offsets = [0, *itertools.accumulate(len(p.draft) + 1 for p in plans)]
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(active):
            groups.setdefault(r.params.processing_key(), []).append(i)
        out: list[torch.Tensor | None] = [None] * len(active)
        for members in groups.values():
            params = active[members[0]].params
            batch_logits = torch.cat([logits[i] for i in members])  # [rows, V]
            # Log-probs read these rows, so a request that asks for them gets processed rows.
            if fused and _kernel_only(params) and all(active[i].top_logprobs is None for i in members):
                for i, start in zip(members, itertools.accumulate([0] + [len(plans[i].draft) + 1 for i in members])):
                    out[i] = batch_logits[start : start + len(plans[i].draft) + 1]
                continue
            rows_mask = None
            if bitmask is not None:
                rows_mask = torch.cat([bitmask[offsets[i] : offsets[i + 1]] for i in members])  # [rows, W], on the device
            if params.needs_history:
                counts, prompt_mask = history_tensors(
                    [(active[i].prompt_ids, active[i].output_ids, plans[i].draft.token_ids) for i in members], vocab, device
                )
            else:  # no penalty reads the history: a zero view, no memory
                counts, prompt_mask = torch.zeros(1, 1, device=device).expand(batch_logits.shape), None
            # Greedy rows are only argmaxed (by rejection_sample or the kernel): the processed
            # logits have the same argmax as the one-hot p, without building it. The vocabulary
            # limit is in `bitmask` already.
            filtered = filtered_logits(batch_logits, params, bitmask=rows_mask, vocab_limit=self.vocabulary_limit, output_counts=counts, prompt_mask=prompt_mask, check_rows=False)
            rows = filtered if fused or params.greedy else torch.softmax(filtered / params.temperature, dim=-1)
            start = 0
            for i in members:
                n = len(plans[i].draft) + 1
                out[i] = rows[start : start + n]
                start += n
        target = torch.cat(out)  # [D + B, V]
        row_ok = _rows_allow_a_token(target if not fused else None, logits, bitmask, self.vocabulary_limit, vocab)
        return target, row_ok

    @staticmethod
    def _record_logprobs(r: _Request, rows: torch.Tensor, rows_are_p: bool, tokens: list[int]) -> None:
        """Log p of each emitted token (token j was drawn at row j) and the top n of that row.
        rows: [k + 1, V], p itself or (greedy / kernel path) the processed untempered logits."""
        if rows_are_p and not r.params.greedy:
            logp = torch.log(rows[: len(tokens)].float())  # [n, V]
        else:
            temperature = r.params.temperature if not r.params.greedy else 1.0
            logp = torch.log_softmax(rows[: len(tokens)].float() / temperature, dim=-1)  # [n, V]
        chosen = logp.gather(1, torch.tensor(tokens, dtype=torch.long, device=logp.device)[:, None])[:, 0].tolist()
        tops: list[tuple[tuple[int, float], ...]] = [()] * len(tokens)
        if r.top_logprobs:
            values, ids = torch.topk(logp, min(r.top_logprobs, logp.shape[-1]), dim=-1)  # [n, top]
            tops = [tuple(zip(i, v)) for i, v in zip(ids.tolist(), values.tolist())]
        r.pending_logprobs = [TokenLogprob(t, lp, top) for t, lp, top in zip(tokens, chosen, tops)]

    def _commit(self, r: _Request, plan: _Planned, tokens: list[int], m: int) -> RequestOutput:
        """Keep the m accepted drafts and the final token; roll matcher and runner back to match."""
        k = len(plan.draft)
        if m > plan.valid:
            raise RuntimeError(f"request {r.request_id}: accepted {m} drafts but only {plan.valid} are grammar-valid")
        if r.matcher is not None:
            advanced = min(plan.valid, k)
            r.matcher.rollback(advanced - m)
            if r.matcher.is_terminated():  # x_m was EOS or ended the grammar: drop the bonus
                tokens = tokens[:m]
            else:
                r.matcher.accept_token(tokens[m])
        r.stats.record(k, m, plan.draft.num_forced, len(tokens))
        r.policy.observe(k, m)
        feedback = getattr(self.proposer, "verified", None)  # optional: learns acceptance per step
        if k and feedback is not None:
            feedback(r.request_id, k, m)
        new: list[int] = []
        pending = r.pending_logprobs if r.top_logprobs is not None else None
        for j, token in enumerate(tokens):
            r.sampled += 1
            if token == self.eos_token_id:
                r.finish_reason = "stop"
                break
            r.output_ids.append(token)
            new.append(token)
            if pending is not None:
                r.logprobs.append(pending[j])
            if r.detokenizer is not None and r.detokenizer.stop and r.detokenizer.push([token]):  # a stop string
                r.finish_reason = "stop"
                break
        if r.detokenizer is not None and not r.detokenizer.stop:  # nothing to find per token: decode once
            r.detokenizer.push(new)
        if r.finish_reason is None:
            if r.matcher is not None and r.matcher.is_terminated():
                r.finish_reason = "stop"
            elif r.sampled >= r.params.max_tokens:
                r.finish_reason = "length"
        if r.finish_reason is not None:
            return self._finish(r, new)
        self.runner.rollback(r.request_id, k - m)  # the context keeps x_1..x_m; the last token waits
        r.last_token = tokens[m]
        r.stats.elapsed_s = time.perf_counter() - r.started_at
        return self._output(r, new)

    def _finish(self, r: _Request, new: list[int]) -> RequestOutput:
        self.runner.release(r.request_id)
        del self._requests[r.request_id]
        r.stats.elapsed_s = time.perf_counter() - r.started_at
        if r.detokenizer is not None:
            r.detokenizer.finish()
        if self.proposer is not None and r.finish_reason != "abort":
            self.proposer.observe(r.prompt_ids, r.output_ids)
        return self._output(r, new)

    @staticmethod
    def _output(r: _Request, new: list[int]) -> RequestOutput:
        finished = r.finish_reason is not None
        detokenizer = r.detokenizer
        return RequestOutput(
            request_id=r.request_id,
            prompt_ids=r.prompt_ids,
            token_ids=list(r.output_ids),
            new_token_ids=new,
            finished=finished,
            finish_reason=r.finish_reason,
            stats=r.stats,
            text=detokenizer.text if detokenizer is not None and finished else None,
            text_delta=detokenizer.delta() if detokenizer is not None else "",
            logprobs=list(r.logprobs) if r.top_logprobs is not None else None,
        )


def _fit_width(bitmask: torch.Tensor | None, rows: int, width: int) -> torch.Tensor:
    """A request's mask rows at the logits' width: no mask allows all; missing words forbid."""
    if bitmask is None:
        return torch.full((rows, width), -1, dtype=torch.int32)
    if bitmask.shape[1] >= width:
        return bitmask[:, :width]
    return torch.cat([bitmask, torch.zeros(rows, width - bitmask.shape[1], dtype=torch.int32)], dim=1)


def _kernel_only(params: SamplingParams) -> bool:
    """Requests the fused kernel processes from the raw logits: only the mask and the temperature."""
    return not (
        params.top_k or params.top_p < 1.0 or params.min_p > 0.0 or params.repetition_penalty != 1.0
        or params.presence_penalty or params.frequency_penalty or params.logit_bias
    )


@lru_cache(maxsize=8)
def _limit_words(limit: int, width: int) -> torch.Tensor:
    """Packed int32 `[W]` words allowing exactly the tokens below `limit` (built once per shape,
    ~60 us; read only: callers AND it into their own rows)."""
    allowed = torch.arange(width * 32) < limit  # [32 W]
    return pack_allowed(allowed[None])[0]


def _rows_allow_a_token(
    target: torch.Tensor | None, logits: list[torch.Tensor], bitmask: torch.Tensor | None, limit: int | None, vocab: int
) -> torch.Tensor:
    """bool `[D + B]`: does each row allow at least one token? Read with the step's one sync.
    From the processed rows when there are any (torch path), else from the mask and the raw
    logits' finiteness (fused path: the kernel sees exactly these)."""
    if target is not None:  # probabilities (NaN where nothing is allowed) or filtered logits (-inf)
        return torch.isfinite(target.max(dim=-1).values)
    allowed = torch.cat(logits) > float("-inf")  # [D + B, V]
    if bitmask is not None:  # the vocabulary limit is folded into it
        covered = min(vocab, bitmask.shape[1] * 32)
        allowed[:, :covered] &= unpack_bitmask(bitmask, covered)
        allowed[:, covered:] = False
    return allowed.any(dim=-1)
