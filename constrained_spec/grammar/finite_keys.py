"""Key prefixes that can only end as a key already used: masked where an object's keys are finite.

The unique-keys wrapper removes the tokens that *close* a key already in its object. Where the
wrapped grammar admits any further key (open objects) that is enough; where it admits a finite
set (`patternProperties` `^(?:a|b)$` next to `additionalProperties: false`, `propertyNames` with
an enum), a prefix can lead only to used keys: after `{"ab":1,"ab` nothing may follow, a dead end
for a sampler. So, for each allowed token that leaves a key open at a prefix of a used key, the
wrapped matcher is asked (accept, mask, roll back) whether some continuation of that prefix
leaves the used keys' trie or closes a key not used; where none does, the token is removed. The
search follows the used keys' bytes only, one byte token a step.

Which objects can run out of keys, and which keys, is read from the schema (json_key_sets.py);
where those keys are listed, only used keys among them are searched. Where every key any object
takes is known (a closed world), no search: inside a key, the unused known keys the grammar takes
whole are asked once for the key (`_live_keys`, a validate call each), and a prefix lives iff one
extends it; prefixes opened from outside a key take a few validate calls each (`_known_alive`).
"""

from __future__ import annotations

import json
import threading
from bisect import bisect_left
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from ..bitmask import TokenSet, count_allowed, new_bitmask
from .vocabulary import Vocabulary, sorted_tokens

__all__ = ["KeyPrefixTables", "dead_key_tokens", "extending", "is_dead", "key_prefix_tables", "key_target"]

_MAX_DEPTH = 256  # bytes searched past a prefix; deeper counts as alive (the old behaviour)


class KeyPrefixTables:
    """Per vocabulary: tokens by their bytes, the one-byte tokens, and each quoted token's bytes
    after its last `"` (where a key it opens would stand)."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.token_bytes = vocab.token_bytes
        self.size = vocab.size
        self.token_of: dict[bytes, int] = {}
        for i, data in enumerate(vocab.token_bytes):
            if data and data not in self.token_of:
                self.token_of[data] = i
        self.single = [self.token_of.get(bytes((b,)), -1) for b in range(256)]
        tails: dict[bytes, list[int]] = {}
        for i, data in enumerate(vocab.token_bytes):
            if data and b'"' in data:
                tails.setdefault(data.rsplit(b'"', 1)[1], []).append(i)
        self.by_tail = {tail: np.array(ids, dtype=np.int64) for tail, ids in tails.items()}
        # its last `"` opens a string from outside one (odd count) or from inside one (even);
        # with a backslash, either: [0] from outside, [1] from inside a string
        self.opening: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        for tail, ids in tails.items():
            sides: tuple[list[int], list[int]] = ([], [])
            for i in ids:
                data = vocab.token_bytes[i]
                if b"\\" in data:
                    sides[0].append(i), sides[1].append(i)
                else:
                    sides[data.count(b'"') % 2 == 0].append(i)
            self.opening[tail] = (np.array(sides[0], dtype=np.int64), np.array(sides[1], dtype=np.int64))
        # tokens ending with a `,` (and whitespace) outside a string: a key may be next
        self.comma_end = TokenSet([i for i, b in enumerate(vocab.token_bytes) if b and b.rstrip(b" \t\n\r").endswith(b",")])
        self.quote = self.token_of.get(b'"', -1)
        self.sorted = sorted_tokens(vocab)
        self._local = threading.local()  # scratch masks per thread (engines may fill masks in a pool)

    def scratch(self, depth: int) -> torch.Tensor:
        """A bitmask `[1, ceil(V/32)]` for one level of the search."""
        masks = self._local.__dict__.setdefault("masks", [])
        while len(masks) <= depth:
            masks.append(new_bitmask(1, self.size))
        return masks[depth]


@lru_cache(maxsize=8)
def key_prefix_tables(vocab: Vocabulary) -> KeyPrefixTables:
    return KeyPrefixTables(vocab)


@lru_cache(maxsize=256)
def _raw_sorted(keys: frozenset) -> list[bytes]:
    """An object's used keys as the raw bytes the plain-escape rule writes, sorted."""
    return sorted(_raw(k) for k in keys)


