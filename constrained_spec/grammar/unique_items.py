"""Exact `uniqueItems`: a wrapper over a JSON-schema grammar compiled without it.

"No item twice in one array" is not context-free, so no grammar says it. The inner grammar
enforces everything else; this wrapper follows the output byte by byte, knows which open arrays
the schema marks `uniqueItems` (`ItemSites`: the schema nodes that may describe each open
container), and removes from the inner mask:
- every token that would end an item (`,` or `]` at the array's depth) equal to an earlier item
  of that array, compared as validators compare JSON values (1 == 1.0, true != 1, objects by
  their key/value pairs). This rule alone makes the result sound;
- every token after which the item can only become a repeat: with the bytes the inner grammar
  then forces it is a complete earlier value that cannot grow; a repeated number grows only into
  spellings of itself (2.0 after 2); or, along an earlier item's text, no token within LOOKAHEAD
  leads away (unless one plain byte the grammar allows already does);
- a `,` where every value of a finite item domain (enums, booleans, integer ranges, closed
  objects of those) is used.
The last two keep sampling out of states whose every continuation repeats an item. Open-ended
items (free strings, unbounded numbers) never need them. Where a schema still narrows an item to
several used values beyond the lookahead, the mask would be empty and GrammarError says so:
never a wrong output.

Narrowing: an array that only some `anyOf`/`oneOf`/`if`/`then`/`else` branch marks `uniqueItems`
is kept unique whichever branch it matches (never wider than the schema).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
import torch

from ..bitmask import HostRows, TokenSet, clear_token, count_allowed, new_bitmask
from .json_merge import VALIDATION
from .protocol import CompiledGrammar, GrammarError, GrammarMatcher
from .unique_keys import decode_key
from .vocabulary import SortedTokens, Vocabulary, sorted_tokens

__all__ = ["ItemSites", "UniqueItemsGrammar", "UniqueItemsMatcher", "item_key"]

_WS = b" \t\n\r"
LOOKAHEAD = 4  # tokens a mask looks ahead along earlier items' text for a way to a new item
_NUMBER_GROWTH = b"0123456789.eE"
_NUMBER_START = [bytes((c,)) for c in b"-0123456789"]
_VALUE_ENDS = b'"}]el0123456789'  # the last byte of a complete JSON value
_ESCAPE_BYTES = b"etaoisrnET _-"  # tried in turn after a token to show an item can differ


def item_key(value: Any) -> Any:
    """A hashable key equal for exactly the JSON values validators call equal."""
    if isinstance(value, bool):
        return ("b", value)
    if value is None:
        return ("z",)
    if isinstance(value, (int, float)):
        return ("n", value)  # 1 == 1.0 and hash(1) == hash(1.0)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("a", tuple(item_key(v) for v in value))
    return ("o", frozenset((k, item_key(v)) for k, v in value.items()))


def _parse_key(text: bytes) -> Any | None:
    """item_key of `text` as one JSON value, None where it is not (yet) one."""
    try:
        return item_key(json.loads(text))
    except (ValueError, RecursionError):
        return None


class ItemSites:
    """Which schema nodes may describe a value at a path, over-approximated (more nodes only ever
    means more arrays kept unique: narrower, never wider). A node set is a frozenset of ids of
    the schema's dicts, closed under $ref, allOf/anyOf/oneOf, if/then/else and dependent schemas."""

    def __init__(self, schema: Any) -> None:
        from .json_schema import _Translator  # noqa: PLC0415 ($ref resolution, as the compiler reads it)

        self._resolver = _Translator(schema, "compact") if isinstance(schema, dict) else None
        self._by_id: dict[int, dict] = {}
        self._children: dict[tuple[frozenset[int], str | int], frozenset[int]] = {}
        self._unique: dict[frozenset[int], bool] = {}
        self._domains: dict[frozenset[int], int | None] = {}
        self._open: dict[frozenset[int], bool] = {}
        self.start = self._close([schema])

    def _resolve(self, ref: str) -> Any:
        try:
            return self._resolver.resolve(ref, "") if self._resolver is not None else None
        except Exception:  # noqa: BLE001 (the inner compile already refused what does not resolve)
            return None

    def _close(self, nodes: Iterable[Any]) -> frozenset[int]:
        seen: set[int] = set()
        todo = list(nodes)
        while todo:
            node = todo.pop()
            if not isinstance(node, dict) or id(node) in seen:
                continue
            seen.add(id(node))
            self._by_id[id(node)] = node
            for key in ("$ref", "$recursiveRef", "$dynamicRef"):
                if isinstance(node.get(key), str):
                    todo.append(self._resolve(node[key] if key == "$ref" else "#"))
            for key in ("allOf", "anyOf", "oneOf"):
                if isinstance(node.get(key), list):
                    todo += node[key]
            todo += [node.get("if"), node.get("then"), node.get("else")]  # `if` too: our compiler makes it a branch
            for key in ("dependentSchemas", "dependencies"):
                if isinstance(node.get(key), dict):
                    todo += node[key].values()
        return frozenset(seen)

    def child(self, nodes: frozenset[int], step: str | int) -> frozenset[int]:
        """The nodes of the value under key `step` (a str) or at item index `step` (an int)."""
        cached = self._children.get((nodes, step))
        if cached is not None:
            return cached
        found: list[Any] = []
        for node in map(self._by_id.__getitem__, nodes):
            if isinstance(step, str):
                matched = False
                if isinstance(node.get("properties"), dict) and step in node["properties"]:
                    found.append(node["properties"][step])
                    matched = True
                for pattern, sub in (node.get("patternProperties") or {}).items():
                    try:
                        hit = re.search(pattern, step) is not None
                    except re.error:
                        hit = True  # over-approximate
                    if hit:
                        found.append(sub)
                        matched = True
                if not matched:
                    found.append(node.get("additionalProperties"))
                found.append(node.get("unevaluatedProperties"))
                continue
            prefix, items = node.get("prefixItems"), node.get("items")
            if isinstance(items, list):  # draft 4-2019: items as a list
                prefix, items = items, node.get("additionalItems")
            if isinstance(prefix, list) and step < len(prefix):
                found.append(prefix[step])
            else:
                found.append(items)
            found += [node.get("contains"), node.get("unevaluatedItems")]
        result = self._close(found)
        self._children[(nodes, step)] = result
        return result

    def unique(self, nodes: frozenset[int]) -> bool:
        """Whether an array described by `nodes` must hold no item twice."""
        cached = self._unique.get(nodes)
        if cached is None:
            cached = self._unique[nodes] = any(self._by_id[i].get("uniqueItems") is True for i in nodes)
        return cached

    def open_ended(self, nodes: frozenset[int]) -> bool:
        """Whether every prefix of an item has endlessly many completions (items are strings
        with at most minLength and a pattern without `$`, or numbers without bounds; not
        integers: `0` and `-0` end there, and `[0,0` was a dead end), so no item can be driven
        into a repeat: only ending one that repeats needs masking."""
        if nodes not in self._open:
            positional = any(isinstance(self._by_id[i].get(k), list) for i in nodes for k in ("prefixItems", "items"))
            items = self.child(nodes, 0)
            self._open[nodes] = not positional and bool(items) and all(self._open_leaf(self._by_id[i]) for i in items)
        return self._open[nodes]

    @staticmethod
    def _open_leaf(node: dict) -> bool:
        parts = set(node) & VALIDATION
        kind = node.get("type")
        if parts and parts <= {"$ref", "allOf", "anyOf"}:
            return True  # a holder: its parts are judged themselves
        if kind == "string" and parts <= {"type", "minLength", "pattern"}:
            return "$" not in str(node.get("pattern", "")).replace("\\$", "")
        return kind == "number" and parts == {"type"}

    def domain_size(self, nodes: frozenset[int]) -> int | None:
        """An upper bound on how many distinct items an array described by `nodes` can hold
        (None: unbounded, or positional items)."""
        if nodes not in self._domains:
            positional = any(isinstance(self._by_id[i].get(k), list) for i in nodes for k in ("prefixItems", "items"))
            self._domains[nodes] = None if positional else self._bound(self.child(nodes, 0), 3)
        return self._domains[nodes]

    def _bound(self, nodes: frozenset[int], depth: int) -> int | None:
        """How many values can match `nodes`, over-approximated (a sum over the constraining
        nodes: enum/const, boolean, null, integer ranges, closed objects of bounded properties)."""
        total = 0
        for node in map(self._by_id.__getitem__, nodes):
            kind = node.get("type")
            if "enum" in node or "const" in node:
                enum = node["enum"] if isinstance(node.get("enum"), list) else [node.get("const")]
                total += len({item_key(v) for v in enum})
            elif not set(node) & _CONSTRAINING:
                if set(node) & _PARTS:
                    continue  # a holder of $ref/allOf/anyOf/...: its parts are in the set themselves
                return None  # constrains nothing: any value
            elif kind in ("boolean", "null"):
                total += 2 if kind == "boolean" else 1
            elif kind == "integer" and isinstance(node.get("minimum"), int) and isinstance(node.get("maximum"), int):
                total += max(0, node["maximum"] - node["minimum"] + 1)
            elif (kind == "object" and depth and node.get("additionalProperties") is False and not node.get("patternProperties")
                  and isinstance(node.get("properties"), dict)):
                product = 1
                for name, sub in node["properties"].items():
                    size = self._bound(self._close([sub]), depth - 1)
                    if size is None:
                        return None
                    product *= size + (name not in node.get("required", []))
                total += product
            else:
                return None
        return total if nodes else None


