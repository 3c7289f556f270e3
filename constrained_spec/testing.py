"""Toy models, vocabularies and grammars: small enough to enumerate, cheap enough to sample 20k times.

- `ToyLM`: a plain callable causal LM `model(input_ids [B, T]) -> logits [B, T, V]` built from
  random tables (current token, previous token, position), so it depends on more than the last
  token and penalties, positions and ragged batches all matter. `ToyLM.perturbed()` gives a draft
  model that agrees only partly with its target.
- `toy_vocabulary()`: a `Vocabulary` of short strings plus an EOS token, for grammar backends.
- `ToyDFAGrammar`: a `CompiledGrammar` from an explicit DFA over token ids, with the full
  `GrammarMatcher` protocol, and `complete_sequences()` to enumerate what it accepts.
- `tiny_hf_model()`: a random one-layer HF Llama with a byte-level tokenizer, for fast
  end-to-end tests of `Generator` and the server (needs transformers).

Public so users can run the whole engine without a real model (`CallableRunner(ToyLM(...))`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import torch

from .bitmask import bitmask_width
from .devices import upload
from .grammar.protocol import GrammarError

if TYPE_CHECKING:
    from .models import LoadedModel

__all__ = ["ToyLM", "toy_vocabulary", "TOY_TOKENS", "ToyDFAGrammar", "ToyDFAMatcher", "tiny_hf_model", "save_tiny_hf_model"]

# Token 0 is EOS; the rest are short strings with shared prefixes so forced-string proposers and
# tokenization ambiguity both show up.
TOY_TOKENS: tuple[str, ...] = ("<eos>", "a", "b", "c", "ab", "ba", "{", "}", '"', ":", ",", " ")


def toy_vocabulary(tokens: Sequence[str] = TOY_TOKENS, eos_token_id: int = 0, size: int | None = None):
    """A `constrained_spec.grammar.vocabulary.Vocabulary` over `tokens` (EOS at `eos_token_id`)."""
    from .grammar.vocabulary import Vocabulary

    token_list: list[str | None] = list(tokens)
    token_list[eos_token_id] = None  # special: never allowed by a grammar except as EOS
    return Vocabulary.from_tokens(token_list, eos_token_id=eos_token_id, size=size)


class ToyLM:
    """A seeded random causal LM: logits[t] = cur[x_t] + prev[x_{t-1}] + pos[min(t, P - 1)].

    Row t depends only on input_ids[:, :t + 1] (causal), so right padding never changes it.
    `scale` sets how peaked the distributions are.
    """

    def __init__(self, vocab_size: int = len(TOY_TOKENS), seed: int = 0, scale: float = 1.5, max_positions: int = 16) -> None:
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
        gen = torch.Generator().manual_seed(seed)
        self.vocab_size = vocab_size
        self.cur = torch.randn(vocab_size, vocab_size, generator=gen) * scale  # [V, V]
        self.prev = torch.randn(vocab_size + 1, vocab_size, generator=gen) * scale * 0.5  # [V + 1, V]; row V = no previous token
        self.pos = torch.randn(max_positions, vocab_size, generator=gen) * scale * 0.5  # [P, V]

    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be [B, T], got shape {tuple(input_ids.shape)}")
        device = self.cur.device
        ids = upload(input_ids.long(), device)
        batch, length = ids.shape
        prev_ids = torch.cat([torch.full((batch, 1), self.vocab_size, dtype=torch.long, device=device), ids[:, :-1]], dim=1)  # [B, T]
        positions = torch.arange(length, device=device).clamp_max(self.pos.shape[0] - 1)  # [T]
        return self.cur[ids] + self.prev[prev_ids] + self.pos[positions]  # [B, T, V]

    def to(self, device: torch.device | str) -> "ToyLM":
        """The same model with its tables on `device` (its logits are then computed there)."""
        other = ToyLM.__new__(ToyLM)
        other.vocab_size = self.vocab_size
        other.cur, other.prev, other.pos = (t.to(device) for t in (self.cur, self.prev, self.pos))
        return other

    def perturbed(self, noise: float = 0.7, seed: int = 1) -> "ToyLM":
        """A draft model: this model's tables plus seeded Gaussian noise (acceptance well below 1)."""
        gen = torch.Generator().manual_seed(seed)
        other = ToyLM.__new__(ToyLM)
        other.vocab_size = self.vocab_size
        other.cur = self.cur + noise * torch.randn(self.cur.shape, generator=gen).to(self.cur.device)
        other.prev = self.prev + noise * torch.randn(self.prev.shape, generator=gen).to(self.cur.device)
        other.pos = self.pos + noise * torch.randn(self.pos.shape, generator=gen).to(self.cur.device)
        return other


