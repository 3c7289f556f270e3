"""No dead end where an object admits finitely many keys (grammar/finite_keys.py).

The unique-keys wrapper removes the tokens that close a used key; where an object's keys are a
finite set (patterned keys in a closed object, `propertyNames` with an enum, and the closed
objects json_key_order hands llguidance with their keys as patterns) a key prefix can lead only
to used keys (`{"ab":1,"ab` with keys ab, b), and a `,` can come when every key is used. CI's
pydantic sampling at T = 1 hit the first. Checked: the masks at such prefixes (one byte a token),
and seeded random walks (N = 60 a schema, uniform over the allowed tokens, one token in two the
shortest) on the byte vocabulary and on SmolLM2's: never a state without an allowed token, and
every finished text valid per jsonschema."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
import torch
from pydantic import BaseModel, Field

from constrained_spec.bitmask import new_bitmask, unpack_bitmask
from constrained_spec.grammar import compile_json_schema
from constrained_spec.grammar.vocabulary import Vocabulary

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], 256)
PATTERNED = {"type": "object", "patternProperties": {"^(?:ab|b|abc)$": {"type": "integer"}}, "additionalProperties": False}
NAMED = {"type": "object", "propertyNames": {"enum": ["x", "xy"]}, "additionalProperties": {"type": "boolean"}}


class Address(BaseModel):
    street: str = Field(max_length=6)
    city: str = Field(max_length=6)


class Person(BaseModel):  # the model CI's sampling dead-ended on (closed, every key required)
    name: str = Field(max_length=6)
    age: int = Field(ge=0, le=120)
    address: Address


class Tagged(BaseModel):  # closed, optional keys after the required one
    id: int
    tag: str = Field(default="", max_length=4)
    tags: list[int] = Field(default=[], max_length=2)
    note: str | None = None


def _allowed(compiled, vocab, text: bytes) -> set[bytes]:
    matcher = compiled.matcher()
    for byte in text:
        matcher.accept_token(byte)
    mask = new_bitmask(1, vocab.size)
    matcher.fill_bitmask(mask)
    return {bytes([i]) for i in unpack_bitmask(mask, vocab.size)[0].nonzero().flatten().tolist() if i < 256}


def test_a_prefix_of_used_keys_only_is_masked():
    compiled = compile_json_schema(PATTERNED, BYTES)
    assert _allowed(compiled, BYTES, b'{"ab":1,"') == {b"a", b"b"}  # abc and b are left
    assert _allowed(compiled, BYTES, b'{"ab":1,"abc":2,"') == {b"b"}  # `a` leads to used keys only
    assert _allowed(compiled, BYTES, b'{"b":1,"a') == {b"b"}
    assert b"," not in _allowed(compiled, BYTES, b'{"ab":1,"abc":2,"b":3')  # every key used: no `,`
    assert b"," in _allowed(compiled, BYTES, b'{"ab":1,"abc":2')
    named = compile_json_schema(NAMED, BYTES)
    assert _allowed(named, BYTES, b'{"xy":true,"x') == {b'"'} and b"," not in _allowed(named, BYTES, b'{"xy":true,"x":false')


def _walk(compiled, vocab, decode, rng: random.Random, limit: int) -> tuple[list[int], bool]:
    """A random walk: tokens and whether it finished (EOS accepted); fails on a dead end."""
    matcher, tokens = compiled.matcher(), []
    mask = new_bitmask(1, vocab.size)
    while len(tokens) < limit:
        matcher.fill_bitmask(mask)
        allowed = unpack_bitmask(mask, vocab.size)[0].nonzero().flatten().tolist()
        assert allowed, f"dead end after {decode(tokens)!r}"
        if rng.random() < 0.5:
            token = rng.choice(allowed)
        else:  # short tokens reach the ends of keys, where the dead ends were
            token = min(allowed, key=lambda t: (len(vocab.token_bytes[t] or b"x"), rng.random()))
        if token == vocab.eos_token_id:
            return tokens, True
        matcher.accept_token(token)
        tokens.append(token)
    return tokens, False


@pytest.mark.parametrize("schema", [PATTERNED, NAMED], ids=["patterned", "property-names"])
def test_random_walks_on_bytes_never_dead_end(schema):
    compiled = compile_json_schema(schema, BYTES)
    rng = random.Random(7)
    decode = lambda tokens: bytes(tokens)  # noqa: E731
    finished = 0
    for _ in range(60):
        tokens, done = _walk(compiled, BYTES, decode, rng, 200)
        if done:
            finished += 1
            jsonschema.validate(json.loads(decode(tokens)), schema)
    assert finished >= 30


@pytest.mark.parametrize("model", [Person, Tagged])
def test_random_walks_on_the_model_vocabulary_never_dead_end(model, smollm2_tokenizer, smollm2_vocab):
    schema = model.model_json_schema()
    compiled = compile_json_schema(schema, smollm2_vocab, closed_objects=True)
    rng = random.Random(11)
    decode = lambda tokens: smollm2_tokenizer.decode(tokens)  # noqa: E731
    finished = 0
    for _ in range(60):
        tokens, done = _walk(compiled, smollm2_vocab, decode, rng, 150)
        if done:
            finished += 1
            model.model_validate_json(decode(tokens))
    assert finished >= 30


# ---- which keys can dead-end, read from the schema (finite_key_sets) ------------------------------

MIXED = {"type": "object", "additionalProperties": False,  # a listed pattern next to one that grows
         "patternProperties": {"^(?:ab|b)$": {"type": "integer"}, "^a[0-9]+$": {"type": "integer"}}}


@pytest.mark.parametrize("pattern, expected", [
    ("^[a-zA-Z_][a-zA-Z0-9_]*$", (False, None)),  # ends in an unbounded repeat: every key grows
    ("^_[a-zA-Z]([^.]+)$", (False, None)),
    ("^x-", (False, None)),  # unanchored
    ("^(?:ab|b|abc)$", (True, {"ab", "b", "abc"})),  # json_key_order's exact list
    ("^(foo|ba[rz])$", (True, {"foo", "bar", "baz"})),  # literals, a class, an alternation
    ("^v[0-9]{1,2}$", (True, {f"v{i}" for i in range(10)} | {f"v{i:02d}" for i in range(100)})),
    ("^x(a|b+)$", (True, None)),  # grows inside an alternation only: `xa` can run out, unlisted
    ("^\\d{3}$", (True, None)),  # a category: not listed
    ("^(?i)ab$", (True, None)),  # flags: not listed
])
def test_which_patterns_can_run_out(pattern, expected):
    from constrained_spec.grammar.json_key_sets import pattern_keys

    finite, names = pattern_keys(pattern)
    assert (finite, None if names is None else set(names)) == expected


def test_finite_key_sets_lists_the_keys_that_can_run_out():
    from constrained_spec.grammar.json_key_sets import finite_key_sets

    assert finite_key_sets(MIXED).names == {"ab", "b"}
    assert finite_key_sets({"properties": {"p": PATTERNED, "n": NAMED}}).names == {"ab", "b", "abc", "x", "xy"}
    grows = {"type": "object", "patternProperties": {"^[a-z]+$": {}}, "additionalProperties": False}
    assert not finite_key_sets(grows).prefixes  # was searched on every key before
    unlisted = {"type": "object", "patternProperties": {"^[a-z]{2}$": {}}, "additionalProperties": False}
    assert finite_key_sets(unlisted).prefixes and finite_key_sets(unlisted).names is None


def test_keys_of_a_growing_pattern_are_not_dead_ends():
    compiled = compile_json_schema(MIXED, BYTES)
    assert compiled.finite_names == {"ab", "b"}
    assert _allowed(compiled, BYTES, b'{"ab":1,"b":2,"a') == {bytes([d]) for d in b"0123456789"}  # not `b`: ab is used
    assert _allowed(compiled, BYTES, b'{"ab":1,"a1":2,"') == {b"a", b"b"}  # a2, ... and b are left
    assert _allowed(compiled, BYTES, b'{"b":1,"a1":2,"a1') == {bytes([d]) for d in b"0123456789"}  # a10, ...


def _twins(compiled, vocab):
    """The compiled wrapper and the same wrapper searching every used key (finite_names=None)."""
    from constrained_spec.grammar.unique_keys import UniqueKeysGrammar

    while not isinstance(compiled, UniqueKeysGrammar) and hasattr(compiled, "inner"):  # under uniqueItems
        compiled = compiled.inner
    assert isinstance(compiled, UniqueKeysGrammar) and compiled.finite_names is not None
    every = UniqueKeysGrammar(compiled.inner, vocab, plain_key_escapes=compiled.plain_escapes, finite_keys=True,
                              finite_count=compiled.finite_count, finite_names=None)
    return compiled, every


def _same_masks_along(twins, vocab, ids: list[int]) -> int:
    """Walk `ids` through both wrappers; every mask must be equal. Returns the masks compared."""
    matchers = [grammar.matcher() for grammar in twins]
    masks = [new_bitmask(1, vocab.size) for _ in twins]
    for step, token in enumerate(ids + [None]):
        for matcher, mask in zip(matchers, masks):
            matcher.fill_bitmask(mask)
        assert (masks[0] == masks[1]).all(), f"masks differ after {step} tokens"
        if token is None or not (int(masks[0][0, token // 32]) >> (token % 32)) & 1:
            return step + 1
        for matcher in matchers:
            matcher.accept_token(token)
    return len(ids) + 1


@pytest.mark.parametrize("schema", [MIXED, PATTERNED, NAMED], ids=["mixed", "patterned", "property-names"])
def test_listed_names_mask_as_searching_every_key_on_random_walks(schema):
    """Differential: searching only the listed keys gives the same masks as searching every used
    key, along seeded random walks (N = 60, byte vocabulary)."""
    twins = _twins(compile_json_schema(schema, BYTES), BYTES)
    rng = random.Random(5)
    for _ in range(60):
        tokens, _ = _walk(twins[0], BYTES, bytes, rng, 120)
        _same_masks_along(twins, BYTES, tokens)


@pytest.mark.parametrize("name", ["schemastore-djlint.json", "schemastore-github-funding.json", "schemastore-aih-org-policy.json"])
def test_listed_names_mask_as_searching_every_key_on_corpus_instances(name, smollm2_tokenizer, smollm2_vocab):
    """Differential on real schemas (the benchmark corpus, SmolLM2's vocabulary): along every
    valid instance, the same masks with the listed keys as with every used key searched."""
    from pathlib import Path

    entry = json.loads((Path(__file__).parents[2] / "benchmarks" / "schema_corpus" / name).read_text())
    twins = _twins(compile_json_schema(entry["schema"], smollm2_vocab), smollm2_vocab)
    compared = 0
    for instance in entry["instances"]:
        if instance["valid"]:
            compared += _same_masks_along(twins, smollm2_vocab, smollm2_tokenizer.encode(instance["text"], add_special_tokens=False))
    assert compared > 50


def _shortcut_differential(compiled, vocab, walks: list[list[int]], monkeypatch) -> tuple[list[tuple[bool, bool]], int]:
    """Outside keys, the wrapper skips the dead-key search on a stack where it found no used key
    that can dead-end, or in a value string no token opening one (`finite_keys.finds_none`, kept
    per stack). Along each walk, the masks with the shortcut must equal those without it.
    Returns the shortcut's verdicts (in a value string, skipped) and the masks compared."""
    from constrained_spec.grammar import finite_keys, unique_keys

    taken = []

    def recorded(stack_memo, in_string):
        taken.append((bool(in_string), finite_keys.finds_none(stack_memo, in_string)))
        return taken[-1][1]

    def masks_along(shortcut) -> list[torch.Tensor]:
        monkeypatch.setattr(unique_keys, "finds_none", shortcut)
        masks = []
        for tokens in walks:
            matcher = compiled.matcher()
            for token in tokens:
                mask = new_bitmask(1, vocab.size)
                matcher.fill_bitmask(mask)
                masks.append(mask)
                matcher.accept_token(token)
        return masks

    with_shortcut, without = masks_along(recorded), masks_along(lambda stack_memo, in_string: False)
    monkeypatch.undo()
    assert len(with_shortcut) == len(without) and all((a == b).all() for a, b in zip(with_shortcut, without))
    return taken, len(without)


@pytest.mark.parametrize("name", ["schemastore-djlint.json", "schemastore-github-funding.json"])
def test_the_shortcut_outside_keys_masks_as_the_search(name, smollm2_tokenizer, smollm2_vocab, monkeypatch):
    """The shortcut differential along every valid instance of real schemas (SmolLM2's
    vocabulary): equal masks, and the shortcut taken in value strings."""
    from pathlib import Path

    entry = json.loads((Path(__file__).parents[2] / "benchmarks" / "schema_corpus" / name).read_text())
    compiled = compile_json_schema(entry["schema"], smollm2_vocab)
    walks = [smollm2_tokenizer.encode(i["text"], add_special_tokens=False) for i in entry["instances"] if i["valid"]]
    taken, _ = _shortcut_differential(compiled, smollm2_vocab, walks, monkeypatch)
    assert (True, True) in taken and sum(verdict for _, verdict in taken) > 20


@pytest.mark.parametrize("schema", [MIXED, PATTERNED, NAMED], ids=["mixed", "patterned", "property-names"])
def test_the_shortcut_outside_keys_masks_as_the_search_on_random_walks(schema, monkeypatch):
    """The shortcut differential along seeded random walks (N = 40 of up to 80 steps, byte
    vocabulary), where keys run out and the search finds dead ends: equal masks (a shortcut taken
    wherever the stack holds openings fails here)."""
    compiled = compile_json_schema(schema, BYTES)
    rng = random.Random(9)
    walks = [_walk(compiled, BYTES, bytes, rng, 80)[0] for _ in range(40)]
    _, compared = _shortcut_differential(compiled, BYTES, walks, monkeypatch)
    assert compared > 300


def test_pattern_reading_checks_itself(monkeypatch):
    """json_key_sets reads patterns with CPython's private regex parser: it checks that parser
    once on known patterns (true on the Pythons we support), and where the check fails every
    finite-looking pattern counts as finite and unlisted (the full search: never fewer checks)."""
    from constrained_spec.grammar import json_key_sets

    assert json_key_sets._parser_reads_as_expected()
    monkeypatch.setattr(json_key_sets, "_parser_reads_as_expected", lambda: False)
    json_key_sets.pattern_keys.cache_clear()
    try:
        assert json_key_sets.pattern_keys("^[a-z]+$") == (True, None)
        assert json_key_sets.pattern_keys("^(foo|bar)$") == (True, None)
        assert json_key_sets.pattern_keys("^(?:ab|b)$") == (True, frozenset({"ab", "b"}))  # exact lists need no parser
    finally:
        json_key_sets.pattern_keys.cache_clear()


def _mask_as_fresh(compiled, matcher, tokens: list[int], vocab) -> torch.Tensor:
    """The walking matcher's mask, checked equal to that of a fresh matcher after the same tokens."""
    mask, fresh_mask = new_bitmask(1, vocab.size), new_bitmask(1, vocab.size)
    matcher.fill_bitmask(mask)
    fresh = compiled.matcher()
    for token in tokens:
        fresh.accept_token(token)
    fresh.fill_bitmask(fresh_mask)
    assert torch.equal(mask, fresh_mask), f"the mask depends on the walk's history after {tokens}"
    return mask


def _history_free(compiled, vocab, rng: random.Random, steps: int) -> int:
    """A seeded random walk with rollbacks (1-4 tokens, one step in six, and wherever only EOS
    is left): every mask of the walking matcher (which keeps its verdicts while a key stays
    open) must equal the mask of a fresh matcher that only accepted the same tokens. Returns the
    masks compared."""
    matcher, tokens, compared, finished = compiled.matcher(), [], 0, False
    for _ in range(steps):
        if tokens and (finished or rng.random() < 1 / 6):
            back = min(len(tokens), rng.randint(1, 4))
            matcher.rollback(back)
            del tokens[-back:]
        mask = _mask_as_fresh(compiled, matcher, tokens, vocab)
        compared += 1
        allowed = unpack_bitmask(mask, vocab.size)[0].nonzero().flatten().tolist()
        choices = [t for t in allowed if t != vocab.eos_token_id]
        finished = not choices
        if finished:
            continue
        short = min(choices, key=lambda t: (len(vocab.token_bytes[t] or b"x"), rng.random()))
        token = short if rng.random() < 0.6 else rng.choice(choices)
        matcher.accept_token(token)
        tokens.append(token)
    return compared


@pytest.mark.parametrize("schema", [MIXED, PATTERNED, NAMED], ids=["mixed", "patterned", "property-names"])
def test_masks_do_not_depend_on_the_walk_history_on_bytes(schema):
    """The wrapper keeps dead-key verdicts while one key stays open (unique_keys' key memo):
    differential against fresh matchers along seeded random walks with rollbacks (N = 20
    walks of up to 60 steps, byte vocabulary)."""
    compiled = compile_json_schema(schema, BYTES)
    rng = random.Random(3)
    assert sum(_history_free(compiled, BYTES, rng, 60) for _ in range(20)) > 300


def test_masks_do_not_depend_on_the_walk_history_on_a_corpus_schema(smollm2_vocab):
    """The same differential on a real schema of many closed keys (djlint, SmolLM2's vocabulary;
    N = 6 walks of up to 50 steps)."""
    from pathlib import Path

    entry = json.loads((Path(__file__).parents[2] / "benchmarks" / "schema_corpus" / "schemastore-djlint.json").read_text())
    compiled = compile_json_schema(entry["schema"], smollm2_vocab)
    rng = random.Random(4)
    assert sum(_history_free(compiled, smollm2_vocab, rng, 50) for _ in range(6)) > 150


def test_verdicts_kept_while_a_key_is_open_follow_that_key():
    """Scripted walks the random ones rarely take, each mask against a fresh matcher's: a key's
    kept verdicts must not reach the next key of the object (`{"ab":1,"abc":2,"` after a
    verdict made with abc unused), nor another spelling of the same open key after a rollback
    (a token that closes the key and opens the next one, `":1,"a`, is dead after `abc` and
    alive after `b`)."""
    vocab = Vocabulary([bytes([b]) for b in range(256)] + [b'":1,"a', None], 257)
    compiled = compile_json_schema(PATTERNED, vocab)
    closer = 256

    def script(steps: list) -> None:
        matcher, tokens = compiled.matcher(), []
        for step in steps:
            if isinstance(step, int):  # roll back this many tokens
                matcher.rollback(step)
                del tokens[-step:]
            else:
                for token in step:
                    matcher.accept_token(token)
                    tokens.append(token)
            _mask_as_fresh(compiled, matcher, tokens, vocab)

    text = lambda data: list(data)  # noqa: E731
    script([text(b'{"ab":1,"'), text(b"a"), text(b"b"), text(b"c"), text(b'":2,"'), text(b"a")])
    script([text(b'{"ab":1,"'), text(b"a"), text(b"b"), text(b"c"), 3, text(b"b")])
    fresh = compiled.matcher()
    for token in text(b'{"ab":1,"abc'):
        fresh.accept_token(token)
    assert not fresh.validate_tokens([closer])  # the closer is dead after abc (every a-key used) ...
    fresh.rollback(3)
    fresh.accept_token(ord("b"))
    assert fresh.validate_tokens([closer]) == 1  # ... and alive after b (abc is left)


OPEN_BESIDE = {"type": "object", "additionalProperties": False,  # a closed world with an open object inside
               "patternProperties": {"^(?:ab|b|abc)$": {"type": "integer"}},
               "properties": {"obj": {"type": "object", "additionalProperties": {"type": "integer"}}}}
EVERY_BESIDE = {"type": "object", "additionalProperties": False,  # the open object's keys from a pattern matching all
                "patternProperties": {"^(?:ab|b|abc)$": {"type": "integer"}},
                "properties": {"obj": {"type": "object", "patternProperties": {".*": {"type": "integer"}}, "additionalProperties": False}}}
PATTERN_BESIDE = {"type": "object", "additionalProperties": False,  # the open object's keys: any, some typed by a pattern
                  "patternProperties": {"^(?:ab|b|abc)$": {"type": "integer"}},
                  "properties": {"obj": {"type": "object", "patternProperties": {"[a-c]+": {"type": "integer"}}}}}


@pytest.mark.parametrize("schema", [OPEN_BESIDE, EVERY_BESIDE, PATTERN_BESIDE], ids=["additional", "every-key-pattern", "open-pattern"])
def test_open_key_lives_where_its_object_takes_any_key(schema, probe_verdicts):
    """Inside the open object a used finite key's prefix lives (any key may follow it: the
    grammar takes a key off every known one there, so the live keys say "any"); in the closed
    one beside it the same prefix dies once its keys are used. Both as the search says."""
    compiled, searching = _without_known(compile_json_schema(schema, BYTES))
    for grammar in (compiled, searching):
        assert b"a" in _allowed(grammar, BYTES, b'{"obj":{"ab":1,"abc":2,"')
        assert b"a" not in _allowed(grammar, BYTES, b'{"ab":1,"abc":2,"')  # only b is left
        assert b"b" in _allowed(grammar, BYTES, b'{"ab":1,"abc":2,"')
    assert True in probe_verdicts and False in probe_verdicts


def test_known_keys_are_every_key_a_closed_world_spells_out():
    from constrained_spec.grammar.json_key_sets import known_keys

    assert known_keys(OPEN_BESIDE) == {"ab", "b", "abc", "obj"}
    assert known_keys(NAMED) == {"x", "xy"}
    assert known_keys({"type": "object", "required": ["id"], "dependentRequired": {"a": ["b"]}}) == {"id", "a", "b"}
    assert known_keys(MIXED) is None  # ^a[0-9]+$ grows: keys not listed
    assert known_keys({"propertyNames": {"pattern": "^[a-z]+$"}}) is None
    assert known_keys({"properties": {'say "hi"': {}}}) is None  # a quote: kept off the probes
    # a pattern every string matches takes any key, as additionalProperties does: still closed
    assert known_keys(EVERY_BESIDE) == {"ab", "b", "abc", "obj"}
    closed = {"patternProperties": {"^.+$": {}}, "additionalProperties": False}
    assert known_keys(closed) is None  # not every string (nor "\n")
    # an open object takes any key whatever its patterns say (traefik's `names` maps), unless a
    # pattern's value schema may be unsatisfiable (then a key it matches cannot be written)
    assert known_keys({"patternProperties": {"^.+$": {}}}) == set()
    assert known_keys({"properties": {"a": {}}, "patternProperties": {"[a-z0-9-_]+": {"type": "string"}}}) == {"a"}
    assert known_keys({"patternProperties": {"^x": {"not": {}}}}) is None
    assert known_keys({"patternProperties": {"^x": False}}) is None
    assert known_keys({"patternProperties": {"^x": {}}, "unevaluatedProperties": False}) is None


def _without_known(compiled):
    """The compiled wrapper and the same wrapper deciding every verdict by the search (known=None)."""
    from constrained_spec.grammar.unique_keys import UniqueKeysGrammar

    while not isinstance(compiled, UniqueKeysGrammar) and hasattr(compiled, "inner"):  # under uniqueItems
        compiled = compiled.inner
    assert isinstance(compiled, UniqueKeysGrammar) and compiled.known is not None
    searching = UniqueKeysGrammar(compiled.inner, compiled.vocab, plain_key_escapes=compiled.plain_escapes, finite_keys=True,
                                  finite_count=compiled.finite_count, finite_names=compiled.finite_names)
    return compiled, searching


@pytest.fixture
def probe_verdicts(monkeypatch):
    """The verdicts (alive: True) the closed world's probes gave, per key prefix asked
    (_known_alive) or per token from the open key's live keys (_dead_by_live): so a
    differential cannot pass unexercised."""
    from constrained_spec.grammar import finite_keys

    given = []
    probe, by_live = finite_keys._known_alive, finite_keys._dead_by_live

    def probed(*args):
        given.append(probe(*args))
        return given[-1]

    def judged(live, typed, tokens, token_bytes):
        dead = by_live(live, typed, tokens, token_bytes)
        given.extend(token not in dead for token in tokens)
        return dead

    monkeypatch.setattr(finite_keys, "_known_alive", probed)
    monkeypatch.setattr(finite_keys, "_dead_by_live", judged)
    return given


@pytest.mark.parametrize("schema", [PATTERNED, NAMED, OPEN_BESIDE, EVERY_BESIDE, PATTERN_BESIDE],
                         ids=["patterned", "property-names", "open-beside", "every-key", "open-pattern"])
def test_closed_world_probes_mask_as_the_search_on_random_walks(schema, probe_verdicts):
    """Differential: where every key is known (json_key_sets.known_keys) a few validate calls
    decide a key prefix; the masks must equal the search's, along seeded random walks (N = 60,
    byte vocabulary), dead verdicts among them."""
    twins = _without_known(compile_json_schema(schema, BYTES))
    rng = random.Random(11)
    for _ in range(60):
        tokens, _ = _walk(twins[0], BYTES, bytes, rng, 120)
        _same_masks_along(twins, BYTES, tokens)
    assert probe_verdicts.count(False) >= 10 and probe_verdicts.count(True) >= 10


@pytest.mark.parametrize("name", ["schemastore-djlint.json", "own-fc-get-weather.json", "schemastore-docker-bake.json"])
def test_closed_world_probes_mask_as_the_search_on_corpus_instances(name, smollm2_tokenizer, smollm2_vocab, probe_verdicts):
    """The same on real schemas (benchmark corpus, SmolLM2's vocabulary), along every valid instance."""
    from pathlib import Path

    entry = json.loads((Path(__file__).parents[2] / "benchmarks" / "schema_corpus" / name).read_text())
    twins = _without_known(compile_json_schema(entry["schema"], smollm2_vocab))
    compared = 0
    for instance in entry["instances"]:
        if instance["valid"]:
            compared += _same_masks_along(twins, smollm2_vocab, smollm2_tokenizer.encode(instance["text"], add_special_tokens=False))
    assert compared > 20 and False in probe_verdicts


def test_extending_slices_the_keys_a_prefix_starts():
    """`extending` (two bisections, a slice) equals the filter it replaces, on seeded random
    sorted key lists over bytes that sort at the ends (0x00, 0xff) and in the middle (N = 3,000)."""
    from constrained_spec.grammar.finite_keys import extending

    rng = random.Random(3)
    alphabet = [0, 1, 97, 98, 254, 255]
    for _ in range(3000):
        raws = sorted({bytes(rng.choice(alphabet) for _ in range(rng.randrange(5))) for _ in range(rng.randrange(12))})
        prefix = bytes(rng.choice(alphabet) for _ in range(rng.randrange(4)))
        assert extending(raws, prefix) == [raw for raw in raws if raw.startswith(prefix)], (raws, prefix)
