"""The Python API: `generate(prompt, schema=Person)` and the reusable `Generator` behind it.

A `Generator` loads a model once (the default SmolLM2-135M-Instruct, a local HF folder, or a
loaded model), builds its grammar vocabulary and a speculative `Engine`, and then serves calls:

    gen = Generator()
    person = gen.generate("Extract: Ada Lovelace, 36", schema=Person).value   # a Person
    for delta in (s := gen.stream("Count to five", regex=r"[0-9 ]+")): print(delta, end="")
    s.result.value

Speculation never changes the output distribution (the engine's rejection rule is exact), so it
is on by default; `speculative=False` turns it off for one call (`speculative=3`: at most 3
drafts per step), `draft="none"` for all.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .chat import normalize_messages, render_prompt, schema_instruction
from .grammar.protocol import CompiledGrammar, GrammarError
from .inputs import PromptTooLong, check_constraint, check_prompt_fits, context_length, longest_token_chars, message_chars, one_line
from .sampling import SamplingParams
from .schemas import OutputValidationError, resolve_schema

__all__ = [
    "Generator", "Result", "Stream", "generate", "stream", "check_request", "default_generator", "GrammarError",
    "OutputValidationError", "PromptTooLong",
]  # fmt: skip

Prompt = str | Sequence[Mapping[str, Any]]


@dataclass
class Result:
    """One finished generation.

    text: the generated text (without EOS; cut before a stop string).
    value: the validated value: a pydantic instance for a pydantic schema, parsed JSON for a
        dict/JSON schema or json_object, the text itself for regex / grammar / choices, None for
        unconstrained text or when `incomplete`.
    token_ids: generated token ids (without the final EOS).
    finish_reason: "stop" (complete), "length" (max_tokens hit) or "abort".
    incomplete: True when the output was cut before the constraint was satisfied.
    stats: speculation statistics (drafted, accepted, mean_accepted_length, tokens_per_second, ...).
    """

    text: str
    value: Any
    token_ids: list[int]
    finish_reason: str
    incomplete: bool
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Constraint:
    grammar: CompiledGrammar | None
    parse: Callable[[str], Any] | None  # complete text -> value
    hint: str | None  # sentence added to the system prompt (JSON schemas)


def _log(message: str) -> None:
    print(f"[constrained_spec] {message}", file=sys.stderr, flush=True)


def _make_params(params: SamplingParams | None, sampling_kwargs: dict[str, Any]) -> SamplingParams:
    base = params if params is not None else SamplingParams()
    if not isinstance(base, SamplingParams):
        raise ValueError(f"params must be a SamplingParams, got {type(base).__name__}")
    if not sampling_kwargs:
        return base
    known = set(SamplingParams.__dataclass_fields__)
    unknown = sorted(set(sampling_kwargs) - known)
    if unknown:
        raise ValueError(f"unknown sampling parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    try:
        return base.replace(**sampling_kwargs)
    except TypeError as exc:  # e.g. stop=5: tuple(5)
        raise ValueError(f"bad sampling parameter value: {exc}") from None


_LOADED_CACHE_SIZE = 2
_loaded: dict[tuple, Any] = {}  # (model name or folder, load options) -> LoadedModel, oldest first
_loaded_lock = threading.Lock()


def _load_shared(model: Any, verbose: bool, **load_options: Any) -> Any:
    """load_model through a small cache: `generate()` and every `Generator(...)` of the same model
    (and options such as device and dtype) share one copy of the weights."""
    from .models import load_model

    key = ("default" if model in (None, "default") else str(model), tuple(sorted((k, str(v)) for k, v in load_options.items())))
    with _loaded_lock:
        if key in _loaded:
            _loaded[key] = _loaded.pop(key)  # most recently used last
            return _loaded[key]
        loaded = load_model(model, verbose=verbose, **load_options)
        _loaded[key] = loaded
        while len(_loaded) > _LOADED_CACHE_SIZE:
            _loaded.pop(next(iter(_loaded)))
        return loaded


def _load(model: Any, tokenizer: Any, verbose: bool, device: Any = None, dtype: Any = None) -> Any:
    """None / "default" / folder / LoadedModel / (HF model + tokenizer) -> LoadedModel.
    Loaded from a name or folder: on `device` ("auto" when None) in `dtype`. A model object is
    moved to `device` / cast to `dtype` only when they are given. Both are checked first."""
    from .devices import resolve_device, resolve_dtype
    from .models import LoadedModel

    if model is None or isinstance(model, str) or hasattr(model, "__fspath__"):
        if tokenizer is not None:
            raise ValueError("tokenizer= is only used with an already loaded model object")
        # Resolved before the cache lookup: equal choices share one copy of the weights.
        return _load_shared(model, verbose, device=resolve_device("auto" if device is None else device), dtype=resolve_dtype(dtype))
    target = (resolve_device(device) if device is not None else None, resolve_dtype(dtype) if dtype is not None else None)
    if isinstance(model, LoadedModel):
        loaded = model
    elif hasattr(model, "model") and hasattr(model, "tokenizer"):
        loaded = LoadedModel(model=model.model, tokenizer=model.tokenizer, name=getattr(model, "name", "model"))
    elif tokenizer is None:
        raise ValueError("a loaded model object needs its tokenizer: Generator(model, tokenizer=tok)")
    else:
        name = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
        loaded = LoadedModel(model=model, tokenizer=tokenizer, name=str(name))
    if any(t is not None for t in target):
        loaded.model.to(*[t for t in target if t is not None])
    return loaded


class Generator:
    """A loaded model + grammar vocabulary + speculative engine, reused across calls.

    model: None or "default" (SmolLM2-135M-Instruct), a local HF folder, a `LoadedModel`, or a HF
        model object (then pass `tokenizer=`).
    draft: the proposer: "auto" (grammar-forced strings + n-gram + suffix tree), "forced",
        "ngram", "suffix", "none", a draft model folder, or a `Proposer` object.
    backend: grammar backend: "default" (JSON schemas through llguidance where it accepts them,
        else our compiler; everything else through ours), "native" (ours only) or "llguidance".
    closed_objects: True (the default): a JSON-schema object gets only the keys its schema
        declares, the output LLM callers want (always valid: an absent `additionalProperties`
        allows extra keys, it does not require them). False: the JSON-schema meaning, undeclared
        keys may be generated too. Not applied with backend "llguidance".
    runner: "auto" (the static-cache runner for Llama-family models, transformers otherwise),
        "static" or "hf" (transformers' forward; the old path).
    device: "auto" (CUDA when present; the default), "cpu", "cuda[:N]" or a torch.device.
    dtype: "auto" (float32; the default), "float32", "bfloat16", "float16" or a torch dtype.
        Both are checked before the model loads (`devices.DeviceError`, a ValueError). A model
        object is moved / cast only when they are given.
    """

    def __init__(
        self,
        model: Any = None,
        *,
        draft: Any = "auto",
        backend: str = "default",
        closed_objects: bool = True,
        max_draft_tokens: int = 8,
        verbose: bool = True,
        tokenizer: Any = None,
        runner: str = "auto",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        from .engine_setup import build_engine, check_runner_name, make_vocabulary
        from .grammar.compiler import check_backend
        from .scheduler import Scheduler
        from .speculative import check_draft_limit

        # Each rule lives in the layer that owns it; asked here only to fail before loading the model.
        check_backend(backend)
        check_runner_name(runner)
        check_draft_limit(max_draft_tokens)
        self.verbose = verbose
        self.backend = backend
        self.closed_objects = bool(closed_objects)
        self.max_draft_tokens = max_draft_tokens
        if verbose:
            _log("loading model ...")
        self.loaded = _load(model, tokenizer, verbose, device=device, dtype=dtype)
        self.tokenizer = self.loaded.tokenizer
        self.model_name = self.loaded.name
        self.vocabulary = make_vocabulary(self.loaded)
        self.draft = draft
        self.runner = runner
        self.engine = build_engine(self.loaded, draft=draft, max_draft_tokens=max_draft_tokens, vocabulary=self.vocabulary, runner=runner)
        self.context_length = context_length(self.loaded.model)  # None when the model does not say
        self.scheduler = Scheduler(self.engine)  # the engine's one owner: every call submits to it

    # -- prompts and constraints -------------------------------------------------------------

    def build_prompt(
        self, prompt_or_messages: Prompt, system_prompt: str | None = None, *, hint: str | None = None, max_tokens: int = 0,
    ) -> list[int]:
        """A prompt string or chat messages -> prompt token ids through the chat template.
        `hint` (e.g. which JSON keys to write) is appended to the last user message. Raises
        PromptTooLong (a ValueError) when the prompt plus `max_tokens` cannot fit the model's
        context; a prompt far too long is refused from its length before it is tokenized."""
        messages = normalize_messages(prompt_or_messages, system_prompt)
        context = getattr(self, "context_length", None)
        if context is not None:
            check_prompt_fits(prompt_chars=message_chars(messages), max_tokens=max_tokens, context=context,
                              longest_token=longest_token_chars(self.tokenizer))
        if hint:
            last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
            if last_user is None:
                messages.append({"role": "user", "content": hint})
            else:
                messages[last_user] = {"role": "user", "content": f"{messages[last_user]['content']}\n{hint}"}
        ids = render_prompt(self.tokenizer, messages)
        check_prompt_fits(prompt_tokens=len(ids), max_tokens=max_tokens, context=context)
        return ids

    def _constraint(
        self, *, schema: Any = None, regex: str | None = None, grammar: str | None = None,
        choices: Sequence[str] | None = None, json_object: bool = False,
    ) -> _Constraint:
        spec = {name: value for name, value in (("json_schema", schema), ("regex", regex), ("grammar", grammar), ("choices", choices)) if value is not None}
        if json_object:
            spec["json_object"] = True
        if not spec:
            return _Constraint(None, None, None)
        start = time.perf_counter()
        try:
            result = self._compile(spec, schema)
        except RecursionError:
            raise GrammarError("the constraint is nested too deeply to compile (Python's recursion limit)") from None
        except GrammarError as exc:  # Lark and others write several lines; a surface shows one
            raise GrammarError(one_line(exc)) from None
        if self.verbose:
            _log(f"compiled the {', '.join(spec)} constraint in {time.perf_counter() - start:.2f} s")
        return result

    def _compile(self, spec: dict[str, Any], schema: Any) -> _Constraint:
        """Compile through the grammar layer, which checks the constraint itself (exactly one;
        each one's type and content). Here: schema sources, readable text, parse and hint."""
        from .grammar import compile as compile_grammar
        from .inputs import check_text

        parse: Callable[[str], Any] = str
        hint = None
        if schema is not None and len(spec) == 1:
            resolved = resolve_schema(schema)
            check_text(json.dumps(resolved.json_schema, ensure_ascii=False), "schema")
            spec["json_schema"], parse, hint = resolved.json_schema, resolved.parse, schema_instruction(resolved.json_schema)
        elif "json_object" in spec:
            parse, hint = json.loads, "Reply with a JSON object."
        for name in ("regex", "grammar"):
            if isinstance(spec.get(name), str):
                check_text(spec[name], name)
        choices = spec.get("choices")
        if isinstance(choices, Sequence) and not isinstance(choices, str):
            for i, choice in enumerate(choices):
                if isinstance(choice, str):
                    check_text(choice, f"choices[{i}]")
        options = {"closed_objects": self.closed_objects} if "json_schema" in spec and self.backend != "llguidance" else {}
        compiled = compile_grammar(**spec, vocab=self.vocabulary, backend=self.backend, **options)
        return _Constraint(compiled, parse, hint)

    def compile_constraint(
        self, *, schema: Any = None, regex: str | None = None, grammar: str | None = None,
        choices: Sequence[str] | None = None, json_object: bool = False,
    ) -> CompiledGrammar | None:
        """The compiled grammar for one constraint (cached by the grammar layer), or None."""
        return self._constraint(schema=schema, regex=regex, grammar=grammar, choices=choices, json_object=json_object).grammar

    # -- generation ----------------------------------------------------------------------------

    def _prepare(self, prompt: Prompt, kwargs: dict[str, Any]) -> tuple[list[int], SamplingParams, _Constraint, bool]:
        constraint_keys = ("schema", "regex", "grammar", "choices", "json_object")
        constraint = self._constraint(**{k: kwargs.pop(k) for k in constraint_keys if k in kwargs})
        params = _make_params(kwargs.pop("params", None), {k: v for k, v in kwargs.items() if k not in ("system_prompt", "speculative", "schema_in_prompt")})
        speculative = kwargs.get("speculative", True)
        hint = constraint.hint if kwargs.get("schema_in_prompt", True) else None
        prompt_ids = self.build_prompt(prompt, kwargs.get("system_prompt"), hint=hint, max_tokens=params.max_tokens)
        return prompt_ids, params, constraint, speculative

    def _submit(self, prompt_ids: list[int], params: SamplingParams, constraint: _Constraint, speculative: bool | int,
                replies: "queue.SimpleQueue[Any]") -> str:
        """Hand one request to the scheduler; its outputs (or the step's exception) go to `replies`."""
        return self.scheduler.submit(
            prompt_ids, params, constraint.grammar, lambda _id, item: replies.put(item),
            max_draft_tokens=None if speculative is True else 0 if speculative is False else speculative,
        )

    def _finish(self, output: Any, params: SamplingParams, constraint: _Constraint) -> Result:
        token_ids = list(output.token_ids)
        text = output.text  # the engine's detokenizer: EOS dropped, cut before a stop string
        incomplete = output.finish_reason != "stop"
        value = None
        if not incomplete and constraint.parse is not None:
            value = constraint.parse(text)
        stats = output.stats.to_dict() if hasattr(output.stats, "to_dict") else dict(output.stats or {})
        stats["prompt_tokens"] = len(output.prompt_ids) if hasattr(output, "prompt_ids") else None
        return Result(text=text, value=value, token_ids=token_ids, finish_reason=output.finish_reason, incomplete=incomplete, stats=stats)

    def generate(
        self, prompt: Prompt, *, schema: Any = None, regex: str | None = None, grammar: str | None = None,
        choices: Sequence[str] | None = None, json_object: bool = False, params: SamplingParams | None = None,
        system_prompt: str | None = None, speculative: bool | int = True, schema_in_prompt: bool = True,
        **sampling_kwargs: Any,
    ) -> Result:
        """Generate one answer. Sampling parameters go in `params` or as keywords
        (temperature=0, max_tokens=100, seed=1, ...). `schema_in_prompt` tells the model
        which JSON keys to write, after the prompt (it does not affect validity, only content).
        `speculative`: True (the Generator's draft length), False (off) or an int (at most that
        many drafts per step for this call); never changes the output distribution."""
        return self.generate_batch(
            [prompt], schema=schema, regex=regex, grammar=grammar, choices=choices, json_object=json_object,
            params=params, system_prompt=system_prompt, speculative=speculative, schema_in_prompt=schema_in_prompt,
            **sampling_kwargs,
        )[0]

    def generate_batch(self, prompts: Sequence[Prompt], **kwargs: Any) -> list[Result]:
        """Generate answers for several prompts at once (batched through the engine); the same
        constraint and sampling parameters apply to all. Keywords as in `generate`."""
        if isinstance(prompts, str) or not isinstance(prompts, Sequence) or len(prompts) == 0:
            raise ValueError("prompts must be a non-empty list of prompts")
        first_ids, params, constraint, speculative = self._prepare(prompts[0], dict(kwargs))
        hint = constraint.hint if kwargs.get("schema_in_prompt", True) else None
        all_ids = [first_ids] + [self.build_prompt(p, kwargs.get("system_prompt"), hint=hint, max_tokens=params.max_tokens) for p in prompts[1:]]
        replies: queue.SimpleQueue[Any] = queue.SimpleQueue()
        ids: list[str] = []
        done: dict[str, Any] = {}
        try:
            for prompt_ids in all_ids:
                ids.append(self._submit(prompt_ids, params, constraint, speculative, replies))
            while len(done) < len(ids):
                item = replies.get()
                if isinstance(item, BaseException):
                    raise item
                if item.finished:
                    done[item.request_id] = item
        finally:
            for request_id in ids:
                if request_id not in done:
                    self.scheduler.abort(request_id)
        return [self._finish(done[i], params, constraint) for i in ids]

    def stream(self, prompt: Prompt, **kwargs: Any) -> "Stream":
        """Like `generate`, but returns an iterator of text deltas; after it is exhausted,
        `.result` holds the `Result` (with the validated value)."""
        prompt_ids, params, constraint, speculative = self._prepare(prompt, dict(kwargs))
        return Stream(self, prompt_ids, params, constraint, speculative)


class Stream:
    """Iterator of text deltas for one request; `.result` is set once it is exhausted. Deltas
    are held back while they could be the start of a stop string or an unfinished UTF-8 char.
    The request runs from creation on; reading slowly blocks no other caller. Stopping early:
    `close()` (or `with generator.stream(...) as s:`) aborts the request."""

    def __init__(self, owner: Generator, prompt_ids: list[int], params: SamplingParams, constraint: _Constraint, speculative: bool | int) -> None:
        self._owner, self._params, self._constraint = owner, params, constraint
        self.result: Result | None = None
        self._replies: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._request_id = owner._submit(prompt_ids, params, constraint, speculative, self._replies)
        self._done = False

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> str:
        while not self._done:
            item = self._replies.get()
            if isinstance(item, BaseException):
                self._done = True
                raise item
            if item.finished:
                self._done = True
                self.result = self._owner._finish(item, self._params, self._constraint)
            if item.text_delta:
                return item.text_delta
        raise StopIteration

    def close(self) -> None:
        """Abort the request if it is still running (no `.result` then)."""
        if not self._done:
            self._done = True
            self._owner.scheduler.abort(self._request_id)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_default: Generator | None = None
_default_lock = threading.Lock()


def default_generator() -> Generator:
    """The shared Generator on the default model, built on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Generator()
        return _default


def check_request(prompt: Prompt, **kwargs: Any) -> None:
    """Check everything in a `generate` call that needs no model: the prompt text, the sampling
    parameters and the constraint (as far as it compiles without a tokenizer). Raises the
    ValueError (GrammarError included) that the call would raise, without loading anything."""
    normalize_messages(prompt, kwargs.get("system_prompt"))
    constraint_keys = ("schema", "regex", "grammar", "choices", "json_object")
    options = ("system_prompt", "speculative", "schema_in_prompt", "params")
    _make_params(kwargs.get("params"), {k: v for k, v in kwargs.items() if k not in constraint_keys + options})
    check_constraint(**{k: kwargs[k] for k in constraint_keys if k in kwargs})


def generate(prompt: Prompt, **kwargs: Any) -> Result:
    """`Generator.generate` on the shared default-model Generator (loaded once per process; the
    request is checked before the first load, so a mistake costs no load)."""
    check_request(prompt, **kwargs)
    return default_generator().generate(prompt, **kwargs)


def stream(prompt: Prompt, **kwargs: Any) -> Stream:
    """`Generator.stream` on the shared default-model Generator."""
    check_request(prompt, **kwargs)
    return default_generator().stream(prompt, **kwargs)
