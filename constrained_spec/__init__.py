"""constrained_spec: grammar-constrained speculative decoding that is fast and exact.

Importing this package is cheap: torch is the only heavy dependency loaded here; transformers,
triton and fastapi are imported only by the modules that need them.
"""

from __future__ import annotations

from .sampling import SamplingParams

__version__ = "0.1.0"
__all__ = ["SamplingParams", "__version__"]
