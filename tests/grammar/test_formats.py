"""String formats (json_terminals.FORMATS): every string a format's pattern admits is one the
format checkers accept (jsonschema's, where this environment has them), on both backends.

Values are drawn from each pattern by hypothesis (seeded, 300 per format, 100 for regex): the checker must
accept every one, and the JSON-text form of the pattern (what our compiler uses) must match the
JSON text of the value. Known near misses are refused by both backends.
"""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from constrained_spec.grammar import Vocabulary, compile_json_schema
from constrained_spec.grammar.json_terminals import FORMAT_PATTERNS, FORMATS

from test_json_schema_keywords import _walk

BYTES = Vocabulary([bytes([i]) for i in range(256)] + [None], eos_token_id=256)
CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
CHECKED = sorted(f for f in FORMATS if f in CHECKER.checkers)


def test_the_usual_checkers_are_here():
    # the formats whose checkers need no extra package, or those of jsonschema[format-nongpl]
    # (installed with the suite: rfc3986-validator, rfc3987-syntax, uri-template, isoduration, fqdn)
    assert {"date", "time", "date-time", "email", "idn-email", "ipv4", "ipv6", "uuid", "regex", "json-pointer",
            "relative-json-pointer", "idn-hostname", "uri", "uri-reference", "iri", "iri-reference", "uri-template",
            "duration", "hostname"} <= set(CHECKED)


@pytest.mark.parametrize("fmt", CHECKED)
def test_every_value_of_the_pattern_passes_the_checker(fmt):
    decoded, text = re.compile(FORMAT_PATTERNS[fmt]), re.compile(FORMATS[fmt])

    @settings(max_examples=100 if fmt == "regex" else 300, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.from_regex(decoded, fullmatch=True))
    def check(value):
        assert CHECKER.conforms(value, fmt), f"format {fmt}: pattern admits {value!r}, the checker refuses it"
        assert text.fullmatch(json.dumps(value, ensure_ascii=False)[1:-1]), f"format {fmt}: JSON text of {value!r} not matched"

    check()


NEAR_MISSES = [
    ("regex", ["a**", "^*", "[z-a]", "(", "x{3,1}", "x{5,03}", "x{9,8}", "x{20,19}"],
     ["^[a-z0-9-]+$", "^\\d{3}\\.(foo|bar)?$", "\\\\", "(?:a|(b|c)+)*?", "^[a-zA-Z0-9_]{3,16}$", "a{0,9}", "(ab){2,100}?", "x{4,4}", "x{12,100}",
      "^\\s*describe\\(\\s*['\"]([^'\"]+)['\"]", 'say "hi"']),
    ("json-pointer", ["a", "/a~2", "~0"], ["", "/a", "/a~1b/0"]),
    ("relative-json-pointer", ["01", "#", "/a", "709"], ["0", "1#", "2/a/b", "10"]),
    ("idn-hostname", ["ab--cd.com", "-a", "a-"], ["example.com", "a-b.c0"]),
    ("date", ["2023-02-29", "2023-13-01"], ["2024-02-29"]),
    ("uri", ["example.com/a", "http://a b", "http://x/%zz", "http://example.com/resource/{"], ["http://a.b/c?d#e", "urn:isbn:0451450523"]),
    ("uri-reference", ["a b", "%zz", "http://example.com/resource/{", "\\a"], ["", "/a/b?x#y", "../c", "http://x.com", "#frag"]),
    ("iri", ["not-an-iri", "http://a b", "/relative"], ["http://例え.jp/パス", "https://a.b/ç?x=é"]),
    ("iri-reference", ["a b", "x<y"], ["/パス", "", "http://例え.jp"]),
    ("uri-template", ["{", "{a b}", "x}", "{a:0}"], ["/users/{id}", "{+path}/x{?q,lang}", "", "{x:3}{y*}"]),
]


@pytest.mark.parametrize("fmt,bad,good", NEAR_MISSES, ids=[m[0] for m in NEAR_MISSES])
@pytest.mark.parametrize("backend", ["native", "default"])
def test_near_misses_refused_on_both_backends(fmt, bad, good, backend):
    schema = {"type": "string", "format": fmt}
    compiled = compile_json_schema(schema, BYTES, backend=backend)
    for value in bad:
        assert not CHECKER.conforms(value, fmt), value
        assert not _walk(compiled, schema, json.dumps(value, ensure_ascii=False)), f"{backend}: {fmt} admitted {value!r}"
    for value in good:
        assert CHECKER.conforms(value, fmt), value
        assert _walk(compiled, schema, json.dumps(value, ensure_ascii=False)), f"{backend}: {fmt} refused {value!r}"


@pytest.mark.parametrize("schema,good,bad", [
    ({"type": "string", "format": "email", "maxLength": 9}, ["ab@cd.ef"], ["abc@def.gh", "abcdefgh"]),
    ({"type": "string", "format": "uri", "pattern": "^https:"}, ["https://a.b/c"], ["http://a.b", "https:/ /"]),
])
def test_format_next_to_its_own_pattern_or_length_on_the_default_backend(schema, good, bad):
    compiled = compile_json_schema(schema, BYTES)
    for value in good:
        assert _walk(compiled, schema, json.dumps(value)), value
    for value in bad:
        assert not _walk(compiled, schema, json.dumps(value)), value


def test_a_format_neither_engine_knows_constrains_nothing(caplog):
    schema = {"type": "string", "format": "x-custom"}
    with caplog.at_level("INFO", logger="constrained_spec"):
        compiled = compile_json_schema(schema, BYTES)
    assert _walk(compiled, schema, '"anything at all"')
    assert "format: x-custom" in caplog.text