@lru_cache(maxsize=8192)
def _raw(key: str) -> bytes:
    return json.dumps(key, ensure_ascii=False)[1:-1].encode()


@lru_cache(maxsize=1024)
def _opening_on(keys: frozenset, names: frozenset | None, tables: KeyPrefixTables, inside: bool, empty: bool) -> TokenSet | None:
    """The tokens whose last `"` opens a key at a prefix of an object's used key that may
    dead-end (its `keys` among `names`), from inside a string or not; `empty`: the key's empty
    start too, else only longer prefixes. None where no used key may dead-end. Built from each
    key's own (a new key set every key: objects grow one key at a time); a prefix two keys share
    lists its tokens twice."""
    used = _finite_used(keys, names)
    if not used:
        return None
    parts = [_key_openings(raw, tables, inside) for raw in _raw_sorted(used)]
    if empty and b"" in tables.opening:
        parts.append(tables.opening[b""][inside])
    return TokenSet(np.concatenate(parts))


@lru_cache(maxsize=8192)
def _key_openings(raw: bytes, tables: KeyPrefixTables, inside: bool) -> np.ndarray:
    """The tokens whose last `"` opens a key at a non-empty prefix of `raw`: `[n]` int64."""
    parts = [tables.opening[raw[:i]][inside] for i in range(1, len(raw) + 1) if raw[:i] in tables.opening]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


@lru_cache(maxsize=1024)
def _continuing(keys: frozenset, names: frozenset | None, tables: KeyPrefixTables, typed: bytes) -> tuple[int, ...]:
    """Inside a key typed so far as `typed` (no escape): the tokens that stay on a used key
    that may dead-end (a prefix of its remaining bytes), without closing it. A few ids, asked
    one by one (a TokenSet costs more to build than to ask: each typed prefix is new)."""
    ids: list[int] = []
    for raw in extending(_raw_sorted(_finite_used(keys, names)), typed):
        ids += _rest_tokens(raw, len(typed), tables)
    return tuple(dict.fromkeys(ids))


@lru_cache(maxsize=8192)
def _rest_tokens(raw: bytes, typed: int, tables: KeyPrefixTables) -> list[int]:
    """The tokens spelling a prefix of `raw` past its first `typed` bytes."""
    rest = raw[typed:]
    return [t for i in range(1, len(rest) + 1) if (t := tables.token_of.get(rest[:i])) is not None]


@lru_cache(maxsize=1024)
def _used_raw(keys: frozenset, names: frozenset[str] | None) -> list[bytes]:
    """An object's used keys that may dead-end, raw and sorted (_raw_sorted)."""
    used = _finite_used(keys, names)
    return _raw_sorted(used) if used else []


def _finite_used(keys: frozenset, names: frozenset[str] | None) -> frozenset:
    """An object's used keys that may dead-end: those among `names` (None: all)."""
    return keys if names is None or not keys else keys & names


def extending(raws: list[bytes], prefix: bytes) -> list[bytes]:
    """The keys of `raws` (sorted bytes) that start with `prefix`: a slice between two bisections
    (those keys sort from `prefix` up to the first string past all its extensions)."""
    stripped = prefix.rstrip(b"\xff")  # extensions of b"a\xff" end where those of b"b" begin
    if not stripped:
        return raws[bisect_left(raws, prefix):]
    beyond = stripped[:-1] + bytes((stripped[-1] + 1,))
    return raws[bisect_left(raws, prefix) : bisect_left(raws, beyond)]


def _extended(raws: list[bytes], prefix: bytes) -> bool:
    """Whether some key of `raws` (sorted bytes) starts with `prefix` (extending's answer, not its list)."""
    at = bisect_left(raws, prefix)
    return at < len(raws) and raws[at].startswith(prefix)


def _has(raws: list[bytes], raw: bytes) -> bool:
    at = bisect_left(raws, raw)
    return at < len(raws) and raws[at] == raw


