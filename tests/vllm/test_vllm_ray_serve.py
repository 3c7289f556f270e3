"""examples/vllm_ray_serve.py end to end: a local Ray cluster, two Serve replicas of vLLM with our
backend and proposers, concurrent json_schema requests over HTTP, every answer validated by the
example against the schema (it prints `valid n/n`); a request without a schema
or with one the backend refuses gets a 400. 256 tokens leave room for the longest person
the schema allows (two strings of at most 60 characters), so every answer finishes."""

import re
import subprocess
from pathlib import Path

import pytest

from constrained_spec.vllm.runtime import vllm_cwd, vllm_env

pytestmark = pytest.mark.vllm

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vllm_ray_serve.py"
REQUESTS = 4


def test_two_replicas_behind_ray_serve_answer_valid_json(vllm_py, free_port):
    env = {**vllm_env(), "RAY_USAGE_STATS_ENABLED": "0"}
    cmd = [vllm_py, str(EXAMPLE), "--replicas", "2", "--requests", str(REQUESTS), "--max-tokens", "256", "--port", str(free_port)]
    done = subprocess.run(cmd, env=env, cwd=vllm_cwd(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    summary = re.search(r"replicas 2, speculation on, .*valid (\d+)/(\d+)", done.stdout)
    assert summary, done.stdout[-2000:] + done.stderr[-2000:]
    assert summary.groups() == (str(REQUESTS), str(REQUESTS)), summary.group(0)
    assert "a request without a json_schema: HTTP 400 ValueError: this example serves response_format json_schema only" in done.stdout
    assert "a request with a schema the backend refuses: HTTP 400 " in done.stdout, done.stdout[-2000:]
