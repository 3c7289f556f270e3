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
        # rotate_half(x) * sin == roll(x, D/2) * sin_signed (the sign moved onto sin, once per forward)
        cos = angles.cos().to(x.dtype)  # [B, T, D]
        sin = angles.sin()
        half = self.head_dim // 2
        sin = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1).to(x.dtype)  # [B, T, D]
        cos_q, sin_q = cos[:, None], sin[:, None]  # [B, 1, T, D]: queries are [B, H, T, D]
        cos_k, sin_k = cos[:, :, None], sin[:, :, None]  # [B, T, 1, D]: keys are [B, T, Hkv, D]
        keys_at = torch.arange(window, device=ids.device)  # [W]
        visible = keys_at[None, None, :] <= positions[:, :, None]  # [B, T, W]
        # Queries are laid out [B, kv_heads, group * T, D] (no copy of keys per query head).
        mask = visible[:, None, None].expand(batch, 1, group, width, window).reshape(batch, 1, group * width, window)
        rows = torch.arange(batch, device=ids.device)[:, None].expand(batch, width)  # [B, T]
        # Few kernels per layer (a small model's step is bound by their count, not by arithmetic):
        # a fused RMSNorm, RoPE as one mul + roll + addcmul, residual adds inside the GEMMs.
        for index, layer in enumerate(self.layers):
            h = _rms_norm(x, layer["input_norm"], self.eps)
            q = layer["q_proj"](h).view(batch, width, self.num_heads, self.head_dim).transpose(1, 2)  # [B, H, T, D]
            k = layer["k_proj"](h).view(batch, width, self.num_kv_heads, self.head_dim)  # [B, T, Hkv, D]
            v = layer["v_proj"](h).view(batch, width, self.num_kv_heads, self.head_dim)  # [B, T, Hkv, D]
            q, k = _rotate(q, cos_q, sin_q), _rotate(k, cos_k, sin_k)
            k_cache = self.k_cache[index, first_slot : first_slot + batch]  # [B, Hkv, L, D] (a view)
            v_cache = self.v_cache[index, first_slot : first_slot + batch]
            k_cache[rows, :, positions] = k  # [B, T, Hkv, D] into (row, position)
            v_cache[rows, :, positions] = v
            q = q.reshape(batch, self.num_kv_heads, group * width, self.head_dim)
            out = F.scaled_dot_product_attention(q, k_cache[:, :, :window], v_cache[:, :, :window], attn_mask=mask)  # [B, Hkv, G*T, D]
            # rows of a kv head are (g, t): to [B, T, Hkv, G, D] = [B, T, H*D] in one copy, whatever
            # strides the attention kernel returned (CUDA's are not contiguous)
            out = out.unflatten(2, (group, width)).permute(0, 3, 1, 2, 4).reshape(batch, width, -1)
            x = _linear_add(x, out, layer["o_proj"])
            h = _rms_norm(x, layer["post_norm"], self.eps)
            x = _linear_add(x, F.silu(layer["gate_proj"](h)) * layer["up_proj"](h), layer["down_proj"])
        return _rms_norm(x, self.final_norm, self.eps)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """`[N, E]` hidden states -> float32 logits `[N, V]`."""
        return F.linear(hidden, self.lm_head).float()


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm: normalise in float32, cast back, then scale. In float32 that is
    F.rms_norm's arithmetic, up to rounding (one fused kernel where torch has one); in half
    precision the cast comes before the scale, as transformers does it."""
    if x.dtype == torch.float32 and weight.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """RoPE in transformers' half-split layout: x * cos + rotate_half(x) * sin, written as
    x * cos + roll(x, D/2) * sin_signed (sin with its first half negated): the same products."""
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, dims=-1), sin_signed)


def _linear_add(x: torch.Tensor, inputs: torch.Tensor, linear: torch.nn.Linear) -> torch.Tensor:
    """x + linear(inputs) `[B, T, E]`, the add inside the GEMM (addmm) where there is no bias."""
    if linear.bias is not None:
        return x + linear(inputs)
    return torch.addmm(x.reshape(-1, x.shape[-1]), inputs.reshape(-1, inputs.shape[-1]), linear.weight.t()).view(x.shape)
