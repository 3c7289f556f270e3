"""Patterns as regular languages (grammar/regular.py): lookaheads, intersections and complements
written without lookarounds, checked against Python's `re.search` (jsonschema's reading), and
the schemas real collections write with them, walked through both backends."""

from __future__ import annotations

import json
import random
import re

import jsonschema
import pytest

from constrained_spec.grammar import GrammarError, Vocabulary, compile_json_schema
from constrained_spec.grammar.llguidance_backend import LLGuidanceGrammar
from constrained_spec.grammar.regular import complement, intersection, lookaround_free
from schema_oracle import engine_of
from test_json_schema_keywords import _valid, _walk

BYTES = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)

# real schemas' patterns (SchemaStore: json-api, browser.i18n, emmet, luaurc, mongodb-atlas,
# hugo; the GitHub corpus' linter rules) and small ones around each construct
PATTERNS = [
    r"^(?!relationships$|links$)\w[-\w_]*$", r"^((?!message|severity).)*$", r"^(?!^lucene\.|builtin\.|mongodb\.).*",
    r"^(?!@@)[@a-zA-Z0-9_-]+$", r"^(?!variables$).+$", r"^(?!\.{1,2}$)(?!.*\/)[a-zA-Z0-9\-\._]+$", r"^(?!tag|category)$",
    r"^x-(?!ms-).*$", r"ab", r"^a|b$", r"^(?:[A-Za-z]:|/|\\)", "a{2,3}b?", r"^[^{}/ :\\]+(?::\d+)?$", r"^\s+$|\spx\s|\spx$|^px",
    r"(?=a)", r"^(?=.*\d)(?=.*[a-z]).{3,}$", r"^[^.]*$", r"x*", r"^$", r"^[A-Z]{3}(,[A-Z]{3})*$", r"(?<name>ab)+c",
    # a `$` inside (SchemaStore's catalogue-entry, the GitHub corpus' path types and key names)
    r"^([^,]+(,|$)){3,}$", r"^(\/?((\.{2})|([a-z0-9\-]*))($|\/))*$", r"^$[a-zA-Z0-9$_]*$", r"a(b|$)", r"^(a$)*$", r"x$$b?",
    r"(?=a$)a", r"^(?!.*,$)[a-z,]+$", r"^(ab|$)+c?", r"a$\n",  # (Python's `$` also before a final newline the pattern then reads)
]  # fmt: skip
ALPHABET = "abcdelmnstrikgy-_.@/:\\ {}x12AZ\t,$"
WORDS = ["relationships", "links", "message", "severity", "lucene.", "builtin.", "@@", "variables", "..", "x-ms-", "x-", "tag",
         "C:", " px", "px", "ab", "ABC,DEF", "a,b,c", "../"]  # fmt: skip


