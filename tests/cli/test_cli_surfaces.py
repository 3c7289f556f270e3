"""The CLI against what users actually send (issue 15): bad bytes, a megabyte prompt, deep schemas,
grammar text with '/', --version, cached model ids, JSONL batches, progress, and a fuzz test.
In-process `main()` on the tiny random model from `constrained_spec.testing`."""

import io
import json
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from constrained_spec.cli import EXIT_BAD_INPUT, EXIT_INCOMPLETE, EXIT_OK, main


@pytest.fixture
def run(tiny_model_folder, capsys, monkeypatch):
    """main(argv) on the tiny model (--model added), optional stdin bytes -> (code, out, err)."""

    def call(*argv, stdin: bytes | None = None, model: str | None = tiny_model_folder):
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        args = list(argv) + (["--model", model, "--quiet"] if model and argv and argv[0] != "--version" else [])
        code = main(args)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return call


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_invalid_utf8_in_an_argument(run):
    code, out, err = run("regex", "[a-z]+", "--prompt", "caf\udce9")  # argv byte 0xe9 (surrogateescape)
    assert code == EXIT_BAD_INPUT and out == ""
    assert "--prompt is not valid UTF-8 text: the byte 0xe9" in _one_error_line(err)
    code, _, err = run("regex", "a\udcff", "--prompt", "x")
    assert code == EXIT_BAD_INPUT and "regex is not valid UTF-8" in _one_error_line(err)


def test_binary_stdin(run):
    code, out, err = run("json", stdin=b"\x89PNG\r\n\x1a\n\xff\x00")
    assert code == EXIT_BAD_INPUT and out == ""
    assert "the prompt on stdin is not valid UTF-8: byte 0x89 at offset 0" in _one_error_line(err)


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    from constrained_spec import __version__

    assert capsys.readouterr().out.strip() == f"constrained-spec {__version__}"


def test_megabyte_prompt_is_refused_fast(run):
    start = time.perf_counter()
    code, out, err = run("regex", "[a-z]+", stdin=("word " * 200_000).encode())
    assert code == EXIT_BAD_INPUT and out == ""
    assert "the prompt is too long" in _one_error_line(err) and "context of 96 tokens" in err
    assert time.perf_counter() - start < 30  # generous under contention; the check is O(length)


def test_prompt_that_fills_the_context_with_max_tokens(run):
    code, _, err = run("regex", "[a-z]+", "--prompt", "x" * 50, "--max-tokens", "60")
    assert code == EXIT_BAD_INPUT and "plus max_tokens=60" in _one_error_line(err)


def test_grammar_text_with_a_slash_is_not_a_path(run):
    code, out, err = run("grammar", "start: /[a-z]+/", "--prompt", "x", "--max-tokens", "4", "--temperature", "0")
    assert code in (EXIT_OK, EXIT_INCOMPLETE), err
    code, _, err = run("grammar", "missing/arith.lark", "--prompt", "x")
    assert code == EXIT_BAD_INPUT and "grammar file not found" in _one_error_line(err)


def test_lark_error_is_one_line(run, tmp_path):
    bad = tmp_path / "bad.lark"
    bad.write_text('start: item+\nitem: "a" | undefined_rule\n')
    code, _, err = run("grammar", str(bad), "--prompt", "x")
    assert code == EXIT_BAD_INPUT and "undefined_rule" in _one_error_line(err)
    assert err.count("\n") == 1


def test_bad_regex_error_has_a_position(run, monkeypatch):
    from constrained_spec import api

    monkeypatch.setattr(api, "Generator", lambda *a, **k: pytest.fail("loaded the model for a bad regex"))
    code, _, err = run("regex", "[0-9]{4}-[0-9", "--prompt", "x")
    assert code == EXIT_BAD_INPUT and "position 9" in _one_error_line(err)


@pytest.mark.parametrize("depth", [500, 2000])
def test_deep_schema_file_is_one_clean_line_or_works(run, tmp_path, depth):
    text = '{"type":"object","properties":{"a":' * depth + '{"type":"integer"}' + '},"required":["a"]}' * depth
    path = tmp_path / "deep.json"
    path.write_text(text)
    code, _, err = run("json", "--schema", str(path), "--prompt", "x", "--max-tokens", "3", "--no-schema-in-prompt")
    assert "Traceback" not in err
    if code == EXIT_BAD_INPUT:
        _one_error_line(err)
    else:
        assert code in (EXIT_OK, EXIT_INCOMPLETE), err