class ToyDFAGrammar:
    """A compiled grammar from an explicit DFA over token ids.

    transitions: state -> {token_id: next_state}. accepting: states where EOS is allowed.
    EOS must not appear in `transitions`. Immutable and shareable, like every `CompiledGrammar`.
    token_bytes (optional) gives each token's bytes, for `forced_bytes`.
    """

    def __init__(
        self,
        transitions: Mapping[int, Mapping[int, int]],
        accepting: Iterable[int],
        vocab_size: int,
        eos_token_id: int,
        start: int = 0,
        token_bytes: Sequence[bytes | None] | None = None,
    ) -> None:
        self.transitions = {int(s): {int(t): int(n) for t, n in edges.items()} for s, edges in transitions.items()}
        self.accepting = frozenset(int(s) for s in accepting)
        self._vocab_size = vocab_size
        self.eos_token_id = eos_token_id
        self.start = start
        self.token_bytes = tuple(token_bytes) if token_bytes is not None else None
        self._packed: dict[int, torch.Tensor] = {}  # state -> packed mask row (-1: terminated)
        for state, edges in self.transitions.items():
            for token in edges:
                if token == eos_token_id or not 0 <= token < vocab_size:
                    raise GrammarError(f"state {state}: token {token} must be a non-EOS id below {vocab_size}")

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def matcher(self) -> "ToyDFAMatcher":
        return ToyDFAMatcher(self)

    def allowed(self, state: int) -> list[int]:
        """Allowed token ids at `state` (EOS included where accepting)."""
        tokens = sorted(self.transitions.get(state, {}))
        return tokens + [self.eos_token_id] if state in self.accepting else tokens

    def complete_sequences(self, max_tokens: int) -> list[tuple[int, ...]]:
        """Every token sequence ending in EOS with at most `max_tokens` tokens (EOS counted)."""
        out: list[tuple[int, ...]] = []
        frontier: list[tuple[tuple[int, ...], int]] = [((), self.start)]
        for _ in range(max_tokens):
            nxt = []
            for seq, state in frontier:
                if state in self.accepting:
                    out.append(seq + (self.eos_token_id,))
                for token, to in self.transitions.get(state, {}).items():
                    nxt.append((seq + (token,), to))
            frontier = nxt
        return out


