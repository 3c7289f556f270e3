"""Vocabulary: decoded token bytes, specials, padding, fingerprints."""

from __future__ import annotations

import pytest

from constrained_spec.grammar.vocabulary import Vocabulary


def test_from_tokens_encodes_text_and_marks_eos_special():
    vocab = Vocabulary.from_tokens(["a", b"\xff", "</s>", "é", ""], eos_token_id=2, size=40)
    assert vocab.token_bytes == (b"a", b"\xff", None, "é".encode(), None)
    assert vocab.size == 40 and len(vocab) == 5 and vocab.eos_token_id == 2


def test_immutable_and_fingerprinted():
    a = Vocabulary.from_tokens(["a", "b", "<eos>"], 2)
    b = Vocabulary.from_tokens([b"a", b"b", None], 2)
    c = Vocabulary.from_tokens(["a", "c", "<eos>"], 2)
    assert a == b and hash(a) == hash(b) and a.fingerprint == b.fingerprint
    assert a != c
    assert Vocabulary.from_tokens(["a", "b", "<eos>"], 2, size=64) != a  # width matters for masks
    with pytest.raises(AttributeError, match="immutable"):
        a.size = 3  # type: ignore[misc]


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="smaller than the 3 tokens"):
        Vocabulary.from_tokens(["a", "b", "c"], 0, size=2)
    with pytest.raises(ValueError, match="eos_token_id 5 is outside"):
        Vocabulary.from_tokens(["a", "b", "c"], 5)


class _FakeSentencePiece:
    """A slow-tokenizer-like object with SentencePiece pieces (no backend_tokenizer)."""

    eos_token_id = 2
    all_special_ids = [0, 1, 2]
    added_tokens_decoder: dict = {}
    _pieces = ["<unk>", "<s>", "</s>", "<0x0A>", "\u2581hello", "world", "<0xE6>", "\u2581"]

    def __len__(self) -> int:
        return len(self._pieces)

    def convert_ids_to_tokens(self, ids):
        return [self._pieces[i] for i in ids]


def test_sentencepiece_pieces_decode_to_bytes():
    vocab = Vocabulary.from_tokenizer(_FakeSentencePiece(), size=16)
    assert vocab.token_bytes == (None, None, None, b"\n", b" hello", b"world", b"\xe6", b" ")
    assert vocab.size == 16


@pytest.mark.model
def test_smollm2_tokenizer_round_trips_bytes(smollm2_tokenizer, smollm2_vocab):
    vocab = smollm2_vocab  # the session fixture is Vocabulary.from_tokenizer(smollm2_tokenizer)
    assert vocab.size == len(vocab) == 49152 and vocab.eos_token_id == 2
    text = 'Hello wörld {"a": [1, 2.5e-3]}\n\t日本 🙂'
    ids = smollm2_tokenizer.encode(text)
    assert b"".join(vocab.token_bytes[i] for i in ids) == text.encode()
    # every special token (ChatML markers, <|endoftext|>, EOS) is never allowed
    for i in smollm2_tokenizer.all_special_ids:
        assert vocab.token_bytes[i] is None
    wider = Vocabulary.from_tokenizer(smollm2_tokenizer, size=49216)
    assert wider.size == 49216 and wider.token_bytes == vocab.token_bytes
