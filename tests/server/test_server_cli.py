"""The `serve` subcommand parses, and importing the package never imports the server's stack."""

import subprocess
import sys

from constrained_spec.cli import build_parser


def test_serve_subcommand_options():
    args = build_parser().parse_args(["serve", "--host", "127.0.0.1", "--port", "8123", "--model", "/m", "--max-tokens-limit", "64"])
    assert (args.command, args.host, args.port, args.model, args.max_tokens_limit) == ("serve", "127.0.0.1", 8123, "/m", 64)


def test_package_import_does_not_load_fastapi():
    code = "import sys, constrained_spec, constrained_spec.server.tools; print('fastapi' in sys.modules, 'uvicorn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
