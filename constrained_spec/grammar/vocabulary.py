"""The decoded bytes of every token: what a grammar needs to know about a tokenizer.

A `Vocabulary` is immutable and fingerprinted, so compiled grammars can be cached per
(constraint, vocabulary) and shared across requests and threads.

- `token_bytes[i]` is the exact byte string token i contributes to the output, or None for a
  special token (never allowed by a grammar; EOS is handled separately: it is allowed exactly
  where the grammar accepts). Tokens that decode to no bytes are None too: allowing them would let
  a sampler loop forever without progress.
- `size` is the mask width, i.e. the model's logits width. It may exceed `len(token_bytes)`
  (embedding padding); ids beyond the tokenizer are always masked.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

__all__ = ["Vocabulary", "SortedTokens", "sorted_tokens", "trim_partial_utf8"]

_SP_BYTE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_SP_SPACE = "\u2581"  # SentencePiece's "▁" stands for a space


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's byte -> printable-unicode table used by byte-level BPE."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def _decode_byte_level(token: str) -> bytes | None:
    table = _byte_decoder()
    try:
        return bytes(table[ch] for ch in token)
    except KeyError:  # not a byte-level token (e.g. an added plain-text token)
        return None


def _decode_sentencepiece(token: str) -> bytes:
    match = _SP_BYTE.match(token)
    if match:
        return bytes([int(match.group(1), 16)])
    return token.replace(_SP_SPACE, " ").encode("utf-8")


def _detect_scheme(tokenizer: Any, pieces: Sequence[str]) -> str:
    """'byte_level' (GPT-2 / SmolLM2 / Llama-3 style) or 'sentencepiece' (Llama-2 / Mistral style)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    decoder = repr(getattr(backend, "decoder", "")) if backend is not None else ""
    if "ByteLevel" in decoder:
        return "byte_level"
    if "Metaspace" in decoder or "ByteFallback" in decoder or _SP_SPACE in decoder:
        return "sentencepiece"
    if getattr(tokenizer, "byte_decoder", None) is not None:
        return "byte_level"
    sp = sum(_SP_SPACE in p for p in pieces)
    gpt2 = sum("\u0120" in p for p in pieces)  # "Ġ" = byte-level space
    return "sentencepiece" if sp > gpt2 else "byte_level"


def trim_partial_utf8(data: bytes) -> bytes:
    """Drop a trailing incomplete UTF-8 sequence (forced bytes must stay whole characters)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # continuation byte: keep looking for the lead byte
            continue
        need = 1 if byte < 0x80 else 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
        return data if need <= back else data[:-back]
    return data


class Vocabulary:
    """Immutable decoded vocabulary. Equal (and equally hashed) iff the fingerprints match."""

    __slots__ = ("token_bytes", "eos_token_id", "size", "fingerprint")

    token_bytes: tuple[bytes | None, ...]
    eos_token_id: int
    size: int
    fingerprint: str

    def __init__(self, token_bytes: Sequence[bytes | None], eos_token_id: int, size: int | None = None) -> None:
        tokens = tuple(b if b else None for b in token_bytes)  # b"" -> None (see module doc)
        size = len(tokens) if size is None else int(size)
        if size < len(tokens):
            raise ValueError(f"vocabulary size {size} is smaller than the {len(tokens)} tokens given")
        if not 0 <= eos_token_id < len(tokens):
            raise ValueError(f"eos_token_id {eos_token_id} is outside the {len(tokens)} tokens given")
        tokens = tokens[:eos_token_id] + (None,) + tokens[eos_token_id + 1 :]  # EOS is special
        digest = hashlib.sha256(f"{size}:{eos_token_id}:{len(tokens)}".encode())
        for b in tokens:
            digest.update(b"\xff" if b is None else len(b).to_bytes(4, "little") + b)
        object.__setattr__(self, "token_bytes", tokens)
        object.__setattr__(self, "eos_token_id", int(eos_token_id))
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "fingerprint", digest.hexdigest()[:32])

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Vocabulary is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and other.fingerprint == self.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __len__(self) -> int:
        return len(self.token_bytes)

    def __repr__(self) -> str:
        return f"Vocabulary(tokens={len(self.token_bytes)}, size={self.size}, eos={self.eos_token_id}, fp={self.fingerprint[:8]})"

    @classmethod
    def from_tokens(cls, tokens: Sequence[str | bytes | None], eos_token_id: int, size: int | None = None) -> "Vocabulary":
        """Plain text (UTF-8 encoded) or bytes per token; None marks a special token."""
        return cls([t.encode("utf-8") if isinstance(t, str) else t for t in tokens], eos_token_id, size)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, size: int | None = None) -> "Vocabulary":
        """From a Hugging Face tokenizer: byte-level BPE or SentencePiece, special tokens -> None.

        `size` is the model's logits width when it exceeds the tokenizer (embedding padding)."""
        eos = tokenizer.eos_token_id
        if eos is None:
            raise ValueError("the tokenizer has no eos_token_id; a grammar needs one to stop")
        n = len(tokenizer)
        pieces = tokenizer.convert_ids_to_tokens(list(range(n)))
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
        special |= {i for i, tok in added.items() if getattr(tok, "special", False)}
        scheme = _detect_scheme(tokenizer, [p for p in pieces if p is not None])
        token_bytes: list[bytes | None] = []
        for i, piece in enumerate(pieces):
            if piece is None or i in special:
                token_bytes.append(None)
            elif i in added:  # a non-special added token is inserted verbatim as text
                token_bytes.append(added[i].content.encode("utf-8"))
            elif scheme == "byte_level":
                token_bytes.append(_decode_byte_level(piece))
            else:
                token_bytes.append(_decode_sentencepiece(piece))
        return cls(token_bytes, int(eos), size)


class SortedTokens:
    """The tokens with bytes, sorted by their bytes: the ones starting with given bytes are one
    bisection away (the uniqueness wrappers ask this on their hot path)."""

    def __init__(self, token_bytes: Sequence[bytes | None]) -> None:
        pairs = sorted((data, i) for i, data in enumerate(token_bytes) if data)
        self._bytes = [data for data, _ in pairs]
        self._ids = [i for _, i in pairs]

    def starting_with(self, prefix: bytes) -> list[int]:
        """Ids of the tokens whose bytes start with `prefix`."""
        at, found = bisect_left(self._bytes, prefix), []
        while at < len(self._bytes) and self._bytes[at].startswith(prefix):
            found.append(self._ids[at])
            at += 1
        return found


@lru_cache(maxsize=8)
def sorted_tokens(vocab: Vocabulary) -> SortedTokens:
    """`vocab`'s SortedTokens, built once per vocabulary."""
    return SortedTokens(vocab.token_bytes)