# keywords that make a node constrain a value by itself (not only through its parts)
_CONSTRAINING = {"type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
                 "items", "prefixItems", "minimum", "maximum", "pattern", "format", "minLength", "maxLength",
                 "not", "contains", "propertyNames", "multipleOf", "exclusiveMinimum", "exclusiveMaximum"}
_PARTS = {"$ref", "allOf", "anyOf", "oneOf", "if", "then", "else", "dependentSchemas", "dependencies", "$recursiveRef", "$dynamicRef"}


class _Frame(NamedTuple):
    is_array: bool
    nodes: frozenset[int]
    unique: bool = False
    open_ended: bool = False  # unique arrays: ItemSites.open_ended
    index: int = 0  # arrays: the item being written
    start: int = -1  # arrays: output offset of that item's first byte, -1 before it
    done: tuple = ()  # unique arrays: (item_key, start, end) of each finished item
    keys: frozenset = frozenset()  # unique arrays: the item_keys in `done`
    key_next: bool = True  # objects: a key comes next
    key: str | None = None  # objects: the last key read


class _State(NamedTuple):
    stack: tuple[_Frame, ...]
    in_string: bool
    escaped: bool
    key: bytes | None  # raw bytes of the key being read
    pos: int  # output bytes so far


_DUPLICATE = None  # what _advance returns when a byte ends an item already in its array


