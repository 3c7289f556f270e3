r"""JSON without duplicate keys: a wrapper over any JSON grammar (JSON-object mode).

"No key twice in one object" is not context-free, so no grammar says it; this wrapper tracks the
keys of every open object byte by byte alongside the wrapped matcher and removes, from the
wrapped mask, each token whose bytes would close a key already in its object (compared as
decoded JSON strings, so `"a"` and `"\\u0061"` are the same key). Only tokens containing `"` can
close a key, so a mask costs one pass over the allowed ones among those.

The wrapped grammar guarantees well-formed JSON, so the tracker only needs: the stack of open
containers (an object frame holds its keys and whether a key comes next), and the string being
read (with its escape state, and its raw bytes when it is a key).

Over llguidance (`plain_key_escapes`), keys are also held to the escapes JSON needs (`\"`, `\\`,
`\b\f\n\r\t`, `\u00XX` for other control characters): llguidance tells a declared or patterned
key from an undeclared one by its raw text, so `{"\u0061":"x"}` was an undeclared key there while
validators read the key `a`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
import torch

from ..bitmask import HostRows, TokenSet, clear_token
from .finite_keys import dead_key_tokens, extending, finds_none, is_dead, key_prefix_tables, key_target
from .protocol import CompiledGrammar, GrammarMatcher
from .tracking import TrackingMatcher
from .vocabulary import Vocabulary

__all__ = ["UniqueKeysGrammar", "UniqueKeysMatcher", "decode_key"]

# State: (stack, in_string, escaped, key) where stack is a tuple of frames, a frame is None (an
# array) or (keys: frozenset[str], key_next: bool), and key is the raw bytes of the key being read
# (None when the string is a value or no string is open); escaped is True after a backslash, the
# hex digits so far inside a key's \u escape (plain_escapes), else False. Immutable, so rollback
# is a list pop.
State = tuple
_START: State = ((), False, False, None)
_DUPLICATE = None  # what _advance returns when a byte closes a duplicate key (or escapes one oddly)
_PLAIN_ESCAPES = frozenset(b'"\\bfnrt')  # after a backslash in a key, where plain_escapes holds (or a u)


def _control_escape(digits: bytes) -> bool:
    """Whether `digits` begin the hex of a \\u escape JSON needs: a control character without
    a short escape (U+0000..U+001F but \\b \\t \\n \\f \\r)."""
    text = digits.decode("latin-1").lower()
    if any(c not in "0123456789abcdef" for c in text) or text[:2] != "00"[: len(text)]:
        return False
    if len(text) >= 3 and text[2] not in "01":
        return False
    return len(text) < 4 or int(text, 16) not in (8, 9, 10, 12, 13)


def _advance(state: State, data: bytes, plain_escapes: bool = False) -> State | None:
    stack, in_string, escaped, key = state
    for byte in data:
        if in_string:
            if escaped is True:
                escaped = False
                if plain_escapes and key is not None:
                    if byte == 0x75:  # \u in a key: only a control character's (what JSON needs)
                        escaped = b""
                    elif byte not in _PLAIN_ESCAPES:
                        return _DUPLICATE
            elif escaped is not False:  # the hex digits of a key's \u escape so far
                escaped += bytes((byte,))
                if not _control_escape(escaped):
                    return _DUPLICATE
                if len(escaped) == 4:
                    escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # closing quote
                in_string = False
                if key is not None:
                    keys, _ = stack[-1]
                    name = decode_key(key)
                    if name in keys:
                        return _DUPLICATE
                    stack = stack[:-1] + ((keys | {name}, False),)
                    key = None
                continue
            if key is not None:
                key += bytes((byte,))
        elif byte == 0x22:
            in_string = True
            top = stack[-1] if stack else None
            key = b"" if top is not None and top[1] else None
        elif byte == 0x7B:  # {
            stack = stack + ((frozenset(), True),)
        elif byte == 0x5B:  # [
            stack = stack + (None,)
        elif byte in (0x7D, 0x5D):  # } ]
            stack = stack[:-1]
        elif byte == 0x2C and stack and stack[-1] is not None:  # , inside an object: a key is next
            stack = stack[:-1] + ((stack[-1][0], True),)
    return (stack, in_string, escaped, key)


def decode_key(raw: bytes) -> str:
    """A JSON string's raw bytes (between the quotes) as the string it means."""
    if b"\\" not in raw:  # no escape: the bytes are the text (the common case, without json.loads)
        return raw.decode("utf-8", "replace")
    try:
        return json.loads(b'"' + raw + b'"')
    except ValueError:  # not valid yet per the wrapped grammar: compare the raw text
        return raw.decode("utf-8", "replace")


