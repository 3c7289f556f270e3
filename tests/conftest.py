"""Suite-wide settings, applied before any test module is imported.

- No GPU here: Triton kernels run under the interpreter, which must be chosen before anything
  (a kernel test, the engine's kernel path, torch._dynamo) imports triton.
- Everything is offline: the default model and tokenizers come from local files only.
- Run in parallel (`-n 2`, pytest-xdist, `--dist loadgroup` from pyproject.toml): each test
  module runs whole on one worker (its module fixtures are built once), and the vLLM and live
  server tests each on one worker (one server per session, not one per worker). A worker's torch
  runs one thread: two workers of two threads each on two cores wait on each other.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_folder(tmp_path_factory):
    """A tiny random Llama + byte-level tokenizer as a local HF folder (context 96 tokens), for
    surface tests that need a real model object but not a good one (loads in well under a second)."""
    from constrained_spec.testing import save_tiny_hf_model

    return save_tiny_hf_model(tmp_path_factory.mktemp("tiny_model") / "tiny", max_positions=96)


# directories whose tests share one session-scoped server: kept on one worker
_ONE_WORKER_DIRS = ("vllm", "server")


def _group(item) -> str:
    """The item's `--dist loadgroup` group: its shared server's directory, else its module."""
    parts = item.nodeid.split("::")[0].split("/")
    return next((d for d in _ONE_WORKER_DIRS if d in parts[:-1]), "/".join(parts))


def pytest_collection_modifyitems(config, items):
    """Groups for `--dist loadgroup`: a module's tests together, a shared server's together; the
    vLLM tests first (the longest group, ~8 min: started last, one worker ran it alone)."""
    items.sort(key=lambda item: _group(item) != "vllm")  # stable: the rest keep their order
    for item in items:
        if not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(_group(item)))
