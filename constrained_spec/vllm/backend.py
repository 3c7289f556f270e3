"""constrained_spec's compiler and matchers as a vLLM structured-output backend.

vLLM 0.32 keeps its structured-output backends in a fixed list (no registry yet, RFC #50966), so
`register()` (run by the general plugin in every vLLM process) adds the name "constrained_spec"
in the three places that know the list: the config's allowed names, the request validation in
`SamplingParams`, and the engine's `StructuredOutputManager.grammar_init`. Each patch handles
only our name and hands everything else to vLLM's original code.

    LLM(model, structured_outputs_config={"backend": "constrained_spec"})
    python -m vllm.entrypoints.openai.api_server --model M --structured-outputs-config.backend constrained_spec

JSON schema, JSON object, regex, choice and Lark grammars are supported (JSON is compact: no
whitespace between tokens); EBNF (GBNF) text and structural tags are refused with a clear error.
"""

from __future__ import annotations

import json
import threading
import typing
from dataclasses import dataclass, field
from typing import Any

import torch

from ..bitmask import bitmask_width
from ..grammar import GrammarError, Vocabulary
from ..grammar import compile as compile_constraint

__all__ = ["BACKEND_NAME", "ConstrainedSpecBackend", "ConstrainedSpecGrammar", "compile_request", "register", "vocabulary_for"]

BACKEND_NAME = "constrained_spec"
_vocab_lock = threading.Lock()
_vocabularies: dict[tuple[int, int], Vocabulary] = {}


def vocabulary_for(tokenizer: Any, vocab_size: int) -> Vocabulary:
    """Our Vocabulary for vLLM's tokenizer, built once per (tokenizer, logits width)."""
    key = (id(tokenizer), int(vocab_size))
    with _vocab_lock:
        if key not in _vocabularies:
            _vocabularies[key] = Vocabulary.from_tokenizer(tokenizer, size=max(int(vocab_size), len(tokenizer)))
        return _vocabularies[key]


def compile_spec(kind: str, spec: str, vocab: Vocabulary) -> Any:
    """vLLM's (request type name, spec text) -> our CompiledGrammar; GrammarError if unsupported."""
    if kind == "JSON":
        # closed objects, like the other generation surfaces (api.Generator): only declared keys
        return compile_constraint(json_schema=json.loads(spec) if isinstance(spec, str) else spec, vocab=vocab, closed_objects=True)
    if kind == "JSON_OBJECT":
        return compile_constraint(json_object=True, vocab=vocab)
    if kind == "REGEX":
        return compile_constraint(regex=spec, vocab=vocab)
    if kind == "CHOICE":
        choices = json.loads(spec) if isinstance(spec, str) else spec
        return compile_constraint(choices=[str(c) for c in choices], vocab=vocab)
    if kind == "GRAMMAR":
        if "::=" in spec:
            raise GrammarError("the constrained_spec backend reads Lark grammars, not EBNF/GBNF ('::=' found)")
        return compile_constraint(grammar=spec, vocab=vocab)
    raise GrammarError(f"the constrained_spec backend does not support {kind.lower()} constraints")


def compile_request(structured_outputs: Any, vocab: Vocabulary) -> Any:
    """vLLM's StructuredOutputsParams -> our CompiledGrammar (cached by the compiler)."""
    from vllm.v1.structured_output.request import get_structured_output_key

    kind, spec = get_structured_output_key(structured_outputs)
    return compile_spec(kind.name, spec, vocab)


@dataclass
class ConstrainedSpecGrammar:
    """One request's matcher, with vLLM's request-level interface. Stop tokens other than EOS are
    treated like EOS: allowed exactly where the grammar accepts."""

    matcher: Any
    eos_token_id: int
    stop_token_ids: frozenset[int] = frozenset()
    num_processed: int = 0  # output tokens accepted
    terminated: bool = False
    _initial: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._initial = self.matcher.fork()

    def _as_grammar_token(self, token: int) -> int:
        return self.eos_token_id if token in self.stop_token_ids else int(token)

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        for token in tokens:
            if self.terminated:
                return False
            try:
                self.matcher.accept_token(self._as_grammar_token(token))
            except GrammarError:
                return False
            self.num_processed += 1
            self.terminated = self.matcher.is_terminated()
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        tokens = [t for t in tokens if t >= 0]  # -1 pads speculative slots
        if self.terminated or not tokens:
            return []
        return tokens[: self.matcher.validate_tokens([self._as_grammar_token(t) for t in tokens])]

    def rollback(self, num_tokens: int) -> None:
        if num_tokens > 0:
            self.matcher.rollback(num_tokens)
            self.num_processed -= num_tokens
            self.terminated = self.matcher.is_terminated()

    def fill_bitmask(self, bitmask: torch.Tensor, batch_index: int) -> None:
        self.matcher.fill_bitmask(bitmask, batch_index)  # int32 [rows, ceil(V/32)], xgrammar's layout
        if self.stop_token_ids and self.matcher.is_accepting():
            row = bitmask[batch_index]
            for token in self.stop_token_ids:
                if token < row.shape[0] * 32:
                    row[token >> 5] |= _bit(token & 31)

    def is_terminated(self) -> bool:
        return self.terminated

    def reset(self) -> None:
        self.matcher = self._initial.fork()
        self.num_processed, self.terminated = 0, False