def finds_none(stack_memo: dict, in_string: bool) -> bool:
    """Whether dead_key_tokens, called before on this stack (its `stack_memo`) with no key or
    escape open, must find no token here again: no used key on the stack can dead-end, or in a
    value string no token opens one (only such a token could lead to one there)."""
    openings = stack_memo.get(("openings", bool(in_string)))
    return openings is False or (bool(in_string) and openings is not None and not len(openings))


def dead_key_tokens(words: np.ndarray, state: Any, inner: Any, tables: KeyPrefixTables,
                    advance: Callable[[Any, bytes], Any], key_mask: np.ndarray | None,
                    witnesses: dict, commas: bool = True, names: frozenset[str] | None = None,
                    memo: dict | None = None, stack_memo: dict | None = None, known: list[bytes] | None = None) -> list[int]:
    """The allowed tokens (per the packed row `words`, uint32 `[W]`) after which the open key
    can only become a used one. `state` is the unique-keys tracker's state, `inner` the wrapped
    matcher at that state (left as it was), `advance` the tracker's step, `key_mask` the packed
    tokens allowed inside a key without an open escape (None: all). `witnesses` (kept by the
    caller across steps): (object depth, key prefix) -> a key (or the start of one) found
    alive there; checked again in one validate call before anything is searched. `commas`:
    whether an object can run out of keys while llguidance still offers a `,` (else neither
    a `,` nor a key just opened is checked: some key is left there). `names`: the only keys
    that can dead-end (FiniteKeys.names; None: any). `memo`: verdicts by (root, key prefix)
    the caller keeps while the same key stays open (None: this step's own); `stack_memo`: a dict
    the caller keeps while the stack (state[0]) stays the same object. `known`: the closed
    world's keys (json_key_sets.known_keys, raw and sorted; None: not closed)."""
    stack, in_string, escaped, key = state
    openings = None if stack_memo is None else stack_memo.get(("openings", bool(in_string)))
    if openings is None:  # the tokens that may open a key at a used key's prefix, in any open object
        parts = [ids for frame in stack if frame is not None and (ids := _opening_on(frame[0], names, tables, bool(in_string), commas)) is not None]
        # one object's set as it is; ids twice in a merged one are asked twice (the verdicts below go per distinct id)
        openings = (parts[0] if len(parts) == 1 else TokenSet(np.concatenate([part.ids for part in parts]))) if parts else False
        if stack_memo is not None:
            stack_memo["openings", bool(in_string)] = openings
    if openings is False:
        return []  # no object has a used key that may dead-end
    candidates: list[int] = []
    alive: dict = {} if memo is None else memo
    dead: list[int] = []
    if key is not None and escaped is False:  # inside a key: the tokens that continue a used one
        item = words.item
        continuing = [t for t in _continuing(stack[-1][0], names, tables, key) if item(t >> 5) >> (t & 31) & 1]
        live = None
        if continuing and known is not None and b"\\" not in key:  # escapes: asked per prefix
            live = _live_keys(inner, tables, key, _used_raw(stack[-1][0], names), known, alive, words)
        if live is None:
            candidates += continuing
        else:
            dead += _dead_by_live(live, key, continuing, tables.token_bytes)
    candidates += openings.allowed_in(words)  # found by their bytes after the last `"`
    if commas and key is None and not in_string:  # after a `,` a key must come: is one left?
        candidates += tables.comma_end.allowed_in(words)
    if not candidates:
        return sorted(dead)
    targets = [(token_id, target) for token_id in dict.fromkeys(candidates)
               if (target := key_target(token_id, state, tables, advance, names)) is not None]
    # shortest prefixes first: a dead one kills every longer prefix from the same root (the keys
    # extending those are among its keys), so most of a full object's prefixes need no probe
    targets.sort(key=lambda pair: len(pair[1][1]))
    for token_id, (used, prefix, root, lead) in targets:
        if any(alive.get((root, prefix[:i])) is False for i in range(len(prefix))):
            alive[root, prefix] = False
            dead.append(token_id)
        elif is_dead(token_id, (used, prefix, root, lead), inner, tables, key_mask, witnesses, alive, words, names, known):
            dead.append(token_id)
        else:
            for i in range(len(prefix)):  # a way on from prefix runs through each of its own prefixes
                alive[root, prefix[:i]] = True
    return sorted(dead)


