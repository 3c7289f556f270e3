"""Every way a vLLM user names our backend builds a config: a dict in AsyncEngineArgs (what a Ray
Serve or other async deployment writes) and in EngineArgs, a StructuredOutputsConfig object. The
LLM(...) and CLI forms run in the exactness and server tests. Regression: VllmConfig kept its own
copy of the backend-name Literal, so a dict config was refused ("Input should be 'auto', ...")."""

import subprocess

import pytest

from constrained_spec.vllm.runtime import model_folder, vllm_cwd, vllm_env

pytestmark = pytest.mark.vllm

SNIPPET = """
import sys
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm import AsyncEngineArgs, EngineArgs
from vllm.config import StructuredOutputsConfig
model = sys.argv[1]
for kind, args in [
    ("async dict", AsyncEngineArgs(model=model, enforce_eager=True, structured_outputs_config={"backend": "constrained_spec"})),
    ("sync dict", EngineArgs(model=model, enforce_eager=True, structured_outputs_config={"backend": "constrained_spec"})),
    ("object", EngineArgs(model=model, enforce_eager=True, structured_outputs_config=StructuredOutputsConfig(backend="constrained_spec"))),
]:
    print(kind, "->", args.create_engine_config().structured_outputs_config.backend)
try:
    EngineArgs(model=model, enforce_eager=True, structured_outputs_config={"backend": "no_such_backend"}).create_engine_config()
    print("unknown -> accepted")
except Exception as exc:
    print("unknown -> refused", type(exc).__name__)
"""


def test_backend_name_is_accepted_by_every_config_form(vllm_py):
    done = subprocess.run([vllm_py, "-c", SNIPPET, str(model_folder())], env=vllm_env(), cwd=vllm_cwd(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if "->" in line]
    assert lines == ["async dict -> constrained_spec", "sync dict -> constrained_spec", "object -> constrained_spec",
                     "unknown -> refused ValidationError"], done.stdout + done.stderr[-2000:]
