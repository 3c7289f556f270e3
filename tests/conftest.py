"""Suite-wide settings, applied before any test module is imported.

- No GPU here: Triton kernels run under the interpreter, which must be chosen before anything
  (a kernel test, the engine's kernel path, torch._dynamo) imports triton.
- Everything is offline: the default model and tokenizers come from local files only.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_folder(tmp_path_factory):
    """A tiny random Llama + byte-level tokenizer as a local HF folder (context 96 tokens), for
    surface tests that need a real model object but not a good one (loads in well under a second)."""
    from constrained_spec.testing import save_tiny_hf_model

    return save_tiny_hf_model(tmp_path_factory.mktemp("tiny_model") / "tiny", max_positions=96)