def key_target(token_id: int, state: Any, tables: KeyPrefixTables, advance: Callable[[Any, bytes], Any],
               names: frozenset[str] | None = None) -> tuple | None:
    """What must be checked after `token_id` at `state`: (used keys, key prefix, root, lead
    tokens) where it leaves a key open at a used key's prefix, or ends with a `,` in an object
    with keys (root: how the grammar reached the key; lead: the tokens that open it), else None.
    Used keys: those among `names` (None: all)."""
    data = tables.token_bytes[token_id]
    end = advance(state, data) if data else None
    if end is None or not end[0] or end[0][-1] is None or end[2] is not False or not (used := _used_raw(end[0][-1][0], names)):
        return None  # a repeat (cleared elsewhere), outside an object with keys, or an escape open
    prefix = end[3]
    typed = state[3] or b""  # roots are the bytes from where the open key began (kept across steps there)
    if prefix is None:  # no key open: dead only after a `,` with every key used
        if end[1] or not end[0][-1][1] or tables.quote < 0:
            return None
        return used, b"", (typed + data + b'"', len(end[0])), [token_id, tables.quote]
    if not _extended(used, prefix):
        return None
    root = b"" if state[3] is not None and b'"' not in data else typed + data[: len(data) - len(prefix)]
    return used, prefix, (root, len(end[0])), [token_id]


def is_dead(token_id: int, target: tuple, inner: Any, tables: KeyPrefixTables, key_mask: np.ndarray | None,
            witnesses: dict, alive: dict | None = None, words: np.ndarray | None = None,
            names: frozenset[str] | None = None, known: list[bytes] | None = None) -> bool:
    """Whether `token_id` (allowed where the wrapped matcher `inner` stands, left as it was; its
    `key_target`) leaves a key open that can only become a used one, or ends with a `,` where no
    key is left. `alive` memoizes verdicts across the tokens of one step; `words` (that step's
    mask) may prove a key alive without a search; so does an unused key of `names` the grammar
    takes here, in one validate call. In a closed world (`known`) a few validate calls
    replace the search (_known_alive)."""
    used, prefix, root, lead = target
    alive = {} if alive is None else alive
    if known is not None and root[0] == b"" and len(lead) == 1 and b"\\" not in prefix:  # inside the open key: its live keys
        typed = prefix[: len(prefix) - len(tables.token_bytes[token_id])]
        live = _live_keys(inner, tables, typed, used, known, alive, words)
        if live is not None:
            return bool(_dead_by_live(live, typed, [token_id], tables.token_bytes))
    if (root, prefix) not in alive:
        witnessed = _witnessed(inner, tables, lead, used, prefix, witnesses, root[1])
        if known is not None and not witnessed:
            verdict = _known_alive(inner, tables, lead, used, prefix, known, alive)
            if verdict is not None:
                alive[root, prefix] = verdict
                _keep_witness(alive, witnesses, root[1], prefix)
                return not verdict
        if witnessed or (
                names and _guessed(inner, tables, lead, used, prefix, names, witnesses, root[1])) or (
                words is not None and len(lead) == 1 and _proven_now(words, tables, tables.token_bytes[token_id], prefix, used)):
            alive[root, prefix] = True
        else:
            taken = 0
            try:
                for step in lead:
                    if inner.validate_tokens([step]) != 1:
                        alive[root, prefix] = True  # the key does not open right here: counted alive
                        break
                    inner.accept_token(step)
                    taken += 1
                else:
                    _alive(inner, tables, used, prefix, 0, key_mask, alive, root)
            finally:
                inner.rollback(taken)
            _keep_witness(alive, witnesses, root[1], prefix)
    return not alive[root, prefix]


_FOUND = ("witness",)  # where a search leaves the live key it found, in its memo
_KNOWN_PROBES = 48  # a closed world's unused keys asked about at most; more: the search
_OFF_KEY = b"~#^"  # key bytes every "any key" source takes (one not continuing a used key is probed)


