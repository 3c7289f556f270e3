"""examples/vllm_ray_serve.py end to end: a local Ray cluster, two Serve replicas of vLLM with our
backend and proposers, concurrent json_schema requests over HTTP, every answer validated by the
example against the schema (it prints `valid n/n`). 256 tokens leave room for the longest person
the schema allows (two strings of at most 60 characters), so every answer finishes."""

import re
import socket
import subprocess
from pathlib import Path

import pytest

from constrained_spec.vllm.runtime import vllm_cwd, vllm_env

pytestmark = pytest.mark.vllm

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vllm_ray_serve.py"
REQUESTS = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_replicas_behind_ray_serve_answer_valid_json(vllm_py):
    env = {**vllm_env(), "RAY_USAGE_STATS_ENABLED": "0"}
    cmd = [vllm_py, str(EXAMPLE), "--replicas", "2", "--requests", str(REQUESTS), "--max-tokens", "256", "--port", str(_free_port())]
    done = subprocess.run(cmd, env=env, cwd=vllm_cwd(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    summary = re.search(r"replicas 2, speculation on, .*valid (\d+)/(\d+)", done.stdout)
    assert summary, done.stdout[-2000:] + done.stderr[-2000:]
    assert summary.groups() == (str(REQUESTS), str(REQUESTS)), summary.group(0)
