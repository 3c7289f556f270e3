"""Packed token bitmasks: the one format that crosses from the grammar to the samplers.

Layout (the one vLLM and xgrammar use): an int32 tensor `[rows, ceil(V / 32)]`; bit i of word j
is 1 when token `32 * j + i` is allowed. Only this module knows the bit order.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "bitmask_width",
    "clear_token",
    "HostRows",
    "count_allowed",
    "TokenSet",
    "new_bitmask",
    "pack_allowed",
    "unpack_bitmask",
    "apply_bitmask_",
]

_BIT_VALUES = torch.tensor([1 << i for i in range(32)], dtype=torch.int64)


def bitmask_width(vocab_size: int) -> int:
    """Number of int32 words that hold one row of `vocab_size` bits."""
    return (vocab_size + 31) // 32


def count_allowed(words: np.ndarray) -> int:
    """How many tokens a packed row allows (its words as uint32 numpy `[ceil(V/32)]`)."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2
        return int(np.bitwise_count(words).sum())
    return int(np.unpackbits(words.view(np.uint8)).sum())


def clear_token(words: np.ndarray, token_id: int) -> None:
    """Remove `token_id` from the packed mask row `words` (uint32 numpy `[ceil(V/32)]`)."""
    word = token_id >> 5
    words[word] = words.item(word) & ~(1 << (token_id & 31))  # Python ints: a third faster than numpy scalars


class HostRows:
    """A bitmask's rows as uint32 numpy words `[ceil(V/32)]` for in-place edits on the host, the
    view kept while callers pass the same CPU bitmask again (a fresh torch view costs ~10 us a
    mask). A device bitmask is copied to the host each time: write the row back with `store`."""

    __slots__ = ("_bitmask", "_table", "_rows")

    def __init__(self) -> None:
        self._bitmask: torch.Tensor | None = None
        self._table: np.ndarray | None = None  # [rows, ceil(V/32)] uint32, sharing memory with _bitmask
        self._rows: dict[int, np.ndarray] = {}  # row -> its view of _table (a view costs ~1 us to make)

    def words(self, bitmask: torch.Tensor, row: int) -> tuple[torch.Tensor, np.ndarray]:
        """(the CPU tensor the words live in, the row's words)."""
        if bitmask is self._bitmask:
            words = self._rows.get(row)
            if words is None:
                words = self._rows[row] = self._table[row]
            return bitmask, words
        host = bitmask if bitmask.device.type == "cpu" else bitmask.cpu()
        table = host.numpy().view(np.uint32)
        if host is bitmask:
            self._bitmask, self._table, self._rows = bitmask, table, {}
        return host, table[row]

    @staticmethod
    def store(bitmask: torch.Tensor, host: torch.Tensor, row: int) -> None:
        """Write the edited row back where `words` gave a host copy of a device bitmask."""
        if host is not bitmask:
            bitmask[row].copy_(host[row])


class TokenSet:
    """A fixed set of token ids, asked which of them a packed row allows (the uniqueness
    wrappers ask this for a few candidate tokens on every mask)."""

    _LOOP = 14  # up to this many ids a Python loop beats numpy's per-call cost (~2.7 us)

    __slots__ = ("ids", "_listed", "_word", "_bit", "_cleared")

    def __init__(self, ids: "np.ndarray | list[int]") -> None:
        self.ids = np.asarray(ids, dtype=np.int64).reshape(-1)  # [n]
        self._listed = self.ids.tolist() if self.ids.size <= self._LOOP else None
        self._word = self.ids >> 5  # [n]
        self._bit = np.left_shift(np.uint32(1), (self.ids & 31).astype(np.uint32))  # [n] uint32: each id's bit in its word
        self._cleared: tuple | None = None  # (the words holding an id [m], what each keeps [m]), built at first use

    def __len__(self) -> int:
        return int(self.ids.size)

    def allowed_in(self, words: np.ndarray) -> list[int]:
        """The ids (in order) whose bit is set in `words`, a row as uint32 numpy `[ceil(V/32)]`."""
        if self._listed is not None:
            item = words.item
            return [t for t in self._listed if item(t >> 5) >> (t & 31) & 1]
        return self.ids[(words[self._word] & self._bit) != 0].tolist()  # (two numpy steps fewer than shift-and-compare)

    def remove_from(self, words: np.ndarray) -> None:
        """Clear every id's bit in `words` (uint32 numpy `[ceil(V/32)]`, in place)."""
        if self._listed is not None:
            for t in self._listed:
                clear_token(words, t)
            return
        if self._cleared is None:
            held, where = np.unique(self._word, return_inverse=True)
            keep = np.full(held.size, 0xFFFFFFFF, dtype=np.uint32)
            np.bitwise_and.at(keep, where, ~self._bit)
            self._cleared = (held, keep)
        held, keep = self._cleared
        words[held] &= keep


def new_bitmask(rows: int, vocab_size: int, allow_all: bool = False) -> torch.Tensor:
    """A fresh bitmask `[rows, ceil(V/32)]`: all tokens forbidden, or all allowed."""
    fill = -1 if allow_all else 0
    return torch.full((rows, bitmask_width(vocab_size)), fill, dtype=torch.int32)


def pack_allowed(allowed: torch.Tensor) -> torch.Tensor:
    """Bool `[rows, V]` (or `[V]`) -> int32 bitmask `[rows, ceil(V/32)]` (or `[ceil(V/32)]`)."""
    squeeze = allowed.ndim == 1
    if squeeze:
        allowed = allowed.unsqueeze(0)
    rows, vocab = allowed.shape
    width = bitmask_width(vocab)
    padded = torch.zeros(rows, width * 32, dtype=torch.int64)
    padded[:, :vocab] = allowed.to(torch.int64)
    words = (padded.view(rows, width, 32) * _BIT_VALUES).sum(-1)
    # Two's complement: words >= 2**31 wrap to negative int32.
    words = torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32)
    return words[0] if squeeze else words


def unpack_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Int32 bitmask `[rows, W]` (or `[W]`) -> bool `[rows, V]` (or `[V]`)."""
    squeeze = bitmask.ndim == 1
    if squeeze:
        bitmask = bitmask.unsqueeze(0)
    shifts = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1  # [rows, W, 32]
    allowed = bits.reshape(bitmask.shape[0], -1)[:, :vocab_size].bool()
    return allowed[0] if squeeze else allowed


def apply_bitmask_(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """Set forbidden logits to -inf in place. logits `[rows, V]`, bitmask `[rows, W]`.

    Columns beyond the bitmask's 32 * W bits (a model whose embedding is wider than the grammar's
    vocabulary) are forbidden too, so padding logits can never be sampled.
    """
    if logits.ndim != 2 or bitmask.ndim != 2 or logits.shape[0] != bitmask.shape[0]:
        raise ValueError(
            f"logits {tuple(logits.shape)} and bitmask {tuple(bitmask.shape)} must be [rows, V] and [rows, W]"
        )
    vocab = logits.shape[1]
    covered = min(vocab, bitmask.shape[1] * 32)
    allowed = unpack_bitmask(bitmask.to(logits.device), covered)
    logits[:, :covered].masked_fill_(~allowed, float("-inf"))
    if covered < vocab:
        logits[:, covered:] = float("-inf")
    return logits