def _known_alive(inner: Any, tables: KeyPrefixTables, lead: list[int], used: list[bytes], prefix: bytes, known: list[bytes],
                 memo: dict) -> bool | None:
    """Whether the key `lead` leaves open at `prefix` (the wrapped matcher where it stands, left
    as it was) can end other than as a used key, where every key any object takes is in `known`
    or the object takes any key: then it can iff the grammar takes `prefix` and one byte off the
    used keys (an "any key" source here), or an unused known key extending it, quote included.
    A few validate calls where the search fills a mask per branch of the used keys. None where
    there are too many keys to ask, or a byte has no one-byte token: the search decides."""
    unused = [raw for raw in extending(known, prefix) if not _has(used, raw)]
    off = _off_key(used, prefix, tables)
    if len(unused) > _KNOWN_PROBES or off is None:
        return None
    if inner.validate_tokens(lead) != len(lead):
        return True  # the key does not open right here: counted alive (as is_dead does)
    if _takes(inner, lead, tables, off):
        return True
    for raw in unused:
        taken = _takes(inner, lead, tables, raw[len(prefix):] + b'"')
        if taken is None:
            return None
        if taken:
            memo[_FOUND] = raw + b'"'
            return True
    return False


def _off_key(raws: list[bytes], prefix: bytes, tables: KeyPrefixTables) -> bytes | None:
    """A byte of _OFF_KEY continuing `prefix` on none of `raws` (probed where any key may stand),
    None where none does or it has no one-byte token."""
    off = next((bytes((b,)) for b in _OFF_KEY if not _extended(raws, prefix + bytes((b,)))), None)
    return off if off is not None and tables.single[off[0]] >= 0 else None


def _takes(inner: Any, lead: list[int], tables: KeyPrefixTables, data: bytes) -> bool | None:
    """Whether the wrapped matcher (where it stands) takes `lead` and then `data` spelled one
    byte a token; None where a byte of `data` has no one-byte token."""
    steps = [tables.single[b] for b in data]
    if min(steps, default=0) < 0:
        return None
    steps = lead + steps
    return inner.validate_tokens(steps) == len(steps)


_LIVE = ("live keys",)  # where _live_keys keeps its answer in a key's memo (verdicts there go by (root, prefix))
_ANY_KEY = ("any key",)  # its answer where the open key may be any key
_LIVE_PROBES = 64  # unused known keys asked about at most; more: asked per prefix (_known_alive) or searched


def _live_keys(inner: Any, tables: KeyPrefixTables, typed: bytes, used: list[bytes], known: list[bytes],
               memo: dict, words: np.ndarray | None = None) -> list[bytes] | tuple | None:
    """In a closed world (`known`), inside a key typed so far as `typed` (no escape open; the
    wrapped matcher where it stands): the unused known keys extending `typed` the grammar takes
    here, whole (raw, sorted). A key prefix lives iff one of them extends it, or _ANY_KEY: the
    grammar takes a key outside `known` here, which in a closed world means any key at all, so
    every prefix lives. One validate call per unused key, shared by every prefix of the step
    (and, kept in `memo` while the key stays open, by the later steps: a longer typed key
    narrows it); None where there are too many to ask or a byte has no one-byte token. `words`
    (the step's mask, packed uint32 `[W]`) spares the probes of keys whose longest first token
    it refuses (the grammar takes every prefix of a key it takes)."""
    kept = memo.get(_LIVE)
    if kept is not None and typed.startswith(kept[0]):
        live = kept[1]
        return live if live is None or live is _ANY_KEY else [raw for raw in live if raw.startswith(typed)]
    off = _off_key(known, typed, tables)
    live: list[bytes] | tuple | None = None
    if off is not None and tables.quote >= 0:
        if _takes(inner, [], tables, off):
            live = _ANY_KEY
        else:
            # only keys sharing a byte past `typed` with a used key decide a prefix anyone asks
            # about (the prefixes asked are longer than `typed`, on used keys)
            n, on_used = len(typed), extending(used, typed)
            firsts, used_here = {raw[n] for raw in on_used if len(raw) > n}, set(on_used)
            unused = [raw for raw in extending(known, typed) if len(raw) > n and raw[n] in firsts and raw not in used_here]
            if words is not None:
                item = words.item
                unused = [raw for raw in unused if (t := _first_token(tables, raw[n:])) < 0 or item(t >> 5) >> (t & 31) & 1]
            if len(unused) <= _LIVE_PROBES:
                live = []
                for raw in unused:
                    taken = _takes(inner, [], tables, raw[len(typed):] + b'"')
                    if taken is None:
                        live = None
                        break
                    if taken:
                        live.append(raw)
    memo[_LIVE] = (typed, live)
    return live