class ToyDFAMatcher:
    """One request's position in a `ToyDFAGrammar` (a stack of visited states)."""

    def __init__(self, grammar: ToyDFAGrammar) -> None:
        self.grammar = grammar
        self._states = [grammar.start]
        self._terminated = False

    @property
    def vocab_size(self) -> int:
        return self.grammar.vocab_size

    def _next(self, state: int, token: int) -> int | None:
        """Next state, or None if `token` is forbidden; -1 for an accepted EOS."""
        if token == self.grammar.eos_token_id:
            return -1 if state in self.grammar.accepting else None
        return self.grammar.transitions.get(state, {}).get(token)

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        if bitmask.shape[-1] < bitmask_width(self.vocab_size):
            raise GrammarError(f"bitmask has {bitmask.shape[-1]} words, {bitmask_width(self.vocab_size)} needed")
        state = -1 if self._terminated else self._states[-1]
        packed = self.grammar._packed.get(state)
        if packed is None:  # cached per state: the grammar is immutable
            words = [0] * bitmask_width(self.vocab_size)
            for token in self.grammar.allowed(state) if state != -1 else []:
                words[token // 32] |= 1 << (token % 32)
            words = [w - (1 << 32) if w >= 1 << 31 else w for w in words]  # int32 two's complement
            packed = self.grammar._packed.setdefault(state, torch.tensor(words, dtype=torch.int32))
        if bitmask.shape[-1] == packed.shape[0]:
            bitmask[row] = packed
        else:
            bitmask[row] = 0
            bitmask[row, : packed.shape[0]] = packed

    def accept_token(self, token_id: int) -> None:
        nxt = None if self._terminated else self._next(self._states[-1], token_id)
        if nxt is None:
            raise GrammarError(f"token {token_id} is not allowed in state {self._states[-1]}")
        self._states.append(nxt)
        self._terminated = nxt == -1

    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        if self._terminated:
            return 0
        state = self._states[-1]
        for i, token in enumerate(token_ids):
            nxt = self._next(state, int(token))
            if nxt is None:
                return i
            if nxt == -1:
                return i + 1
            state = nxt
        return len(token_ids)

    def rollback(self, num_tokens: int) -> None:
        if num_tokens < 0 or num_tokens >= len(self._states):
            raise GrammarError(f"cannot roll back {num_tokens} tokens: {len(self._states) - 1} accepted")
        if num_tokens:
            del self._states[-num_tokens:]
            self._terminated = self._states[-1] == -1

    def is_accepting(self) -> bool:
        return not self._terminated and self._states[-1] in self.grammar.accepting

    def is_terminated(self) -> bool:
        return self._terminated or (not self.grammar.allowed(self._states[-1]))

    def forced_bytes(self, max_bytes: int = 64) -> bytes:
        """The longest common byte prefix of every valid continuation (so `ab` is forced where
        the tokens `ab` and `a` `b` both lead on), cut at `max_bytes`."""
        token_bytes = self.grammar.token_bytes
        if token_bytes is None or self._terminated:
            return b""
        common: bytes | None = None  # the prefix shared by every path walked so far
        stack = [(self._states[-1], b"")]
        while stack:  # depth first; a path only matters up to the length of `common`
            state, text = stack.pop()
            limit = max_bytes if common is None else len(common)
            if state in self.grammar.accepting or len(text) >= limit:
                common = text[:limit] if common is None else os.path.commonprefix([common, text])
                continue
            for token, nxt in self.grammar.transitions.get(state, {}).items():  # none: a dead end
                stack.append((nxt, text + (token_bytes[token] or b"")))
        return (common or b"")[:max_bytes]

    def fork(self) -> "ToyDFAMatcher":
        other = ToyDFAMatcher(self.grammar)
        other._states = list(self._states)
        other._terminated = self._terminated
        return other


def tiny_hf_model(seed: int = 0, hidden_size: int = 32) -> LoadedModel:
    """A `LoadedModel` small enough for end-to-end tests of `Generator` and the server: a random
    one-layer Llama over a byte-level tokenizer of the 256 bytes plus EOS (no merges, no chat
    template). Its outputs are noise, but every constraint and code path is the real one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from .models import LoadedModel

    vocab = {char: i for i, char in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    eos = vocab["<|endoftext|>"] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(["<|endoftext|>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>")
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=hidden_size, intermediate_size=2 * hidden_size, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
        bos_token_id=eos, eos_token_id=eos, pad_token_id=eos,
    )
    with torch.random.fork_rng():  # seeded weights without touching the caller's RNG
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).eval()
    return LoadedModel(model=model, tokenizer=tokenizer, name=f"tiny-random-llama-{seed}")


_TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def save_tiny_hf_model(folder: str | os.PathLike, *, max_positions: int = 256, seed: int = 0) -> str:
    """Write a tiny random Llama causal LM with a byte-level tokenizer (256 bytes + 3 ChatML
    specials, EOS = <|im_end|>) as a local Hugging Face folder; returns the folder.

    For surface tests (CLI, API, server) that need a real HF model and tokenizer but not a good
    one: it loads in well under a second and grammars over its 259 tokens compile instantly.
    `max_positions` is its context length (max_position_embeddings)."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    byte_chars = pre_tokenizers.ByteLevel.alphabet()  # the 256 printable stand-ins for bytes
    vocab = {ch: i for i, ch in enumerate(sorted(byte_chars))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", bos_token="<|im_start|>", pad_token="<|endoftext|>",
    )
    tokenizer.chat_template = _TINY_CHAT_TEMPLATE
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=max_positions, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id, pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)
