"""Token ids -> text as they are generated, in time linear in the output: stop strings, EOS and
unfinished UTF-8 characters handled in one place (the engine, `api.Stream` and the server use it).

Byte-level tokenizers can split one character across tokens, so a token cannot be decoded alone,
and re-decoding the whole output each step is quadratic. Each push decodes a short window
instead: the tokens not yet decoded plus those decoded at the previous push (context: a
tokenizer may decode a token differently at the start of a text), and the new text is what the
window adds to the text of that context. While the window ends in U+FFFD (an unfinished
character) only the text before it is taken; the window grows until the character completes.

Terms: `text` is everything decoded so far, cut before the first stop string; `delta()` hands
out the part of it not handed out yet, holding back a tail that could still become the start of
a stop string (all of it once the text has ended).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable, Sequence

__all__ = ["ByteDecoder", "Detokenizer"]

_UNFINISHED = "\ufffd"  # what decoding shows for bytes of a character still to come


class ByteDecoder:
    """`decode` for a byte-level tokenizer, where a text's bytes are its tokens' bytes joined
    (invalid UTF-8 shown as U+FFFD): a Detokenizer given one decodes each token once, through
    an incremental UTF-8 decoder, instead of re-decoding windows (two tokenizer calls a push).
    token_bytes[i]: token i's bytes; None (and ids past the table) for tokens that decode to
    nothing, as special tokens do with `skip_special_tokens=True`."""

    def __init__(self, token_bytes: Sequence[bytes | None]) -> None:
        self.token_bytes = [b or b"" for b in token_bytes]

    def bytes_of(self, token_ids: Iterable[int]) -> bytes:
        table, size = self.token_bytes, len(self.token_bytes)
        return b"".join(table[t] for t in token_ids if 0 <= t < size)

    def __call__(self, token_ids: Sequence[int]) -> str:
        return self.bytes_of(token_ids).decode("utf-8", "replace")


class Detokenizer:
    """One request's incremental decoder. `decode(ids) -> str` decodes a token list (e.g.
    `tokenizer.decode(ids, skip_special_tokens=True)`); `stop`: strings that end the text (not
    included); a token equal to `eos_token_id` ends it too (not decoded)."""

    def __init__(self, decode: Callable[[list[int]], str], stop: Sequence[str] = (), eos_token_id: int | None = None) -> None:
        self._decode = decode
        self.stop = tuple(stop)
        self._eos = eos_token_id
        self._longest = max((len(s) for s in self.stop), default=0)
        self.token_ids: list[int] = []  # pushed ids, without EOS
        self.stopped = False  # a stop string or EOS ended the text
        self._pieces: list[str] = []  # the decoded text, joined only when `text` is read
        self._tail = ""  # the last `longest - 1` characters of the text: where a stop string may begin
        self._pending = ""  # text not yet handed out by delta()
        self._window_start = 0  # tokens [_window_start, _decoded) are decoded again for context
        self._decoded = 0  # tokens before this index are in the text
        self._partial = 0  # characters of an unfinished window already in the text
        # a ByteDecoder: bytes in, text out as characters complete (no windows)
        self._bytes = decode if isinstance(decode, ByteDecoder) else None
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace") if self._bytes is not None else None

    @property
    def text(self) -> str:
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    def push(self, token_ids: Iterable[int]) -> bool:
        """Append tokens; returns True once the text has ended. Tokens after the end are ignored,
        so with stop strings push one token at a time to learn which token ended it. Without
        any, only EOS ends the text, so a push decodes its tokens once (a step's few tokens: one
        decode pair instead of one per token)."""
        each = bool(self.stop)
        for token in token_ids:
            if self.stopped:
                break
            if token == self._eos:
                self.finish()
                break
            self.token_ids.append(int(token))
            if each:
                self._decode_window(final=False)
        if not each and not self.stopped and self._decoded < len(self.token_ids):
            self._decode_window(final=False)
        return self.stopped

    def finish(self) -> None:
        """The request is over: decode what waits for more bytes (as U+FFFD if it never came)."""
        if not self.stopped and (self._decoded < len(self.token_ids) or self._bytes is not None):
            self._decode_window(final=True)  # (a ByteDecoder's decoder may hold bytes of a character)
        self.stopped = True

    def delta(self) -> str:
        """Text not handed out yet, minus a tail that could begin a stop string while the text
        may still grow."""
        hold = 0 if self.stopped else self._stop_prefix_length(self._pending)
        ready = len(self._pending) - hold
        out, self._pending = self._pending[:ready], self._pending[ready:]
        return out

    # ---- internals ----

    def _decode_window(self, final: bool) -> None:
        if self._bytes is not None:
            data = self._bytes.bytes_of(self.token_ids[self._decoded :])
            self._decoded = len(self.token_ids)
            self._append(self._utf8.decode(data, final))
            return
        start, decoded = self._window_start, self._decoded
        known = self._decode(self.token_ids[start:decoded]) if decoded > start else ""
        new = self._decode(self.token_ids[start:])[len(known) :]
        complete = final or not new.endswith(_UNFINISHED)
        if not complete:  # keep what precedes the unfinished character; the rest waits
            new = new.rstrip(_UNFINISHED)
        self._append(new[self._partial :])
        self._partial = 0 if complete else max(self._partial, len(new))
        if complete:
            self._window_start, self._decoded = decoded, len(self.token_ids)

    def _append(self, new: str) -> None:
        if not new:
            return
        searched = self._tail + new
        cut = min((i for i in (searched.find(s) for s in self.stop) if i >= 0), default=-1)
        if cut >= 0:  # the stop string starts at most longest - 1 characters back: in _pending
            drop = len(searched) - cut  # characters of the text from the stop string on
            full = self.text + new
            self._pieces = [full[: len(full) - drop]]
            self._pending = (self._pending + new)[: len(self._pending) + len(new) - drop]
            self.stopped = True
            return
        self._pieces.append(new)
        self._pending += new
        if self._longest > 1:
            self._tail = searched[-(self._longest - 1) :]

    def _stop_prefix_length(self, text: str) -> int:
        """The longest end of `text` that is a proper prefix of a stop string."""
        best = 0
        for s in self.stop:
            for length in range(min(len(s) - 1, len(text)), best, -1):
                if text.endswith(s[:length]):
                    best = length
                    break
        return best
