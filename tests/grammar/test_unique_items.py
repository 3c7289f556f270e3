"""Exact uniqueItems (unique_items.py) on both backends, against jsonschema.

- A seeded generated family of uniqueItems arrays (strings, bounded and free numbers, enums,
  objects, nested arrays, inside objects and anyOf): drawn valid instances, the same with an item
  repeated (also as 1.0 for 1, or with the object's keys reordered), walked with the real
  tokenizer's and random tokenizations; acceptance (with EOS only at the end) equals jsonschema.
- Sampled outputs: random walks through the masks, steered to repeat earlier items; every
  finished output validates, and a sampler never meets an empty mask on these schemas.
- Equality as validators define it, rollback and fork, and the one documented dead end.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import jsonschema
import pytest
from hypothesis import strategies as st

from constrained_spec.bitmask import new_bitmask, unpack_bitmask
from constrained_spec.grammar import GrammarError, Vocabulary, compile_json_schema
from constrained_spec.grammar.unique_items import UniqueItemsGrammar, item_key

from test_schema_differential import FULL, Harness, _over_generated_schemas, _report, _valid_instances

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], 256)

ITEMS = st.one_of(
    st.just({"type": "string"}),
    st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(1, 3)),
    st.just({"type": "integer"}),
    st.builds(lambda lo: {"type": "integer", "minimum": lo, "maximum": lo + 3}, st.integers(-2, 5)),
    st.just({"type": "number"}),
    st.just({"type": "boolean"}),
    st.builds(lambda vs: {"enum": vs}, st.lists(st.sampled_from(["a", "b", "ab", 1, 2, 1.5, True, None, "x y"]), min_size=5, max_size=8, unique=True)),
    st.builds(lambda closed: {"type": "object", "properties": {"k": {"type": "string"}, "n": {"type": "integer"}}, "required": ["k"],
                              **({"additionalProperties": False} if closed else {})}, st.booleans()),
    st.just({"type": "array", "items": {"type": "integer"}}),
    st.just({}),
)
ARRAYS = st.builds(lambda items, extra: {"type": "array", "items": items, "uniqueItems": True, **extra}, ITEMS,
                   st.fixed_dictionaries({}, optional={"minItems": st.integers(0, 2), "maxItems": st.integers(2, 5)}))
UNIQUE_SCHEMAS = st.one_of(
    ARRAYS,
    st.builds(lambda a, b: {"type": "object", "properties": {"tags": a, "other": b}, "required": ["tags"]}, ARRAYS,
              st.just({"type": "array", "items": {"type": "integer"}})),
    st.builds(lambda a: {"anyOf": [a, {"type": "string"}]}, ARRAYS),
    st.builds(lambda a: {"type": "array", "items": a, "maxItems": 3}, ARRAYS),  # unique arrays inside a plain one
)


def _repeats(value, rng: random.Random) -> list:
    """`value` with one item of a (nested) array repeated: as is, 1 -> 1.0, keys reordered."""
    out = []
    if isinstance(value, list) and value:
        item = rng.choice(value)
        twins = [item]
        if isinstance(item, int) and not isinstance(item, bool):
            twins.append(float(item))
        if isinstance(item, dict) and len(item) > 1:
            twins.append(dict(reversed(list(item.items()))))
        for twin in twins:
            copy = list(value)
            copy.insert(rng.randrange(len(copy) + 1), twin)
            out.append(copy)
        for i, sub in enumerate(value):
            out += [value[:i] + [r] + value[i + 1:] for r in _repeats(sub, rng)]
    elif isinstance(value, dict):
        for key, sub in value.items():
            out += [{**value, key: r} for r in _repeats(sub, rng)]
    return out


@pytest.fixture(scope="module")
def harness(smollm2_tokenizer, smollm2_vocab) -> Harness:
    return Harness(smollm2_tokenizer, smollm2_vocab, random_splits=2 if FULL else 1)


def test_generated_unique_arrays(harness):
    """Seeded: 40 schemas (150 with CONSTRAINED_SPEC_FULL=1), 2 drawn instances each plus their
    repeats; any disagreement with jsonschema fails."""
    examples = 150 if FULL else 40
    seen: Counter = Counter()

    @_over_generated_schemas(examples, UNIQUE_SCHEMAS)
    def run(schema, data):
        engines = {}
        for backend in ("default", "native"):
            try:
                engines[backend] = compile_json_schema(schema, harness.vocab, backend=backend)
            except GrammarError:
                seen[f"refused {backend}"] += 1
        if not engines:
            return
        seen["compiled"] += 1
        seen["wrapped"] += any(isinstance(e, UniqueItemsGrammar) for e in engines.values())
        oracle, rng = harness.oracle(schema), random.Random(json.dumps(schema, sort_keys=True))
        problems = []
        for value in _valid_instances(schema, data, 2):
            valid = oracle.is_valid(value)
            seen["valid draws"] += valid
            texts = [json.dumps(value, separators=(",", ":"), ensure_ascii=False)]
            texts += [json.dumps(v, separators=(",", ":"), ensure_ascii=False) for v in _repeats(value, rng)[:4]]
            seen["repeats"] += len(texts) - 1
            for text in texts:
                problems += harness.check(oracle, engines, text, rng)
        assert not problems, _report(schema, problems)

    run()
    print(f"unique arrays: {dict(seen)}")
    assert seen["compiled"] >= examples * 3 // 4 and seen["wrapped"] >= examples // 2 and seen["repeats"] >= examples, seen


STEERED = [
    {"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": True, "maxItems": 6},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 3}, "uniqueItems": True},
    {"type": "array", "items": {"enum": ["a", "b", "c", "d", "e"]}, "uniqueItems": True},
    {"type": "array", "items": {"type": "string", "enum": ["a", "b", "ab"]}, "uniqueItems": True},  # all three used: only `]`
    {"type": "array", "items": {"type": "object", "properties": {"k": {"enum": ["x", "y"]}}, "required": ["k"],
                                "additionalProperties": False}, "uniqueItems": True},
    {"type": "object", "properties": {"t": {"type": "array", "items": {"type": "number"}, "uniqueItems": True, "maxItems": 5}}, "required": ["t"],
     "additionalProperties": False},
    {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}, "uniqueItems": True, "maxItems": 5},
]


@pytest.mark.parametrize("backend", ["default", "native"])
@pytest.mark.parametrize("schema", STEERED, ids=range(len(STEERED)))
def test_sampled_outputs_are_unique(smollm2_vocab, schema, backend):
    """40 seeded walks per schema through the packed masks on the real vocabulary, each step
    preferring a token that continues an earlier item's text (to provoke repeats), then one that
    ends something, else a short one: no empty mask (GrammarError) and every finished output
    valid for jsonschema."""
    vocab = smollm2_vocab
    compiled = compile_json_schema(schema, vocab, backend=backend)
    # our compiler enumerates the unique arrays of up to 4 scalar values itself
    assert isinstance(compiled, UniqueItemsGrammar) or (backend == "native" and len(schema.get("items", {}).get("enum", [])) <= 4)
    rng, mask, finished = random.Random(7), new_bitmask(1, vocab.size), 0
    for _ in range(40):
        matcher, text = compiled.matcher(), b""
        for _ in range(80):
            matcher.fill_bitmask(mask)
            allowed = unpack_bitmask(mask, vocab.size)[0].nonzero().flatten().tolist()
            assert allowed, f"empty mask after {text!r}"
            if vocab.eos_token_id in allowed and rng.random() < 0.3:
                token = vocab.eos_token_id
            else:
                tail = text[max(text.rfind(b"["), text.rfind(b","), text.rfind(b"{")) + 1:]
                earlier = [p for p in text.split(b",") if p.startswith(tail) and len(p) > len(tail)]
                steer = [t for t in allowed if earlier and vocab.token_bytes[t] and earlier[0][len(tail):].startswith(vocab.token_bytes[t])]
                short = [t for t in allowed if vocab.token_bytes[t] and len(vocab.token_bytes[t]) <= 2]
                closing = [t for t in short if vocab.token_bytes[t][-1:] in (b",", b"]", b"}")]
                pick = rng.random()
                token = rng.choice(steer if steer and pick < 0.6 else closing if closing and pick < 0.8 else short or allowed)
            matcher.accept_token(token)
            if token == vocab.eos_token_id:
                break
            text += vocab.token_bytes[token]
        else:
            continue
        finished += 1
        jsonschema.validate(json.loads(text), schema)
    assert finished >= 10, finished


def test_equality_as_validators_define_it():
    pairs = [(1, 1.0), (0, False), (1, True), ("1", 1), ([1], [1.0]), ({"a": 1, "b": [2]}, {"b": [2.0], "a": 1}),
             (None, False), ({"a": None}, {}), ([1, 2], [2, 1]), ("a", "a"), (0.5, 0.5), ({"a": True}, {"a": 1})]
    for a, b in pairs:
        repeated = not jsonschema.Draft202012Validator({"uniqueItems": True}).is_valid([a, b])
        assert (item_key(a) == item_key(b)) == repeated, (a, b)


def test_rollback_and_fork_restore_the_masks():
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    compiled = compile_json_schema(schema, BYTES)
    text = b'["ab","a","a'
    masks = []
    matcher, mask = compiled.matcher(), new_bitmask(1, 257)
    for byte in text:
        matcher.fill_bitmask(mask)
        masks.append(mask.clone())
        matcher.accept_token(byte)
    fork = matcher.fork()
    with pytest.raises(GrammarError, match="repeat"):
        fork.accept_token(ord('"'))  # "a" again, complete: masked where it closes
    fork.accept_token(ord("c"))  # the failed accept left the state as it was
    fork.accept_token(ord('"'))
    probe = matcher.fork()
    probe.accept_token(ord("b"))  # "ab" may still become "abc"
    with pytest.raises(GrammarError, match="repeat"):
        probe.accept_token(ord('"'))
    for back in range(len(text), 0, -1):
        matcher.rollback(1)
        matcher.fill_bitmask(mask)
        assert mask.equal(masks[back - 1]), back
    assert matcher.validate_tokens(list(b'["a","a"]')) == 7  # the second "a" cannot close


def test_exhausted_small_domain_inside_an_object_item_is_refused_loudly():
    """The documented dead end: items narrowed by an inner enum whose values are all used. The
    `,` that would start a third item is masked (the domain bound: 2 objects), so no sampler gets
    there; a caller forcing its way in gets a GrammarError, never a repeated item."""
    schema = {"type": "array", "items": {"type": "object", "properties": {"k": {"enum": ["x", "y"]}}, "required": ["k"],
                                         "additionalProperties": False}, "uniqueItems": True}
    matcher = compile_json_schema(schema, BYTES).matcher()
    for byte in b'[{"k":"x"},{"k":"y"}':
        matcher.accept_token(byte)
    assert matcher.validate_tokens([ord(",")]) == 0 and matcher.validate_tokens([ord("]"), 256]) == 2


def test_a_first_item_is_not_closed_where_only_a_repeat_can_follow(smollm2_vocab):
    """{"items": {"enum": ["b"]}, "uniqueItems": true, "maxItems": 3}: after `["b` the token `","`
    ends the first item and opens a second, which can only be "b" again. validate_tokens refused
    it, the mask offered it (a dead end; found by the generated differential test): the mask only
    looked at arrays that already held a complete item."""
    schema = {"type": "array", "items": {"enum": ["b"]}, "uniqueItems": True, "minItems": 1, "maxItems": 3}
    vocab = smollm2_vocab
    compiled = compile_json_schema(schema, vocab)
    matcher = compiled.matcher()
    for piece in (b'["', b"b"):
        matcher.accept_token(vocab.token_bytes.index(piece))
    mask = new_bitmask(1, vocab.size)
    matcher.fill_bitmask(mask)
    allowed = set(unpack_bitmask(mask, vocab.size)[0].nonzero().flatten().tolist())
    for token_id in allowed:  # the mask and validate_tokens agree on every allowed token
        assert matcher.validate_tokens([token_id]) == 1, vocab.token_bytes[token_id]
    assert vocab.token_bytes.index(b'","') not in allowed and vocab.token_bytes.index(b'"]') in allowed


@pytest.mark.parametrize("backend", ["default", "native"])
def test_an_integer_item_that_cannot_grow_is_not_a_dead_end(backend):
    """Unique integers: after `[0,` (or `[1,0,`, `[0,-`) the token `0` writes an item equal to an
    earlier one that no digit can extend (JSON has no `01`, `-0` is 0): the mask offered it and
    the next mask was empty (found with CONSTRAINED_SPEC_FULL=1; integers were taken for items
    every prefix of which goes on). Byte by byte, every state reached keeps an allowed token."""
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 3}
    tiny = Vocabulary([b"[", b"]", b",", b"0", b"1", b"-", None], 6)
    compiled = compile_json_schema(schema, tiny, backend=backend)
    mask = new_bitmask(1, tiny.size)

    def allowed(matcher) -> list[int]:
        matcher.fill_bitmask(mask)
        return unpack_bitmask(mask, tiny.size)[0].nonzero().flatten().tolist()

    frontier, states = [compiled.matcher()], 0
    for _ in range(8):  # every text of up to 8 bytes the masks allow
        grown = []
        for matcher in frontier:
            ids = allowed(matcher)
            assert ids, "a dead end: no token allowed, not even EOS"
            for token_id in (i for i in ids if i != tiny.eos_token_id):
                child = matcher.fork()
                child.accept_token(token_id)
                grown.append(child)
        states += len(grown)
        frontier = grown
    assert states > 1000
    matcher = compiled.matcher()
    for piece in (b"[", b"0", b","):
        matcher.accept_token(tiny.token_bytes.index(piece))
    assert tiny.token_bytes.index(b"0") not in allowed(matcher) and tiny.token_bytes.index(b"1") in allowed(matcher)


# Items equal as values though written in another key order (two branches order the keys
# differently), holding `}` and `]` inside strings; nested arrays; a first object item of a
# finite domain. The masks check a narrowed set of candidate tokens (unique_items._candidates):
# these exhaustive walks check that narrowing against checking every allowed token. (The
# key-order items reach the documented dead end: a repeat that differs only in key order is
# seen when it completes, not looked ahead for; both masks must then refuse alike.)
_PAIR = {"a": {"const": 1}, "b": {"enum": ["x}", "y]"]}, "c": {"const": "p"}}
NARROWED = [
    {"type": "array", "uniqueItems": True, "maxItems": 3, "items": {"anyOf": [
        {"type": "object", "properties": _PAIR, "required": ["a", "b"], "additionalProperties": False},
        {"type": "object", "properties": {k: _PAIR[k] for k in "bac"}, "required": ["a", "b"], "additionalProperties": False}]}},
    {"type": "array", "uniqueItems": True, "maxItems": 4, "items": {"type": "array", "items": {"enum": [1, 2]}, "maxItems": 2}},
    {"type": "array", "uniqueItems": True, "maxItems": 2, "items": {
        "type": "object", "properties": {"k": {"const": "v}"}, "n": {"enum": ["]", "q"]}}, "required": ["k"],
        "additionalProperties": False}},
    {"type": "array", "uniqueItems": True, "items": {"type": "object", "properties": {"k": {"const": "v"}}, "required": ["k"],
                                                     "additionalProperties": False}},
]
# bytes, and tokens that end an item and go on (`"},{` ends a first item and opens a second)
MULTI = Vocabulary([bytes([b]) for b in range(256)] + [b'"}', b"},", b'"},{', b"}]", b'"]', b'"},', None], 262)


@pytest.mark.parametrize("schema, dead_ends, vocab", zip(NARROWED, (True, False, False, False), (BYTES, BYTES, MULTI, MULTI)),
                         ids=["key-order", "nested-arrays", "first-object", "one-object"])
def test_narrowed_candidates_mask_as_checking_every_allowed_token(schema, dead_ends, vocab, monkeypatch):
    """Differential, exhaustive (every output the masks allow; bytes, and a few multi-byte tokens for object items): the mask from
    the narrowed candidates equals the mask from checking every token the inner grammar allows,
    no state is a dead end (but the documented one), and every finished text is valid per
    jsonschema."""
    import numpy as np

    from constrained_spec.bitmask import TokenSet
    from constrained_spec.grammar import unique_items

    narrowed = compile_json_schema(schema, vocab)
    assert isinstance(narrowed, UniqueItemsGrammar)
    every = UniqueItemsGrammar(narrowed.inner, vocab, schema)  # not compile_json_schema: that one is cached
    original = unique_items.UniqueItemsMatcher._candidates
    every_token = TokenSet(np.arange(vocab.size, dtype=np.int64))

    def candidates(self, state, words):
        return set(every_token.allowed_in(words)) if self._grammar is every else original(self, state, words)

    monkeypatch.setattr(unique_items.UniqueItemsMatcher, "_candidates", candidates)
    matchers = [narrowed.matcher(), every.matcher()]
    masks = [new_bitmask(1, vocab.size) for _ in matchers]
    finished, states, refused = 0, 0, 0

    def visit(text: bytes) -> None:
        nonlocal finished, states, refused
        states += 1
        outcomes = []
        for matcher, mask in zip(matchers, masks):
            try:
                matcher.fill_bitmask(mask)
                outcomes.append(None)
            except GrammarError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1], f"one mask refused after {text!r}: {outcomes}"
        if outcomes[0] is not None:
            assert dead_ends, f"dead end after {text!r}"
            refused += 1
            return
        assert (masks[0] == masks[1]).all(), f"masks differ after {text!r}"
        allowed = unpack_bitmask(masks[0], vocab.size)[0].nonzero().flatten().tolist()
        assert allowed, f"dead end after {text!r}"
        ended = _step_in_lockstep(matchers, vocab, text, allowed, visit, schema)  # (visit adds its own as it goes)
        finished += ended

    visit(b"")
    assert finished >= 2 and states < 100_000 and (refused > 0) == dead_ends


def _step_in_lockstep(matchers, vocab, text: bytes, allowed, visit, schema) -> int:
    """Each allowed token after `text`, taken by every matcher, `visit`ed, rolled back; EOS ends a
    text that must validate. Returns the number of texts EOS finished here."""
    finished = 0
    for token in allowed:
        if token == vocab.eos_token_id:
            finished += 1
            jsonschema.validate(json.loads(text), schema)
            continue
        for matcher in matchers:
            matcher.accept_token(token)
        visit(text + vocab.token_bytes[token])
        for matcher in matchers:
            matcher.rollback(1)
    return finished


# tokens that close a string item and end it (`a",`), close it only (`a"`), close it and the
# array (`b"]`), escapes, and single bytes
STRINGY = Vocabulary([b"[", b"]", b'"', b",", b"a", b"b", b"\\", b" ", b'a",', b'b"]', b'",', b'"]', b'a"', b'" ,', b'\\"', b'"a', None], 16)


OPEN_ENDED = [  # unique arrays of free strings (or numbers), alone and inside plain and unique arrays
    {"type": "array", "uniqueItems": True, "items": {"type": "string"}},
    {"type": "array", "uniqueItems": True, "items": {"anyOf": [{"type": "string"}, {"type": "number"}]}},
    {"type": "array", "maxItems": 2, "items": {"type": "array", "uniqueItems": True, "items": {"type": "string"}}},
    {"type": "array", "uniqueItems": True, "items": {"type": "array", "uniqueItems": True, "items": {"type": "string"}}},
]
OPEN_ENDED_IDS = ["strings", "strings-or-numbers", "inside-a-plain-array", "inside-a-unique-array"]


@pytest.mark.parametrize("schema", OPEN_ENDED, ids=OPEN_ENDED_IDS)
def test_string_item_shortcut_masks_as_the_general_check(schema, monkeypatch):
    """Differential, exhaustive to 7 bytes: inside a string item of an open-ended unique array,
    closing tokens are judged by comparing text (`_closes_a_repeat`) instead of `_blocked`; the
    masks must be the ones `_blocked` alone gives, in every state, and the shortcut must run."""
    from constrained_spec.grammar import unique_items

    fast = compile_json_schema(schema, STRINGY)
    assert isinstance(fast, UniqueItemsGrammar)
    general = UniqueItemsGrammar(fast.inner, STRINGY, schema)
    shortcut = unique_items.UniqueItemsMatcher._string_item_closing
    used = []

    def closing(self, state):
        found = None if self._grammar is general else shortcut(self, state)
        used.append(found is not None)
        return found

    monkeypatch.setattr(unique_items.UniqueItemsMatcher, "_string_item_closing", closing)
    states = _same_masks_to_depth([fast.matcher(), general.matcher()], STRINGY, schema)
    assert states > 500 and sum(used) > 50, (states, sum(used))


def _same_masks_to_depth(matchers, vocab, schema, depth: int = 7) -> int:
    """Every text the masks allow, up to `depth` bytes, taken by both `matchers` in lockstep:
    their masks must be equal in every state. Returns the states visited."""
    masks = [new_bitmask(1, vocab.size) for _ in matchers]
    states = 0

    def visit(text: bytes) -> None:
        nonlocal states
        states += 1
        for matcher, mask in zip(matchers, masks):
            matcher.fill_bitmask(mask)
        assert (masks[0] == masks[1]).all(), f"masks differ after {text!r}"
        if len(text) < depth:
            _step_in_lockstep(matchers, vocab, text, unpack_bitmask(masks[0], vocab.size)[0].nonzero().flatten().tolist(), visit, schema)

    visit(b"")
    return states


# tokens that write a whole string item from its start (`"a"`, `""`), end an item and open the
# next one (`","`, `", "a`) or write it whole too (`","a"`, `["a","a"` from before the array),
# end one and the array, numbers and their ends, and single bytes
OPENING = Vocabulary([b"[", b"]", b'"', b",", b"a", b"b", b"\\", b" ", b"1", b'"a"', b'""', b'","', b'", "a', b'a","b', b'"a",',
                      b'"]', b'a"]', b"1,", b"1]", b' "a"', b'","a"', b'["a","a"', None], 22)


@pytest.mark.parametrize("schema", OPEN_ENDED, ids=OPEN_ENDED_IDS)
def test_item_start_shortcuts_mask_as_checking_every_allowed_token(schema, monkeypatch):
    """Differential, exhaustive to 7 bytes: the narrowed candidates before an item of free
    strings or numbers (tokens writing a whole one) and the text comparisons at an item's start
    and for tokens opening the next string item must give the masks of `_blocked` run on every
    token the inner grammar allows, in every state; both shortcuts must run."""
    import numpy as np

    from constrained_spec.bitmask import TokenSet
    from constrained_spec.grammar import unique_items

    fast = compile_json_schema(schema, OPENING)
    assert isinstance(fast, UniqueItemsGrammar)
    general = UniqueItemsGrammar(fast.inner, OPENING, schema)
    shortcut, original = unique_items.UniqueItemsMatcher._string_item_closing, unique_items.UniqueItemsMatcher._candidates
    every_token = TokenSet(np.arange(OPENING.size, dtype=np.int64))
    starts = []

    def closing(self, state):
        if self._grammar is general:
            return None
        found = shortcut(self, state)
        starts.append(found is not None and found[2])
        return found

    def candidates(self, state, words):
        return set(every_token.allowed_in(words)) if self._grammar is general else original(self, state, words)

    monkeypatch.setattr(unique_items.UniqueItemsMatcher, "_string_item_closing", closing)
    monkeypatch.setattr(unique_items.UniqueItemsMatcher, "_candidates", candidates)
    states = _same_masks_to_depth([fast.matcher(), general.matcher()], OPENING, schema)
    assert states > 500 and sum(starts) > 20, (states, sum(starts))


def test_a_token_writing_two_equal_items_is_masked_before_the_array_opens():
    """`["a","a"` opens a unique array and repeats its first item in one token: masked (and
    refused) where no unique array is open yet, as inside one (`","a"` after `["a`)."""
    schema = {"type": "object", "properties": {"t": {"type": "array", "uniqueItems": True, "items": {"type": "string"}}}}
    vocab = Vocabulary([bytes([b]) for b in range(256)] + [b'["a","a"', b'","a"', None], 258)
    compiled = compile_json_schema(schema, vocab)
    assert isinstance(compiled, UniqueItemsGrammar)
    for text, token in ((b'{"t":', 256), (b'{"t":["a', 257)):
        matcher, mask = compiled.matcher(), new_bitmask(1, vocab.size)
        for byte in text:
            matcher.accept_token(byte)
        matcher.fill_bitmask(mask)
        allowed = unpack_bitmask(mask, vocab.size)[0]
        assert allowed[ord("[") if token == 256 else ord('"')] and not allowed[token]
        with pytest.raises(GrammarError):
            matcher.accept_token(token)


def test_a_token_closing_an_item_array_that_repeats_an_outer_item_is_masked():
    """`"],` and `"]]` close a string item, its array and (with the `,` or `]`) an item of a unique
    array around it: after `[["a"],["a` both would repeat `["a"]`, so both are masked; where the
    array around is a plain one they are not. (The text shortcut for tokens closing the array
    runs only where no array around is unique; there it never holds an item, so this is
    _blocked's case.)"""
    vocab = Vocabulary([bytes([b]) for b in range(256)] + [b'"],', b'"]]', None], 258)
    inner = {"type": "array", "uniqueItems": True, "items": {"type": "string"}}
    for outer_unique in (True, False):
        compiled = compile_json_schema({"type": "array", "uniqueItems": outer_unique, "items": inner}, vocab)
        matcher, mask = compiled.matcher(), new_bitmask(1, vocab.size)
        for byte in b'[["a"],["a':
            matcher.accept_token(byte)
        matcher.fill_bitmask(mask)
        allowed = unpack_bitmask(mask, vocab.size)[0]
        assert allowed[ord('"')] and bool(allowed[256]) is not outer_unique and bool(allowed[257]) is not outer_unique
