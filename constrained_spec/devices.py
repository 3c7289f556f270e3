"""Device and dtype choices: `auto | cpu | cuda[:N]` and `auto | float32 | bfloat16 | float16`.

Resolved (and rejected with a clear error) before any model loads. `auto` picks the first CUDA
device when one is present, else the CPU; the dtype `auto` is float32, the only dtype whose
verification drift is measured no larger than plain decoding's on every device so far (see
`speculation_dtype_check` and README, "Devices and environments").
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "DEVICE_CHOICES",
    "DTYPE_CHOICES",
    "DeviceError",
    "resolve_device",
    "resolve_dtype",
    "speculation_dtype_check",
    "SPECULATION_DRIFT",
]

DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")
_DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}


class DeviceError(ValueError):
    """A device or dtype that is malformed or not present on this machine. `field` names the option."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def resolve_device(device: Any = None) -> Any:
    """None / "auto" / "cpu" / "cuda" / "cuda:N" / a torch.device -> an available torch.device."""
    import torch

    if device is None or (isinstance(device, str) and device.strip().lower() == "auto"):
        return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    if isinstance(device, torch.device):
        text = str(device)
    elif isinstance(device, str):
        text = device.strip().lower()
    else:
        raise DeviceError("device", f"expected one of {DEVICE_CHOICES}, got {device!r}")
    match = re.fullmatch(r"(cpu|cuda)(?::(\d+))?", text)
    if match is None or (match.group(1) == "cpu" and match.group(2) not in (None, "0")):
        raise DeviceError("device", f"expected one of {DEVICE_CHOICES}, got {device!r}")
    if match.group(1) == "cpu":
        return torch.device("cpu")
    index = int(match.group(2) or 0)
    if not torch.cuda.is_available():
        raise DeviceError("device", f"{text!r} asked for, but torch {torch.__version__} sees no CUDA device (use --device cpu or auto)")
    if index >= torch.cuda.device_count():
        raise DeviceError("device", f"{text!r} asked for, but only {torch.cuda.device_count()} CUDA device(s) are present")
    return torch.device("cuda", index)


def resolve_dtype(dtype: Any = None) -> Any:
    """None / "auto" / a name in DTYPE_CHOICES (or fp32/bf16/fp16) / a torch dtype -> torch dtype."""
    import torch

    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        name = str(dtype).removeprefix("torch.")
    elif isinstance(dtype, str):
        name = _DTYPE_ALIASES.get(dtype.strip().lower(), dtype.strip().lower())
    else:
        name = ""
    if name == "auto":
        return torch.float32
    if name not in DTYPE_CHOICES:
        raise DeviceError("dtype", f"expected one of {', '.join(DTYPE_CHOICES)}, got {dtype!r}")
    return getattr(torch, name)


# Logit drift of the target, measured by `python benchmarks/verify_cost.py` (see README):
# (device type, dtype) -> (max |logit diff| scoring k + 1 rows vs 1 row, max |logit diff| between
# batch sizes in plain decoding). Speculation changes the target distribution by the first; plain
# decoding already varies by the second. A dtype is offered for speculation only where the first is
# no larger than the second, or than the dtype's rounding floor: in float32 plain cached decoding
# already differs from one full forward by ~7e-5 (runner_check), so drift below 1e-4 is that same
# rounding, not a different distribution. Combinations not listed have not been measured.
SPECULATION_DRIFT: dict[tuple[str, str], tuple[float, float]] = {
    # `python benchmarks/verify_cost.py --devices cpu --dtypes float32 bfloat16 --sizes 1 9 --context 64
    # --length 18` (k = 8, batch of 4), default model, static runner, torch 2.13 CPU build.
    ("cpu", "float32"): (4.98e-05, 5.15e-05),
    ("cpu", "bfloat16"): (0.5, 0.25),  # oneDNN picks other kernels for 1 and 9 rows: refused
    # `python benchmarks/gpu_check.py` (its drift step: verify_cost.py --devices cuda, k = 8, batch
    # of 4, context 200), default model, static runner with CUDA graphs, one H200, torch 2.11 cu130.
    ("cuda", "float32"): (4.77e-05, 2.67e-05),  # below the float32 floor: offered
    ("cuda", "bfloat16"): (0.0, 0.0),  # bit-identical rows for 1 and 9 tokens: offered
    ("cuda", "float16"): (0.0547, 0.0),  # refused
}
ROUNDING_FLOOR = {"float32": 1e-4}  # see above; half precisions have none: their drift must not exceed batching's


def speculation_dtype_check(device: Any, dtype: Any) -> str | None:
    """None when speculation is measured as exact enough on (device, dtype); otherwise the reason
    (measured worse, or not measured). Callers raise for the first and warn for the second."""
    key = (str(getattr(device, "type", device)), str(dtype).removeprefix("torch."))
    drift = SPECULATION_DRIFT.get(key)
    if drift is None:
        return f"unmeasured: the verification drift of {key[1]} on {key[0]} is not measured (run benchmarks/verify_cost.py)"
    k_rows, batch_sizes = drift
    if k_rows > max(batch_sizes, ROUNDING_FLOOR.get(key[1], 0.0)):
        return (
            f"refused: scoring k + 1 rows moves {key[1]} logits on {key[0]} by up to {k_rows:.3g}, more than plain decoding "
            f"varies between batch sizes ({batch_sizes:.3g}); use float32 or --draft none"
        )
    return None


def upload(tensor: Any, device: Any) -> Any:
    """A host tensor on `device` without a host sync. On CUDA a plain `.to(device)` of pageable
    memory waits for the copy (a sync per upload); through pinned memory with non_blocking=True it
    is queued on the stream instead (torch keeps the pinned buffer alive until the copy is done)."""
    import torch

    device = torch.device(device)
    if device.type != "cuda" or tensor.device.type != "cpu":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)