@lru_cache(maxsize=4096)
def _strings_in(data: bytes, in_string: bool) -> tuple[str, ...] | None:
    """The strings `data` writes whole (between an opening and a closing `"`), read from inside a
    string or outside one with no escape open; None where it holds a backslash (escapes shift the
    quotes: the byte-by-byte tracker decides). A key it closes is one of these."""
    if b"\\" in data:
        return None
    parts = data.split(b'"')
    return tuple(part.decode("utf-8", "replace") for part in parts[2 if in_string else 1 : len(parts) - 1 : 2])


@lru_cache(maxsize=8)
def _escaped_closers(vocab: Vocabulary) -> list[int]:
    """The tokens that, read inside a key with no escape open, close it after an escape (a
    backslash before their first unescaped `"`): they can close a key spelled with escapes.
    (`\\"` continues the key with a quote: it closes nothing.)"""
    return [i for i, b in enumerate(vocab.token_bytes) if b is not None and _escape_before_close(b)]


def _escape_before_close(data: bytes) -> bool:
    escaped = seen = False
    for byte in data:
        if escaped:
            escaped = False
        elif byte == 0x5C:
            escaped = seen = True
        elif byte == 0x22:
            return seen
    return False


def _json_escapes(data: bytes) -> bool:
    """Whether every escape `data` writes, read inside a string with none open, is one JSON
    takes (`\\"`, `\\\\`, `\\/`, `\\b`, `\\f`, `\\n`, `\\r`, `\\t`, `\\u` and hex digits), as far as it goes;
    read up to its first unescaped `"` (bytes after that are not a key's)."""
    i = 0
    while i < len(data):
        byte = data[i]
        if byte == 0x22:
            return True
        if byte == 0x5C:
            if i + 1 < len(data):
                if data[i + 1] not in b'"\\/bfnrtu':
                    return False
                if data[i + 1] == 0x75 and any(chr(c) not in "0123456789abcdefABCDEF" for c in data[i + 2 : i + 6]):
                    return False
                i += 6 if data[i + 1] == 0x75 else 2
                continue
        i += 1
    return True


@lru_cache(maxsize=8)
def _escape_tables(vocab: Vocabulary) -> tuple[np.ndarray | None, TokenSet, np.ndarray, TokenSet, TokenSet]:
    """For keys held to plain escapes, packed masks `[ceil(V/32)]` uint32 and token sets:
    the tokens that keep a key's escapes plain when it is not inside one (all but `\\/`,
    `\\u0041`, ... : whether a token escapes needlessly before its first quote does not depend on
    the key so far; None where every token does); the tokens holding a backslash; the tokens that may follow a backslash in a key
    (a plain escape letter or `u`); the tokens starting with `u`; those starting with a hex digit."""
    tokens = vocab.token_bytes
    words = (len(tokens) + 31) // 32

    def ids(test: Callable[[bytes], bool]) -> np.ndarray:
        return np.array([i for i, b in enumerate(tokens) if b and test(b)], dtype=np.int64)

    def packed(allowed_ids: np.ndarray) -> np.ndarray:
        allowed = np.zeros(words * 32, dtype=bool)
        allowed[allowed_ids] = True
        return np.packbits(allowed, bitorder="little").view("<u4").astype(np.uint32)

    inside: State = (((frozenset(), False),), True, False, b"")  # in a key, no escape open
    # a token escaping against JSON itself (`\\_`, `\\'`) never reaches the mask of the JSON grammar
    # wrapped: only the valid needless escapes (`\\/`, `\\u0041`) are cleared; None where no token
    # writes one (SmolLM2's vocabulary: no AND inside keys at all)
    odd = ids(lambda b: b"\\" in b and _advance(inside, b, True) is _DUPLICATE and _json_escapes(b))
    plain = ~packed(odd) if len(odd) else None
    after = packed(ids(lambda b: b[0] in _PLAIN_ESCAPES or b[0] == 0x75))
    return (plain, TokenSet(ids(lambda b: b"\\" in b)), after, TokenSet(ids(lambda b: b[0] == 0x75)),
            TokenSet(ids(lambda b: chr(b[0]) in "0123456789abcdefABCDEF")))


