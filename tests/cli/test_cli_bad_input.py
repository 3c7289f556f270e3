"""Bad input as a new user would give it: a clear one-line message on stderr, exit code 2, no
traceback. These cases are all caught before the model is loaded."""

import subprocess
import sys

import pytest

from constrained_spec.cli import EXIT_BAD_INPUT, main


def run_main(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["json", "--schema", "no/such/schema.json", "--prompt", "x"], "error: schema file not found: no/such/schema.json"),
        (["json", "--prompt", "   "], "error: the prompt is empty"),
        (["json", "--temperature", "-1", "--prompt", "x"], "error: SamplingParams.temperature=-1.0: must be a finite number >= 0"),
        (["json", "--top-p", "1.5", "--prompt", "x"], "error: SamplingParams.top_p=1.5: must be in (0, 1]"),
        (["json", "--top-k", "-3", "--prompt", "x"], "error: SamplingParams.top_k=-3"),
        (["json", "--max-tokens", "0", "--prompt", "x"], "error: SamplingParams.max_tokens=0: must be an integer >= 1"),
        (["json", "--seed", "-1", "--prompt", "x"], "error: SamplingParams.seed=-1"),
        (["json", "--pydantic", "Person", "--prompt", "x"], "error: expected module:Class"),
        (["json", "--pydantic", "no_such_module_xyz:Person", "--prompt", "x"], "error: cannot import 'no_such_module_xyz'"),
        (["grammar", "missing/arith.lark", "--prompt", "x"], "error: grammar file not found: missing/arith.lark"),
        (["verify", "--samples", "5"], "error: --samples must be at least 100"),
    ],
)
def test_bad_input_exits_2_with_message(argv, message, capsys):
    code, out, err = run_main(argv, capsys)
    assert code == EXIT_BAD_INPUT
    assert message in err
    assert out == ""
    assert "Traceback" not in err


def test_invalid_json_schema_file(tmp_path, capsys):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"type": "object", ')
    code, _, err = run_main(["json", "--schema", str(bad_json), "--prompt", "x"], capsys)
    assert code == EXIT_BAD_INPUT and "is not valid JSON" in err
    bad_schema = tmp_path / "schema.json"
    bad_schema.write_text('{"type": "strng"}')
    code, _, err = run_main(["json", "--schema", str(bad_schema), "--prompt", "x"], capsys)
    assert code == EXIT_BAD_INPUT and "invalid JSON schema at type" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["json", "--temperature", "hot"], "invalid float value: 'hot'"),
        (["json", "--schema", "a.json", "--pydantic", "m:C"], "not allowed with argument"),
        (["dance"], "invalid choice: 'dance'"),
        ([], "required: COMMAND"),
    ],
)
def test_usage_errors_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == EXIT_BAD_INPUT
    assert message in capsys.readouterr().err


def test_schema_on_stdin_needs_prompt_flag():
    proc = subprocess.run(
        [sys.executable, "-m", "constrained_spec", "json", "--schema", "-"],
        input='{"type": "string"}', capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == EXIT_BAD_INPUT
    assert "give the prompt with --prompt" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
