"""constrained_spec: grammar-constrained speculative decoding that is fast and exact.

Importing this package is cheap: torch is the only heavy dependency loaded here; transformers,
triton and fastapi are imported only by the modules that need them.
"""

from __future__ import annotations

from .sampling import SamplingParams

__version__ = "0.1.0"
__all__ = ["SamplingParams", "__version__", "generate", "stream", "Generator", "Result"]

_LAZY_API = ("generate", "stream", "Generator", "Result")


def __getattr__(name: str):
    # The user-facing API is loaded on first use, so `import constrained_spec` stays cheap.
    if name in _LAZY_API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'constrained_spec' has no attribute {name!r}")