def _strings(rng: random.Random, count: int) -> list[str]:
    out = []
    for _ in range(count):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12)))
        for word in WORDS:
            if rng.random() < 0.06:
                at = rng.randint(0, len(text))
                text = text[:at] + word + text[at:]
        out.append(text)
    return out + WORDS + ["", ".", "a", "\n", "a\n", "x\ny"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_written_without_lookarounds_as_re_reads_them(pattern):
    """Seeded: 1,500 strings a pattern (random over an alphabet around its literals, with its
    words inserted), each held against `re.search`. The lookaround-free regex matches exactly
    the same strings where ECMA and Python agree (no line breaks), and never one Python's `re`
    does not; the complement exactly the others, and never one it matches."""
    python = re.sub(r"\(\?<(?=[A-Za-z])", "(?P<", pattern)  # ECMA's named group, as Python writes it
    rng = random.Random(pattern)
    written, other = lookaround_free(pattern), None
    try:
        other = complement(pattern)
    except ValueError:
        other = "refused"  # a wide Unicode class past the size budget, a tempered token before `$`
    assert written is None or not re.search(r"\(\?<?[=!]", written)
    for text in _strings(rng, 1500):
        found = re.search(python, text) is not None
        agreed = "\n" not in text
        mine = written is not None and re.fullmatch(written[1:-1], text) is not None
        assert not mine or found, (text, written)
        assert not agreed or mine == found, text
        if other != "refused":
            rest = other is not None and re.fullmatch(other[1:-1], text) is not None
            assert not (rest and found), text
            assert not agreed or rest != found, text


def _random_pattern(rng: random.Random, depth: int = 0) -> str:
    """A small pattern over `a`, `b`, `,` with groups, alternation, repeats and anchors anywhere."""
    if depth > 2 or rng.random() < 0.3:
        return rng.choice(["a", "b", ",", "[ab]", "[^,]", ".", "$", "^", "a", "b"])
    parts = [_random_pattern(rng, depth + 1) for _ in range(rng.randint(1, 3))]
    kind = rng.random()
    body = "|".join(parts) if kind < 0.3 else "".join(parts)
    group = f"({body})" if kind < 0.6 or len(parts) > 1 else body
    return group + rng.choice(["", "", "*", "+", "?", "{2}", "{1,2}"])


def test_generated_patterns_with_anchors_inside_read_as_re_reads_them():
    """Seeded: 400 generated patterns (132 with a `$` or `^` inside), 300 strings each over `a`, `b`, `,`
    and a newline, held against Python's `re.search`: the narrow reading (lookaround_free, what
    the generated regex matches) never matches a string Python does not and equals it where
    the readings agree (no newline); the wide one (its complement) never leaves out a string
    Python matches. Patterns the reader refuses raise ValueError (counted; most are read)."""
    rng, read = random.Random(11), 0
    for _ in range(400):
        pattern = ("^" if rng.random() < 0.3 else "") + _random_pattern(rng)
        try:
            written, other = lookaround_free(pattern), complement(pattern)
        except ValueError:
            continue
        read += 1
        for _ in range(300):
            text = "".join(rng.choice("ab,,\n") for _ in range(rng.randint(0, 6)))
            found = re.search(pattern, text) is not None
            mine = written is not None and re.fullmatch(written[1:-1], text) is not None
            rest = other is not None and re.fullmatch(other[1:-1], text) is not None
            assert not mine or found, (pattern, text, written)
            assert "\n" in text or mine == found, (pattern, text, written)
            assert not (rest and found), (pattern, text, other)
    assert read >= 300, read


def test_intersection_meets_every_pattern():
    rng = random.Random(1)
    pairs = [(r"^a", r"b$"), (r"^[a-z]+$", r"^(?!tag$)"), (r"\d", r"^[^2]*$"), (r"^x", r"^y")]
    for first, second in pairs:
        both = intersection([first, second])
        for text in _strings(rng, 800):
            expected = re.search(first, text) is not None and re.search(second, text) is not None
            got = both is not None and re.fullmatch(both[1:-1], text) is not None
            assert got == expected or ("\n" in text and not got), (first, second, text)
    assert intersection([r"^x", r"^y"]) is None


def test_classes_are_read_as_both_ecma_and_python_read_them():
    """\\d, \\w, \\s: Python's are Unicode-aware, ECMA's are not (its \\s has U+FEFF): used
    positively, a class takes what both accept; complemented, what either does."""
    from constrained_spec.grammar.byte_dfa import python_category
    from constrained_spec.grammar.regular import _PY_SPACE

    assert _PY_SPACE == python_category("SPACE")  # Python's \s, written out for the narrow reading
    for pattern, inside, outside in [(r"^\d$", "7", "\u0663"), (r"^\w$", "k", "\u00e9"), (r"^\s$", " ", "\ufeff")]:
        positive, negative = lookaround_free(pattern), complement(pattern)
        assert re.fullmatch(positive[1:-1], inside) and not re.fullmatch(positive[1:-1], outside)
        assert not re.fullmatch(negative[1:-1], inside) and not re.fullmatch(negative[1:-1], outside)


def test_what_is_not_regular_is_refused():
    for pattern in [r"(a)\1", r"(?<=a)b", r"(?i)a", r"(?!^a)a", r"a$(?=b)", r"a\bc", r"(?=a)(^|b)", r"(?=a(^|b))", r"($|a)(^|b)"]:
        with pytest.raises(ValueError):
            lookaround_free(pattern)


def test_anchors_inside_tells_the_patterns_llguidance_refuses_for_their_anchors():
    """anchors_inside finds every pattern llguidance refuses for an anchor ("lookarounds not
    supported yet; End" / "Start", asked of llguidance itself), and leaves the forms it takes
    as they are (anchors at a pattern's, a top-level branch's or a lone group's edges; `$` or
    `^` in a class or escaped is a character)."""
    import llguidance

    from constrained_spec.grammar.regular import anchors_inside

    def refused(pattern: str) -> bool:
        grammar = llguidance.LLMatcher.grammar_from_json_schema({"type": "string", "pattern": pattern})
        bad, warnings = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
        return bad and any("Start" in w or "End" in w for w in warnings)

    inside = [r"^([^,]+(,|$)){3,}$", r"^$[a-z$]*$", r"a$b", r"a^", r"(a(^b))", r"(a|b)$c", r"(a$|b)c", r"^(?:a$b|c)"]
    taken = [r"a$", r"^a$|^b$", r"^\d+-\d+|^\d+$", r"^(a|b)$", r"x[$]y", r"a\$b", r"^a$|b", r"ab", r"^a|^b", r"[^a]", r"a\^",
             r"^$|(^(?:\S+\s+){0,99}\S+$)", r"x|(^b)", r"(a|b$)", r"((a)$)"]
    assert [p for p in inside if not refused(p)] == [] and [p for p in taken if refused(p)] == []  # llguidance's verdicts
    assert [p for p in inside if not anchors_inside(p)] == [] and [p for p in taken if anchors_inside(p)] == []


JSON_API = {"type": "object", "additionalProperties": False,
            "patternProperties": {r"^(?!relationships$|links$)\w[-\w_]*$": {"type": "integer"}}}  # fmt: skip


@pytest.mark.parametrize("schema, texts", [
    (JSON_API, ['{"title":1}', '{"links":1}', '{"relationships":2}', '{"link":1,"linkss":2}', '{"a-b":3}', '{"-a":1}', '{"title":"x"}']),
    ({"type": "string", "pattern": r"^((?!message|severity).)*$"}, ['"rule"', '"no-message"', '"mess age"', '"severit"', '""']),
    ({"type": "string", "not": {"pattern": r"^(?:[A-Za-z]:|/|\\)"}}, ['"a/b"', '"/x"', '"C:x"', '"\\\\x"', '"ab"', '""']),
    ({"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "z$"}]}, ['"az"', '"abz"', '"a"', '"z"', '"za"']),
    ({"type": "string", "format": "uri", "pattern": "^https?://"}, ['"https://a.b/c"', '"ftp://a"', '"http:x"', '"http://"']),
    ({"type": "string", "pattern": "^[A-Z]{3}(,[A-Z]{3})*$", "maxLength": 7}, ['"ABC"', '"ABC,DEF"', '"ABC,DEF,GHI"', '"AB"']),
], ids=["json-api-attributes", "tempered", "not-a-pattern", "two-patterns", "format-and-pattern", "lengths-and-pattern"])
def test_schemas_with_such_patterns_on_both_backends(schema, texts):
    """Once refused by our compiler (lookarounds, a complement, two patterns, a format or lengths
    beside a pattern) and, for the first two, by llguidance: both backends now take them, and
    every text walks as jsonschema (with format checks) judges it."""
    for backend in ("default", "native"):
        compiled = compile_json_schema(schema, BYTES, backend=backend)
        for text in texts:
            assert _walk(compiled, schema, text) == _valid(schema, text), (backend, text)


@pytest.mark.parametrize("schema, texts", [
    ({"type": "string", "pattern": r"^([^,]+(,|$)){3,}$"}, ['"a,b,c"', '"a,b,c,"', '"a,b"', '"a,,b,c"', '"a,b,c,d"', '","', '""']),
    ({"type": "object", "patternProperties": {r"^_[a-z$]*$": {"type": "integer"}, r"^$[a-z$]*$": {"type": "string"}},
      "additionalProperties": False}, ['{"_a":1}', '{"":"x"}', '{"$a":"x"}', '{"":1}', '{"_$":2}']),
    ({"type": "string", "not": {"pattern": r"a(,|$)"}}, ['"a,"', '"a"', '"ab"', '"ba"', '"b,a,c"', '"ca b"', '""']),
    ({"type": "string", "pattern": r"(^|,)ab"}, ['"ab"', '",ab"', '"x,abc"', '"xab"', '"a,b"', '""']),
    ({"type": "string", "not": {"pattern": r"(^|[ ,])x($|[ ,])"}}, ['"x"', '"a x"', '"x,b"', '"ax"', '"xa b"', '""', '"a,x "']),
], ids=["a-list-of-three-or-more", "key-patterns", "negated", "start-inside", "both-inside-negated"])
def test_patterns_reading_an_anchor_inside_them(schema, texts):
    """Patterns with a `$` or `^` inside (SchemaStore's catalogue-entry searchTags, a key pattern
    the GitHub corpus writes `^$...`, `(^|,)`) were refused by llguidance and by our compiler:
    they go to llguidance written out without them (regular.py), and every text walks as
    jsonschema judges it."""
    compiled = compile_json_schema(schema, BYTES)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    verdicts = [(_walk(compiled, schema, text), _valid(schema, text)) for text in texts]
    assert [v for v, _ in verdicts] == [valid for _, valid in verdicts], list(zip(texts, verdicts))
    assert any(valid for _, valid in verdicts) and not all(valid for _, valid in verdicts)


@pytest.mark.parametrize("pattern, texts", [
    (r'^[^"]*$', ['a"b', "ab", "a\\b"]), (r"^[^\\]*$", ["x\\y", "ab", 'a"b']), (r'^[^x"\\]*$', ["\\", '"', "a"]),
    (r"^[^\s\"]+$", ['"', "\\", "a"]), (r"^[a\\]*$", ['"', "\\", "a\\"]),
])  # fmt: skip
@pytest.mark.parametrize("backend", ["default", "llguidance"])
def test_negated_classes_hold_escaped_quotes_and_backslashes_out(pattern, texts, backend):
    """llguidance 1.9 read the escapes `\\"` and `\\\\` into a negated class that excludes the
    quote or backslash wherever the class admits a control character (`{"pattern": "^[^\\\\"]*$"}`
    accepted "a\\"b"); such classes go to it without control characters, so neither is read in.
    Every text's JSON spelling walks as jsonschema judges it, or is refused (a narrowing)."""
    schema = {"type": "string", "pattern": pattern}
    compiled = compile_json_schema(schema, BYTES, backend=backend)
    assert isinstance(engine_of(compiled), LLGuidanceGrammar)
    assert schema == {"type": "string", "pattern": pattern}  # the caller's schema is not rewritten
    for value in texts:
        text = json.dumps(value)
        valid = jsonschema.Draft202012Validator(schema).is_valid(value)
        assert not _walk(compiled, schema, text) or valid, text
        if valid and "\\" not in text:
            assert _walk(compiled, schema, text), text


def test_a_pattern_nothing_matches_beside_others_is_refused_by_name():
    with pytest.raises(GrammarError, match="no string meets"):
        compile_json_schema({"type": "string", "allOf": [{"pattern": "^x"}, {"pattern": "^y"}]}, BYTES, backend="native")


def test_classes_python_cannot_read_are_narrowed_where_they_name_a_quote():
    """`\\p{Lu}` (ECMA with the u flag, Rust) does not parse in Python: such a class is narrowed
    wherever its text names a quote or backslash, and left as written otherwise."""
    from constrained_spec.grammar.llguidance_schema import _controls_excluded

    assert _controls_excluded(r'^[^\p{Lu}"]+$') == r'^[^\x00-\x1f\p{Lu}"]+$'
    assert _controls_excluded(r"^[^\p{Lu}\x5c]+$") == r"^[^\x00-\x1f\p{Lu}\x5c]+$"
    assert _controls_excluded(r"^[^\p{Lu}]+$") == r"^[^\p{Lu}]+$"
    assert _controls_excluded(r"^[^ab]+$") == r"^[^ab]+$"  # admits quotes and backslashes: exact as it is


# patterns of key names (SchemaStore, the GitHub corpus) and ones each reader takes differently
KEY_PATTERNS = [r"^[a-zA-Z0-9._-]+$", r"^[0-9]{2,}$", r"^(a|bc)*$", r"^x-[a-z]+$", r"ab", r"^[A-Z][a-z]*$", r"^(get|put|post)$",
                r"^\w+$", r"^\d+$", r"^a.c$", r".+", r"^x-", r"^[^\\]+$", r"^[^.]+$", r"^[a-z\n]+$", r"^a\"b$"]  # fmt: skip
KEYS = ["web", "web\n", "a-b", "x-y", "x-ab", "abc", "bcbc", "12", "٣٣", "é", "", "a\rc", "a\u2028c", 'a"b', "a\\b", "Get", "get",
        "AB", "a b", "ab.c"]  # fmt: skip


@pytest.mark.parametrize("pattern", KEY_PATTERNS)
def test_agreed_search_reads_keys_as_llguidance_and_python_do(pattern):
    """agreed_search (which patternProperties the required-keys tracker applies to a key) is
    given only for patterns every reader takes alike, and then answers as llguidance does on
    every key (a key's value an integer where the pattern matches, a string otherwise) and as
    Python's `re` does but for a final newline (Python's `$`). The patterns it refuses each
    disagree somewhere: `\\w`, `\\d`, `.`, Python's `$`, or text JSON escapes."""
    from constrained_spec.grammar.regular import agreed_search

    search = agreed_search(pattern)
    schema = {"type": "object", "patternProperties": {pattern: {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    compiled = compile_json_schema(schema, BYTES)
    for key in KEYS:
        verdict = _walk(compiled, schema, "{" + json.dumps(key) + ":1}")
        if search is not None:
            assert search(key) is verdict, key
            assert verdict is (re.search(pattern, key) is not None) or key.endswith("\n"), key
    eligible = {r"^[a-zA-Z0-9._-]+$", r"^[0-9]{2,}$", r"^(a|bc)*$", r"^x-[a-z]+$", r"^[A-Z][a-z]*$", r"^(get|put|post)$"}
    assert (search is not None) is (pattern in eligible)


@pytest.mark.parametrize("pattern, infinite", [
    ("^\\.", True), ("a+", True), ("^x-", True), ("^(ab)*$", True),
    ("^[ab]$", False), ("^(a|bc)$", False), ("^\\.[a-z]{2}$", False), ("^$", False), ("^a{0,40}$", False),
])
def test_an_automaton_tells_whether_it_matches_infinitely_many_strings(pattern, infinite):
    """DFA.infinite: a cycle among a minimized automaton's states (json_key_order reads a closed
    object's pattern matching endless keys as always leaving a new key to write)."""
    from constrained_spec.grammar.regular import meet, pattern_dfa

    assert pattern_dfa(pattern).infinite() is infinite
    plain = meet(pattern_dfa(pattern), pattern_dfa("^[a-z.x-]*$"))  # within a finite alphabet too
    assert plain.infinite() is infinite