def _tail(text: bytes | bytearray, data: bytes, start: int) -> bytes:
    """Bytes from output offset `start` to the end of `text + data` (without copying `text`)."""
    return bytes(text[start:]) + data if start < len(text) else data[start - len(text):]


def _span(text: bytes | bytearray, data: bytes, start: int, end: int) -> bytes:
    """Output bytes [start, end) of `text + data`."""
    return bytes(text[start:end]) if end <= len(text) else _tail(text, data, start)[: end - start]


def _advance(sites: ItemSites, state: _State, text: bytes | bytearray, data: bytes) -> _State | None:
    """`state` after `data`; `text` is the output so far (len(text) == state.pos)."""
    stack, in_string, escaped, key, pos = state
    for j, byte in enumerate(data):
        if in_string:
            if escaped or byte == 0x5C:  # an escape: its bytes are the key's too (decode_key reads them)
                escaped = not escaped
                if key is not None:
                    key += bytes((byte,))
            elif byte == 0x22:  # closing quote
                in_string = False
                if key is not None:
                    stack = stack[:-1] + (stack[-1]._replace(key_next=False, key=decode_key(key)),)
                    key = None
            elif key is not None:
                key += bytes((byte,))
            continue
        if byte in _WS or byte == 0x3A:  # whitespace, ':'
            continue
        top = stack[-1] if stack else None
        if top is not None and top.is_array and top.start < 0 and byte != 0x5D:
            top = top._replace(start=pos + j)  # the item's first byte
            stack = stack[:-1] + (top,)
        if byte == 0x22:
            in_string = True
            key = b"" if top is not None and not top.is_array and top.key_next else None
        elif byte in (0x7B, 0x5B):  # { [
            nodes = sites.start if top is None else sites.child(top.nodes, top.index if top.is_array else top.key or "")
            unique = byte == 0x5B and sites.unique(nodes)
            stack = stack + (_Frame(byte == 0x5B, nodes, unique=unique, open_ended=unique and sites.open_ended(nodes)),)
        elif byte in (0x5D, 0x2C) and top is not None and top.is_array:  # ] or , ends an item
            if top.unique and top.start >= 0:
                item = _parse_key(_tail(text, data[:j], top.start).rstrip(_WS))
                if item is not None:
                    if item in top.keys:
                        return _DUPLICATE
                    top = top._replace(done=top.done + ((item, top.start, pos + j),), keys=top.keys | {item})
                    size = sites.domain_size(top.nodes) if byte == 0x2C else None
                    if size is not None and len(top.keys) >= size:
                        return _DUPLICATE  # every value is used: the next item would repeat one
            if byte == 0x5D:
                stack = stack[:-1]
            else:
                stack = stack[:-1] + (top._replace(index=top.index + 1, start=-1),)
        elif byte in (0x5D, 0x7D):  # } (or a stray ])
            stack = stack[:-1]
        elif byte == 0x2C and top is not None:  # , inside an object: a key is next
            stack = stack[:-1] + (top._replace(key_next=True),)
    return _State(stack, in_string, escaped, key, pos + len(data))


