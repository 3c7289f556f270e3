#!/usr/bin/env bash
# The model-runner tests against the LOWEST transformers that pyproject.toml admits, so the admitted
# range is the tested range. A throwaway venv over the system packages (everything else, including
# this checkout's editable install, comes from there) gets only that transformers version, and a
# fresh model cache makes the GGUF conversion run under it too. About 1-2 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
low=$(sed -n 's/^ *"transformers>=\([0-9.]*\).*/\1/p' pyproject.toml)
[ -n "$low" ] || { echo "error: no transformers>=X.Y in pyproject.toml" >&2; exit 1; }
work=$(mktemp -d /tmp/cs-lowest-transformers.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 -m venv --system-site-packages "$work/venv" || exit 1
CONSTRAINTS=${CONSTRAINTS-constraints-cpu.txt}
args=()
[ -n "$CONSTRAINTS" ] && args+=(-c "$CONSTRAINTS")
"$work/venv/bin/python" -m pip install -q "${args[@]}" "transformers==$low" || exit 1
echo "== model-runner tests with transformers $low (lowest admitted) =="
CONSTRAINED_SPEC_CACHE="$work/cache" "$work/venv/bin/python" -m pytest -q -p no:cacheprovider -o addopts= \
    tests/test_models.py tests/spec/test_runner_check.py tests/spec/test_runners.py tests/spec/test_model.py \
    tests/spec/test_static_runner.py tests/spec/test_static_runner_model.py
