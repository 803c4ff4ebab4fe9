"""The default model: a llama-architecture decoder (RMSNorm, rotary position
embedding in llama.cpp's "normal" layout, grouped-query attention, SwiGLU,
tied input/output embeddings).

RoPE rotates adjacent pairs (x[2i], x[2i+1]) by pos * base^(-2i/head_dim),
which is what llama.cpp applies for the llama architecture (the original
Meta layout), so the Q and K weights are exported as they are, with no
permutation. Query head h uses key/value head h // (n_heads / n_kv_heads),
as ggml's broadcasting does.
"""

import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int = 2048
    dim: int = 256
    n_layers: int = 8
    n_heads: int = 8
    n_kv_heads: int = 4
    ffn_dim: int = 768
    context: int = 512
    rope_base: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self):
        return self.dim // self.n_heads

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * self.weight.float()).type_as(x)


def rope_tables(cfg, device):
    hd = cfg.head_dim
    inv = 1.0 / (cfg.rope_base ** (torch.arange(0, hd, 2, device=device, dtype=torch.float64) / hd))
    pos = torch.arange(cfg.context, device=device, dtype=torch.float64)
    ang = torch.outer(pos, inv)
    return ang.cos().float(), ang.sin().float()


def apply_rope(x, cos, sin):
    # x: (B, T, H, D); cos, sin: (T, D/2). Rotates adjacent pairs.
    T = x.shape[1]
    c = cos[:T][None, :, None, :]
    s = sin[:T][None, :, None, :]
    xf = x.float()
    x0, x1 = xf[..., 0::2], xf[..., 1::2]
    out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)
    return out.type_as(x)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.attn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * hd, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False)
        self.wo = nn.Linear(cfg.n_heads * hd, cfg.dim, bias=False)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.w1 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)  # gate
        self.w3 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)  # up
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)  # down

    def forward(self, x, cos, sin):
        cfg = self.cfg
        B, T, _ = x.shape
        hd = cfg.head_dim
        h = self.attn_norm(x)
        q = apply_rope(self.wq(h).view(B, T, cfg.n_heads, hd), cos, sin).transpose(1, 2)
        k = apply_rope(self.wk(h).view(B, T, cfg.n_kv_heads, hd), cos, sin).transpose(1, 2)
        v = self.wv(h).view(B, T, cfg.n_kv_heads, hd).transpose(1, 2)
        rep = cfg.n_heads // cfg.n_kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            y = att @ v
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, cfg.n_heads * hd))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        cos, sin = rope_tables(cfg, "cpu")
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.apply(self._init)
        for b in self.blocks:
            for w in (b.wo.weight, b.w2.weight):
                nn.init.normal_(w, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):
        x = self.tok_emb(idx)
        for b in self.blocks:
            x = b(x, self.cos, self.sin)
        x = self.norm(x)
        return x @ self.tok_emb.weight.t()  # tied output

    def n_params(self):
        return sum(p.numel() for p in self.parameters())


def gguf_tensors(model):
    """(name, numpy float32 array in PyTorch shape) in llama.cpp's naming."""
    out = [("token_embd.weight", model.tok_emb.weight)]
    for i, b in enumerate(model.blocks):
        p = f"blk.{i}."
        out += [
            (p + "attn_norm.weight", b.attn_norm.weight),
            (p + "attn_q.weight", b.wq.weight),
            (p + "attn_k.weight", b.wk.weight),
            (p + "attn_v.weight", b.wv.weight),
            (p + "attn_output.weight", b.wo.weight),
            (p + "ffn_norm.weight", b.ffn_norm.weight),
            (p + "ffn_gate.weight", b.w1.weight),
            (p + "ffn_up.weight", b.w3.weight),
            (p + "ffn_down.weight", b.w2.weight),
        ]
    out.append(("output_norm.weight", model.norm.weight))
    return [(n, t.detach().float().cpu().numpy()) for n, t in out]