class _Tables(NamedTuple):
    """What the masks need to know of a vocabulary's tokens."""
    structural: TokenSet  # tokens holding `" , ] }`: where an item can end
    digits: TokenSet  # tokens holding a digit: where a number can become a repeat
    growth: TokenSet  # tokens starting with a digit, '.', 'e' or 'E': a number going on
    numeric: TokenSet  # tokens starting with a number character (growth and '+', '-')
    by_bytes: dict[bytes, list[int]]
    longest: int
    ordered: SortedTokens  # tokens starting with given bytes
    escapes: list[tuple[int, bytes]]  # single-byte tokens that end nothing (a way out of a repeat)
    closing_more: TokenSet  # tokens with `" , ] }` after their first `"`: they close a string and go on
    scratch: threading.local  # a mask row per thread for _way_out
    brackets: TokenSet  # tokens holding `]` or `}`: the only ones that can complete an open container
    quoted_brackets: TokenSet  # those with the `]` or `}` after a `"`: the only ones from inside a string
    whole: TokenSet  # tokens holding two `"` or starting a number: the only ones that write a whole string or number item
    second_items: TokenSet  # tokens that may end an item and write the next one whole (`","a"`, `1,1]`): they may repeat one alone
    second_items_in_string: TokenSet  # the same read from inside a string: a `"` first (`,:]` is string text there)


@lru_cache(maxsize=8)
def _token_tables(vocab: Vocabulary) -> _Tables:
    structural, digits, growth, numeric, brackets, quoted_brackets, by_bytes, longest = [], [], [], [], [], [], {}, 1
    for i, data in enumerate(vocab.token_bytes):
        if not data:
            continue
        if any(c in data for c in b'",]}'):
            structural.append(i)
        if any(c in data for c in b"]}"):
            brackets.append(i)
            if b'"' in data and any(c in data.split(b'"', 1)[1] for c in b"]}"):
                quoted_brackets.append(i)
        if any(c in data for c in b"0123456789"):
            digits.append(i)
        if data[0] in _NUMBER_GROWTH:
            growth.append(i)
        if data[0] in _NUMBER_GROWTH + b"+-":
            numeric.append(i)
        by_bytes.setdefault(data, []).append(i)
        longest = max(longest, len(data))
    as_ids = TokenSet
    escapes = [(by_bytes[bytes((b,))][0], bytes((b,))) for b in _ESCAPE_BYTES if bytes((b,)) in by_bytes]
    closing_more = [i for data, ids in by_bytes.items() for i in ids
                    if b'"' in data and any(c in data.split(b'"', 1)[1] for c in b'",]}')]
    return _Tables(as_ids(structural), as_ids(digits), as_ids(growth), as_ids(numeric), by_bytes, longest,
                   sorted_tokens(vocab), escapes, as_ids(sorted(closing_more)), threading.local(), as_ids(brackets), as_ids(quoted_brackets),
                   as_ids([i for i, data in enumerate(vocab.token_bytes) if data and (data.count(b'"') >= 2 or data.lstrip(_WS)[:1] in _NUMBER_START)]),
                   as_ids([i for i, data in enumerate(vocab.token_bytes) if data and _writes_a_second_item(data)]),
                   as_ids([i for i, data in enumerate(vocab.token_bytes) if data and b'"' in data and _writes_a_second_item(data.partition(b'"')[2])]))


def _writes_a_second_item(data: bytes) -> bool:
    """Whether after a `,` the token may write a whole item: two quotes, a `]` or `}`, or a
    digit with a `,` after it (a number ends there)."""
    rest = data.partition(b",")[2]
    if rest.count(b'"') >= 2 or b"]" in rest or b"}" in rest:
        return True
    digit = next((i for i, c in enumerate(rest) if 48 <= c <= 57), None)
    return digit is not None and b"," in rest[digit:]


