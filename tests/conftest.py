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