@lru_cache(maxsize=8)
def _quote_tokens(vocab: Vocabulary) -> tuple[TokenSet, TokenSet, TokenSet]:
    """The tokens holding at least one, two and three `"` (what can close a key inside a key,
    where a key may start, in a value string)."""
    quoted = [i for i, b in enumerate(vocab.token_bytes) if b is not None and b'"' in b]
    return tuple(TokenSet([i for i in quoted if vocab.token_bytes[i].count(b'"') >= least]) for least in (1, 2, 3))


@lru_cache(maxsize=16)
def _closers_by_string(vocab: Vocabulary, in_string: bool) -> tuple[list[int], dict[str, list[int]]]:
    """The tokens that can close a key read from a value string (in_string) or from outside a
    string, with no key or escape open (those holding three `"`, or two): (those with a
    backslash, which the tracker reads; the rest by each string they write whole)."""
    escaped: list[int] = []
    by_string: dict[str, list[int]] = {}
    for token_id in _quote_tokens(vocab)[2 if in_string else 1].ids.tolist():
        strings = _strings_in(vocab.token_bytes[token_id], in_string)
        if strings is None:
            escaped.append(token_id)
        for text in strings or ():
            by_string.setdefault(text, []).append(token_id)
    return escaped, by_string


@lru_cache(maxsize=4096)
def _keys_raw(keys: frozenset) -> tuple[list[bytes], bool]:
    """An object's keys as UTF-8 bytes, sorted (those a typed key may still become are one
    bisection away), and whether each is written without escapes (no `"`, backslash or control
    character)."""
    raws = sorted(name.encode("utf-8") for name in keys)
    return raws, all(b'"' not in raw and b"\\" not in raw and min(raw, default=32) >= 32 for raw in raws)


@lru_cache(maxsize=8)
def _by_text_before_quote(vocab: Vocabulary) -> dict[bytes, list[int]]:
    """The tokens holding a `"`, by their bytes before the first one: those that start with a
    text (without quotes) and a quote, in one lookup."""
    found: dict[bytes, list[int]] = {}
    for token_id, data in enumerate(vocab.token_bytes):
        if data and b'"' in data:
            found.setdefault(data.partition(b'"')[0], []).append(token_id)
    return found


def _closing_tokens(keys: frozenset, typed: bytes, by_text: dict[bytes, list[int]]) -> tuple[int, ...] | None:
    """Inside a key typed so far as `typed` (no escape): the tokens that start with the rest of a
    key in `keys` and its closing quote (by_text: _by_text_before_quote). None where such a key
    needs escapes to be written."""
    raws, plain = _keys_raw(keys)
    if not plain:
        return None
    closing: list[int] = []
    for raw in extending(raws, typed):
        closing += by_text.get(raw[len(typed):], ())
    return tuple(closing)


