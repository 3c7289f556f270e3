"""The incremental Detokenizer against decoding the whole sequence at once: random token
sequences over a byte-level toy vocabulary whose characters are split across tokens, stop strings
spanning tokens, EOS; and the real default tokenizer when it is cached."""

import random

import pytest

from constrained_spec.detokenizer import ByteDecoder, Detokenizer

EOS = 0
# Byte tokens: ASCII words, whole multi-byte characters, and their bytes one or two at a time.
TOKEN_BYTES = [b""] + [t.encode() for t in ("a", "b", "ab", "ba", " ", "\n", "x<", "</", "stop")] + [
    "é".encode(), "€".encode(), "😀".encode(), b"\xc3", b"\xa9", b"\xe2", b"\x82\xac", b"\xe2\x82", b"\xac",
    b"\xf0\x9f", b"\x98\x80", b"\xf0", b"\x9f\x98", b"\x80", b"\xff",
]


def decode(ids):
    return b"".join(TOKEN_BYTES[i] for i in ids).decode("utf-8", errors="replace")


def reference(ids, stop):
    """(text cut before the first stop string, tokens consumed): the consumed prefix is the shortest
    whose decoded text, without an unfinished last character, contains a stop string."""
    if EOS in ids:
        ids = ids[: ids.index(EOS)]
    for n in range(1, len(ids) + 1):
        text = decode(ids[:n]).rstrip("\ufffd")
        cuts = [i for i in (text.find(s) for s in stop) if i >= 0]
        if cuts:
            return text[: min(cuts)], n
    return decode(ids), len(ids)


# the same function twice: decoded by windows, and (ByteDecoder) byte by byte
DECODERS = {"windows": decode, "bytes": ByteDecoder(TOKEN_BYTES)}


def run(ids, stop, rng, decoder=decode):
    """Push ids in chunks of random size, one token at a time; read deltas after each chunk."""
    detok = Detokenizer(decoder, stop, eos_token_id=EOS)
    deltas, i = [], 0
    while i < len(ids) and not detok.stopped:
        chunk = rng.randrange(1, 4)
        for token in ids[i : i + chunk]:
            if detok.push([token]):
                break
        i += chunk
        deltas.append(detok.delta())
        assert not any(s in "".join(deltas) for s in stop)  # nothing handed out holds a stop string
    detok.finish()
    deltas.append(detok.delta())
    return detok, "".join(deltas)


@pytest.mark.parametrize("kind", DECODERS)
@pytest.mark.parametrize("seed", range(300))
def test_matches_decoding_the_whole_sequence(seed, kind):
    rng = random.Random(seed)
    ids = [rng.randrange(1, len(TOKEN_BYTES)) for _ in range(rng.randrange(0, 40))]
    if rng.random() < 0.2:
        ids.insert(rng.randrange(len(ids) + 1), EOS)
    whole = decode(ids[: ids.index(EOS)] if EOS in ids else ids).replace("\ufffd", "")
    stop = []
    for _ in range(rng.randrange(0, 3)):  # substrings of the output: they span tokens
        if len(whole) >= 2:
            a = rng.randrange(len(whole) - 1)
            stop.append(whole[a : a + rng.randrange(1, 6)])
    if rng.random() < 0.3:
        stop.append("never here")
    expected, consumed = reference(ids, stop)
    detok, streamed = run(ids, stop, rng, DECODERS[kind])
    assert streamed == expected
    assert detok.text == expected
    assert len(detok.token_ids) == consumed


@pytest.mark.parametrize("kind", DECODERS)
def test_unfinished_character_is_held_then_completed(kind):
    detok = Detokenizer(DECODERS[kind])
    euro_start, euro_end = TOKEN_BYTES.index(b"\xe2\x82"), TOKEN_BYTES.index(b"\xac")
    detok.push([1, euro_start])
    assert detok.delta() == "a"  # the half character is not shown
    detok.push([euro_end])
    assert detok.delta() == "€"


@pytest.mark.parametrize("kind", DECODERS)
def test_a_possible_stop_start_is_held_back_until_decided(kind):
    detok = Detokenizer(DECODERS[kind], stop=["</stop>"])
    detok.push([TOKEN_BYTES.index(b"x<")])
    assert detok.delta() == "x"  # "<" may begin "</stop>"
    detok.push([TOKEN_BYTES.index(b"a")])
    assert detok.delta() == "<a"
    assert not detok.stopped