@lru_cache(maxsize=8192)
def _first_token(tables: KeyPrefixTables, rest: bytes) -> int:
    """The longest token spelling a prefix of `rest` (non-empty; its first byte's token at least)."""
    for n in range(len(rest), 0, -1):
        token_id = tables.token_of.get(rest[:n])
        if token_id is not None:
            return token_id
    return tables.single[rest[0]]


def _dead_by_live(live: list[bytes] | tuple, typed: bytes, tokens: list[int], token_bytes: list) -> list[int]:
    """Of `tokens` (each continuing the open key typed so far as `typed` on a used key), those
    whose key prefix no live key (`_live_keys`) extends: it can only end as a used key."""
    if live is _ANY_KEY:
        return []
    return [t for t in tokens if not _extended(live, typed + token_bytes[t])] if live else list(tokens)


def _witnessed(inner: Any, tables: KeyPrefixTables, lead: list[int], used: list[bytes], prefix: bytes,
               witnesses: dict, level: int) -> bool:
    """Whether the key found alive here before (at this object depth and prefix) still is: not
    used since, and the wrapped matcher takes `lead` (the tokens that open the key) and it."""
    witness = witnesses.get((level, prefix))
    if witness is None:
        return False
    key, quote, _ = witness.partition(b'"')
    if _has(used, key) if quote else _extended(used, key):
        return False
    return _takes(inner, lead, tables, witness[len(prefix):]) is True


_GUESSES = 3  # unused listed keys tried before a search


def _guessed(inner: Any, tables: KeyPrefixTables, lead: list[int], used: list[bytes], prefix: bytes,
             names: frozenset[str], witnesses: dict, level: int) -> bool:
    """Whether the wrapped matcher takes `lead` and then a whole key of `names` not used yet
    (one byte a token, its closing quote too): kept as the witness at this depth and prefix."""
    tries = 0
    for raw in extending(_raw_sorted(names), prefix):
        if _has(used, raw):
            continue
        if _takes(inner, lead, tables, raw[len(prefix):] + b'"'):
            _remember(witnesses, level, prefix, raw + b'"')
            return True
        tries += 1
        if tries == _GUESSES:
            break
    return False


def _keep_witness(memo: dict, witnesses: dict, level: int, prefix: bytes) -> None:
    found = memo.pop(_FOUND, None)
    if found is not None and found.startswith(prefix):
        _remember(witnesses, level, prefix, found)


def _remember(witnesses: dict, level: int, prefix: bytes, found: bytes) -> None:
    """Keep `found` (a live key, its `"` where closed) as the witness at this depth and prefix;
    the dict is bounded (cleared past 1,024 entries)."""
    if len(witnesses) > 1024:
        witnesses.clear()
    witnesses[level, prefix] = found


@lru_cache(maxsize=4096)
def _starting_with(tables: KeyPrefixTables, data: bytes) -> TokenSet:
    return TokenSet(tables.sorted.starting_with(data))


def _proven_now(words: np.ndarray, tables: KeyPrefixTables, data: bytes, prefix: bytes, used: list[bytes]) -> bool:
    """Whether a longer token allowed now (the same bytes, then more) shows the key at `prefix`
    leaving the used keys' trie or closing a key not used: alive without asking the grammar."""
    for token_id in _starting_with(tables, data).allowed_in(words):
        extra = tables.token_bytes[token_id][len(data):]
        if not extra or b"\\" in extra:
            continue
        segment, quote, _ = extra.partition(b'"')
        grown = prefix + segment
        if not _has(used, grown) if quote else not _extended(used, grown):
            return True
    return False