def _bit(i: int) -> int:
    """Bit i of an int32 word as a Python int that fits int32 (bit 31 is the sign)."""
    return -(1 << 31) if i == 31 else 1 << i


def _backend_class() -> type:
    """The StructuredOutputBackend subclass (built lazily: vllm is only imported inside vLLM)."""
    from vllm.v1.structured_output.backend_types import StructuredOutputBackend, StructuredOutputGrammar

    StructuredOutputGrammar.register(ConstrainedSpecGrammar)

    @dataclass
    class ConstrainedSpecBackend(StructuredOutputBackend):
        def compile_grammar(self, request_type: Any, grammar_spec: str, stop_token_ids: set[int] | None = None) -> Any:
            vocab = vocabulary_for(self.tokenizer, self.vocab_size)
            compiled = compile_spec(request_type.name, grammar_spec, vocab)
            stops = frozenset(int(t) for t in (stop_token_ids or ()) if int(t) != vocab.eos_token_id)
            return ConstrainedSpecGrammar(compiled.matcher(), vocab.eos_token_id, stops)

        def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
            return torch.full((max_num_seqs, bitmask_width(self.vocab_size)), -1, dtype=torch.int32)

        def destroy(self) -> None:
            pass

    return ConstrainedSpecBackend


_backend_cls: type | None = None


def __getattr__(name: str) -> Any:  # ConstrainedSpecBackend is importable once vllm is there
    global _backend_cls
    if name == "ConstrainedSpecBackend":
        if _backend_cls is None:
            _backend_cls = _backend_class()
        return _backend_cls
    raise AttributeError(name)


def _validate_request(params: Any, tokenizer: Any, vocab_size: int) -> None:
    """Request validation in the frontend: a bad constraint is a 400, not an engine-side failure.
    Compiles the constraint (cached per process), which also catches unsupported schema keywords."""
    from vllm.exceptions import VLLMValidationError

    try:
        compile_request(params.structured_outputs, vocabulary_for(tokenizer, vocab_size))
    except (GrammarError, ValueError) as exc:
        raise VLLMValidationError(f"constrained_spec backend: {exc}") from exc


def register() -> None:
    """Make "constrained_spec" a structured-output backend name vLLM accepts (idempotent)."""
    import pydantic
    import vllm.config.structured_outputs as so_config
    from vllm.sampling_params import SamplingParams
    from vllm.v1.structured_output import StructuredOutputManager

    if getattr(StructuredOutputManager.grammar_init, "_constrained_spec", False):
        return
    names = typing.get_args(so_config.StructuredOutputsBackend)
    if BACKEND_NAME not in names:
        extended = typing.Literal[(*names, BACKEND_NAME)]  # type: ignore[valid-type]
        so_config.StructuredOutputsBackend = extended
        cls = so_config.StructuredOutputsConfig
        cls.__annotations__["backend"] = extended
        cls.__dataclass_fields__["backend"].type = extended
        pydantic.dataclasses.rebuild_dataclass(cls, force=True)
        # VllmConfig holds its own copy of the nested schema: without this a dict config
        # (AsyncEngineArgs(structured_outputs_config={...}), as Ray Serve deployments build) is refused
        from vllm.config import VllmConfig

        pydantic.dataclasses.rebuild_dataclass(VllmConfig, force=True)

    original_validate = SamplingParams._validate_structured_outputs

    def validate(self: Any, model_config: Any, structured_outputs_config: Any, tokenizer: Any) -> None:
        if structured_outputs_config is None or self.structured_outputs is None or structured_outputs_config.backend != BACKEND_NAME:
            return original_validate(self, model_config, structured_outputs_config, tokenizer)
        from vllm.exceptions import VLLMValidationError

        if tokenizer is None:
            raise VLLMValidationError("structured outputs need a tokenizer (skip_tokenizer_init is set)")
        if self.structured_outputs._backend not in (None, BACKEND_NAME):
            raise VLLMValidationError(f"request-level backend {self.structured_outputs._backend!r} differs from the engine's {BACKEND_NAME!r}")
        _validate_request(self, tokenizer, model_config.get_vocab_size())
        self.structured_outputs._backend = BACKEND_NAME
        self.structured_outputs.__post_init__()

    original_init = StructuredOutputManager.grammar_init

    def grammar_init(self: Any, request: Any) -> None:
        if request.structured_output_request is not None and self.backend is None and request.sampling_params.structured_outputs._backend == BACKEND_NAME:
            self.backend = __getattr__("ConstrainedSpecBackend")(
                self.vllm_config, tokenizer=self.tokenizer, vocab_size=self.vllm_config.model_config.get_vocab_size()
            )
        original_init(self, request)

    grammar_init._constrained_spec = True  # type: ignore[attr-defined]
    SamplingParams._validate_structured_outputs = validate
    StructuredOutputManager.grammar_init = grammar_init
