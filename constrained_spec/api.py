"""The Python API: `generate(prompt, schema=Person)` and the reusable `Generator` behind it.

A `Generator` loads a model once (the default SmolLM2-135M-Instruct, a local HF folder, or a
loaded model), builds its grammar vocabulary and a speculative `Engine`, and then serves calls:

    gen = Generator()
    person = gen.generate("Extract: Ada Lovelace, 36", schema=Person).value   # a Person
    for delta in (s := gen.stream("Count to five", regex=r"[0-9 ]+")): print(delta, end="")
    s.result.value

Speculation never changes the output distribution (the engine's rejection rule is exact), so it
is on by default; `speculative=False` turns it off for one call, `draft="none"` for all.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .chat import normalize_messages, render_prompt, schema_instruction
from .grammar.protocol import CompiledGrammar, GrammarError
from .sampling import SamplingParams
from .schemas import OutputValidationError, resolve_schema

__all__ = ["Generator", "Result", "Stream", "generate", "stream", "default_generator", "GrammarError", "OutputValidationError"]

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
    return base.replace(**sampling_kwargs)


def _load(model: Any, tokenizer: Any, verbose: bool, device: Any = None, dtype: Any = None) -> Any:
    """None / "default" / folder / LoadedModel / (HF model + tokenizer) -> LoadedModel.
    A model object is moved to `device` / cast to `dtype` only when they are given."""
    from .devices import resolve_device, resolve_dtype
    from .models import LoadedModel, load_model

    if model is None or isinstance(model, str) or hasattr(model, "__fspath__"):
        if tokenizer is not None:
            raise ValueError("tokenizer= is only used with an already loaded model object")
        return load_model(model, dtype=dtype, verbose=verbose, device="auto" if device is None else device)
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
    backend: grammar backend, "default" (ours) or "llguidance".
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
        max_draft_tokens: int = 8,
        verbose: bool = True,
        tokenizer: Any = None,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        from .engine_setup import build_engine, make_vocabulary

        if backend not in ("default", "llguidance"):
            raise ValueError(f"unknown grammar backend {backend!r}; expected 'default' or 'llguidance'")
        if not isinstance(max_draft_tokens, int) or isinstance(max_draft_tokens, bool) or max_draft_tokens < 0:
            raise ValueError(f"max_draft_tokens must be an integer >= 0, got {max_draft_tokens!r}")
        self.verbose = verbose
        self.backend = backend
        self.max_draft_tokens = max_draft_tokens
        if verbose:
            _log("loading model ...")
        self.loaded = _load(model, tokenizer, verbose, device=device, dtype=dtype)
        self.tokenizer = self.loaded.tokenizer
        self.model_name = self.loaded.name
        self.vocabulary = make_vocabulary(self.loaded)
        self.draft = draft
        self.engine = build_engine(self.loaded, draft=draft, max_draft_tokens=max_draft_tokens, vocabulary=self.vocabulary)
        self._plain_engine = None  # built on the first speculative=False call
        self._lock = threading.RLock()  # one caller steps an engine at a time

    # -- prompts and constraints -------------------------------------------------------------

    def build_prompt(self, prompt_or_messages: Prompt, system_prompt: str | None = None, *, hint: str | None = None) -> list[int]:
        """A prompt string or chat messages -> prompt token ids through the chat template.
        `hint` (e.g. which JSON keys to write) is appended to the last user message."""
        messages = normalize_messages(prompt_or_messages, system_prompt)
        if hint:
            last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
            if last_user is None:
                messages.append({"role": "user", "content": hint})
            else:
                messages[last_user] = {"role": "user", "content": f"{messages[last_user]['content']}\n{hint}"}
        return render_prompt(self.tokenizer, messages)

    def _constraint(
        self, *, schema: Any = None, regex: str | None = None, grammar: str | None = None,
        choices: Sequence[str] | None = None, json_object: bool = False,
    ) -> _Constraint:
        from .grammar import compile as compile_grammar

        given = [n for n, v in (("schema", schema), ("regex", regex), ("grammar", grammar), ("choices", choices)) if v is not None]
        if json_object:
            given.append("json_object")
        if len(given) > 1:
            raise ValueError(f"give at most one constraint, got {', '.join(given)}")
        if not given:
            return _Constraint(None, None, None)
        start = time.perf_counter()
        kind = given[0]
        if kind == "schema":
            resolved = resolve_schema(schema)
            compiled = compile_grammar(json_schema=resolved.json_schema, vocab=self.vocabulary, backend=self.backend)
            result = _Constraint(compiled, resolved.parse, schema_instruction(resolved.json_schema))
        elif kind == "json_object":
            import json

            compiled = compile_grammar(json_object=True, vocab=self.vocabulary, backend=self.backend)
            result = _Constraint(compiled, json.loads, "Reply with a JSON object.")
        elif kind == "regex":
            if not isinstance(regex, str) or not regex:
                raise ValueError(f"regex must be a non-empty string, got {regex!r}")
            result = _Constraint(compile_grammar(regex=regex, vocab=self.vocabulary, backend=self.backend), str, None)
        elif kind == "grammar":
            if not isinstance(grammar, str) or not grammar.strip():
                raise ValueError(f"grammar must be Lark text or a bundled grammar name, got {grammar!r}")
            result = _Constraint(compile_grammar(grammar=grammar, vocab=self.vocabulary, backend=self.backend), str, None)
        else:
            if isinstance(choices, str) or not isinstance(choices, Sequence) or not choices:
                raise ValueError(f"choices must be a non-empty list of strings, got {choices!r}")
            if not all(isinstance(c, str) and c for c in choices):
                raise ValueError("every choice must be a non-empty string")
            compiled = compile_grammar(choices=list(choices), vocab=self.vocabulary, backend=self.backend)
            result = _Constraint(compiled, str, None)
        if self.verbose:
            _log(f"compiled the {kind} constraint in {time.perf_counter() - start:.2f} s")
        return result

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
        prompt_ids = self.build_prompt(prompt, kwargs.get("system_prompt"), hint=hint)
        return prompt_ids, params, constraint, bool(speculative)

    def _engine_for(self, speculative: bool) -> Any:
        if speculative:
            return self.engine
        if self._plain_engine is None:
            from .engine_setup import build_engine

            self._plain_engine = build_engine(self.loaded, draft="none", max_draft_tokens=0, vocabulary=self.vocabulary)
        return self._plain_engine

    def _finish(self, output: Any, params: SamplingParams, constraint: _Constraint) -> Result:
        token_ids = _strip_eos(list(output.token_ids), self.loaded)
        text = output.text if getattr(output, "text", None) is not None else self.tokenizer.decode(token_ids, skip_special_tokens=True)
        text = _cut_at_stop(text, params.stop)
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
        system_prompt: str | None = None, speculative: bool = True, schema_in_prompt: bool = True,
        **sampling_kwargs: Any,
    ) -> Result:
        """Generate one answer. Sampling parameters go in `params` or as keywords
        (temperature=0, max_tokens=100, seed=1, ...). `schema_in_prompt` tells the model
        which JSON keys to write, after the prompt (it does not affect validity, only content)."""
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
        all_ids = [first_ids] + [self.build_prompt(p, kwargs.get("system_prompt"), hint=hint) for p in prompts[1:]]
        with self._lock:
            engine = self._engine_for(speculative)
            ids = [engine.add_request(p, params, grammar=constraint.grammar) for p in all_ids]
            done: dict[str, Any] = {}
            while len(done) < len(ids):
                for out in engine.step():
                    if out.finished and out.request_id in ids:
                        done[out.request_id] = out
        return [self._finish(done[i], params, constraint) for i in ids]

    def stream(self, prompt: Prompt, **kwargs: Any) -> "Stream":
        """Like `generate`, but returns an iterator of text deltas; after it is exhausted,
        `.result` holds the `Result` (with the validated value)."""
        prompt_ids, params, constraint, speculative = self._prepare(prompt, dict(kwargs))
        return Stream(self, prompt_ids, params, constraint, speculative)


class Stream:
    """Iterator of text deltas for one request; `.result` is set once it is exhausted. Deltas
    are held back while they could be the start of a stop string or an unfinished UTF-8 char.
    Stopping early: `close()` (or `with generator.stream(...) as s:`) aborts the request."""

    def __init__(self, owner: Generator, prompt_ids: list[int], params: SamplingParams, constraint: _Constraint, speculative: bool) -> None:
        self._owner, self._params, self._constraint = owner, params, constraint
        self._prompt_ids, self._speculative = prompt_ids, speculative
        self.result: Result | None = None
        self._iter = self._run()

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> str:
        return next(self._iter)

    def close(self) -> None:
        """Abort the request if it is still running (no `.result` then)."""
        self._iter.close()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> Iterator[str]:
        owner, params = self._owner, self._params
        holdback = max((len(s) for s in params.stop), default=1) - 1
        sent = 0
        with owner._lock:
            engine = owner._engine_for(self._speculative)
            rid = engine.add_request(self._prompt_ids, params, grammar=self._constraint.grammar)
            try:
                final = None
                while final is None:
                    for out in engine.step():
                        if out.request_id != rid:
                            continue
                        if out.finished:
                            final = out
                            break
                        text = owner.tokenizer.decode(_strip_eos(list(out.token_ids), owner.loaded), skip_special_tokens=True)
                        if params.stop:
                            text = _cut_at_stop(text, params.stop)
                        ready = len(text) - holdback
                        while ready > sent and text[ready - 1] == "\ufffd":  # an unfinished UTF-8 sequence
                            ready -= 1
                        if ready > sent:
                            yield text[sent:ready]
                            sent = ready
            finally:
                if final is None:  # the caller stopped early: abort, step until the abort lands
                    engine.abort(rid)
                    while engine.has_unfinished() and not any(o.request_id == rid and o.finished for o in engine.step()):
                        pass
        self.result = owner._finish(final, params, self._constraint)
        if len(self.result.text) > sent:
            yield self.result.text[sent:]


def _strip_eos(token_ids: list[int], loaded: Any) -> list[int]:
    eos = loaded.tokenizer.eos_token_id
    return token_ids[:-1] if token_ids and token_ids[-1] == eos else token_ids


def _cut_at_stop(text: str, stop: Sequence[str]) -> str:
    cuts = [i for i in (text.find(s) for s in stop) if i >= 0]
    return text[: min(cuts)] if cuts else text


_default: Generator | None = None
_default_lock = threading.Lock()


def default_generator() -> Generator:
    """The shared Generator on the default model, built on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Generator()
        return _default


def generate(prompt: Prompt, **kwargs: Any) -> Result:
    """`Generator.generate` on the shared default-model Generator (loaded once per process)."""
    return default_generator().generate(prompt, **kwargs)


def stream(prompt: Prompt, **kwargs: Any) -> Stream:
    """`Generator.stream` on the shared default-model Generator."""
    return default_generator().stream(prompt, **kwargs)
