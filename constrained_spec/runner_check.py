"""A model runner checks itself once per model: cached decoding must reproduce a full forward.

Why: a runner that feeds one token at a time through a KV cache gives the model's distribution
only if the library actually uses that cache. transformers renamed the forward's cache keyword
(`past_key_values=` -> `cache=` in 5.24) and older versions silently ignore a keyword they do not
know: every step then runs without context and sampling is silently wrong. Any such mismatch
between a library version and the runner shows up here as a large logit difference, so we fail
loudly, naming the versions, instead of generating garbage.

`check_runner(runner, full_forward)` drives the runner through the calls the speculative loop
makes (a prompt, single-token steps, a k + 1-token step, a rollback, a ragged batch of two
requests) and compares every returned row with one full forward of the same tokens. Any runner
(the HF runner, a static-cache runner) calls it from its constructor; `check_once` runs it once
per model object.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["RunnerSelfCheckError", "check_runner", "check_model_runner", "check_once", "cache_keyword", "tolerance_for", "versions"]

# Max |logit difference| allowed, relative to the largest |logit| of the reference (plus one).
# Float rounding of a cached vs an uncached forward is ~1e-6 relative in float32 (measured
# 7e-5 on logits up to ~25 for the default model); a forward without context is off by O(1).
_RELATIVE_TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 1e-2}


class RunnerSelfCheckError(RuntimeError):
    """The runner's cached decoding does not reproduce a full forward in this environment."""


def versions() -> str:
    """'torch X, transformers Y' (transformers only when it is importable)."""
    parts = [f"torch {torch.__version__}"]
    try:
        import transformers

        parts.append(f"transformers {transformers.__version__}")
    except ImportError:
        pass
    return ", ".join(parts)


def cache_keyword(model: Any) -> str:
    """The keyword this model's forward takes its KV cache by: `cache` (transformers >= 5.24) or
    `past_key_values` (older). Read from the signature, so no deprecated keyword is ever passed."""
    import inspect

    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in parameters else "past_key_values"


def tolerance_for(dtype: torch.dtype) -> float:
    return _RELATIVE_TOLERANCE.get(dtype, 5e-2)


def _check_tokens(vocab_size: int) -> list[int]:
    """Ten distinct-ish in-vocabulary ids, away from the special tokens at the start."""
    return [(3 + 977 * i) % vocab_size for i in range(10)] if vocab_size > 16 else [(3 + 5 * i) % vocab_size for i in range(10)]


def check_runner(runner: Any, full_forward: Callable[[torch.Tensor], torch.Tensor], dtype: torch.dtype, name: str = "runner") -> float:
    """Drive `runner` like the speculative loop and compare with `full_forward(ids [1, T]) ->
    logits [T, V]`. Returns the max |logit difference|; raises RunnerSelfCheckError above the
    tolerance of `dtype`. The runner is left with no requests."""
    t = _check_tokens(runner.vocab_size)
    a, b = "__self_check_a__", "__self_check_b__"
    got: dict[int, list[torch.Tensor]] = {}  # position in t -> rows the runner returned for it

    def keep(start: int, rows: torch.Tensor) -> None:
        for i in range(rows.shape[0]):
            got.setdefault(start + i, []).append(rows[i].float().cpu())

    try:
        runner.start(a, t[:2])
        keep(2, runner.score([(a, [t[2]])])[0])  # prefill + first step: row after t[:3]
        keep(3, runner.score([(a, [t[3]])])[0])  # one token through the cache
        keep(4, runner.score([(a, [t[4]])])[0])
        keep(5, runner.score([(a, t[5:8])])[0])  # k + 1 rows in one forward
        runner.rollback(a, 2)  # reject two drafts
        keep(6, runner.score([(a, t[6:8])])[0])  # re-score them on the cropped cache
        runner.start(b, t[:4])
        rows_a, rows_b = runner.score([(a, [t[8]]), (b, t[4:6])])  # a ragged batch
        keep(8, rows_a)
        keep(4, rows_b)
    finally:
        runner.release(a)
        runner.release(b)
    with torch.no_grad():
        reference = full_forward(torch.tensor([t[:9]], dtype=torch.long)).float().cpu()  # [9, V]
    scale = 1.0 + float(reference.abs().max())
    worst, where = 0.0, 0
    for position, rows in got.items():
        for row in rows:
            diff = float((row[: reference.shape[1]] - reference[position]).abs().max())
            if not diff <= worst:  # also catches NaN
                worst, where = diff, position
    allowed = tolerance_for(dtype) * scale
    if not worst <= allowed:
        raise RunnerSelfCheckError(
            f"{name} self-check failed: decoding step by step through the KV cache differs from one full forward "
            f"by {worst:.3g} (position {where}; allowed {allowed:.3g} for {dtype}) with {versions()}. "
            "The model would be sampled without its context or with wrong positions: this library combination is "
            "not supported (see README, 'Devices and environments', for the tested transformers range)."
        )
    return worst


_checked: "weakref.WeakKeyDictionary[Any, dict[Any, float]]" = weakref.WeakKeyDictionary()


def check_once(model: Any, key: Any, run_check: Callable[[], float]) -> float:
    """Run `run_check` the first time `model` is seen with `key` (e.g. its device and dtype, which
    `model.to` changes in place) in this process; remember the result."""
    seen = _checked.setdefault(model, {})
    if key not in seen:
        seen[key] = run_check()
    return seen[key]


def check_model_runner(runner: Any, model: Any, name: str, key: Any = None) -> float:
    """The self-check of a runner over an HF causal LM, once per (model, device, dtype, `key`):
    the reference is the model's own forward over the whole sequence without a cache. The runner's
    prefix cache is off during the check (its prompts must not serve later requests)."""
    parameter = next(model.parameters())

    def full_forward(ids: torch.Tensor) -> torch.Tensor:
        return model(input_ids=ids.to(parameter.device), use_cache=False).logits[0]  # [T, V]

    def run() -> float:
        saved = getattr(runner, "prefix_cache_size", None)
        if saved is not None:
            runner.prefix_cache_size = 0
        try:
            return check_runner(runner, full_forward, parameter.dtype, name=name)
        finally:
            if saved is not None:
                runner.prefix_cache_size = saved

    return check_once(model, (name, parameter.device, parameter.dtype, key), run)