def test_eos_ends_the_text_and_is_not_decoded():
    detok = Detokenizer(lambda ids: "".join("E" if i == EOS else "a" for i in ids), eos_token_id=EOS)
    assert detok.push([1, 1, EOS, 1]) is True
    assert detok.token_ids == [1, 1] and detok.text == "aa"


def test_decoding_cost_is_linear_in_the_output():
    decoded_tokens = 0

    def counting_decode(ids):
        nonlocal decoded_tokens
        decoded_tokens += len(ids)
        return decode(ids)

    detok = Detokenizer(counting_decode, stop=["never"])
    for _ in range(2000):
        detok.push([1])
        detok.delta()
    assert decoded_tokens <= 4 * 2000  # re-decoding everything would be ~2000**2 / 2


def test_real_tokenizer_round_trip():
    try:
        from transformers import AutoTokenizer

        from constrained_spec.models import DEFAULT_MODEL, cache_dir

        tokenizer = AutoTokenizer.from_pretrained(cache_dir() / f"{DEFAULT_MODEL}-float32", local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - the default model is optional here
        pytest.skip(f"default tokenizer not available: {exc}")
    from constrained_spec.engine_setup import text_decoder
    from constrained_spec.grammar import Vocabulary

    text = "Hé said: « 42 € » 😀 — naïve café\n{\"k\": [1, 2]} 漢字かな"
    ids = tokenizer.encode(text, add_special_tokens=False)
    rng = random.Random(0)
    dec = lambda t: tokenizer.decode(t, skip_special_tokens=True)  # noqa: E731
    by_bytes = text_decoder(tokenizer, Vocabulary.from_tokenizer(tokenizer))
    assert isinstance(by_bytes, ByteDecoder)  # SmolLM2's tokenizer is byte-level
    for i in range(40):
        sample = ids + [rng.randrange(tokenizer.vocab_size) for _ in range(30)]
        assert by_bytes(sample) == dec(sample)
        detok = Detokenizer(by_bytes if i % 2 else dec, eos_token_id=tokenizer.eos_token_id)
        out = []
        for t in sample:
            if detok.push([t]):
                break
            out.append(detok.delta())
        detok.finish()
        out.append(detok.delta())
        kept = sample[: sample.index(tokenizer.eos_token_id)] if tokenizer.eos_token_id in sample else sample
        assert "".join(out) == dec(kept)


def test_an_unfinished_character_at_the_end_shows_as_replacement():
    for decoder in DECODERS.values():
        detok = Detokenizer(decoder)
        detok.push([1, TOKEN_BYTES.index(b"\xe2\x82")])
        detok.finish()
        assert detok.text == "a\ufffd" and detok.delta() == "a\ufffd"


def test_text_decoder_is_bytes_only_where_the_tokenizer_decodes_bytes():
    from tokenizers import decoders

    from constrained_spec.engine_setup import text_decoder
    from constrained_spec.grammar import Vocabulary

    class Backend:
        def __init__(self, decoder, texts):
            self.decoder, self.texts = decoder, texts

        def decode_batch(self, batch, skip_special_tokens):
            return [self.texts[i] for (i,) in batch]

    class Tokenizer:
        clean_up_tokenization_spaces = False

        def __init__(self, backend):
            self.backend_tokenizer = backend

        def decode(self, ids, skip_special_tokens):
            return "".join(self.backend_tokenizer.texts[i] for i in ids)

    vocab = Vocabulary([b"a", b" b", "é".encode(), None], eos_token_id=3)
    texts = ["a", " b", "é", ""]
    assert isinstance(text_decoder(Tokenizer(Backend(decoders.ByteLevel(), texts)), vocab), ByteDecoder)
    # a decoder that changes text (Metaspace strips a leading space), or one token decoded
    # unlike its bytes: the tokenizer's own decode
    for backend in (Backend(decoders.Metaspace(), texts), Backend(decoders.ByteLevel(), ["a", "b", "é", ""])):
        chosen = text_decoder(Tokenizer(backend), vocab)
        assert not isinstance(chosen, ByteDecoder) and chosen([0, 1]) == backend.texts[0] + backend.texts[1]
    # an added token that is not special (decoded apart from its neighbours' bytes): not bytes
    from tokenizers import AddedToken

    with_added = Tokenizer(Backend(decoders.ByteLevel(), texts))
    with_added.added_tokens_decoder = {3: AddedToken("<x>", special=False)}
    assert not isinstance(text_decoder(with_added, vocab), ByteDecoder)
    with_added.added_tokens_decoder = {3: AddedToken("<x>", special=True)}
    assert isinstance(text_decoder(with_added, vocab), ByteDecoder)
