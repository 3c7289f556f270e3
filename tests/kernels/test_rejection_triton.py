"""The Triton kernel against the torch reference, token for token (interpreter on CPU)."""

import pytest
import torch

from constrained_spec.bitmask import unpack_bitmask
from constrained_spec.kernels import rejection_sample_logits
from constrained_spec.rejection import SamplerRandomness, rejection_sample
from constrained_spec.sampling import SamplingParams, filtered_logits, process_logits

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="large vocabularies only on a GPU")


def both(batch: dict) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    return rejection_sample_logits(**batch, kernel="torch"), rejection_sample_logits(**batch, kernel="triton")


def assert_same(batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    (ref_out, ref_n), (out, n) = both(batch)
    assert out.device == batch["logits"].device and ref_out.device == batch["logits"].device
    assert torch.equal(out.cpu(), ref_out.cpu()), f"tokens differ:\n{out}\nvs reference\n{ref_out}"
    assert torch.equal(n.cpu(), ref_n.cpu())
    return ref_out.cpu(), ref_n.cpu()


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("vocab", [1, 31, 33, 100, 257])
def test_random_ragged_batches_match_reference(make_batch, dense, vocab):
    seen_accept = seen_reject = 0
    for seed in range(3):
        ks = [0, 1, 3, 2, 5, 0, 4]
        out, n = assert_same(make_batch(seed, vocab, ks, dense=dense))
        k = torch.tensor(ks)
        seen_accept += int((n > 0).sum())
        seen_reject += int((n < k).sum())
        for b, kb in enumerate(ks):  # -1 padding after the emitted tokens, real tokens before
            assert (out[b, : n[b] + 1] >= 0).all() and (out[b, n[b] + 1 :] == -1).all()
    if vocab > 1:
        assert seen_accept and seen_reject, "the batches should exercise both paths"


def test_greedy_and_sampled_share_a_batch(make_batch):
    batch = make_batch(7, 64, [3, 3, 2, 4], greedy=[True, False, True, False])
    assert_same(batch)


def test_all_accepted_emits_bonus(make_batch):
    """q == p (dense) or drafts == argmax (greedy): every draft is accepted, plus a bonus token."""
    ks = [4, 2, 3]
    for greedy in ([False] * 3, [True] * 3):
        out, n = assert_same(make_batch(3, 50, ks, greedy=greedy, q_equals_p=True, one_token_rows=0.0))
        assert n.tolist() == ks
        assert all(out[b, ks[b]] >= 0 for b in range(3))


def test_first_draft_rejected(make_batch):
    batch = make_batch(5, 40, [3, 2, 1], greedy=[False] * 3, dense=True, one_token_rows=0.0)
    batch["randomness"] = SamplerRandomness(torch.full_like(batch["randomness"].uniforms, 0.999999), batch["randomness"].exponentials)
    batch["draft_probs"] = torch.full_like(batch["draft_probs"], 1.0)  # q(x) = 1 > p(x): u * q >= p
    out, n = assert_same(batch)
    assert n.tolist() == [0, 0, 0]


def test_one_token_masks_force_the_token(make_batch):
    batch = make_batch(11, 70, [2, 0, 3], one_token_rows=1.0)
    out, n = assert_same(batch)
    allowed_token = unpack_bitmask(batch["bitmask"].cpu(), 70).int().argmax(dim=-1)  # [rows], one bit per row
    cu = batch["cu_num_draft_tokens"].tolist()
    for b in range(3):
        for j in range(int(n[b]) + 1):
            assert out[b, j] == allowed_token[cu[b] + b + j]


def test_filtered_logits_then_kernel_equals_process_logits_then_reference(make_batch):
    """top-k / top-p / penalties applied by sampling.filtered_logits before the kernel."""
    batch = make_batch(13, 90, [3], greedy=[False], dense=True)
    params = SamplingParams(temperature=float(batch["temperature"][0]), top_k=20, top_p=0.9, repetition_penalty=1.3)
    drafts = batch["draft_token_ids"].tolist()
    raw = batch["logits"]
    filt = filtered_logits(raw, params, prompt_ids=[1, 2], draft_ids=drafts, bitmask=batch["bitmask"])
    probs = process_logits(raw, params, prompt_ids=[1, 2], draft_ids=drafts, bitmask=batch["bitmask"])
    q = batch["draft_probs"]
    # Drafts must be allowed by the processed p's support for q(x) > 0 to be meaningful; keep them.
    ref = rejection_sample(probs, batch["draft_token_ids"], batch["cu_num_draft_tokens"], q, batch["randomness"], torch.tensor([False], device=raw.device))
    for kernel in ("torch", "triton"):
        out = rejection_sample_logits(filt, batch["bitmask"], batch["temperature"], batch["draft_token_ids"],
                                      batch["cu_num_draft_tokens"], q, batch["randomness"], kernel=kernel)
        assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1]), kernel


def test_max_num_draft_tokens_pads_output(make_batch):
    batch = make_batch(2, 20, [1, 2])
    for kernel in ("torch", "triton"):
        out, _ = rejection_sample_logits(**batch, kernel=kernel, max_num_draft_tokens=5)
        assert out.shape == (2, 6) and (out[:, 3:] == -1).all()


@needs_cuda
@pytest.mark.parametrize("vocab", [49152, 50257, 128256])
@pytest.mark.parametrize("dense", [True, False])
def test_real_vocabularies_on_gpu(make_batch, vocab, dense):
    assert_same(make_batch(1, vocab, [0, 4, 8, 1, 3], dense=dense))