def _alive(inner: Any, tables: KeyPrefixTables, used: list[bytes], prefix: bytes, depth: int,
           key_mask: np.ndarray | None, memo: dict, root: tuple) -> bool:
    """Whether the key open at `prefix` (the wrapped matcher just after it) can end other than
    as a used key: some allowed token leaves the used keys' trie, or a byte along it leads to
    such a prefix. Verdicts go to `memo` by (`root`: how the key was reached, prefix)."""
    if (root, prefix) not in memo:
        memo[root, prefix] = _search(inner, tables, used, prefix, depth, key_mask, memo, root)
    return memo[root, prefix]


def _search(inner: Any, tables: KeyPrefixTables, used: list[bytes], prefix: bytes, depth: int,
            key_mask: np.ndarray | None, memo: dict, root: tuple) -> bool:
    rests = [raw[len(prefix):] for raw in extending(used, prefix)]
    if not rests or depth >= _MAX_DEPTH:
        return True
    forced = inner.forced_bytes(64)  # one way on: follow it (far cheaper than a mask)
    if forced:
        segment, quote, _ = forced.partition(b'"')
        grown = prefix + segment
        if b"\\" in segment:
            return True  # an escape: cannot tell, counted alive
        if quote:
            verdict = not _has(used, grown)
        else:
            steps = [tables.single[b] for b in segment]
            if not _extended(used, grown) or min(steps) < 0:
                return True
            for token_id in steps:
                inner.accept_token(token_id)
            try:
                verdict = _alive(inner, tables, used, grown, depth + len(steps), key_mask, memo, root)
            finally:
                inner.rollback(len(steps))
        for i in range(1, len(segment)):  # the forced way runs through these prefixes: the same verdict
            memo[root, prefix + segment[:i]] = verdict
        return verdict
    mask = tables.scratch(depth)
    inner.fill_bitmask(mask)
    words = mask.numpy().view(np.uint32)[0]
    if key_mask is not None:
        n = min(len(words), len(key_mask))
        words[:n] &= key_mask[:n]
    item = words.item

    def allowed(token_id: int) -> bool:
        return bool(item(token_id >> 5) >> (token_id & 31) & 1)

    on_trie = set()  # allowed tokens that stay on a used key, or close one
    for rest in rests:
        on_trie.update(t for i in range(1, len(rest) + 1) if (t := tables.token_of.get(rest[:i])) is not None and allowed(t))
        on_trie.update(t for t in tables.sorted.starting_with(rest + b'"') if allowed(t))
    if count_allowed(words) > len(on_trie):
        memo[_FOUND] = _off_trie(words, tables, on_trie, prefix)
        return True
    for byte in dict.fromkeys(rest[0] for rest in rests if rest):
        token_id = tables.single[byte]
        if token_id < 0:
            return True  # no one-byte token to follow: cannot tell, counted alive
        if not allowed(token_id):
            continue
        inner.accept_token(token_id)
        try:
            if _alive(inner, tables, used, prefix + bytes((byte,)), depth + 1, key_mask, memo, root):
                return True
        finally:
            inner.rollback(1)
    return False


def _off_trie(words: np.ndarray, tables: KeyPrefixTables, on_trie: set, prefix: bytes) -> bytes | None:
    """The key so far with an allowed token that leaves the used keys' trie (its `"` too where
    it closes the key), or None where the first few found hold escapes."""
    for word in np.flatnonzero(words)[:64].tolist():
        bits = int(words[word])
        while bits:
            low = bits & -bits
            bits ^= low
            token_id = word * 32 + low.bit_length() - 1
            data = tables.token_bytes[token_id] if token_id < len(tables.token_bytes) else None
            if token_id in on_trie or not data:
                continue
            segment, quote, _ = data.partition(b'"')
            if b"\\" not in segment:
                return prefix + segment + quote
    return None
