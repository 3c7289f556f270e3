"""A Llama-family forward over a static, slot-indexed KV cache (used by `static_runner`).

The weights are the Hugging Face model's own tensors (no copy). The cache is two buffers
`[layers, slots, kv_heads, capacity, head_dim]`: slot s holds one request's keys/values at
positions 0..length-1; anything at or beyond a slot's length is garbage that the next forward
overwrites. A forward runs a contiguous range of slots (one row per slot), writes its new keys and
values at the given positions and attends, per row, to positions <= its own (a mask over the slot),
so ragged batches need no re-padding and rollback is the runner moving a length.

`unsupported_reason(model)` names what this file does not implement (other architectures, RoPE
scaling types, activations, quantized weights); the runner then falls back to transformers.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["StaticLlama", "unsupported_reason"]


def _rope_parameters(config: Any) -> dict:
    """transformers >= 5 keeps theta and the type in `rope_parameters`; 4.x in rope_theta/rope_scaling."""
    params = getattr(config, "rope_parameters", None)
    if params:
        return dict(params)
    scaling = getattr(config, "rope_scaling", None) or {}
    return {"rope_type": scaling.get("rope_type", scaling.get("type", "default")), "rope_theta": getattr(config, "rope_theta", 10000.0), **scaling}


def unsupported_reason(model: Any) -> str | None:
    """None when `model` is a Hugging Face Llama this file implements exactly, else why not."""
    config = getattr(model, "config", None)
    if type(model).__name__ != "LlamaForCausalLM" or getattr(config, "model_type", None) != "llama":
        return f"architecture {type(model).__name__} ({getattr(config, 'model_type', None)}) is not a Llama"
    rope = _rope_parameters(config)
    if rope.get("rope_type", "default") != "default":
        return f"rope type {rope.get('rope_type')!r} is not implemented (only 'default')"
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        return "partial rotary embeddings are not implemented"
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"activation {config.hidden_act!r} is not implemented (only 'silu')"
    if getattr(config, "pretraining_tp", 1) != 1:
        return "pretraining_tp != 1 is not implemented"
    if getattr(model, "hf_quantizer", None) is not None or getattr(config, "quantization_config", None):
        return "quantized weights are not implemented"
    weights = list(model.parameters())
    if any(w.device != weights[0].device or w.dtype != weights[0].dtype for w in weights):
        return "weights spread over several devices or dtypes"
    if weights[0].device.type == "meta":
        return "weights are on the meta device"
    return None


class StaticLlama(torch.nn.Module):
    """The forward of an HF LlamaForCausalLM over a slot cache. Caches are buffers, so a compiled
    forward (CUDA graphs) sees them at fixed addresses; `resize` reallocates them (and a compiled
    forward recompiles once for the new shapes)."""

    def __init__(self, model: Any, slots: int, capacity: int) -> None:
        super().__init__()
        reason = unsupported_reason(model)
        if reason is not None:
            raise ValueError(f"StaticLlama cannot run this model: {reason}")
        config = model.config
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = getattr(config, "num_key_value_heads", None) or self.num_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.num_heads
        self.eps = float(config.rms_norm_eps)
        inner = model.model
        self.embed = inner.embed_tokens.weight  # [V, E]
        self.final_norm = inner.norm.weight  # [E]
        self.lm_head = model.get_output_embeddings().weight  # [V, E] (the embedding when tied)
        self.layers = [
            {
                "input_norm": layer.input_layernorm.weight, "post_norm": layer.post_attention_layernorm.weight,
                **{name: getattr(layer.self_attn, name) for name in ("q_proj", "k_proj", "v_proj", "o_proj")},
                **{name: getattr(layer.mlp, name) for name in ("gate_proj", "up_proj", "down_proj")},
            }
            for layer in inner.layers
        ]
        theta = float(_rope_parameters(config)["rope_theta"])
        device, dtype = self.embed.device, self.embed.dtype
        # The same float32 formula as transformers' default RoPE, so cos/sin match bit for bit.
        inv_freq = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float) / self.head_dim))
        self.register_buffer("inv_freq", inv_freq.to(device), persistent=False)  # [D / 2]
        shape = (len(self.layers), slots, self.num_kv_heads, capacity, self.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device), persistent=False)

    @property
    def slots(self) -> int:
        return self.k_cache.shape[1]

    @property
    def capacity(self) -> int:
        return self.k_cache.shape[3]

    def resize(self, slots: int, capacity: int) -> None:
        """Grow the cache to at least (slots, capacity), keeping what is stored."""
        if slots <= self.slots and capacity <= self.capacity:
            return
        slots, capacity = max(slots, self.slots), max(capacity, self.capacity)
        for name in ("k_cache", "v_cache"):
            old = getattr(self, name)
            new = old.new_zeros(old.shape[0], slots, old.shape[2], capacity, old.shape[4])
            new[:, : old.shape[1], :, : old.shape[3]] = old
            setattr(self, name, new)

    def copy_prefix(self, slot: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Put saved keys/values `[layers, kv_heads, n, D]` at positions 0..n-1 of `slot`."""
        n = keys.shape[2]
        self.k_cache[:, slot, :, :n] = keys
        self.v_cache[:, slot, :, :n] = values

    def read_prefix(self, slot: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A copy of `slot`'s keys/values at positions 0..n-1, `[layers, kv_heads, n, D]` each."""
        return self.k_cache[:, slot, :, :n].clone(), self.v_cache[:, slot, :, :n].clone()

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, first_slot: int, window: int) -> torch.Tensor:
        """Rows b of `ids`/`positions` `[B, T]` are slots first_slot + b. Writes the new keys and
        values at `positions`, attends over cache positions < window (each query to positions
        <= its own) and returns the final-norm hidden states `[B, T, E]`."""
        batch, width = ids.shape
        group = self.num_heads // self.num_kv_heads
        x = F.embedding(ids, self.embed)  # [B, T, E]
        freqs = positions[..., None].float() * self.inv_freq  # [B, T, D / 2]
        angles = torch.cat((freqs, freqs), dim=-1)  # [B, T, D]
        cos, sin = angles.cos().to(x.dtype)[:, None], angles.sin().to(x.dtype)[:, None]  # [B, 1, T, D]
        keys_at = torch.arange(window, device=ids.device)  # [W]
        visible = keys_at[None, None, :] <= positions[:, :, None]  # [B, T, W]
        # Queries are laid out [B, kv_heads, group * T, D] (no copy of keys per query head).
        mask = visible[:, None, None].expand(batch, 1, group, width, window).reshape(batch, 1, group * width, window)
        rows = torch.arange(batch, device=ids.device)[:, None].expand(batch, width)  # [B, T]
        for index, layer in enumerate(self.layers):
            h = _rms_norm(x, layer["input_norm"], self.eps)
            q = layer["q_proj"](h).view(batch, width, self.num_heads, self.head_dim).transpose(1, 2)  # [B, H, T, D]
            k = layer["k_proj"](h).view(batch, width, self.num_kv_heads, self.head_dim).transpose(1, 2)  # [B, Hkv, T, D]
            v = layer["v_proj"](h).view(batch, width, self.num_kv_heads, self.head_dim)  # [B, T, Hkv, D]
            q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
            k_cache = self.k_cache[index, first_slot : first_slot + batch]  # [B, Hkv, L, D] (a view)
            v_cache = self.v_cache[index, first_slot : first_slot + batch]
            k_cache[rows, :, positions] = k.transpose(1, 2)  # [B, T, Hkv, D] into (row, position)
            v_cache[rows, :, positions] = v
            q = q.reshape(batch, self.num_kv_heads, group * width, self.head_dim)
            out = F.scaled_dot_product_attention(q, k_cache[:, :, :window], v_cache[:, :, :window], attn_mask=mask)  # [B, Hkv, G*T, D]
            out = out.reshape(batch, self.num_heads, width, self.head_dim).transpose(1, 2).reshape(batch, width, -1)  # [B, T, H*D] (CUDA attention may return it strided)
            x = x + layer["o_proj"](out)
            h = _rms_norm(x, layer["post_norm"], self.eps)
            x = x + layer["down_proj"](F.silu(layer["gate_proj"](h)) * layer["up_proj"](h))
        return _rms_norm(x, self.final_norm, self.eps)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """`[N, E]` hidden states -> float32 logits `[N, V]`."""
        return F.linear(hidden, self.lm_head).float()


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm: normalise in float32, cast back, then scale."""
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE in transformers' half-split layout: x * cos + rotate_half(x) * sin."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin
