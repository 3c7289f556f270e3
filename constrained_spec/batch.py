"""JSONL batches for the CLI (`constrained-spec batch requests.jsonl`): one request per line in,
one result per line out, in the same order.

A request line is a JSON object:
    {"prompt": "..." or [{"role": ..., "content": ...}, ...],    required
     "id": anything,                                               echoed back
     "system": "...", "schema_in_prompt": true,
     one of "schema": {...}, "regex": "...", "grammar": "...", "choices": [...], "json_object": true,
     any sampling parameter: "temperature", "top_p", "top_k", "seed", "max_tokens", "stop", ...}
Missing sampling parameters take the command line's values. A result line is
    {"line": N, "id": ..., "text": ..., "value": ..., "finish_reason": ..., "incomplete": ..., "tokens": ...}
or, for a line that could not run, {"line": N, "id": ..., "error": "..."}; a bad line never costs the
others. Lines with the same constraint and sampling parameters run as one engine batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Any

from .inputs import check_text, one_line
from .sampling import SamplingParams

__all__ = ["BatchRequest", "parse_requests", "run_requests", "CONSTRAINT_KEYS"]

CONSTRAINT_KEYS = ("schema", "regex", "grammar", "choices", "json_object")
_OPTION_KEYS = ("prompt", "id", "system", "schema_in_prompt")
_SAMPLING_KEYS = tuple(f.name for f in fields(SamplingParams))


@dataclass
class BatchRequest:
    line: int  # 1-based line number in the input
    id: Any
    prompt: Any
    system: str | None
    schema_in_prompt: bool
    constraint: dict[str, Any]
    params: SamplingParams

    def group_key(self) -> str:
        """Requests with equal keys share one generate_batch call."""
        key = {"constraint": self.constraint, "system": self.system, "hint": self.schema_in_prompt, "params": repr(self.params)}
        return json.dumps(key, default=repr)  # key order kept: a schema's order is the order its keys are written in


def _parse_line(number: int, text: str, defaults: SamplingParams, check: Callable[..., None]) -> BatchRequest:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError("nested too deeply to parse") from None
    if not isinstance(data, dict):
        raise ValueError(f"a request must be a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_OPTION_KEYS) - set(CONSTRAINT_KEYS) - set(_SAMPLING_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(map(repr, unknown))}; known: prompt, id, system, schema_in_prompt, "
                         f"{', '.join(CONSTRAINT_KEYS)} and the sampling parameters {', '.join(_SAMPLING_KEYS)}")
    if "prompt" not in data:
        raise ValueError("missing 'prompt'")
    constraint = {k: data[k] for k in CONSTRAINT_KEYS if k in data and data[k] is not None and data[k] is not False}
    sampling = {k: data[k] for k in _SAMPLING_KEYS if k in data}
    if "stop" in sampling and isinstance(sampling["stop"], list):
        sampling["stop"] = tuple(sampling["stop"])
    try:
        params = defaults.replace(**sampling)
    except TypeError as exc:
        raise ValueError(f"bad sampling parameter: {exc}") from None
    system = data.get("system")
    schema_in_prompt = data.get("schema_in_prompt", True)
    if not isinstance(schema_in_prompt, bool):
        raise ValueError(f"schema_in_prompt must be true or false, got {schema_in_prompt!r:.40}")
    check(data["prompt"], system_prompt=system, **constraint)
    return BatchRequest(number, data.get("id"), data["prompt"], system, schema_in_prompt, constraint, params)


def parse_requests(
    lines: Iterable[str], defaults: SamplingParams, check: Callable[..., None]
) -> tuple[list[BatchRequest], dict[int, dict[str, Any]]]:
    """Lines -> (good requests, {line number: error record}). `check(prompt, system_prompt=,
    **constraint)` checks what needs no model (api.check_request); blank lines are skipped."""
    good: list[BatchRequest] = []
    errors: dict[int, dict[str, Any]] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            good.append(_parse_line(number, check_text(text, f"line {number}"), defaults, check))
        except RecursionError:
            errors[number] = {"line": number, "id": _id_of(text), "error": "nested too deeply"}
        except ValueError as exc:  # GrammarError and the input checks are ValueErrors too
            errors[number] = {"line": number, "id": _id_of(text), "error": one_line(exc)}
    return good, errors


def _id_of(text: str) -> Any:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data.get("id") if isinstance(data, dict) else None


def run_requests(generator: Any, requests: list[BatchRequest], on_done: Callable[[int], None] | None = None) -> dict[int, dict[str, Any]]:
    """Run every request on `generator`, batched per group; {line number: result or error record}.
    A group that fails is retried one request at a time so only the bad lines get errors."""
    groups: dict[str, list[BatchRequest]] = {}
    for request in requests:
        groups.setdefault(request.group_key(), []).append(request)
    records: dict[int, dict[str, Any]] = {}
    for members in groups.values():
        try:
            results = _generate(generator, members)
        except ValueError:
            results = []
            for request in members:
                try:
                    results += _generate(generator, [request])
                except ValueError as exc:
                    results.append(exc)
        for request, result in zip(members, results):
            records[request.line] = _record(request, result)
        if on_done is not None:
            on_done(len(records))
    return records


def _generate(generator: Any, members: list[BatchRequest]) -> list[Any]:
    first = members[0]
    return generator.generate_batch(
        [r.prompt for r in members], params=first.params, system_prompt=first.system,
        schema_in_prompt=first.schema_in_prompt, **first.constraint,
    )


def _record(request: BatchRequest, result: Any) -> dict[str, Any]:
    if isinstance(result, Exception):
        return {"line": request.line, "id": request.id, "error": one_line(result)}
    value = result.value
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    return {
        "line": request.line, "id": request.id, "text": result.text, "value": value,
        "finish_reason": result.finish_reason, "incomplete": result.incomplete, "tokens": len(result.token_ids),
    }