def test_model_id_from_the_local_hf_cache(run, tiny_model_folder, tmp_path, monkeypatch):
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = tmp_path / "models--tiny-org--tiny-cli" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for file in __import__("os").listdir(tiny_model_folder):
        (snapshot / file).symlink_to(f"{tiny_model_folder}/{file}")
    (tmp_path / "models--tiny-org--tiny-cli" / "refs").mkdir()
    (tmp_path / "models--tiny-org--tiny-cli" / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    code, out, err = run("choice", "yes", "no", "--prompt", "x", "--max-tokens", "4", model="tiny-org/tiny-cli")
    assert code == EXIT_OK and out.strip() in ("yes", "no"), err
    code, _, err = run("choice", "yes", "no", "--prompt", "x", model="tiny-org/not-cached")
    assert code == EXIT_BAD_INPUT and "neither a local folder nor in the local Hugging Face cache" in _one_error_line(err)


def test_batch_jsonl(run, tmp_path):
    lines = [
        json.dumps({"id": "a", "prompt": "one", "regex": "[a-z]{2}", "temperature": 0}),
        "{not json",
        json.dumps({"id": "b", "prompt": "two", "regex": "[a-z]{2}", "temperature": 0}),
        json.dumps({"id": "c", "prompt": "x", "regex": "("}),
        "",
        json.dumps({"id": "d", "prompt": "x", "colour": "red"}),
        json.dumps({"id": "e", "prompt": "three", "choices": ["yes", "no"], "seed": 3}),
        json.dumps({"id": "f", "prompt": "x" * 200}),  # too long for the tiny model's context
    ]
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = run("batch", str(path), "--max-tokens", "8")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["line"] for r in records] == [1, 2, 3, 4, 6, 7, 8]
    by_id = {r["id"]: r for r in records if r["id"] is not None}
    assert by_id["a"]["text"] == by_id["a"]["value"] and len(by_id["a"]["text"]) == 2 and not by_id["a"]["incomplete"]
    assert by_id["b"]["finish_reason"] == "stop"
    assert by_id["e"]["value"] in ("yes", "no")
    assert "not valid JSON" in records[1]["error"]
    assert "invalid regex" in by_id["c"]["error"] and "unknown key(s) 'colour'" in by_id["d"]["error"]
    assert "too long" in by_id["f"]["error"]
    assert code == EXIT_BAD_INPUT and "4 of 7 requests could not run" in _one_error_line(err)


def test_progress_is_shown_when_forced_and_hidden_when_quiet(tiny_model_folder, capsys):
    argv = ["regex", "[a-z]{6}", "--prompt", "x", "--model", tiny_model_folder, "--temperature", "0", "--max-tokens", "8"]
    assert main(argv + ["--progress"]) == EXIT_OK
    captured = capsys.readouterr()
    assert "[constrained_spec] generating: " in captured.err and len(captured.out.strip()) == 6
    assert main(argv + ["--progress", "--quiet"]) == EXIT_OK
    assert capsys.readouterr().err == ""


# -- fuzz: random bytes, JSON, schemas and sampling values; no traceback, no hang ---------------------

_text = st.text(st.characters(codec="utf-8") | st.sampled_from(["\udcff", "\ud800", "/", "\n", "{", "("]), max_size=12)
_number = st.sampled_from(["0", "1", "-1", "0.5", "2", "nan", "inf", "1e9", "x", ""])
_schema = st.recursive(
    st.sampled_from([{"type": "integer"}, {"type": "string", "maxLength": 3}, {"enum": ["a", 1]}, {"type": "boolean"}, {}, {"type": "bogus"}]),
    lambda inner: st.builds(lambda p: {"type": "object", "properties": p}, st.dictionaries(st.sampled_from("abc"), inner, max_size=2))
    | st.builds(lambda i: {"type": "array", "items": i, "maxItems": 2}, inner),
    max_leaves=4,
)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    command=st.sampled_from(["regex", "grammar", "choice", "json"]),
    spec=_text,
    prompt=_text,
    schema=_schema,
    option=st.sampled_from(["--temperature", "--top-p", "--top-k", "--seed", "--max-tokens"]),
    value=_number,
    stdin=st.binary(max_size=16),
)
def test_fuzz_cli(tiny_model_folder, tmp_path_factory, capsys, command, spec, prompt, schema, option, value, stdin):
    argv = [command]
    if command == "json":
        path = tmp_path_factory.mktemp("fuzz") / "schema.json"
        path.write_text(json.dumps(schema))
        argv += ["--schema", str(path)]
    elif spec:
        argv += [spec]
    argv += ["--prompt", prompt, option, value, "--max-tokens", "3", "--model", tiny_model_folder, "--quiet"]
    start = time.perf_counter()
    old_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors (a bad number, a missing argument)
        code = exc.code
    finally:
        sys.stdin = old_stdin
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code in (EXIT_OK, EXIT_BAD_INPUT, EXIT_INCOMPLETE), (argv, code, err)
    if code == EXIT_BAD_INPUT and "usage:" not in err:
        _one_error_line(err)
    assert time.perf_counter() - start < 60, argv


def test_batch_groups_keep_a_schemas_key_order():
    """A group of batch requests runs with its first request's constraint: two schemas that differ
    only in their properties' order are two groups (sorted keys grouped them, and the second
    request's keys were written in the first one's order)."""
    from constrained_spec.batch import parse_requests
    from constrained_spec.sampling import SamplingParams

    def line(order: list[str]) -> str:
        props = {"a": {"type": "integer"}, "b": {"type": "string"}}
        schema = {"type": "object", "properties": {k: props[k] for k in order}, "required": ["a", "b"]}
        return json.dumps({"prompt": "x", "schema": schema})

    requests, errors = parse_requests([line(["a", "b"]), line(["b", "a"]), line(["a", "b"])], SamplingParams(), lambda *a, **k: None)
    assert not errors and len(requests) == 3
    keys = [r.group_key() for r in requests]
    assert keys[0] != keys[1] and keys[0] == keys[2]