class UniqueKeysGrammar:
    """CompiledGrammar: `inner` (a JSON grammar) with duplicate keys removed."""

    def __init__(self, inner: CompiledGrammar, vocab: Vocabulary, plain_key_escapes: bool = False,
                 finite_keys: bool = False, finite_count: bool = True, finite_names: frozenset[str] | None = None,
                 known_keys: frozenset[str] | None = None) -> None:
        self.inner = inner
        self.vocab = vocab
        self.plain_escapes = plain_key_escapes
        # some object admits only finitely many keys: a key prefix may lead to used keys only,
        # and (finite_count) a `,` may come with every key used
        self.prefixes = key_prefix_tables(vocab) if finite_keys else None
        self.finite_count = finite_count
        self.finite_names = finite_names  # the keys that can dead-end (None: any)
        self.known = sorted(json.dumps(k, ensure_ascii=False)[1:-1].encode() for k in known_keys) if known_keys is not None else None
        tables = _escape_tables(vocab) if plain_key_escapes else (None,) * 5
        self._plain_in_key, self._slashed, self._after_slash, self._u_start, self._hex_start = tables
        self._closers = _quote_tokens(vocab)
        self._closer_strings = (_closers_by_string(vocab, False), _closers_by_string(vocab, True))
        self._escaped = _escaped_closers(vocab)
        self._by_text = _by_text_before_quote(vocab)  # built now, not at the first key's mask
        # _closing_tokens by (keys, typed): a key's masks on one object ask again (an lru_cache keyed
        # by the vocabulary cost a microsecond a mask in hashing and comparing it)
        self.closing_memo: dict[tuple[frozenset, bytes], tuple[int, ...] | None] = {}
        self._escaped_on = [t for t in self._escaped if vocab.token_bytes[t].count(b'"') > 1]  # a quote after the close
        # held to plain escapes, a key's escapes decode to `"`, `\\` or a control character, which no
        # used key extending the typed bytes holds (else _closing_tokens is None): only a token that
        # goes on to close a second key may repeat one
        self.key_escaped = self._escaped_on if plain_key_escapes else self._escaped
        # a key's mask with no escape to mask (fill_bitmask's `escapes`) needs only its closing
        # tokens: no finite key sets, no token closing a key after an escape
        self.quick_keys = self.prefixes is None and not self.key_escaped

    @property
    def vocab_size(self) -> int:
        return self.inner.vocab_size

    def matcher(self) -> "UniqueKeysMatcher":
        return UniqueKeysMatcher(self, self.inner.matcher(), [_START])


