"""The static-cache runner on the real default model (SmolLM2-135M): logits equal transformers'
forward through a ragged batch, rollback, prefix reuse and one width per draft bucket; and the
engine's greedy JSON output with it equals the HF runner's token for token. On CPU, and on CUDA
where present (there the runner replays CUDA graphs, its default)."""

from __future__ import annotations

import json

import pytest
import torch

pytestmark = pytest.mark.model

ATOL, RTOL = 2e-4, 1e-4  # float32 over 30 layers (the HF runner's own tests use the same)


@pytest.fixture(scope="module", params=["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
def loaded(request):
    from constrained_spec.models import load_model

    return load_model(verbose=False, device=request.param)


def chat(tok, text: str) -> list[int]:
    return list(tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])


def test_logits_equal_transformers_through_batch_rollback_prefix_reuse_and_buckets(loaded):
    from constrained_spec.static_runner import DRAFT_BUCKETS, StaticRunner

    model, tok = loaded.model, loaded.tokenizer
    device = next(model.parameters()).device

    def full(tokens, rows):
        with torch.no_grad():
            return model(torch.tensor([tokens], device=device)).logits[0, -rows:]

    runner = StaticRunner(model)
    assert runner.graphed == (device.type == "cuda")
    p1 = chat(tok, "Extract the person as JSON. Text: Maria, 41, Valencia.")
    p2 = chat(tok, "Extract the person as JSON. Text: Kenji, 57, Osaka.")
    runner.start("a", p1[:-1])
    first = runner.score([("a", [p1[-1], 100, 200])])[0]  # a prompt: alone, exact width
    torch.testing.assert_close(first, full(p1 + [100, 200], 3), atol=ATOL, rtol=RTOL)
    runner.rollback("a", 2)
    runner.start("b", p2[:-1])  # shares the chat template and instruction with a's prompt
    shared = next(i for i, (x, y) in enumerate(zip(p1, p2)) if x != y)
    assert runner.prefix_hits == shared
    contexts = {"a": p1[:-1] + [p1[-1]], "b": p2[:-1]}
    last = {"a": 300, "b": p2[-1]}
    for width in DRAFT_BUCKETS[::2] + DRAFT_BUCKETS[1::2][-1:]:  # 1, 4, 16, 8: ragged, a at `width`
        batch = [("a", [last["a"]] + [1000 + 7 * j for j in range(width - 1)]), ("b", [last["b"]] + [2000 + j for j in range(max(width - 2, 0))])]
        for (rid, new), got in zip(batch, runner.score(batch)):
            contexts[rid] += new
            torch.testing.assert_close(got, full(contexts[rid], len(new)), atol=ATOL, rtol=RTOL)
            back = len(new) - 1  # reject every draft
            runner.rollback(rid, back)
            del contexts[rid][len(contexts[rid]) - back :]
            last[rid] = 40 + width
            assert runner.cached_length(rid) == len(contexts[rid])


def test_greedy_json_with_static_runner_equals_hf_runner(loaded):
    from constrained_spec.engine_setup import build_engine, make_vocabulary
    from constrained_spec.grammar import compile_json_schema
    from constrained_spec.runners import HFRunner
    from constrained_spec.sampling import SamplingParams
    from constrained_spec.static_runner import StaticRunner

    tok = loaded.tokenizer
    vocabulary = make_vocabulary(loaded)
    person = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}
    colors = {"type": "object", "properties": {"colors": {"type": "array", "items": {"enum": ["red", "green", "blue"]}}}, "required": ["colors"]}
    tasks = [
        (chat(tok, "Alice is 30 years old. Reply with JSON with her name and age."), compile_json_schema(person, vocabulary, closed_objects=True)),
        (chat(tok, "List the colors of the French flag that are in red, green, blue, as JSON."), compile_json_schema(colors, vocabulary, closed_objects=True)),
    ]
    params = SamplingParams(temperature=0, max_tokens=32)
    outputs = {}
    for name in ("static", "hf"):
        engine = build_engine(loaded, draft="auto", vocabulary=vocabulary, runner=name)
        assert isinstance(engine.runner, StaticRunner if name == "static" else HFRunner)
        outputs[name] = engine.generate([p for p, _ in tasks], params, [g for _, g in tasks])  # one ragged batch
    for static, hf in zip(outputs["static"], outputs["hf"]):
        assert static.token_ids == hf.token_ids
        assert static.finish_reason == hf.finish_reason == "stop"
        json.loads(tok.decode(static.token_ids))
        assert static.stats.accepted > 0  # drafts were verified through the static runner
