"""The CLI on the default model: stdout carries the output alone, stats go to stderr, exit codes
0 / 2 / 3. One test runs the README's main command as a real subprocess."""

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from constrained_spec.cli import EXIT_BAD_INPUT, EXIT_INCOMPLETE, EXIT_OK

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]
PERSON = ROOT / "examples" / "schemas" / "person.json"


def test_readme_main_command():
    proc = subprocess.run(
        [sys.executable, "-m", "constrained_spec", "json", "--schema", str(PERSON), "--prompt", "Extract: Ada Lovelace, 36, mathematician"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert proc.returncode == EXIT_OK, proc.stderr
    value = json.loads(proc.stdout)  # stdout is the JSON alone: pipe-able into jq
    jsonschema.validate(value, json.loads(PERSON.read_text()))
    assert "loading model" in proc.stderr and "tokens" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_json_mode_stream_and_stats(cli_with_model, capsys, tmp_path):
    schema = tmp_path / "flag.json"
    schema.write_text('{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false}')
    code = cli_with_model(["json", "--schema", str(schema), "--prompt", "Is water wet?", "--temperature", "0", "--stream"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK
    assert json.loads(out) in ({"ok": True}, {"ok": False})
    assert "finish=stop" in err


def test_prompt_from_stdin_and_regex_mode(cli_with_model, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("Give a two-digit number."))
    code = cli_with_model(["regex", "[0-9]{2}", "--temperature", "0.8", "--seed", "1", "-q"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK
    assert re.fullmatch(r"[0-9]{2}\n", out)
    assert err == ""  # --quiet


def test_incomplete_output_exits_3(cli_with_model, capsys):
    code = cli_with_model(["json", "--schema", str(PERSON), "--prompt", "Extract: Ada Lovelace, 36", "--max-tokens", "3", "--temperature", "0"])
    out, err = capsys.readouterr()
    assert code == EXIT_INCOMPLETE
    assert "the output is incomplete (length): raise --max-tokens (now 3)" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["json", "--schema", "{schema}", "--prompt", "x"], "unevaluatedProperties"),
        (["grammar", "no_such_grammar", "--prompt", "x"], "unknown bundled grammar 'no_such_grammar'"),
    ],
)
def test_constraint_errors_exit_2(cli_with_model, capsys, tmp_path, argv, message):
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "anyOf": [{"properties": {"a": {}}}, {"required": ["b"]}], "unevaluatedProperties": false}')
    code = cli_with_model([a.replace("{schema}", str(schema)) for a in argv])
    out, err = capsys.readouterr()
    assert code == EXIT_BAD_INPUT
    assert message in err and err.startswith("error: ")
    assert out == "" and "Traceback" not in err


def test_json_schema_ref_to_a_document_given_with_ref(cli_with_model, capsys, tmp_path):
    """`--ref URI=FILE` registers the document a schema's `$ref` names (nothing is fetched); the
    output holds the referenced enum. Without it the same schema is bad input naming the URI."""
    units, schema = tmp_path / "units.json", tmp_path / "size.json"
    units.write_text('{"enum": ["cm", "in"]}')
    schema.write_text('{"type": "object", "properties": {"unit": {"$ref": "https://example.org/cli-units.json"}}, "required": ["unit"], '
                      '"additionalProperties": false}')
    argv = ["json", "--schema", str(schema), "--prompt", "A size unit?", "--temperature", "0", "-q"]
    assert cli_with_model(argv) == EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert "https://example.org/cli-units.json" in err and "register_schema" in err and out == ""
    assert cli_with_model([*argv, "--ref", "https://example.org/cli-units.json=" + str(units)]) == EXIT_OK
    out, _ = capsys.readouterr()
    assert json.loads(out)["unit"] in ("cm", "in")
    assert cli_with_model([*argv, "--ref", str(units)]) == EXIT_BAD_INPUT
    assert "--ref takes URI=FILE" in capsys.readouterr().err
