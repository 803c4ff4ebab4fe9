"""A bf16 PyTorch prefill of the Qwen2.5-0.5B shape on the GPU: the
"neither exact nor cached" peer of muser's GPU benchmark
(scripts/cuda/gpu-bench.sh). Random weights (the timing does not depend
on their values), hidden 896, 24 layers, 14 heads, 2 KV heads, head dim
64, FFN 4864, vocab 151936, Q/K/V biases, NeoX RoPE, causal
scaled_dot_product_attention (flash kernels), logits of the last token
only. Prints one JSON line per prompt length: the median of 5 timed
prefills after 2 warm-ups, timed with CUDA events.

    python3 scripts/cuda/torch-prefill.py 2048 8192 32768
"""
import json
import sys

import torch
import torch.nn.functional as F

H, L, NH, NKV, D, FF, V = 896, 24, 14, 2, 64, 4864, 151936
dev, dt = "cuda", torch.bfloat16
g = torch.Generator(device=dev).manual_seed(1)


def w(*shape, scale=0.02):
    return (torch.randn(*shape, generator=g, device=dev, dtype=torch.float32) * scale).to(dt)


emb = w(V, H)
layers = [dict(n1=torch.ones(H, device=dev, dtype=dt), wq=w(NH * D, H), bq=w(NH * D), wk=w(NKV * D, H), bk=w(NKV * D),
               wv=w(NKV * D, H), bv=w(NKV * D), wo=w(H, NH * D), n2=torch.ones(H, device=dev, dtype=dt),
               wg=w(FF, H), wu=w(FF, H), wd=w(H, FF)) for _ in range(L)]
nout = torch.ones(H, device=dev, dtype=dt)


def rms(x, wt):
    return F.rms_norm(x, (H,), wt, 1e-6)


def rope(x, cos, sin):
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


@torch.no_grad()
def prefill(tokens):
    n = tokens.shape[0]
    pos = torch.arange(n, device=dev, dtype=torch.float32)
    inv = 1.0 / (1e6 ** (torch.arange(0, D // 2, device=dev, dtype=torch.float32) * 2 / D))
    ang = pos[:, None] * inv[None, :]
    cos, sin = ang.cos().to(dt)[None], ang.sin().to(dt)[None]
    x = emb[tokens]
    for l in layers:
        h = rms(x, l["n1"])
        q = F.linear(h, l["wq"], l["bq"]).view(n, NH, D).transpose(0, 1)
        k = F.linear(h, l["wk"], l["bk"]).view(n, NKV, D).transpose(0, 1)
        v = F.linear(h, l["wv"], l["bv"]).view(n, NKV, D).transpose(0, 1)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True, enable_gqa=True)[0]
        x = x + F.linear(a.transpose(0, 1).reshape(n, NH * D), l["wo"])
        h = rms(x, l["n2"])
        x = x + F.linear(F.silu(F.linear(h, l["wg"])) * F.linear(h, l["wu"]), l["wd"])
    return F.linear(rms(x[-1:], nout), emb)


for n in [int(a) for a in sys.argv[1:]] or [8192]:
    tokens = torch.randint(0, V, (n,), device=dev, generator=g)
    for _ in range(2):
        prefill(tokens)
    times = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        prefill(tokens)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1000)
    times.sort()
    print(json.dumps({"engine": "torch-bf16", "torch": torch.__version__, "prompt_tokens": n,
                      "prefill_tok_s": n / times[2], "median_s": times[2]}), flush=True)