class UniqueKeysMatcher(TrackingMatcher):
    def __init__(self, grammar: UniqueKeysGrammar, inner: GrammarMatcher, states: list[State]) -> None:
        super().__init__(grammar, inner, states)
        self._host = HostRows()  # the caller's bitmask as numpy words, kept while it is reused
        self._witnesses: dict = {}  # live keys found by finite_keys, checked again before a search
        # finite_keys' verdicts while one key is open: (the stack it was opened on, verdicts).
        # The stack object is rebuilt at every `{` and `,`, so the same object means the same key.
        self._key_memo: tuple = (None, {})
        # per stack (rebuilt at every `{`, `[`, `,` and closed key, so one object while a value is
        # read): whether any key can repeat, and by where a string stands (in_string) the quoted
        # tokens that would close a key used on it (_duplicates): a few bits cleared a mask, not a scan
        self._stack_memo: tuple = (None, False, {})

    _refusal = "it would repeat a key of its JSON object (or escape a key's character needlessly)"

    def _step(self, state: State, data: bytes) -> State | None:
        return _advance(state, data, self._grammar.plain_escapes)

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        self._inner.fill_bitmask(bitmask, row)
        state = self._states[-1]
        stack, in_string, escaped, key = state
        memo = self._stack_memo
        if memo[0] is not stack:
            repeats = any(frame is not None and frame[0] for frame in stack)  # else no key can repeat yet
            self._stack_memo = memo = (stack, repeats, {})
        repeats = memo[1]
        if key is None and escaped is False and (self._grammar.prefixes is None or finds_none(memo[2], in_string)):
            # most masks: a value string, or between strings. The state is the stack and
            # in_string here, so the tokens that would close a used key are kept per stack
            if repeats:
                duplicates = self._duplicates_on(state)
                if duplicates:
                    host, words = self._host.words(bitmask, row)
                    for token_id in duplicates:  # clearing a token the mask left out changes nothing
                        clear_token(words, token_id)
                    HostRows.store(bitmask, host, row)
            return
        # no escape open and no token escaping needlessly (_escape_tables): no escape to mask
        escapes = key is not None and self._grammar.plain_escapes and (escaped is not False or self._grammar._plain_in_key is not None)
        if not (repeats or escapes):
            return
        if not escapes and key is not None and self._grammar.quick_keys and b"\\" not in key:
            # inside a key with no escape and no finite key sets (most keys' masks): the tokens
            # closing it as a used key, kept per (keys, typed); the mask is read only to clear them
            closing = self._closing(stack[-1][0], key)
            if closing is not None:
                if closing:
                    host, words = self._host.words(bitmask, row)
                    for token_id in closing:
                        clear_token(words, token_id)
                    HostRows.store(bitmask, host, row)
                return
        host, words = self._host.words(bitmask, row)  # [ceil(V/32)] uint32
        if escapes:
            self._mask_escapes(escaped, words, state)
        if repeats:
            self._mask_repeats(words, state)
            if self._grammar.prefixes is not None:
                plain, memo = self._grammar.plain_escapes, None
                if key is not None:
                    if self._key_memo[0] is not stack:
                        self._key_memo = (stack, {})
                    memo = self._key_memo[1]
                for token_id in dead_key_tokens(words, state, self._inner, self._grammar.prefixes,
                                                lambda s, data: _advance(s, data, plain), self._grammar._plain_in_key,
                                                self._witnesses, self._grammar.finite_count, self._grammar.finite_names, memo,
                                                self._stack_memo[2], self._grammar.known):
                    clear_token(words, token_id)
        HostRows.store(bitmask, host, row)

    def _mask_escapes(self, escaped: bool | bytes, words: np.ndarray, state: State) -> None:
        """Inside a key: clear the tokens that escape a character JSON does not need escaped."""
        grammar = self._grammar
        if escaped is False:  # the common case: one AND with the tokens that escape plainly
            plain = grammar._plain_in_key  # not None: fill_bitmask masks no escape otherwise
            if len(plain) == len(words):
                np.bitwise_and(words, plain, out=words)  # without the slices' views: half the time
            else:
                n = min(len(words), len(plain))
                words[:n] &= plain[:n]
            return
        candidates = [grammar._slashed]  # an escape open: the token's first bytes continue it
        if escaped is True:  # the first byte ends the escape (or starts a \u)
            n = min(len(words), len(grammar._after_slash))
            words[:n] &= grammar._after_slash[:n]
            candidates.append(grammar._u_start)
        else:  # inside a \u escape's hex digits
            candidates.append(grammar._hex_start)
        token_bytes = grammar.vocab.token_bytes
        for ids in candidates:
            for token_id in ids.allowed_in(words):
                if _advance(state, token_bytes[token_id], True) is _DUPLICATE:
                    clear_token(words, token_id)

    def _mask_repeats(self, words: np.ndarray, state: State) -> None:
        """Clear the tokens that close a key already in its object."""
        stack, in_string, _, key = state
        # a key ends at its closing quote: inside a key any token with a `"` can close it; where a
        # key may start, one holding a whole key (two quotes); in a value string, three
        if key is not None and b"\\" not in key and self._mask_key_ends(stack[-1][0], key, words, state):
            return  # inside a key: only the tokens that complete an earlier key, found by their bytes
        if key is None and state[2] is False:  # no key and no escape open: kept per stack
            for token_id in self._duplicates_on(state):
                clear_token(words, token_id)
            return
        closers = self._grammar._closers[0 if key is not None else 2 if in_string else 1]
        token_bytes, plain = self._grammar.vocab.token_bytes, self._grammar.plain_escapes
        candidates = closers.allowed_in(words)
        for token_id in candidates:
            if _advance(state, token_bytes[token_id], plain) is _DUPLICATE:
                clear_token(words, token_id)

    def _duplicates_on(self, state: State) -> list[int]:
        """`_duplicates(state)`, kept per stack (self._stack_memo, which fill_bitmask keeps on state's stack)."""
        held = self._stack_memo[2]
        duplicates = held.get(state[1])
        if duplicates is None:
            duplicates = held[state[1]] = self._duplicates(state)
        return duplicates

    def _duplicates(self, state: State) -> list[int]:
        """With no key or escape open (inside a value string or not): the tokens that would close
        a key used on the stack, found among those that write it whole (or hold a backslash,
        left to the tracker). A function of (stack, in_string): kept per stack by the callers."""
        stack, in_string = state[0], bool(state[1])
        escaped, by_string = self._grammar._closer_strings[in_string]
        # the smaller side looked up in the other: SmolLM2's tokens write 1-5 strings whole, while
        # deep objects hold dozens of keys (their union cost microseconds a stack)
        frames = [frame[0] for frame in stack if frame is not None and frame[0]]
        if len(by_string) <= sum(len(keys) for keys in frames):
            texts = [text for text in by_string if any(text in keys for keys in frames)]
        else:
            texts = [text for text in dict.fromkeys(key for keys in frames for key in keys) if text in by_string]
        suspects = escaped + [t for text in texts for t in by_string[text]]
        if not suspects:
            return []
        token_bytes, plain = self._grammar.vocab.token_bytes, self._grammar.plain_escapes
        return [t for t in dict.fromkeys(suspects) if _advance(state, token_bytes[t], plain) is _DUPLICATE]

    def _mask_key_ends(self, keys: frozenset, typed: bytes, words: np.ndarray, state: State) -> bool:
        """Inside a key whose bytes so far are `typed` (no escape): clear the tokens that close it
        as one of `keys`, i.e. start with an earlier key's remaining bytes and its quote (a
        bisection in the sorted vocabulary per such key), and check the few tokens that could
        close it through an escape. False (nothing done) where a key needs escapes to be written."""
        closing = self._closing(keys, typed)
        if closing is None:
            return False  # written with escapes: the general path compares decoded keys
        for token_id in closing:
            clear_token(words, token_id)
        token_bytes, item = self._grammar.vocab.token_bytes, words.item
        for token_id in self._grammar.key_escaped:
            if item(token_id >> 5) >> (token_id & 31) & 1 and _advance(state, token_bytes[token_id], self._grammar.plain_escapes) is _DUPLICATE:
                clear_token(words, token_id)
        return True

    def _closing(self, keys: frozenset, typed: bytes) -> tuple[int, ...] | None:
        """_closing_tokens, kept per grammar by (keys, typed): a key's masks on one object ask again."""
        memo = self._grammar.closing_memo
        closing = memo.get((keys, typed), False)
        if closing is False:
            if len(memo) >= 4096:
                memo.clear()
            closing = memo[keys, typed] = _closing_tokens(keys, typed, self._grammar._by_text)
        return closing

    def _dead_at(self, state: State, before: Sequence[int], token_id: int) -> bool:
        """Whether `token_id` after `before` (both checked) leads only to used keys, as the mask says."""
        plain, tables = self._grammar.plain_escapes, self._grammar.prefixes
        if tables is None:  # every object admits a new key: none is dead
            return False
        target = key_target(int(token_id), state, tables, lambda s, data: _advance(s, data, plain), self._grammar.finite_names)
        if target is None or (not target[1] and not self._grammar.finite_count):  # a `,` or a key just opened: one is left
            return False
        for token in before:
            self._inner.accept_token(token)
        try:
            return is_dead(int(token_id), target, self._inner, tables, self._grammar._plain_in_key, self._witnesses,
                           names=self._grammar.finite_names, known=self._grammar.known)
        finally:
            self._inner.rollback(len(before))