def _mask_words(matcher: GrammarMatcher, scratch: threading.local | None = None) -> np.ndarray:
    """The matcher's mask now, as packed uint32 words `[ceil(V/32)]` (lookahead probes); in
    this thread's scratch row where `scratch` is given (read it before the next such call)."""
    if scratch is None:
        mask = new_bitmask(1, matcher.vocab_size)
    else:
        mask = scratch.__dict__.get("mask")
        if mask is None or mask.shape[1] * 32 < matcher.vocab_size:
            mask = scratch.mask = new_bitmask(1, matcher.vocab_size)
    matcher.fill_bitmask(mask)
    return mask[0].numpy().view(np.uint32)


_ITEM_END = frozenset(b", \t\n\r")
_CLOSING = frozenset(b"]}, \t\n\r")  # what may follow an array's `]` in a token _closes_a_repeat decides


def _closes_a_repeat(closing: tuple[bytes, frozenset[bytes], bool, bool], data: bytes) -> bool | None:
    """For _string_item_closing's case: whether a token that closes the string repeats an
    earlier item; None where the token does more than close it, end the item and perhaps open
    the next string item or close the array and what holds it (where no array around is
    unique: `outer_free`); an escape, a whole string, an opened container: _blocked decides.
    An open string item of such an array is never a repeat yet, whatever follows."""
    item, earlier, at_start, outer_free = closing
    if at_start:  # before the item: a token opening the string at once, then as inside it
        if data[:1] != b'"':
            return None
        item, data = b'"', data[1:]
    found = _closing_part(data)
    if found is None or (found[1] and not outer_free):
        return None
    return item + found[0] in earlier


@lru_cache(maxsize=65536)
def _closing_part(data: bytes) -> tuple[bytes, bool] | None:
    """What a token adds to a string item it closes (its bytes to the quote) and whether it
    closes the array too, where it does no more than close the item, end it and perhaps open the
    next string item, or close the array and containers around it; else None."""
    quote = data.find(b'"')
    if quote < 0 or b"\\" in data[:quote]:
        return None
    rest = data[quote + 1:]
    if rest.lstrip(_WS)[:1] == b"]" and _CLOSING.issuperset(rest):  # `"]`, `"]},`
        return data[: quote + 1], True
    if not _ITEM_END.issuperset(rest):  # the next string item may start, and stay open (`","ab`)
        between, opening, started = rest.partition(b'"')
        if not opening or not _ITEM_END.issuperset(between) or between.count(b",") != 1 or b'"' in started or b"\\" in started:
            return None
    return data[: quote + 1], False


class UniqueItemsGrammar:
    """CompiledGrammar: `inner` (the schema compiled without uniqueItems) with uniqueItems exact."""

    def __init__(self, inner: CompiledGrammar, vocab: Vocabulary, schema: Any) -> None:
        self.inner = inner
        self.vocab = vocab
        self.sites = ItemSites(schema)
        self.tables = _token_tables(vocab)
        self.second_item_ids = frozenset(self.tables.second_items.ids.tolist() + self.tables.second_items_in_string.ids.tolist())

    @property
    def vocab_size(self) -> int:
        return self.inner.vocab_size

    def matcher(self) -> "UniqueItemsMatcher":
        return UniqueItemsMatcher(self, self.inner.matcher(), [_State((), False, False, None, 0)], bytearray())


