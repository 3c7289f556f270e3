"""The incremental Detokenizer against decoding the whole sequence at once: random token
sequences over a byte-level toy vocabulary whose characters are split across tokens, stop strings
spanning tokens, EOS; and the real default tokenizer when it is cached."""

import random

import pytest

from constrained_spec.detokenizer import Detokenizer

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


def run(ids, stop, rng):
    """Push ids in chunks of random size, one token at a time; read deltas after each chunk."""
    detok = Detokenizer(decode, stop, eos_token_id=EOS)
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


@pytest.mark.parametrize("seed", range(300))
def test_matches_decoding_the_whole_sequence(seed):
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
    detok, streamed = run(ids, stop, rng)
    assert streamed == expected
    assert detok.text == expected
    assert len(detok.token_ids) == consumed


def test_unfinished_character_is_held_then_completed():
    detok = Detokenizer(decode)
    euro_start, euro_end = TOKEN_BYTES.index(b"\xe2\x82"), TOKEN_BYTES.index(b"\xac")
    detok.push([1, euro_start])
    assert detok.delta() == "a"  # the half character is not shown
    detok.push([euro_end])
    assert detok.delta() == "€"


def test_a_possible_stop_start_is_held_back_until_decided():
    detok = Detokenizer(decode, stop=["</stop>"])
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
    text = "Hé said: « 42 € » 😀 — naïve café\n{\"k\": [1, 2]} 漢字かな"
    ids = tokenizer.encode(text, add_special_tokens=False)
    rng = random.Random(0)
    dec = lambda t: tokenizer.decode(t, skip_special_tokens=True)  # noqa: E731
    for _ in range(20):
        sample = ids + [rng.randrange(tokenizer.vocab_size) for _ in range(30)]
        detok = Detokenizer(dec, eos_token_id=tokenizer.eos_token_id)
        out = []
        for t in sample:
            if detok.push([t]):
                break
            out.append(detok.delta())
        detok.finish()
        out.append(detok.delta())
        kept = sample[: sample.index(tokenizer.eos_token_id)] if tokenizer.eos_token_id in sample else sample
        assert "".join(out) == dec(kept)
