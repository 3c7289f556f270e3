"""User choices -> the objects the speculative loop needs: vocabulary, proposer, runner, engine.

`runner` names the model runner: "auto" (the static-cache runner where it implements the model,
the Llama family; transformers otherwise), "static" (that runner or a ValueError saying why not),
or "hf" (transformers' forward with per-request DynamicCaches).

`draft` names a proposer: "auto" (the proposers package's default chain), "forced", "ngram",
"suffix", "none" (no speculation), a local draft-model folder (an HF causal LM sharing the
target's tokenizer), or a ready `Proposer` object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["DRAFT_NAMES", "RUNNER_NAMES", "check_runner_name", "make_vocabulary", "make_proposer", "make_runner", "build_engine", "check_speculation_dtype", "text_decoder"]

DRAFT_NAMES = ("auto", "forced", "ngram", "suffix", "none")
RUNNER_NAMES = ("auto", "static", "hf")


def make_vocabulary(loaded: Any) -> Any:
    """The grammar vocabulary of a LoadedModel; the mask is as wide as the model's logits."""
    from .grammar import Vocabulary

    return Vocabulary.from_tokenizer(loaded.tokenizer, size=loaded.logits_width)


def make_proposer(draft: Any, loaded: Any, vocabulary: Any) -> Any:
    """A proposer (or None for "none") for `draft`; ValueError for an unknown name or folder."""
    if draft is None or draft == "none":
        return None
    if not isinstance(draft, (str, Path)):
        if not hasattr(draft, "propose"):
            raise ValueError(f"draft must be one of {', '.join(DRAFT_NAMES)}, a draft model folder or a Proposer, got {draft!r}")
        return draft
    from . import proposers

    name = str(draft)
    token_bytes = vocabulary.token_bytes
    if name == "auto":
        return proposers.auto_proposer(loaded.tokenizer, token_bytes=token_bytes)
    if name == "forced":
        return proposers.ForcedProposer(loaded.tokenizer, token_bytes=token_bytes)
    if name == "ngram":
        return proposers.NgramProposer(token_bytes=token_bytes, encode=loaded.tokenizer)
    if name == "suffix":
        return proposers.SuffixProposer()
    folder = Path(name).expanduser()
    if not folder.is_dir():
        raise ValueError(f"unknown draft {name!r}: expected one of {', '.join(DRAFT_NAMES)} or a draft model folder")
    from .models import load_model

    draft_model = load_model(folder)
    if draft_model.vocab_size != loaded.vocab_size:
        raise ValueError(
            f"draft model {folder} has a tokenizer of {draft_model.vocab_size} tokens, the target {loaded.vocab_size}: "
            "a draft model must share the target's tokenizer"
        )
    # The default chain with the draft model last: forced text and copies are free, the model fills the rest.
    return proposers.auto_proposer(
        loaded.tokenizer, token_bytes=token_bytes, draft_model=draft_model.model,
        vocab_size=loaded.logits_width, vocab_limit=loaded.vocab_size,
    )


def check_runner_name(runner: object) -> None:
    """ValueError unless `runner` names a model runner."""
    if runner not in RUNNER_NAMES:
        raise ValueError(f"runner must be one of {', '.join(RUNNER_NAMES)}, got {runner!r}")


def make_runner(model: Any, runner: str = "auto") -> Any:
    """The runner for an HF causal LM: see the module docstring for the names."""
    check_runner_name(runner)
    if runner != "hf":
        from .static_llama import unsupported_reason

        reason = unsupported_reason(model)
        if reason is None:
            from .runner_check import check_model_runner
            from .static_runner import StaticRunner

            static = StaticRunner(model)
            check_model_runner(static, model, "StaticRunner")  # once per model, device and dtype
            return static
        if runner == "static":
            raise ValueError(f"runner 'static' cannot run this model: {reason}; use runner 'hf'")
    from .runners import HFRunner

    return HFRunner(model)


def build_engine(loaded: Any, *, draft: Any = "auto", max_draft_tokens: int = 8, vocabulary: Any = None, runner: str = "auto") -> Any:
    """A speculative Engine for `loaded` with the chosen proposer and runner (`make_runner`)."""
    from .speculative import Engine, check_draft_limit

    vocabulary = vocabulary if vocabulary is not None else make_vocabulary(loaded)
    proposer = make_proposer(draft, loaded, vocabulary) if check_draft_limit(max_draft_tokens) > 0 else None
    if proposer is not None:
        check_speculation_dtype(loaded.model)
    tokenizer = loaded.tokenizer
    return Engine(
        make_runner(loaded.model, runner),
        eos_token_id=int(tokenizer.eos_token_id),
        proposer=proposer,
        vocabulary_limit=loaded.vocab_size,
        decode=text_decoder(tokenizer, vocabulary),
        max_draft_tokens=max_draft_tokens,
    )


def text_decoder(tokenizer: Any, vocabulary: Any) -> Any:
    """Token ids -> text as `tokenizer.decode(ids, skip_special_tokens=True)`: a
    `detokenizer.ByteDecoder` over the vocabulary's bytes where that is the same function (a
    byte-level decoder, no clean-up of spaces, every token's text its bytes; checked on the
    whole vocabulary, ~40 ms), else the tokenizer's own decode."""
    from .detokenizer import ByteDecoder

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True)

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or type(backend.decoder).__name__ != "ByteLevel" or getattr(tokenizer, "clean_up_tokenization_spaces", True):
        return decode
    # an added token that is not special is decoded apart from the bytes around it (a character
    # split across it would show as U+FFFD there, joined here)
    if any(not getattr(added, "special", True) for added in getattr(tokenizer, "added_tokens_decoder", {}).values()):
        return decode
    table = vocabulary.token_bytes
    singles = backend.decode_batch([[i] for i in range(len(table))], skip_special_tokens=True)
    if any((b.decode("utf-8", "replace") if b is not None else "") != text for b, text in zip(table, singles)):
        return decode
    return ByteDecoder(table)


def check_speculation_dtype(model: Any) -> None:
    """Speculation is offered only in a dtype whose verification drift (k + 1 rows scored together
    vs one) is measured no larger than plain decoding's drift between batch sizes on that device
    (devices.SPECULATION_DRIFT). Measured worse: DeviceError (a ValueError naming `dtype`); not
    measured: a warning naming the command that measures it."""
    import warnings

    from .devices import DeviceError, speculation_dtype_check

    parameter = next(model.parameters())
    reason = speculation_dtype_check(parameter.device, parameter.dtype)
    if reason is None:
        return
    if reason.startswith("refused"):
        raise DeviceError("dtype", f"speculation {reason}")
    warnings.warn(f"speculation in {str(parameter.dtype).removeprefix('torch.')} on {parameter.device.type}: {reason}", RuntimeWarning, stacklevel=3)
