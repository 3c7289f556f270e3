"""Run constrained_spec inside vLLM (the `vllm` extra): a general plugin that vLLM loads through
its `vllm.general_plugins` entry point in every process.

- `backend`: our grammar compiler and matchers as the structured-output backend
  "constrained_spec" (`structured_outputs_config={"backend": "constrained_spec"}`);
- `proposer`: our `auto` proposer chain as a speculative method
  (`speculative_config={"method": "custom_class", "model": proposer.PROPOSER_PATH, ...}`);
- `fix_55005`: on CPU, the fix for vLLM's sampled speculative decoding (vllm-project/vllm#55005),
  applied only where a probe shows the bug;
- `fix_seeded_prefill`: on CPU, seeded requests no longer kill the engine when their prompt is
  prefilled in chunks (CPU generators have no offset to rewind);
- `exactness`: the distribution check behind `constrained-spec verify --engine vllm`.

Only this package imports vllm; the rest of constrained_spec never imports it.
"""

from __future__ import annotations

__all__ = ["register"]


def register() -> None:
    """The `vllm.general_plugins` entry point (vLLM may call it several times per process)."""
    from . import backend, fix_55005, fix_seeded_prefill

    fix_55005.apply()
    fix_seeded_prefill.apply()
    backend.register()
