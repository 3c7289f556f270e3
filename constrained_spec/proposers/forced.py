"""Grammar-forced strings: where the grammar allows exactly one text continuation (a JSON key,
`", "`, closing brackets, an enum or const value), propose its canonical tokenization.

The draft is one-hot and a deterministic function of the grammar state and the history, so the
exact rejection rule verifies it like any other draft: at T = 0 it is accepted wherever the
model would emit the same tokens, at T > 0 with probability p(x). It costs no model call.

Token boundaries: the model does not always spell forced text canonically. Measured on
SmolLM2-135M with compact JSON (greedy): the canonical `":"` is one token, but the model writes
`":` then `"`; it often opens with `{` and `"` apart. So, with `token_bytes` given, the proposer
learns the model's own spelling: it remembers where it proposed a forced text and, once the
committed output covers that spot, records the tokens the model actually used for it (only up to
the last token boundary inside it, so a tail the model merges onward is held back). Later
proposals of the same text use the spelling the model used most often. Other texts get the
canonical encoding with the learned rewrites of its pieces (aligning the two spellings on their
common byte boundaries gives rewrites such as `":"` -> `":` `"`, which then apply after every
key). All of this depends only on committed output. `tail="drop"` always holds the last token back.

At T > 0 the model's spelling varies (`":"` 0.6, `":` + `"` 0.4), and one fixed spelling is
accepted only with its own probability. There the proposer draws a spelling from the observed
ones with the request's draft generator and returns dense q rows (the observed frequencies, an
estimate of p), so a token is accepted with sum_x min(p(x), q(x)) instead.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .base import Draft, ProposalContext

__all__ = ["ForcedProposer", "as_encode"]

Encode = Callable[[str], Sequence[int]]
_MISMATCH = ()  # the output did not spell the forced text where it was proposed


def as_encode(tokenizer_or_encode: Any) -> Encode:
    """A `str -> token ids` callable from a Hugging Face tokenizer (no special tokens added) or
    from a callable that already is one."""
    if hasattr(tokenizer_or_encode, "encode"):
        tokenizer = tokenizer_or_encode
        return lambda text: tokenizer.encode(text, add_special_tokens=False)
    if callable(tokenizer_or_encode):
        return tokenizer_or_encode
    raise TypeError(f"expected a tokenizer with .encode or a callable str -> token ids, got {type(tokenizer_or_encode).__name__}")


def _valid_utf8_prefix(data: bytes) -> str:
    """The longest prefix of `data` that is complete UTF-8, decoded (forced bytes may stop inside
    a multi-byte character)."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""


