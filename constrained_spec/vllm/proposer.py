"""constrained_spec's proposers as a vLLM speculative method (`custom_class`).

    LLM(model, speculative_config={"method": "custom_class",
        "model": "constrained_spec.vllm.proposer.ConstrainedSpecProposer", "num_speculative_tokens": 4})

The draft for each running request comes from the `auto` chain (proposers/chain.py): the
grammar-forced text, then a byte-level copy from the prompt or output (n-gram), then the suffix
tree over earlier outputs. vLLM verifies the drafts with its rejection sampler as one-hot drafts:
exact for any draft that does not depend on the verifier's random numbers, which ours never do.

vLLM hands a custom proposer only the batch's token arrays (`propose(sampled_token_ids,
num_tokens_no_spec, token_ids_cpu)`), not the request ids or sampling parameters. The proposer
therefore wraps the model runner's `propose_draft_token_ids` (once, when vLLM builds it in the
worker process) to see the runner: its persistent batch (request ids, prompt lengths,
temperature) and each request's sampling parameters. The grammar lives in the scheduler, another
process, so the proposer keeps its own matcher per constrained request: it compiles the request's
constraint with our compiler (cached) and advances it over the committed output. That works
whichever structured-output backend vLLM enforces with (ours, xgrammar, guidance); drafts a
backend would refuse are cut by vLLM's `validate_tokens` before verification.
"""

from __future__ import annotations

from typing import Any

import torch

from ..grammar import GrammarError
from ..proposers import ProposalContext, auto_proposer
from ..sampling import SamplingParams
from .backend import compile_request, vocabulary_for

__all__ = ["ConstrainedSpecProposer", "PROPOSER_PATH"]

PROPOSER_PATH = "constrained_spec.vllm.proposer.ConstrainedSpecProposer"
_GREEDY_EPS = 1e-5  # vLLM stores temperature 0 for greedy requests


class ConstrainedSpecProposer:
    """vLLM custom proposer over our `auto` chain. One instance per model runner."""

    def __init__(self, vllm_config: Any) -> None:
        from vllm.tokenizers import cached_tokenizer_from_config

        model_config = vllm_config.model_config
        self.num_speculative_tokens = int(vllm_config.speculative_config.num_speculative_tokens)
        self.max_model_len = int(model_config.max_model_len)
        tokenizer = cached_tokenizer_from_config(model_config=model_config)
        self.vocab = vocabulary_for(tokenizer, model_config.get_vocab_size())
        self.chain = auto_proposer(tokenizer, token_bytes=self.vocab.token_bytes)
        # A reasoning parser means the constraint starts somewhere inside the output: no forced text.
        self.use_grammar = not vllm_config.structured_outputs_config.reasoning_parser
        self.generator = torch.Generator().manual_seed(int(model_config.seed or 0))
        self.runner: Any = None  # the model runner, bound before every propose
        self._drafted: dict[str, int] = {}  # request -> length of its last draft
        self._running: dict[str, tuple[list[int], list[int]]] = {}  # request -> (prompt, output) last seen
        self._matchers: dict[str, list[Any]] = {}  # request -> [matcher, output tokens it has consumed]
        self.num_drafted = self.num_accepted = 0
        _bind_runner_batches()

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        """No model to load: the proposers draft from text and the grammar."""

    def propose(self, sampled_token_ids: list[list[int]], num_tokens_no_spec: Any, token_ids_cpu: Any, slot_mappings: Any = None) -> list[list[int]]:
        if self.runner is None:
            raise RuntimeError("ConstrainedSpecProposer was not bound to its model runner (vLLM's runner interface changed?)")
        batch = self.runner.input_batch
        req_ids = batch.req_ids
        self._observe_finished(set(req_ids))
        drafts: list[list[int]] = []
        for i, sampled in enumerate(sampled_token_ids):
            req_id = req_ids[i]
            if not sampled:  # a partial prefill chunk: nothing to draft from yet
                drafts.append([])
                continue
            self._feedback(req_id, len(sampled) - 1)
            n = int(num_tokens_no_spec[i])
            budget = min(self.num_speculative_tokens, self.max_model_len - n - 1)
            num_prompt = int(batch.num_prompt_tokens[i])
            ids = token_ids_cpu[i, :n].tolist()
            prompt, output = ids[:num_prompt], ids[num_prompt:]
            self._running[req_id] = (prompt, output)
            if budget <= 0:
                drafts.append([])
                continue
            temperature = float(batch.temperature_cpu[i])
            params = SamplingParams(temperature=0.0 if temperature < _GREEDY_EPS else temperature)
            context = ProposalContext(req_id, prompt, output, params, self._matcher_after(req_id, output), self.generator)
            draft = self.chain.propose(context, budget).token_ids
            self._drafted[req_id] = len(draft)
            self.num_drafted += len(draft)
            drafts.append(list(draft))
        return drafts

    def _feedback(self, req_id: str, num_accepted: int) -> None:
        drafted = self._drafted.pop(req_id, 0)
        if drafted:
            accepted = min(num_accepted, drafted)
            self.num_accepted += accepted
            self.chain.verified(req_id, drafted, accepted)

    def _observe_finished(self, running: set[str]) -> None:
        """Requests that left the batch have finished (or were preempted): the suffix tree and the
        forced proposer's spelling statistics learn from their output."""
        for req_id in [r for r in self._running if r not in running]:
            prompt, output = self._running.pop(req_id)
            self._drafted.pop(req_id, None)
            self._matchers.pop(req_id, None)
            self.chain.observe(prompt, output)

    def _matcher_after(self, req_id: str, output: list[int]) -> Any:
        """The request's matcher advanced over its committed output (a fork: proposers must not
        move it), or None for an unconstrained request or one the grammar cannot follow."""
        state = self._matchers.get(req_id)
        if state is None:
            state = self._matchers[req_id] = [self._compile(req_id), 0]
        matcher, consumed = state
        if matcher is None or consumed > len(output):
            return None
        try:
            for token in output[consumed:]:
                matcher.accept_token(token)
                state[1] += 1
        except GrammarError:  # a stop token other than EOS, or another backend's grammar: stop following
            state[0] = None
            return None
        return None if matcher.is_terminated() else matcher.fork()

    def _compile(self, req_id: str) -> Any:
        request = self.runner.requests.get(req_id)
        params = getattr(request, "sampling_params", None)
        structured = getattr(params, "structured_outputs", None)
        if not self.use_grammar or structured is None or structured.all_constraints_none():
            return None
        try:
            return compile_request(structured, self.vocab).matcher()
        except (GrammarError, ValueError):  # a constraint our compiler does not read: draft without it
            return None


def _bind_runner_batches() -> None:
    """Wrap the model runner's propose step (once per process) so that our proposer sees the
    runner (its batch and requests)."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original = GPUModelRunner.propose_draft_token_ids
    if getattr(original, "_constrained_spec", False):
        return

    def propose_draft_token_ids(self: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(self.drafter, ConstrainedSpecProposer):
            self.drafter.runner = self
        return original(self, *args, **kwargs)

    propose_draft_token_ids._constrained_spec = True  # type: ignore[attr-defined]
    GPUModelRunner.propose_draft_token_ids = propose_draft_token_ids