class UniqueItemsMatcher:
    def __init__(self, grammar: UniqueItemsGrammar, inner: GrammarMatcher, states: list[_State], text: bytearray) -> None:
        self._grammar = grammar
        self._inner = inner
        self._states = states  # one per accepted token, after it; [0] = the start
        self._text = text  # the output bytes so far
        self._host = HostRows()  # the caller's bitmask as numpy words, kept while it is reused
        self._unique_on: tuple = (None, False)  # (a stack, whether a unique array is open on it): kept while it stays
        tables = grammar.tables
        self._any_second = (len(tables.second_items) > 0, len(tables.second_items_in_string) > 0)  # by in_string

    @property
    def vocab_size(self) -> int:
        return self._inner.vocab_size

    def _bytes(self, token_id: int) -> bytes:
        table = self._grammar.vocab.token_bytes
        data = table[token_id] if 0 <= token_id < len(table) else None
        return data or b""

    def _open_items(self, state: _State) -> list[_Frame]:
        """The unique arrays on the stack that already hold an item (where a repeat is possible)."""
        return [f for f in state.stack if f.unique and f.done]

    def _blocked(self, state: _State, text: bytes | bytearray, token_id: int, inner: GrammarMatcher, depth: int = LOOKAHEAD) -> bool:
        """Whether token_id (allowed by `inner`, which is at `state`) must be removed: it ends a
        repeated item, or leads (within `depth` more tokens) only to repeats."""
        data = self._bytes(token_id)
        after = _advance(self._grammar.sites, state, text, data)
        if after is _DUPLICATE:
            return True
        probe, forced, written, following = None, b"", b"", []
        for frame in self._open_items(after):
            if frame.start < 0:
                continue
            item = _tail(text, data, frame.start)
            keys = frame.keys
            stripped = item.rstrip(_WS)
            current = _parse_key(stripped) if stripped[-1:] in _VALUE_ENDS else None
            if frame.open_ended:
                if current in keys and current[0] != "n":
                    return True  # a complete string that is a repeat (a number may still grow)
                continue  # any other item can always become a new one
            ahead = [e for e in (_span(text, data, s, e) for _, s, e in frame.done) if e.startswith(item)]
            numeric = item[:1] in (b"-", *(bytes((d,)) for d in b"0123456789")) and any(k[0] == "n" for k in keys)
            if not ahead and not numeric and current not in keys:
                continue  # this item already differs from every earlier one (numbers: 2 == 2.0)
            if not numeric and current in keys:
                return True  # a complete string, object, array or literal that is a repeat
            if not numeric and self._way_out(inner, token_id, item, ahead):
                continue  # one more byte the grammar allows leaves every earlier item's text
            if probe is None:  # what the grammar forces next may complete the repeat
                probe = inner.fork()
                probe.accept_token(token_id)
                forced, written = probe.forced_bytes(256), bytes(text) + data
                if forced and _advance(self._grammar.sites, after, written, forced) is _DUPLICATE:
                    return True
            whole = (item + forced).rstrip(_WS)
            if _parse_key(whole) in keys:
                value = json.loads(whole)
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not self._number_can_grow(probe, forced):
                    return True
                if depth > 0 and not forced and not self._number_goes_on(after, written, probe, depth - 1):
                    return True  # it can grow only into spellings of the same number (2.0 after 2)
            longer = [e for e in ahead if len(e) > len(item)]
            if longer:
                following.append((item, longer))
        if following and depth > 0:  # still on the text of earlier items: is there a way out?
            return not self._alive(after, written, probe, following, depth - 1)  # `following` grows only past the probe
        return False

    def _string_item_closing(self, state: _State) -> tuple[bytes, frozenset[bytes], bool, bool] | None:
        """The common case, decided without _blocked: inside a string item (no escapes) of an
        open-ended unique array, the only unique array holding items, or right before an item of
        one (at_start). Then (the item's bytes so far, the earlier items' texts, at_start, whether
        no array around it is unique), else None. Without escapes equal strings are equal text."""
        stack = state.stack
        if not (state.escaped is False and state.key is None and stack):
            return None
        top = stack[-1]
        at_start = not state.in_string and top.start < 0
        if not (top.is_array and top.unique and top.open_ended and top.done and (state.in_string and top.start >= 0 or at_start)):
            return None
        if any(f.unique and f.done for f in stack[:-1]):
            return None  # an outer array could complete a repeat of its own
        item = b'"' if at_start else bytes(self._text[top.start:])
        if item[:1] != b'"' or b"\\" in item:
            return None
        earlier = frozenset(bytes(self._text[s:e]).rstrip(_WS) for _, s, e in top.done)
        if any(b"\\" in e for e in earlier):
            return None
        return item, earlier, at_start, not any(f.unique for f in stack[:-1])

    def _way_out(self, inner: GrammarMatcher, token_id: int, item: bytes, ahead: list[bytes]) -> bool:
        """Whether after token_id the grammar allows a plain byte (a letter, a space, ...) that
        no earlier item has next: a cheap proof that the item need not become a repeat."""
        taken = {earlier[len(item):len(item) + 1] for earlier in ahead}
        escapes = [escape for escape, data in self._grammar.tables.escapes if data not in taken]
        if not escapes:
            return False
        if inner.validate_tokens([token_id, escapes[0]]) == 2:
            return True
        inner.accept_token(token_id)  # the others in one mask (a validate call each costs about as much)
        try:
            words = _mask_words(inner, self._grammar.tables.scratch)
        finally:
            inner.rollback(1)
        return any((words[escape >> 5] >> (escape & 31)) & 1 for escape in escapes[1:])

    def _alive(self, state: _State, text: bytes, matcher: GrammarMatcher, following: list[tuple[bytes, list[bytes]]], depth: int) -> bool:
        """Whether some token allowed at `state` leaves the text of every earlier item it is
        following, or leads (within `depth` tokens) to a state that does."""
        words = _mask_words(matcher)
        tokens: set[int] = set()
        for item, ahead in following:
            for earlier in ahead:
                tokens |= self._along(earlier[len(item):])
        tokens = {t for t in tokens if (words[t >> 5] >> (t & 31)) & 1}
        # and those that may end an item or a number (the only ones a repeat can be masked at)
        tables = self._grammar.tables
        tokens |= set(tables.structural.allowed_in(words)) | set(tables.digits.allowed_in(words))
        if count_allowed(words) > len(tokens):
            return True  # a token that leaves every earlier item's text and ends nothing
        return any(not self._blocked(state, text, t, matcher, depth) for t in tokens)

    def _number_goes_on(self, state: _State, text: bytes, matcher: GrammarMatcher, depth: int) -> bool:
        """Whether some token the grammar allows to go on with the number is not removed."""
        words = _mask_words(matcher)
        return any(not self._blocked(state, text, t, matcher, depth) for t in self._grammar.tables.growth.allowed_in(words))

    def _along(self, rest: bytes) -> set[int]:
        """Ids of the tokens that are a prefix of `rest` or start with it."""
        tables = self._grammar.tables
        found = {i for n in range(1, min(len(rest), tables.longest) + 1) for i in tables.by_bytes.get(rest[:n], ())}
        found.update(tables.ordered.starting_with(rest))
        return found

    def _number_can_grow(self, matcher: GrammarMatcher, forced: bytes) -> bool:
        """Whether, after `forced`, the grammar lets the number go on (a digit, '.', 'e')."""
        if forced:
            matcher = matcher.fork()
            by_bytes, longest = self._grammar.tables.by_bytes, self._grammar.tables.longest
            while forced:  # the forced bytes as tokens, longest first
                size = next((n for n in range(min(longest, len(forced)), 0, -1) if forced[:n] in by_bytes), 0)
                if not size or matcher.validate_tokens(by_bytes[forced[:size]][:1]) != 1:
                    return True  # cannot follow it: assume it can grow (keeps the token)
                matcher.accept_token(by_bytes[forced[:size]][0])
                forced = forced[size:]
        return bool(self._grammar.tables.growth.allowed_in(_mask_words(matcher)))

    def _candidates(self, state: _State, words: np.ndarray) -> set[int]:
        """The allowed tokens `_blocked` may remove: those holding `" , ] }` or a digit, those
        going on along an earlier item's text, and number characters in a numeric item. While a
        string item is written (no escapes around): only tokens along an earlier item's text
        and those that close the string and go on to more structure."""
        tables = self._grammar.tables
        found: set[int] = set(self._second_items(state).allowed_in(words))  # two items in one token: the first may be any
        structural = False  # every allowed token holding `" , ] }` may matter
        completing = False  # those that can complete an open object or array item
        for frame in state.stack:  # the first item of a finite domain: a token may end it and start a forced repeat
            if frame.unique and not frame.done and frame.start >= 0 and not frame.open_ended:
                if frame is state.stack[-1]:
                    structural = True
                else:  # the item is an open object or array: only a token with `}` or `]` can end it
                    completing = True
        for frame in self._open_items(state):
            item = bytes(self._text[frame.start:]) if frame.start >= 0 else b""
            earlier = [bytes(self._text[s:e]) for _, s, e in frame.done]
            in_item_string = state.in_string and frame is state.stack[-1] and item[:1] == b'"'
            if in_item_string and not any(b"\\" in e for e in (item, *earlier)):
                # without escapes equal strings are equal text: only a token along an earlier
                # item can close a repeat, only one with structure after its quote reach further
                found |= set(tables.closing_more.allowed_in(words))
                if not frame.open_ended:
                    for e in earlier:
                        if e.startswith(item):
                            found |= {i for i in self._along(e[len(item):]) if words.item(i >> 5) >> (i & 31) & 1}
                else:
                    for e in earlier:
                        if e.startswith(item):
                            found |= {i for i in self._along(e[len(item):]) if words.item(i >> 5) >> (i & 31) & 1 and b'"' in self._bytes(i)}
                continue
            if frame.open_ended and item[:1] == b'"' and not state.in_string:
                continue  # a complete string, already unlike every earlier one
            if frame.open_ended and frame is state.stack[-1] and not state.in_string and not item.strip(_WS):
                # before an item of free strings or numbers: only a token writing a whole one
                # (two quotes, or a number and what ends it) can make it a repeat
                found |= set(tables.whole.allowed_in(words))
                continue
            if frame is not state.stack[-1] and not any(e.startswith(item) for e in earlier):
                # an open object or array unlike every earlier item's text: it can only become
                # a repeat (keys in another order) where a token completes it, with a `}` or `]`
                completing = True
                continue
            structural = True
            if frame.open_ended:
                continue
            if any(d[0][0] == "n" for d in frame.done):
                found |= set(tables.digits.allowed_in(words))
                if item[:1] in (b"", b"-", *(bytes((d,)) for d in b"0123456789")):  # 2 == 2.0 == 2e0
                    found |= set(tables.numeric.allowed_in(words))
            for e in earlier:
                if e.startswith(item):
                    found |= {i for i in self._along(e[len(item):]) if words.item(i >> 5) >> (i & 31) & 1}
        if structural:
            found |= set(tables.structural.allowed_in(words))
        elif completing:  # (from inside a string a token must close it first)
            found |= set((tables.quoted_brackets if state.in_string else tables.brackets).allowed_in(words))
        return found

    def _second_items(self, state: _State) -> TokenSet:
        """The tokens that may end an item and write the next one whole, read at `state`."""
        tables = self._grammar.tables
        return tables.second_items_in_string if state.in_string else tables.second_items

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        self._inner.fill_bitmask(bitmask, row)
        state = self._states[-1]
        held = self._unique_on
        if held[0] is not state.stack:  # the stack object stays while a string or number is written
            held = self._unique_on = (state.stack, any(f.unique for f in state.stack))
        unique = held[1]
        if not unique and not self._any_second[state.in_string]:
            return
        host, words = self._host.words(bitmask, row)  # [ceil(V/32)] uint32
        if unique:
            closing, candidates = self._string_item_closing(state), self._candidates(state, words)
        else:  # only a token writing two items could open a unique array and repeat in it
            closing, candidates = None, self._second_items(state).allowed_in(words)
        cleared = False
        for token_id in candidates:
            verdict = None if closing is None else _closes_a_repeat(closing, self._bytes(token_id))
            if verdict is None:
                verdict = self._blocked(state, self._text, token_id, self._inner)
            if verdict:
                clear_token(words, token_id)
                cleared = True
        if cleared and not words.any():  # it held the cleared tokens: everything allowed was a repeat
            raise GrammarError("uniqueItems: every continuation the schema allows here repeats an earlier item of the array")
        HostRows.store(bitmask, host, row)

    def accept_token(self, token_id: int) -> None:
        token_id = int(token_id)
        if self._inner.validate_tokens([token_id]) != 1:
            self._inner.accept_token(token_id)  # raises the inner grammar's own GrammarError
        state = self._states[-1]
        if (any(f.unique for f in state.stack) or token_id in self._grammar.second_item_ids) and self._blocked(state, self._text, token_id, self._inner):
            raise GrammarError(f"token {token_id} rejected: it would repeat an item of a uniqueItems array")
        following = _advance(self._grammar.sites, state, self._text, self._bytes(token_id))
        self._inner.accept_token(token_id)
        self._states.append(following)
        self._text += self._bytes(token_id)

    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        limit = self._inner.validate_tokens(token_ids)
        probe = self.fork()
        for i, token_id in enumerate(token_ids[:limit]):
            try:
                probe.accept_token(token_id)
            except GrammarError:
                return i
        return limit

    def rollback(self, num_tokens: int) -> None:
        if num_tokens > len(self._states) - 1 or num_tokens < 0:
            raise GrammarError(f"cannot roll back {num_tokens} tokens: only {len(self._states) - 1} accepted")
        self._inner.rollback(num_tokens)
        if num_tokens:
            del self._states[-num_tokens:]
            del self._text[self._states[-1].pos:]

    def is_accepting(self) -> bool:
        return self._inner.is_accepting()

    def is_terminated(self) -> bool:
        return self._inner.is_terminated()

    def forced_bytes(self, max_bytes: int = 64) -> bytes:
        forced = self._inner.forced_bytes(max_bytes)
        # forced text that would repeat an item: a dead end the masks avoid; force nothing
        return b"" if forced and _advance(self._grammar.sites, self._states[-1], self._text, forced) is _DUPLICATE else forced

    def fork(self) -> "UniqueItemsMatcher":
        return UniqueItemsMatcher(self._grammar, self._inner.fork(), list(self._states), bytearray(self._text))
