"""Required keys in any order: a wrapper that refuses to close an object missing one.

json_key_order.py may move a fixed node's required keys (json_required.py) to exact patterns,
so llguidance writes them in any order, and leaves them out of `required`. This wrapper puts the
requirement back: it tracks, byte by byte alongside the wrapped matcher, every open object with
the context it is validated against (from its path: the key or array it is the value of) and the
required keys still missing, and clears each token whose bytes would close such an object (`}`)
with one missing. The wrapped grammar guarantees well-formed JSON, so the tracker reads only
structure: containers, strings (with escapes) and keys. A missing key can always still be
written (its schema is satisfiable, no `propertyNames` or count bounds it), so no output is cut
off where it was not before.

State: (stack, in_string, escaped, key, pending, skip). stack holds frames: an object is
(context, missing keys: per way to meet it, the keys that way still needs (one way unless an
anyOf of bare `required` branches or a union of closed objects was lifted: json_key_order; a
way a written key rules out needs `None` from then on), the context of the current key's
value, key next, the keys written where the context has dependentRequired keys (a key written
adds those it requires, unless written before)), an array is its
elements' context (int). key: the raw bytes of the key being read (None outside keys). pending:
the context of the next value where no container holds it (the root's, 0 once it closed). skip:
bytes of the literal frame text still to pass before the value. Immutable: rollback is a pop.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from ..bitmask import HostRows, TokenSet, clear_token
from .json_required import KeyContexts
from .protocol import CompiledGrammar, GrammarMatcher
from .tracking import TrackingMatcher
from .unique_keys import decode_key
from .vocabulary import Vocabulary

__all__ = ["RequiredKeysGrammar", "RequiredKeysMatcher"]

State = tuple
_MISSING = None  # what _advance returns where a byte closes an object missing a required key
_NOTHING_WRITTEN: frozenset[str] = frozenset()
_RULED_OUT = frozenset({None})  # a way a written key ruled out: it misses a key no object writes


def _advance(state: State, data: bytes, contexts: KeyContexts) -> State | None:
    stack, in_string, escaped, key, pending, skip = state
    for byte in data:
        if skip:
            skip -= 1
            continue
        if in_string:
            if escaped or byte == 0x5C:  # an escape: its bytes are the key's too (decode_key reads them)
                escaped = not escaped
                if key is not None:
                    key += bytes((byte,))
            elif byte == 0x22:  # closing quote
                in_string = False
                if key is not None:
                    context, missing, _, _, written = stack[-1]
                    name = decode_key(key)
                    needs = contexts.dependent[context]
                    if needs:  # a key another's presence requires, and a key requiring others
                        if name in needs:
                            missing = tuple(way | (needs[name] - written) for way in missing)
                        written = written | {name}
                    missing = tuple(way - {name} for way in missing) if any(name in way for way in missing) else missing
                    ruled = contexts.ruled_out[context]
                    if ruled is not None and any(name in out for out in ruled):  # a branch this key rules out: never met
                        missing = tuple(_RULED_OUT if name in out else way for way, out in zip(missing, ruled))
                    stack = stack[:-1] + ((context, missing, contexts.of_key(context, name), False, written),)
                    key = None
            elif key is not None:
                key += bytes((byte,))
            continue
        if byte == 0x22:
            in_string = True
            top = stack[-1] if stack else None
            key = b"" if type(top) is tuple and top[3] else None
        elif byte == 0x7B or byte == 0x5B:  # { [
            top = stack[-1] if stack else None
            context = pending if top is None else top if type(top) is int else top[2]
            if top is None:
                pending = 0
            stack += ((context, contexts.required[context], 0, True, _NOTHING_WRITTEN),) if byte == 0x7B else (contexts.of_item(context),)
        elif byte == 0x7D:  # }
            if stack and type(stack[-1]) is tuple:
                if all(stack[-1][1]):  # every way still misses a key
                    return _MISSING
                stack = stack[:-1]
        elif byte == 0x5D:  # ]
            if stack and type(stack[-1]) is int:
                stack = stack[:-1]
        elif byte == 0x2C and stack and type(stack[-1]) is tuple:  # , inside an object: a key is next
            context, missing, _, _, written = stack[-1]
            stack = stack[:-1] + ((context, missing, 0, True, written),)
        elif not stack and byte not in b" \t\n\r":
            pending = 0  # a scalar root value: nothing to track
    return (stack, in_string, escaped, key, pending, skip)


@lru_cache(maxsize=8)
def _closers(vocab: Vocabulary) -> tuple[TokenSet, ...]:
    """The tokens that can close an object, read from outside a string (holding `}`): all, those
    that open one first (a `{` before a `}`: `{}`); read from inside one (a `"` and a `}` after
    it): all, those that open one first."""
    tokens = vocab.token_bytes
    outside = [i for i, b in enumerate(tokens) if b and b"}" in b]
    opening = [i for i in outside if b"{" in tokens[i] and tokens[i].index(b"{") < tokens[i].rindex(b"}")]
    inside = [i for i in outside if b'"' in tokens[i] and tokens[i].index(b'"') < tokens[i].rindex(b"}")]
    inside_opening = [i for i in inside if b"{" in tokens[i][tokens[i].index(b'"'):]]
    return TokenSet(outside), TokenSet(opening), TokenSet(inside), TokenSet(inside_opening)


class RequiredKeysGrammar:
    """CompiledGrammar: `inner` (llguidance's JSON grammar with required keys moved) with the
    objects missing a required key left unclosed. frame_prefix: the literal text before the value."""

    def __init__(self, inner: CompiledGrammar, vocab: Vocabulary, contexts: KeyContexts, frame_prefix: str = "") -> None:
        self.inner = inner
        self.vocab = vocab
        self.contexts = contexts
        self._start: State = ((), False, False, None, contexts.root, len(frame_prefix.encode("utf-8")))
        self._closers = _closers(vocab)

    @property
    def vocab_size(self) -> int:
        return self.inner.vocab_size

    def matcher(self) -> "RequiredKeysMatcher":
        return RequiredKeysMatcher(self, self.inner.matcher(), [self._start])


class RequiredKeysMatcher(TrackingMatcher):
    def __init__(self, grammar: RequiredKeysGrammar, inner: GrammarMatcher, states: list[State]) -> None:
        super().__init__(grammar, inner, states)
        self._host = HostRows()
        self._open: tuple = (None, False)  # (a stack, whether an object on it misses a key): rebuilt per stack
        # (a stack, the tokens that would close an object missing a key from inside a string on
        # it): a string value takes many masks on one stack, and the answer is the stack's alone
        self._in_string: tuple = (None, [])
        # (a stack, pending and skip, verdicts by token: whether it would close an object missing
        # a key from outside a string there): a number or a literal takes several masks on one stack
        self._outside: tuple = (None, None, {})

    _refusal = "it would close a JSON object without one of its required keys"

    def _step(self, state: State, data: bytes) -> State | None:
        return _advance(state, data, self._grammar.contexts)

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        self._inner.fill_bitmask(bitmask, row)
        state = self._states[-1]
        stack, in_string, escaped, key = state[:4]
        if key is not None or escaped:
            return  # inside a key or an escape no token closes an object (the grammar writes `:` first)
        if self._open[0] is not stack:
            self._open = (stack, any(type(frame) is tuple and all(frame[1]) for frame in stack))
        every, opening, inside, inside_opening = self._grammar._closers
        token_bytes, contexts = self._grammar.vocab.token_bytes, self._grammar.contexts
        if in_string:  # a handful of tokens (`"}`, `"},`), judged once per stack
            if self._in_string[0] is not stack:
                tokens = inside if self._open[1] else inside_opening
                self._in_string = (stack, [t for t in tokens.ids.tolist() if _advance(state, token_bytes[t], contexts) is _MISSING])
            if self._in_string[1]:
                host, words = self._host.words(bitmask, row)  # [ceil(V/32)] uint32
                for token_id in self._in_string[1]:  # clearing a token the mask left out changes nothing
                    clear_token(words, token_id)
                HostRows.store(bitmask, host, row)
            return
        # where no open object misses a key, only a token opening one can close it (`{}`)
        tokens = every if self._open[1] else opening
        host, words = self._host.words(bitmask, row)  # [ceil(V/32)] uint32
        if self._outside[0] is not stack or self._outside[1] != state[4:]:
            self._outside = (stack, state[4:], {})
        verdicts = self._outside[2]
        for token_id in tokens.allowed_in(words):
            missing = verdicts.get(token_id)
            if missing is None:
                missing = verdicts[token_id] = _advance(state, token_bytes[token_id], contexts) is _MISSING
            if missing:
                clear_token(words, token_id)
        HostRows.store(bitmask, host, row)
