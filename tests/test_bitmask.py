import pytest
import torch

from constrained_spec.bitmask import apply_bitmask_, bitmask_width, new_bitmask, pack_allowed, unpack_bitmask


@pytest.mark.parametrize("vocab", [1, 31, 32, 33, 100, 49152, 50257])
def test_pack_unpack_roundtrip(vocab):
    gen = torch.Generator().manual_seed(vocab)
    allowed = torch.rand(3, vocab, generator=gen) < 0.3
    packed = pack_allowed(allowed)
    assert packed.dtype == torch.int32 and packed.shape == (3, bitmask_width(vocab))
    assert torch.equal(unpack_bitmask(packed, vocab), allowed)


def test_bit_layout_matches_vllm_and_xgrammar():
    # Bit i of word j is token 32 * j + i.
    allowed = torch.zeros(70, dtype=torch.bool)
    allowed[[0, 31, 33, 69]] = True
    packed = pack_allowed(allowed)
    assert packed.tolist() == [1 | -(1 << 31), 1 << 1, 1 << 5]


def test_apply_sets_forbidden_and_padding_to_minus_inf():
    logits = torch.zeros(2, 40)
    mask = new_bitmask(2, 35)  # grammar knows 35 tokens; the model has 40 logits
    mask[0, 0] = 0b101
    mask[1, 1] = 1 << 2  # token 34
    apply_bitmask_(logits, mask)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [0, 2]
    assert torch.isfinite(logits[1]).nonzero().flatten().tolist() == [34]


def test_apply_rejects_mismatched_rows():
    with pytest.raises(ValueError, match="must be"):
        apply_bitmask_(torch.zeros(2, 8), new_bitmask(3, 8))


def test_allow_all():
    assert unpack_bitmask(new_bitmask(1, 40, allow_all=True), 40).all()


@pytest.mark.parametrize("size", [0, 3, 14, 15, 200])  # both sides of TokenSet's loop/numpy switch
def test_token_set_reads_the_allowed_ids_of_a_row(size):
    from constrained_spec.bitmask import TokenSet

    gen = torch.Generator().manual_seed(size)
    allowed = torch.rand(1000, generator=gen) < 0.4
    words = pack_allowed(allowed).numpy().view("uint32").reshape(-1)
    ids = torch.randperm(1000, generator=gen)[:size].sort().values.tolist()
    tokens = TokenSet(ids)
    assert len(tokens) == size
    assert tokens.allowed_in(words) == [i for i in ids if allowed[i]]


@pytest.mark.parametrize("size", [0, 5, 14, 15, 300])
def test_token_set_removes_its_ids_from_a_row(size):
    from constrained_spec.bitmask import TokenSet

    gen = torch.Generator().manual_seed(100 + size)
    allowed = torch.rand(1000, generator=gen) < 0.5
    ids = torch.randint(0, 1000, (size,), generator=gen).tolist()  # repeats and shared words too
    tokens, expected = TokenSet(ids), allowed.clone()
    expected[ids] = False
    for _ in range(2):  # the second call reuses what the first built
        words = pack_allowed(allowed).numpy().view("uint32").reshape(-1).copy()
        tokens.remove_from(words)
        assert torch.equal(unpack_bitmask(torch.from_numpy(words.view("int32")), 1000), expected)
