"""DraftModelProposer: q rows are exactly `process_logits` of the draft model under the request's
params, history and grammar mask; drafts are grammar-valid; the KV cache gives the same rows as
recomputing from scratch."""

import pytest
import torch

from constrained_spec.bitmask import new_bitmask
from constrained_spec.proposers import DraftModelProposer, ProposalContext
from constrained_spec.sampling import SamplingParams, process_logits
from constrained_spec.testing import ToyLM
from proposer_toys import PEOPLE, VOCAB, SetMatcher, encode

PARAMS = SamplingParams(temperature=0.8, top_k=20, repetition_penalty=1.3, presence_penalty=0.5)


def start(text="{"):
    m = SetMatcher(PEOPLE)
    out = encode(text)
    for t in out:
        m.accept_token(t)
    return m, out


def expected_rows(model, prompt, output, draft, matcher, params):
    """Recompute every q row from scratch (no cache): logits after prompt + output + draft[:j]."""
    m = matcher.fork()
    rows = []
    for j in range(len(draft)):
        logits = model(torch.tensor([[*prompt, *output, *draft[:j]]]))[0, -1:].float()  # [1, V]
        mask = new_bitmask(1, VOCAB)
        m.fill_bitmask(mask, 0)
        rows.append(process_logits(logits, params, prompt, [*output, *draft[:j]], bitmask=mask)[0])
        m.accept_token(draft[j])
    return torch.stack(rows)


def test_q_rows_equal_process_logits_and_drafts_are_valid():
    model = ToyLM(VOCAB, seed=5)
    proposer = DraftModelProposer(model)
    m, out = start()
    prompt = [3, 4, 5]
    gen = torch.Generator().manual_seed(0)
    draft = proposer.propose(ProposalContext("r", prompt, out, PARAMS, m, gen), 6)
    assert len(draft) == 6 and draft.probs.shape == (6, VOCAB) and draft.source == "draft_model"
    assert m.validate_tokens(draft.token_ids) == len(draft)
    assert torch.allclose(draft.probs, expected_rows(model, prompt, out, draft.token_ids, m, PARAMS), atol=1e-6)
    assert all(draft.probs[j, t] > 0 for j, t in enumerate(draft.token_ids))
    # Same generator state, same draft: it is a sample from q, driven only by context.generator.
    again = proposer.propose(ProposalContext("r2", prompt, out, PARAMS, m, torch.Generator().manual_seed(0)), 6)
    assert again.token_ids == draft.token_ids


def test_greedy_draft_is_one_hot_argmax_chain():
    model = ToyLM(VOCAB, seed=6)
    m, out = start()
    params = SamplingParams(temperature=0)
    draft = DraftModelProposer(model).propose(ProposalContext("r", [1], out, params, m), 5)
    assert draft.probs is None
    rows = expected_rows(model, [1], out, draft.token_ids, m, params)
    assert draft.token_ids == rows.argmax(-1).tolist()


def test_stops_when_grammar_terminates():
    m, out = start('{"name":"Bob","age":41')
    params = SamplingParams(temperature=1.0)
    draft = DraftModelProposer(ToyLM(VOCAB, seed=7)).propose(ProposalContext("r", [1], out, params, m, torch.Generator().manual_seed(1)), 8)
    assert draft.token_ids == encode("}") + [0]  # `}` then EOS, nothing after


def tiny_hf_model():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def test_kv_cache_reuse_matches_recomputation():
    model = tiny_hf_model()
    plain = lambda ids: model(input_ids=ids).logits  # [B, T, V], no cache
    proposer = DraftModelProposer(model, max_requests=1)
    prompt = [5, 6, 7, 8]
    m, out = start()
    gen = torch.Generator().manual_seed(3)
    for step in range(4):  # commit part of each draft, as the loop would, then draft again
        with torch.no_grad():
            draft = proposer.propose(ProposalContext("r", prompt, out, PARAMS, m, gen), 4)
            want = expected_rows(plain, prompt, out, draft.token_ids, m, PARAMS)
        assert torch.allclose(draft.probs, want, atol=1e-5), step
        keep = draft.token_ids[: step % 3]
        for t in keep:
            m.accept_token(t)
        out = out + keep
        if m.is_terminated():
            break
    # A second request evicts the first cache (max_requests=1); the first still works afterwards.
    other, _ = start()
    proposer.propose(ProposalContext("other", [9], [], PARAMS, other, gen), 2)
    with torch.no_grad():
        draft = proposer.propose(ProposalContext("r", prompt, out, PARAMS, m, gen), 3)
        assert torch.allclose(draft.probs, expected_rows(plain, prompt, out, draft.token_ids, m, PARAMS), atol=1e-5)


def test_q_width_follows_the_target():
    m, out = start()
    draft = DraftModelProposer(ToyLM(VOCAB, seed=5), vocab_size=VOCAB + 4).propose(
        ProposalContext("r", [1], out, PARAMS, m, torch.Generator().manual_seed(0)), 2
    )
    assert draft.probs.shape == (2, VOCAB + 4) and float(draft.probs[:, VOCAB:].sum()) == 0


def test_bad_model_rejected():
    with pytest.raises(TypeError, match="draft model must be"):
        DraftModelProposer(42)
