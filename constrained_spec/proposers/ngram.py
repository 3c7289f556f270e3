"""N-gram / prompt lookup: if the end of prompt + output occurred before, propose what followed
it. Extraction tasks copy names, numbers and phrases from the prompt, and JSON output repeats its
own structure, so the copy is often right.

Two ways to match:
- by tokens (the default): the longest suffix n-gram of token ids (`min_n`..`max_n` tokens);
- by bytes (`token_bytes` given): the longest suffix of the decoded bytes (at least `min_bytes`,
  with at least `min_word_bytes` letters or digits, so `":"` alone is no match). Copies inside
  JSON strings rarely start on the prompt's token boundaries (`"Maria` vs ` Maria`, `US` + `B`
  vs ` USB`), so token matching misses most of them. The continuation is the source's own
  tokens from the next token boundary on; a match ending inside a source token first spells
  the rest of that token with `encode` (dropped when the encoding does not spell it exactly).

One-hot and deterministic: the candidate is a function of the token history only. Among earlier
occurrences of the longest match (most recent first, up to `max_candidates`), the one whose
continuation the grammar accepts furthest wins, so a copy that would break the grammar loses to
one that does not.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import Draft, ProposalContext

__all__ = ["NgramProposer"]

_NO_BYTES = b"\xff"  # special tokens: a byte that never occurs in UTF-8 text
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_MAX_CACHED = 64  # requests whose history bytes are kept between steps (least recently used go)


class NgramProposer:
    """Prompt-lookup drafts. `min_n`..`max_n`: n-gram lengths tried, longest first (token
    matching). `token_bytes` (each token's bytes, index = id) switches to byte matching;
    `encode` (a tokenizer or `str -> ids`) spells a match that ends inside a token."""

    name = "ngram"

    def __init__(
        self,
        min_n: int = 2,
        max_n: int = 4,
        max_candidates: int = 4,
        *,
        token_bytes: Sequence[bytes | None] | None = None,
        encode: Any = None,
        min_bytes: int = 3,
        min_word_bytes: int = 2,
        max_bytes: int = 48,
    ) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError(f"need 1 <= min_n <= max_n, got min_n={min_n}, max_n={max_n}")
        if max_candidates < 1:
            raise ValueError(f"max_candidates={max_candidates}: must be >= 1")
        if not 1 <= min_bytes <= max_bytes:
            raise ValueError(f"need 1 <= min_bytes <= max_bytes, got min_bytes={min_bytes}, max_bytes={max_bytes}")
        self.min_n, self.max_n, self.max_candidates = min_n, max_n, max_candidates
        self.min_bytes, self.min_word_bytes, self.max_bytes = min_bytes, min_word_bytes, max_bytes
        self._token_bytes = [b or _NO_BYTES for b in token_bytes] if token_bytes is not None else None
        self._encode = None
        # request id -> (its history so far [n], the bytes of those tokens, each token's byte
        # offset [n + 1]): a history only grows between steps, so each step decodes its new
        # tokens only (the whole prompt again cost ~40 us a step)
        self._histories: OrderedDict[str, tuple[list[int], bytearray, list[int]]] = OrderedDict()
        if encode is not None:
            from .forced import as_encode

            self._encode = as_encode(encode)

    # ---- token matching ----

    def _token_candidates(self, seq: np.ndarray, max_tokens: int) -> list[list[int]]:
        """Continuations after earlier occurrences of the longest matching suffix n-gram."""
        length = len(seq)
        if length < self.min_n + 1:
            return []
        # Earlier occurrences of the last token, then grown backwards one token at a time.
        ends = np.flatnonzero(seq[: length - 1] == seq[-1])  # [M] index of each match's last token
        matched = np.ones(len(ends), dtype=np.int64)  # [M] matched n-gram length per occurrence
        alive = np.ones(len(ends), dtype=bool)
        for n in range(2, min(self.max_n, length - 1) + 1):
            starts = ends - (n - 1)
            alive &= starts >= 0
            alive[alive] = seq[starts[alive]] == seq[length - n]
            if not alive.any():
                break
            matched[alive] = n
        best = int(matched.max()) if len(ends) else 0
        if best < self.min_n:
            return []
        chosen = ends[matched == best][::-1][: self.max_candidates]  # most recent first
        return [seq[end + 1 : end + 1 + max_tokens].tolist() for end in chosen]

    # ---- byte matching ----

    def _history_bytes(self, key: str | None, seq: list[int]) -> tuple[bytes, list[int]]:
        """The bytes of `seq` and each token's byte offset `[len(seq) + 1]`, extended from what
        request `key` had at its last step where that is a prefix of `seq`."""
        assert self._token_bytes is not None
        table = self._token_bytes
        cached = self._histories.pop(key, None) if key is not None else None
        if cached is not None and len(cached[0]) <= len(seq) and seq[: len(cached[0])] == cached[0]:
            tokens, text, starts = cached
        else:
            tokens, text, starts = [], bytearray(), [0]
        for t in seq[len(tokens) :]:
            text += table[t] if 0 <= t < len(table) else _NO_BYTES
            starts.append(len(text))
        tokens.extend(seq[len(tokens) :])
        if key is not None:
            self._histories[key] = (tokens, text, starts)
            while len(self._histories) > _MAX_CACHED:
                self._histories.popitem(last=False)
        return bytes(text), starts

    def _byte_candidates(self, seq: list[int], max_tokens: int, key: str | None = None) -> list[list[int]]:
        """Continuations after earlier occurrences of the longest matching suffix of the bytes
        (`key`: the request, whose history bytes are kept between steps)."""
        text, starts = self._history_bytes(key, seq)  # starts: byte offset of each token
        size = len(text)
        length, found = self.min_bytes, -1
        while length <= min(self.max_bytes, size - 1):  # grow the suffix while it occurs earlier
            at = text.rfind(text[size - length :], 0, size - 1)
            if at < 0:
                break
            found, length = at, length + 1
        length -= 1
        if found < 0:
            return []
        suffix = text[size - length :]
        if sum(byte in _WORD for byte in suffix) < self.min_word_bytes:
            return []
        out, end = [], size - 1
        for _ in range(self.max_candidates):  # most recent occurrence first
            at = text.rfind(suffix, 0, end)
            if at < 0:
                break
            end = at + length - 1
            cont = at + length  # first byte of the continuation
            i = bisect.bisect_right(starts, cont) - 1  # the token holding that byte
            head: list[int] = []
            if starts[i] != cont:  # the match ends inside token i: spell the rest of it
                head = self._spell(text[cont : starts[i + 1]])
                if not head:
                    continue
                i += 1
            out.append((head + seq[i : i + max_tokens])[:max_tokens])
        return out

    def _spell(self, data: bytes) -> list[int]:
        """Token ids spelling exactly `data`, or [] when `encode` cannot."""
        if self._encode is None:
            return []
        try:
            ids = [int(t) for t in self._encode(data.decode("utf-8"))]
        except UnicodeDecodeError:
            return []
        table = self._token_bytes
        if not all(0 <= t < len(table) for t in ids) or b"".join(table[t] for t in ids) != data:
            return []
        return ids

    def propose(self, context: ProposalContext, max_tokens: int) -> Draft:
        if max_tokens <= 0:
            return Draft(source=self.name)
        if self._token_bytes is not None:
            candidates = self._byte_candidates([*context.prompt_ids, *context.output_ids], max_tokens, context.request_id)
        else:
            candidates = self._token_candidates(np.asarray([*context.prompt_ids, *context.output_ids], dtype=np.int64), max_tokens)
        best: list[int] = []
        for candidate in candidates:
            if context.matcher is not None:
                candidate = candidate[: context.matcher.validate_tokens(candidate)]
            if len(candidate) > len(best):
                best = candidate
        return Draft(token_ids=best, source=self.name)

    def observe(self, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> None:
        """Looks only at the current request's history: nothing to learn."""
