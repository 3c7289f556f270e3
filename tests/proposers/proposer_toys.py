"""A tiny grammar and vocabulary for proposer tests: the language is a finite set of byte
strings, the matcher walks it token by token. It implements the whole `GrammarMatcher`
protocol, including `forced_bytes` (the longest common prefix of every valid continuation)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from constrained_spec.bitmask import pack_allowed
from constrained_spec.grammar.protocol import GrammarError

EOS = 0
# Token 0 is EOS; the rest are single characters plus a few merges, like a small BPE vocabulary.
TOKENS: list[bytes] = [b"<eos>"] + [bytes([c]) for c in b'{}":, abcdeilmnorstuxy0123456789'] + [
    b'{"', b'":', b'",', b'"}', b'name', b'age', b'city', b'":"', b' "', b'Ali', b'ce', b'Bob', b'Paris', b'Rome',
]
VOCAB = len(TOKENS)
TOKEN_ID = {t: i for i, t in enumerate(TOKENS)}


def encode(text: str) -> list[int]:
    """Greedy longest-match tokenization: the toy's 'canonical' encoding."""
    data, ids, pos = text.encode(), [], 0
    while pos < len(data):
        best = max((t for t in TOKENS[1:] if data.startswith(t, pos)), key=len)
        ids.append(TOKEN_ID[best])
        pos += len(best)
    return ids


def decode(ids: Sequence[int]) -> bytes:
    return b"".join(TOKENS[i] for i in ids if i != EOS)


class SetMatcher:
    """Accepts exactly the byte strings in `language` (then EOS)."""

    def __init__(self, language: Sequence[bytes], history: list[bytes] | None = None, ended: bool = False) -> None:
        self.language = tuple(language)
        self.history = history or [b""]  # text after each accepted token, for rollback
        self.ended = ended

    @property
    def vocab_size(self) -> int:
        return VOCAB

    @property
    def text(self) -> bytes:
        return self.history[-1]

    def _allowed(self, token: int) -> bool:
        if self.ended:
            return False
        if token == EOS:
            return self.text in self.language
        candidate = self.text + TOKENS[token]
        return any(s.startswith(candidate) for s in self.language)

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        allowed = torch.tensor([self._allowed(t) for t in range(VOCAB)])
        bitmask[row] = pack_allowed(allowed)

    def accept_token(self, token_id: int) -> None:
        if not self._allowed(token_id):
            raise GrammarError(f"token {token_id} is not allowed here")
        if token_id == EOS:
            self.ended = True
            self.history.append(self.text)
        else:
            self.history.append(self.text + TOKENS[token_id])

    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        probe = self.fork()
        for n, token in enumerate(token_ids):
            if not probe._allowed(token):
                return n
            probe.accept_token(token)
        return len(token_ids)

    def rollback(self, num_tokens: int) -> None:
        if num_tokens > len(self.history) - 1:
            raise GrammarError("rollback past the start")
        for _ in range(num_tokens):
            self.history.pop()
        self.ended = False

    def is_accepting(self) -> bool:
        return self.text in self.language

    def is_terminated(self) -> bool:
        return self.ended

    def forced_bytes(self, max_bytes: int = 64) -> bytes:
        if self.ended or self.is_accepting():
            return b""
        rests = [s[len(self.text):] for s in self.language if s.startswith(self.text)]
        if not rests:
            return b""
        prefix = rests[0]
        for rest in rests[1:]:
            n = 0
            while n < min(len(prefix), len(rest)) and prefix[n] == rest[n]:
                n += 1
            prefix = prefix[:n]
        return prefix[:max_bytes]

    def fork(self) -> "SetMatcher":
        return SetMatcher(self.language, list(self.history), self.ended)


PEOPLE = [b'{"name":"Alice","age":30}', b'{"name":"Bob","age":41}', b'{"name":"Rome","city":"Paris"}']
