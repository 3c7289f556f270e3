"""The runner and the loop on the real default model (SmolLM2-135M): KV-cache rollback is exact,
and at T = 0 speculative output equals plain greedy constrained output token for token."""

from __future__ import annotations

import json

import pytest
import torch

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def loaded():
    from constrained_spec.models import load_model

    torch.manual_seed(0)
    return load_model(verbose=False)


def test_hf_runner_rollback_and_ragged_batch(loaded):
    from constrained_spec.runners import HFRunner

    runner = HFRunner(loaded.model)
    a = loaded.tokenizer.encode("The capital of France is")
    b = loaded.tokenizer.encode("1, 2, 3, 4, 5, 6,")
    runner.start("a", a[:-1])
    runner.start("b", b[:-1])
    draft_a, draft_b = [100, 200, 300], [17]
    first = runner.score([("a", [a[-1], *draft_a]), ("b", [b[-1], *draft_b])])
    assert [tuple(x.shape) for x in first] == [(4, runner.vocab_size), (2, runner.vocab_size)]
    runner.rollback("a", 2)  # keep draft_a[:1]
    again = runner.score([("a", [555])])[0]  # [1, V]
    with torch.no_grad():
        full_a = loaded.model(torch.tensor([a + draft_a[:1] + [555]])).logits[0, -3:]  # [3, V]
        full_b = loaded.model(torch.tensor([b + draft_b])).logits[0, -2:]
    torch.testing.assert_close(torch.cat([first[0][:2], again]), full_a, atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(first[1], full_b, atol=2e-4, rtol=1e-4)
    assert runner.cached_length("a") == len(a) + 2  # prompt + draft_a[0] + 555
    with pytest.raises(ValueError, match="cannot roll back 99"):
        runner.rollback("b", 99)


@pytest.mark.parametrize("batched", [False, True])
def test_prefix_cache_reuses_shared_prompt_tokens_with_the_same_logits(loaded, batched):
    from constrained_spec.runners import HFRunner

    tok = loaded.tokenizer

    def chat(text):
        return list(tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])

    p1 = chat("Extract the person from this text as JSON. Text: Maria, 41, Valencia.")
    p2 = chat("Extract the person from this text as JSON. Text: Kenji, 57, Osaka.")
    shared = next(i for i, (x, y) in enumerate(zip(p1, p2)) if x != y)
    results = {}
    for name, runner in (("cached", HFRunner(loaded.model, batched=batched)), ("plain", HFRunner(loaded.model, batched=batched, prefix_cache_size=0))):
        runner.start("a", p1[:-1])
        runner.score([("a", [p1[-1], 100, 200])])
        runner.start("b", p2[:-1])  # shares `shared` tokens with a's prompt
        runner.start("c", p1[:-1])  # the same prompt again: all of it is reused
        first = runner.score([("b", [p2[-1], 300]), ("c", [p1[-1]])])
        runner.rollback("b", 1)
        second = runner.score([("b", [5, 6])])
        results[name] = (runner, first + second)
    cached, plain = results["cached"][0], results["plain"][0]
    assert cached.prefix_hits == shared + len(p1) - 1 and plain.prefix_hits == 0
    assert cached.cached_length("b") == plain.cached_length("b") == len(p2) + 2
    # Reused keys/values were computed in a forward of another length: equal up to float rounding.
    for got, want in zip(results["cached"][1], results["plain"][1]):
        torch.testing.assert_close(got, want, atol=2e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="prefix_cache_size"):
        HFRunner(loaded.model, prefix_cache_size=-1)


def test_greedy_speculative_equals_plain_on_default_model(loaded):
    from constrained_spec.grammar import Vocabulary, compile_json_schema
    from constrained_spec.proposers import ChainProposer, ForcedProposer, NgramProposer
    from constrained_spec.runners import HFRunner
    from constrained_spec.sampling import SamplingParams
    from constrained_spec.speculative import Engine

    tok = loaded.tokenizer
    vocab = Vocabulary.from_tokenizer(tok, size=loaded.logits_width)
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}
    grammar = compile_json_schema(schema, vocab, closed_objects=True)  # as the generation surfaces do
    messages = [{"role": "user", "content": "Alice is 30 years old. Reply with JSON with her name and age."}]
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    params = SamplingParams(temperature=0, max_tokens=40)

    def run(proposer):
        engine = Engine(HFRunner(loaded.model), eos_token_id=tok.eos_token_id, proposer=proposer, vocabulary_limit=len(tok), max_draft_tokens=6)
        return engine.generate([prompt], params, grammar)[0]

    plain = run(None)
    spec = run(ChainProposer([ForcedProposer(tok, token_bytes=vocab.token_bytes), NgramProposer()]))
    assert spec.token_ids == plain.token_ids
    assert spec.finish_reason == plain.finish_reason == "stop"
    value = json.loads(tok.decode(spec.token_ids))
    assert set(value) >= {"name", "age"} and isinstance(value["age"], int)
    assert spec.stats.accepted > 0 and spec.stats.steps < plain.stats.steps


def test_batched_hf_runner_matches_batch_one(loaded):
    """One padded forward for ragged requests (one fresh, two with caches of different lengths)
    gives the batch-1 logits up to float rounding, and rollback keeps working afterwards."""
    from constrained_spec.runners import HFRunner

    tok = loaded.tokenizer
    prompts = [tok.encode("The capital of France is"), tok.encode("1, 2, 3, 4, 5, 6, 7, 8,"), tok.encode("Hi")]
    drafts = [[100, 200], [17, 18, 19, 20], [5]]
    single, batched = HFRunner(loaded.model, batched=False), HFRunner(loaded.model, batched=True)
    fresh = [("f0", prompts[0]), ("f1", prompts[1])]  # nothing cached yet: a batched prefill
    for runner in (single, batched):
        for rid, p in fresh:
            runner.start(rid, [])
    for a, b in zip(single.score(fresh), batched.score(fresh)):
        torch.testing.assert_close(b, a, atol=2e-4, rtol=1e-4)
    for runner in (single, batched):
        for i, p in enumerate(prompts[:2]):
            runner.start(str(i), p[:-1])
            runner.score([(str(i), [p[-1]])])
        runner.start("2", prompts[2][:-1])
    batch = [("0", drafts[0]), ("1", drafts[1]), ("2", [prompts[2][-1], *drafts[2]])]
    for a, b in zip(single.score(batch), batched.score(batch)):
        torch.testing.assert_close(b, a, atol=2e-4, rtol=1e-4)
    for runner in (single, batched):
        runner.rollback("1", 3)
    again = [("0", [7]), ("1", [9])]
    for a, b in zip(single.score(again), batched.score(again)):
        torch.testing.assert_close(b, a, atol=2e-4, rtol=1e-4)
    assert batched.cached_length("1") == single.cached_length("1") == len(prompts[1]) + 2