class ForcedProposer:
    """Proposes the canonical tokenization of `matcher.forced_bytes()`, cut where the grammar
    rejects it. `encode`: a tokenizer or `str -> ids` callable. `token_bytes` (each token's bytes,
    index = id), when given, checks that the encoding spells exactly the forced bytes and cuts it
    where it does not (SentencePiece tokenizers prepend a space, some normalize text)."""

    name = "forced"

    def __init__(
        self,
        encode: Any,
        *,
        token_bytes: Sequence[bytes | None] | None = None,
        tail: str = "keep",
        max_bytes: int = 64,
        cache_size: int = 4096,
    ) -> None:
        if tail not in ("keep", "drop"):
            raise ValueError(f"tail={tail!r}: must be 'keep' or 'drop'")
        if max_bytes < 1:
            raise ValueError(f"max_bytes={max_bytes}: must be >= 1")
        self._encode = as_encode(encode)
        self.tail = tail
        self._token_bytes = list(token_bytes) if token_bytes is not None else None
        self.max_bytes = max_bytes
        self._cache: OrderedDict[str, list[int]] = OrderedDict()  # forced text -> ids, LRU
        self._cache_size = cache_size
        # forced text -> {the model's spelling: (times seen, when last seen)}, LRU over texts
        self._learned: OrderedDict[str, dict[tuple[int, ...], tuple[int, int]]] = OrderedDict()
        self._observed = 0
        self._pending: OrderedDict[str, list[tuple[int, bytes]]] = OrderedDict()  # request -> (position, forced bytes)
        self._rewrites: dict[tuple[int, ...], list[int]] = {}  # canonical piece -> the model's spelling

    def _tokenize(self, text: str) -> list[int]:
        ids = self._cache.get(text)
        if ids is None:
            ids = [int(i) for i in self._encode(text)]
            if self._token_bytes is not None:
                ids = self._spelled_prefix(ids, text.encode("utf-8"))
            self._cache[text] = ids
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(text)
        return ids

    def _spelled_prefix(self, ids: list[int], data: bytes) -> list[int]:
        """The longest prefix of `ids` whose token bytes are a prefix of `data`."""
        pos = 0
        for n, token in enumerate(ids):
            piece = self._token_bytes[token] if 0 <= token < len(self._token_bytes) else None
            if not piece or not data.startswith(piece, pos):
                return ids[:n]
            pos += len(piece)
        return ids

    def _spelling(self, output: Sequence[int], pos: int, data: bytes) -> list[int] | None | tuple[()]:
        """The tokens the output used for `data` starting at token `pos`, up to the last token
        boundary inside it (possibly none); `_MISMATCH` when the output does not spell `data`
        there; None while the output is too short to tell."""
        assert self._token_bytes is not None
        used, tokens = 0, []
        for token in output[pos:]:
            piece = self._token_bytes[token] if 0 <= token < len(self._token_bytes) else None
            if not piece:
                return _MISMATCH
            if used + len(piece) > len(data):  # merged onward: keep what lies inside `data`
                return tokens if piece.startswith(data[used:]) else _MISMATCH
            if data[used : used + len(piece)] != piece:
                return _MISMATCH
            tokens.append(token)
            used += len(piece)
            if used == len(data):
                return tokens
        return None

    def _learn(self, context: ProposalContext) -> None:
        """Resolve this request's earlier proposals against its committed output."""
        pending = self._pending.get(context.request_id)
        if not pending:
            return
        committed = list(context.output_ids[: len(context.output_ids) - context.num_drafted])
        still = []
        for pos, data in pending:
            spelled = self._spelling(committed, pos, data)
            if spelled is None:
                still.append((pos, data))
            elif spelled is not _MISMATCH:
                text = data.decode("utf-8")
                seen = self._learned.setdefault(text, {})
                self._learned.move_to_end(text)
                self._observed += 1
                count, _ = seen.get(tuple(spelled), (0, 0))
                seen[tuple(spelled)] = (count + 1, self._observed)
                self._learn_rewrites(self._tokenize(text), spelled)
                if len(self._learned) > self._cache_size:
                    self._learned.popitem(last=False)
        self._pending[context.request_id] = still[-8:]

    def _learn_rewrites(self, canonical: list[int], model: list[int]) -> None:
        """Align two spellings of the same bytes on their common token boundaries; every piece
        the model spelled differently becomes a rewrite (one it spelled canonically drops one)."""
        assert self._token_bytes is not None
        i = j = c_end = m_end = 0
        piece_c: list[int] = []
        piece_m: list[int] = []
        while True:
            if c_end <= m_end and i < len(canonical):
                piece_c.append(canonical[i])
                c_end += len(self._token_bytes[canonical[i]] or b"")
                i += 1
            elif j < len(model):
                piece_m.append(model[j])
                m_end += len(self._token_bytes[model[j]] or b"")
                j += 1
            else:
                return  # a trailing piece the model did not finish inside the text: no rewrite
            if c_end == m_end and piece_c and piece_m:
                key = tuple(piece_c)
                if piece_c != piece_m and len(key) <= 3:
                    self._rewrites[key] = piece_m
                else:
                    self._rewrites.pop(key, None)
                piece_c, piece_m = [], []

    def _rewrite(self, ids: list[int]) -> list[int]:
        """Apply learned piece rewrites to a canonical encoding, longest piece first."""
        if not self._rewrites:
            return ids
        out, i = [], 0
        while i < len(ids):
            for size in (3, 2, 1):
                replacement = self._rewrites.get(tuple(ids[i : i + size])) if i + size <= len(ids) else None
                if replacement is not None:
                    out.extend(replacement)
                    i += size
                    break
            else:
                out.append(ids[i])
                i += 1
        return out

    def _remember(self, context: ProposalContext, text: str) -> None:
        records = self._pending.setdefault(context.request_id, [])
        self._pending.move_to_end(context.request_id)
        record = (len(context.output_ids), text.encode("utf-8"))
        if record not in records:
            records.append(record)
        while len(self._pending) > 4096:  # finished requests age out
            self._pending.popitem(last=False)

    def propose(self, context: ProposalContext, max_tokens: int) -> Draft:
        matcher = context.matcher
        if matcher is None or max_tokens <= 0 or matcher.is_terminated():
            return Draft(source=self.name)
        if self._token_bytes is not None:
            self._learn(context)
        text = _valid_utf8_prefix(matcher.forced_bytes(self.max_bytes))
        if not text:
            return Draft(source=self.name)
        if self._token_bytes is not None:
            self._remember(context, text)
        seen = self._learned.get(text)
        probs = None
        if seen and len(seen) > 1 and not context.params.greedy and context.generator is not None:
            ids, probs = self._sample_spelling(seen, context.generator, max_tokens)
        elif seen:  # the spelling the model used most often, latest on ties
            ids = list(max(seen.items(), key=lambda item: item[1])[0])
        else:
            ids = self._rewrite(self._tokenize(text))
        if self.tail == "drop":
            ids = ids[:-1]
        ids = ids[:max_tokens]
        ids = ids[: matcher.validate_tokens(ids)] if ids else ids
        if probs is not None:
            probs = probs[: len(ids)] if ids else None
        return Draft(token_ids=ids, probs=probs, source=self.name, num_forced=len(ids))

    def _sample_spelling(self, seen: dict[tuple[int, ...], tuple[int, int]], generator: torch.Generator, max_tokens: int) -> tuple[list[int], torch.Tensor | None]:
        """At T > 0 the model spells forced text in several ways (`":"` or `":` + `"`), so one
        fixed spelling is accepted only with the probability the model gives it. Instead, draw a
        spelling token by token from the observed ones: row j of q is the share of observed
        spellings agreeing with the tokens drawn so far that continue with each token (the
        empirical estimate of p there). Returns (tokens, q rows [len, V] or None if all one-hot).
        Stops where most agreeing spellings end (the model merged the rest onward)."""
        assert self._token_bytes is not None
        spellings = [(spelling, count) for spelling, (count, _) in seen.items()]
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        while len(tokens) < max_tokens:
            depth = len(tokens)
            nexts: dict[int, int] = {}
            ended = 0
            for spelling, count in spellings:
                if len(spelling) > depth:
                    nexts[spelling[depth]] = nexts.get(spelling[depth], 0) + count
                else:
                    ended += count
            if not nexts or ended > sum(nexts.values()):
                break
            ids = torch.tensor(list(nexts), dtype=torch.long)  # [n] candidate tokens
            weights = torch.tensor(list(nexts.values()), dtype=torch.float32)
            weights /= weights.sum()
            token = int(ids[torch.multinomial(weights, 1, generator=generator)])
            row = torch.zeros(len(self._token_bytes))
            row[ids] = weights
            rows.append(row)
            tokens.append(token)
            spellings = [(s, c) for s, c in spellings if len(s) > depth and s[depth] == token]
        if all(float(row.max()) == 1.0 for row in rows):
            return tokens, None
        return tokens, torch.stack(rows)

    def observe(self, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> None:
        """Forced strings come from the grammar alone: nothing to learn."""
