"""Trains a block drafter for a target of the default model's family and
exports it as an F32 GGUF (architecture "muser-blockdraft", docs/blockdraft.md).

The drafter proposes B-1 tokens in one forward pass: given the target's
final-normed hidden state h after token x_p and the token a = x_{p+1} the
target sampled there, it predicts x_{p+2} ... x_{p+B}. Its B positions are
the anchor's embedding and B-1 learned mask vectors, each concatenated with
h and projected (fc), then L bidirectional transformer layers, then the
output norm and the vocabulary projection.

Training data: the recipe's corpus (corpusgen, the target's training text),
in windows of --context tokens. The target (loaded from its GGUF, Q8_0 or Q4_K
dequantized) runs over each window once, without gradients, and gives the
hidden states and its own greedy predictions; the drafter learns, at
--positions anchor positions per window, to predict the target's greedy
token at each block position (teacher forcing: the target's argmax after
the corpus prefix), with position j's loss weighted by exp(-(j-1)/gamma)
(the first draft tokens matter most: a draft is accepted up to its first
miss).

With --rollout-windows, each step also trains on windows the target wrote
itself: a pool made once at the start, each a corpus prefix of 128 to 512
tokens continued to --rollout-len tokens by the target (greedy for half of
them, sampled at temperature 0.8 for the others) with its end-of-generation
tokens banned, as `muser bench` decodes; anchors are drawn from the written
part and the labels are the target's greedy tokens with those tokens banned.
A drafter trained on the corpus alone drafts well until the target would end
its answer and poorly after (the target's text there is unlike any corpus
text), where a benchmark that bans the end spends most of its tokens.

Outputs in --out: drafter-f32.gguf, report.json (the configuration, losses,
per-position accuracy, and the greedy acceptance measured by decoding with
the target and drafting at each step), vectors.json (hidden states, anchors
and the drafts of the exported F32 drafter, for checking the Go forward
pass).
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import ggufw
import tok as tokmod
from model import Config, Model, RMSNorm, apply_rope, rope_tables
from train import load_corpus, log, pack

ARCH = "muser-blockdraft"


# ---- the target ---------------------------------------------------------------

_LAYER_NAMES = {
    "attn_norm.weight": "attn_norm.weight", "attn_q.weight": "wq.weight", "attn_k.weight": "wk.weight",
    "attn_v.weight": "wv.weight", "attn_output.weight": "wo.weight", "ffn_norm.weight": "ffn_norm.weight",
    "ffn_gate.weight": "w1.weight", "ffn_up.weight": "w3.weight", "ffn_down.weight": "w2.weight",
}


def load_target(path):
    """Returns (Model, metadata) from a llama-architecture GGUF of the family."""
    meta, ts = ggufw.read(path)
    if meta.get("general.architecture") != "llama":
        raise SystemExit(f"{path}: architecture {meta.get('general.architecture')!r}, want llama")
    cfg = Config(vocab_size=len(meta["tokenizer.ggml.tokens"]), dim=meta["llama.embedding_length"],
                 n_layers=meta["llama.block_count"], n_heads=meta["llama.attention.head_count"],
                 n_kv_heads=meta["llama.attention.head_count_kv"], ffn_dim=meta["llama.feed_forward_length"],
                 context=meta["llama.context_length"], rope_base=meta["llama.rope.freq_base"],
                 norm_eps=meta["llama.attention.layer_norm_rms_epsilon"])
    model = Model(cfg)
    sd = {}
    for name, (typ, dims, arr) in ts.items():
        if arr is None:
            raise SystemExit(f"{path}: tensor {name} has ggml type {typ}; the recipe reads F32, F16, Q8_0 and Q4_K")
        if name == "token_embd.weight":
            key = "tok_emb.weight"
        elif name == "output_norm.weight":
            key = "norm.weight"
        elif name.startswith("blk."):
            _, i, rest = name.split(".", 2)
            key = f"blocks.{i}.{_LAYER_NAMES[rest]}"
        else:
            raise SystemExit(f"{path}: unexpected tensor {name}")
        sd[key] = torch.from_numpy(np.array(arr, dtype=np.float32))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise SystemExit(f"{path}: tensors missing {missing}, unexpected {unexpected}")
    return model, meta


def target_pass(model, idx):
    """The final-normed hidden states and the logits of a batch of windows."""
    x = model.tok_emb(idx)
    for b in model.blocks:
        x = b(x, model.cos, model.sin)
    h = model.norm(x)
    return h, h @ model.tok_emb.weight.t()


# The texts of tokens that end generation wherever a vocabulary has them,
# as muser's tokenizer lists them (infer/tokenizer).
EOG_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
             "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
             "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>")


def eog_ids(meta):
    """The target's end-of-generation tokens: the metadata's EOS, EOT and
    EOM ids and the tokens whose text is in EOG_TEXTS."""
    ids = {int(meta[k]) for k in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                  "tokenizer.ggml.eom_token_id") if k in meta}
    ids.update(i for i, t in enumerate(meta["tokenizer.ggml.tokens"]) if t in EOG_TEXTS)
    return sorted(ids)


@torch.no_grad()
def rollouts(model, prompts, n_new, ban, temps, gen, dtype):
    """Continues each row of prompts (N, Lp) by n_new tokens written by the
    target with a key/value cache: greedy where temps is 0, else sampled at
    that temperature, the tokens of ban never chosen. Returns (N, Lp+n_new)."""
    cfg = model.cfg
    N, Lp = prompts.shape
    hd, rep = cfg.head_dim, cfg.n_heads // cfg.n_kv_heads
    shape = (N, cfg.n_kv_heads, Lp + n_new, hd)
    cache = [(torch.zeros(shape, device=prompts.device, dtype=dtype),
              torch.zeros(shape, device=prompts.device, dtype=dtype)) for _ in model.blocks]

    def run(tok, pos):
        t = tok.shape[1]
        cos, sin = model.cos[pos:pos + t], model.sin[pos:pos + t]
        x = model.tok_emb(tok)
        for b, (K, V) in zip(model.blocks, cache):
            h = b.attn_norm(x)
            q = apply_rope(b.wq(h).view(N, t, cfg.n_heads, hd), cos, sin).transpose(1, 2)
            K[:, :, pos:pos + t] = apply_rope(b.wk(h).view(N, t, cfg.n_kv_heads, hd), cos, sin).transpose(1, 2)
            V[:, :, pos:pos + t] = b.wv(h).view(N, t, cfg.n_kv_heads, hd).transpose(1, 2)
            k = K[:, :, :pos + t].repeat_interleave(rep, dim=1)
            v = V[:, :, :pos + t].repeat_interleave(rep, dim=1)
            y = F.scaled_dot_product_attention(q.to(dtype), k, v, is_causal=t > 1)
            x = x + b.wo(y.transpose(1, 2).reshape(N, t, cfg.n_heads * hd))
            h = b.ffn_norm(x)
            x = x + b.w2(F.silu(b.w1(h)) * b.w3(h))
        return (model.norm(x[:, -1]) @ model.tok_emb.weight.t()).float()

    out = [prompts]
    greedy = temps <= 0
    lg = run(prompts, 0)
    for i in range(n_new):
        lg[:, ban] = -float("inf")
        pr = torch.softmax(lg / temps.clamp(min=1e-3)[:, None], -1)
        nxt = torch.where(greedy, lg.argmax(-1), torch.multinomial(pr, 1, generator=gen)[:, 0])
        out.append(nxt[:, None])
        if i + 1 < n_new:
            lg = run(nxt[:, None], Lp + i)
    return torch.cat(out, 1)


# ---- the drafter ----------------------------------------------------------------

class DraftLayer(nn.Module):
    """A transformer layer whose attention is bidirectional within the block."""

    def __init__(self, dim, heads, kv_heads, ffn, eps):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.attn_norm = RMSNorm(dim, eps)
        self.wq = nn.Linear(dim, heads * self.hd, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(heads * self.hd, dim, bias=False)
        self.ffn_norm = RMSNorm(dim, eps)
        self.w1 = nn.Linear(dim, ffn, bias=False)
        self.w3 = nn.Linear(dim, ffn, bias=False)
        self.w2 = nn.Linear(ffn, dim, bias=False)

    def forward(self, x, cos, sin):
        N, B, _ = x.shape
        h = self.attn_norm(x)
        q = apply_rope(self.wq(h).view(N, B, self.heads, self.hd), cos, sin).transpose(1, 2)
        k = apply_rope(self.wk(h).view(N, B, self.kv_heads, self.hd), cos, sin).transpose(1, 2)
        v = self.wv(h).view(N, B, self.kv_heads, self.hd).transpose(1, 2)
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        y = att.float().softmax(-1).type_as(v) @ v
        x = x + self.wo(y.transpose(1, 2).reshape(N, B, self.heads * self.hd))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Drafter(nn.Module):
    def __init__(self, vocab, hidden, dim, layers, heads, kv_heads, ffn, block, eps, rope_base):
        super().__init__()
        self.block, self.dim, self.hidden = block, dim, hidden
        self.tok_emb = nn.Embedding(vocab, dim)
        self.mask_emb = nn.Parameter(torch.randn(block - 1, dim) * 0.02)
        self.fc = nn.Linear(dim + hidden, dim, bias=False)
        self.layers = nn.ModuleList(DraftLayer(dim, heads, kv_heads, ffn, eps) for _ in range(layers))
        self.norm = RMSNorm(dim, eps)
        self.out = nn.Linear(dim, vocab, bias=False)
        rc = Config(dim=dim, n_heads=heads, context=block, rope_base=rope_base)
        cos, sin = rope_tables(rc, "cpu")
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
        with torch.no_grad():
            # Start as x_j = e_j + h (the hidden size may differ: then its
            # first min(dim, hidden) coordinates).
            self.fc.weight.zero_()
            self.fc.weight[:, :dim] += torch.eye(dim)
            k = min(dim, hidden)
            self.fc.weight[:k, dim:dim + k] += torch.eye(k)

    def forward(self, h, anchor):
        """h: (N, hidden); anchor: (N,) -> logits (N, block-1, vocab)."""
        N = h.shape[0]
        e = torch.cat((self.tok_emb(anchor)[:, None, :], self.mask_emb[None].expand(N, -1, -1).type_as(h)), 1)
        x = self.fc(torch.cat((e, h[:, None, :].expand(-1, self.block, -1)), -1))
        for l in self.layers:
            x = l(x, self.cos, self.sin)
        return self.out(self.norm(x[:, 1:]))

    def n_params(self):
        return sum(p.numel() for p in self.parameters())


def gguf_tensors(d):
    out = [("token_embd.weight", d.tok_emb.weight), ("mask_embd.weight", d.mask_emb), ("fc.weight", d.fc.weight)]
    for i, l in enumerate(d.layers):
        p = f"blk.{i}."
        out += [(p + "attn_norm.weight", l.attn_norm.weight), (p + "attn_q.weight", l.wq.weight),
                (p + "attn_k.weight", l.wk.weight), (p + "attn_v.weight", l.wv.weight),
                (p + "attn_output.weight", l.wo.weight), (p + "ffn_norm.weight", l.ffn_norm.weight),
                (p + "ffn_gate.weight", l.w1.weight), (p + "ffn_up.weight", l.w3.weight),
                (p + "ffn_down.weight", l.w2.weight)]
    out += [("output_norm.weight", d.norm.weight), ("output.weight", d.out.weight)]
    return [(n, t.detach().float().cpu().numpy()) for n, t in out]


def copy_tokenizer(w, meta):
    """Writes the target's tokenizer.* metadata with the value types the
    family's files use."""
    for k, v in meta.items():
        if not k.startswith("tokenizer."):
            continue
        if isinstance(v, bool):
            w.bool(k, v)
        elif isinstance(v, str):
            w.string(k, v)
        elif isinstance(v, int):
            w.u32(k, v)
        elif isinstance(v, float):
            w.f32(k, v)
        elif isinstance(v, list) and all(isinstance(x, str) for x in v):
            w.strings(k, v)
        elif isinstance(v, list) and all(isinstance(x, float) for x in v):
            w.f32s(k, v)
        elif isinstance(v, list) and all(isinstance(x, int) for x in v):
            w.i32s(k, v)
        else:
            raise SystemExit(f"tokenizer key {k}: cannot copy a value of type {type(v).__name__}")


def export(d, args, target_meta, path):
    w = ggufw.Writer()
    w.string("general.architecture", ARCH)
    w.string("general.name", args.name)
    w.u32("general.file_type", 0)
    w.u32("general.alignment", ggufw.ALIGN)
    w.u32(ARCH + ".block_size", d.block)
    w.u32(ARCH + ".embedding_length", d.dim)
    w.u32(ARCH + ".block_count", len(d.layers))
    w.u32(ARCH + ".feed_forward_length", args.ffn)
    w.u32(ARCH + ".attention.head_count", args.heads)
    w.u32(ARCH + ".attention.head_count_kv", args.kv_heads)
    w.f32(ARCH + ".attention.layer_norm_rms_epsilon", target_meta["llama.attention.layer_norm_rms_epsilon"])
    w.f32(ARCH + ".rope.freq_base", args.rope_base)
    w.u32(ARCH + ".target_hidden", d.hidden)
    w.string(ARCH + ".target_name", target_meta.get("general.name", ""))
    copy_tokenizer(w, target_meta)
    for n, a in gguf_tensors(d):
        w.tensor(n, a, ggufw.GGML_F32)
    w.write(path)
    meta, ts = ggufw.read(path)
    for n, a in gguf_tensors(d):
        if not np.array_equal(ts[n][2], a):
            raise RuntimeError(f"{path}: tensor {n} does not read back equal")
    assert meta["tokenizer.ggml.tokens"] == target_meta["tokenizer.ggml.tokens"]
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ---- evaluation -------------------------------------------------------------------

@torch.no_grad()
def greedy_acceptance(target, d, prompts, gen, device):
    """Decodes each prompt greedily with the target for gen tokens and, at
    every step, drafts with the drafter from the target's hidden state and
    the token it just chose; returns the mean number of draft tokens that
    equal the target's next greedy tokens (up to the first miss), per
    draft, over every step with a full block of future tokens, and the
    per-position hit rate."""
    B = d.block
    acc, steps, hits = 0, 0, np.zeros(B - 1)
    for p in prompts:
        seq = list(p)
        hs, outs = [], []
        for _ in range(gen + B):
            idx = torch.tensor([seq], device=device)
            h, lg = target_pass(target, idx)
            hs.append(h[0, -1].float())
            nxt = int(lg[0, -1].float().argmax())
            outs.append(nxt)
            seq.append(nxt)
        # At step i the target has computed up to the token before outs[i]
        # (hidden hs[i]) and chose outs[i]; the drafter predicts outs[i+1..].
        H = torch.stack(hs[:gen])
        A = torch.tensor(outs[:gen], device=device)
        dr = d(H, A).argmax(-1).cpu().numpy()
        want = np.array([outs[i + 1:i + B] for i in range(gen)])
        eq = dr == want
        hits += eq.mean(0)
        run = np.cumprod(eq, axis=1).sum(1)
        acc += run.sum()
        steps += gen
    return acc / steps, (hits / len(prompts)).tolist()


# ---- training ---------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True, help="the target's GGUF (F32, F16, Q8_0 or Q4_K tensors)")
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--corpusgen")
    ap.add_argument("--corpus-seed", type=int, default=1)
    ap.add_argument("--corpus-size", type=int, default=200_000_000)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="muser-default-long-blockdraft")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--block", type=int, default=8, help="B: the anchor and B-1 drafted positions")
    ap.add_argument("--dim", type=int, default=0, help="drafter width (0: the target's)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=1536)
    ap.add_argument("--rope-base", type=float, default=10000.0)
    ap.add_argument("--context", type=int, default=4096, help="tokens per target window")
    ap.add_argument("--windows", type=int, default=4, help="target windows per step")
    ap.add_argument("--positions", type=int, default=1024, help="anchor positions drawn per window")
    ap.add_argument("--gamma", type=float, default=4.0, help="position j's loss weight is exp(-(j-1)/gamma)")
    ap.add_argument("--rollout-windows", type=int, default=0, help="windows the target wrote, per step (0: none)")
    ap.add_argument("--rollout-positions", type=int, default=256, help="anchor positions drawn per written window")
    ap.add_argument("--rollout-len", type=int, default=1024, help="tokens per written window, its prefix included")
    ap.add_argument("--rollout-pool", type=int, default=2048, help="written windows made at the start")
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--time-limit", type=float, default=240)
    ap.add_argument("--eval-prompts", type=int, default=6)
    ap.add_argument("--eval-gen", type=int, default=96)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    log(f"torch {torch.__version__}, device {device}" + (f" ({torch.cuda.get_device_name()})" if device == "cuda" else ""))
    torch.manual_seed(args.seed)

    target, tmeta = load_target(args.target)
    target = target.to(device).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    tcfg = target.cfg
    log(f"target {tmeta.get('general.name')!r}: {target.n_params()} parameters, {tcfg.to_dict()}")
    tk = tokmod.Tok(args.tokenizer)
    if tk.n_vocab != tcfg.vocab_size:
        raise SystemExit(f"tokenizer {args.tokenizer}: {tk.n_vocab} pieces, the target has {tcfg.vocab_size}")
    if args.context > tcfg.context:
        raise SystemExit(f"--context {args.context} exceeds the target's {tcfg.context}")

    t0 = time.time()
    _, enc, _, _ = load_corpus(args)
    n_val = max(1, len(enc) // 200)
    train_tokens, train_starts = pack(enc[:-n_val])
    val_tokens, val_starts = pack(enc[-n_val:])
    del enc
    log(f"tokenized in {time.time() - t0:.1f}s: {len(train_tokens)} train tokens, {len(val_tokens)} val tokens")

    dim = args.dim or tcfg.dim
    d = Drafter(tcfg.vocab_size, tcfg.dim, dim, args.layers, args.heads, args.kv_heads, args.ffn, args.block,
                tcfg.norm_eps, args.rope_base)
    if dim == tcfg.dim:
        with torch.no_grad():  # the target's (tied) embedding, input and output
            d.tok_emb.weight.copy_(target.tok_emb.weight)
            d.out.weight.copy_(target.tok_emb.weight)
    d = d.to(device)
    log(f"drafter: {d.n_params()} parameters, width {dim}, {args.layers} layers, block {args.block}")

    T, B, P = args.context, args.block, args.positions
    if P > T - B:
        raise SystemExit(f"--positions {P} exceeds the {T - B} anchor positions of a window")
    tt = torch.from_numpy(train_tokens.astype(np.int32)).to(device)
    vt = torch.from_numpy(val_tokens.astype(np.int32)).to(device)
    ts = torch.from_numpy(train_starts[train_starts + T <= len(train_tokens)]).to(device)
    vs = torch.from_numpy(val_starts[val_starts + T <= len(val_tokens)]).to(device)
    ar = torch.arange(T, device=device)
    g = torch.Generator(device=device)
    g.manual_seed(args.seed)
    amp = torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=(device == "cuda"))
    amp_dtype = torch.bfloat16 if device == "cuda" else torch.float32
    wpos = torch.exp(-torch.arange(B - 1, device=device, dtype=torch.float32) / args.gamma)
    wpos = wpos / wpos.sum()
    offs = torch.arange(1, B, device=device)

    @torch.no_grad()
    def examples(tokens_, starts_, n, gen):
        """Target windows -> (h, anchor, labels) at P random positions each."""
        s = starts_[torch.randint(len(starts_), (n,), device=device, generator=gen)]
        idx = tokens_[s[:, None] + ar].long()
        with amp:
            h, lg = target_pass(target, idx)
        greedy = lg.argmax(-1)  # greedy[:, t]: the target's token after idx[:, :t+1]
        p = torch.stack([torch.randperm(T - B, device=device, generator=gen)[:P] for _ in range(n)])
        rows = torch.arange(n, device=device)[:, None]
        hp = h[rows, p].float().reshape(-1, h.shape[-1])
        anchor = idx[rows, p + 1].reshape(-1)
        # Position j predicts x_{p+1+j}: the target's token after x_{p+j}.
        labels = greedy[rows[..., None], p[..., None] + offs].reshape(-1, B - 1)
        return hp, anchor, labels

    ban = torch.tensor(eog_ids(tmeta), device=device, dtype=torch.long)
    R, PR = args.rollout_len, args.rollout_positions
    if args.rollout_windows and R - B - 511 < 1:
        raise SystemExit(f"--rollout-len {R} leaves no written anchors after a 512-token prefix")

    @torch.no_grad()
    def rollout_pool(tokens_, starts_, n, greedy_only, gen):
        """n windows the target wrote: (windows (n, R), first written position (n,))."""
        ws, fs = [], []
        for c in range(0, n, 512):
            m = min(512, n - c)
            lp = (128, 256, 384, 512)[(c // 512) % 4]
            s = starts_[torch.randint(len(starts_), (m,), device=device, generator=gen)]
            prompts = tokens_[s[:, None] + torch.arange(lp, device=device)].long()
            temps = torch.zeros(m, device=device)
            if not greedy_only:
                temps = torch.where(torch.rand(m, device=device, generator=gen) < 0.5, temps + 0.8, temps)
            with amp:
                ws.append(rollouts(target, prompts, R - lp, ban, temps, gen, amp_dtype))
            fs.append(torch.full((m,), lp, device=device))
        return torch.cat(ws), torch.cat(fs)

    @torch.no_grad()
    def rollout_examples(pool, n, gen):
        """Written windows -> (h, anchor, labels) at PR random positions
        each, all in the written part, the labels with the end banned."""
        win, first = pool
        i = torch.randint(len(win), (n,), device=device, generator=gen)
        idx, lo = win[i], first[i] - 1
        with amp:
            h, lg = target_pass(target, idx)
        lg = lg.float()
        lg[..., ban] = -float("inf")
        greedy = lg.argmax(-1)
        p = lo[:, None] + (torch.rand(n, PR, device=device, generator=gen) * (R - B - lo)[:, None]).long()
        rows = torch.arange(n, device=device)[:, None]
        hp = h[rows, p].float().reshape(-1, h.shape[-1])
        anchor = idx[rows, p + 1].reshape(-1)
        labels = greedy[rows[..., None], p[..., None] + offs].reshape(-1, B - 1)
        return hp, anchor, labels

    def loss_of(m, hp, anchor, labels):
        with amp:
            lg = m(hp, anchor)
        ce = F.cross_entropy(lg.float().reshape(-1, lg.shape[-1]), labels.reshape(-1), reduction="none").view(-1, B - 1)
        return (ce.mean(0) * wpos).sum(), lg

    gv = torch.Generator(device=device)
    gv.manual_seed(12345)
    val_sets = [examples(vt, vs, args.windows, gv) for _ in range(4)]
    pool = val_written = None
    if args.rollout_windows:
        t0 = time.time()
        pool = rollout_pool(tt, ts, args.rollout_pool, False, g)
        # The written check: greedy continuations of held-out prefixes.
        vpool = rollout_pool(vt, vs, 64, True, gv)
        val_written = [rollout_examples(vpool, 16, gv) for _ in range(4)]
        log(f"the target wrote {len(pool[0])} windows of {R} tokens in {time.time() - t0:.1f}s "
            f"(ends banned: {ban.tolist()})")

    @torch.no_grad()
    def val_metrics(sets=None):
        d.eval()
        ls, hit, run = [], torch.zeros(B - 1, device=device), []
        sets = val_sets if sets is None else sets
        for hp, a, y in sets:
            l, lg = loss_of(d, hp, a, y)
            ls.append(float(l))
            eq = (lg.argmax(-1) == y).float()
            hit += eq.mean(0)
            run.append(eq.cumprod(1).sum(1).mean())
        d.train()
        return sum(ls) / len(ls), (hit / len(sets)).tolist(), float(torch.stack(run).mean())

    decay = [p for p in d.parameters() if p.dim() >= 2]
    no_decay = [p for p in d.parameters() if p.dim() < 2]
    opt_kw = {"fused": True} if device == "cuda" else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **opt_kw)
    fwd = d
    if args.compile and hasattr(torch, "compile"):
        fwd = torch.compile(d)

    # The schedule's length comes from the step rate measured over steps
    # [50, 150) (after compilation), so that the cosine decay ends near
    # --time-limit; training stops at the limit regardless.
    history, step, t_train, steps_total, t50 = [], 0, time.time(), None, None
    while True:
        now = time.time()
        if now - t_train > args.time_limit:
            break
        if step == 50:
            if device == "cuda":
                torch.cuda.synchronize()
            t50 = time.time()
        if step == 150:
            if device == "cuda":
                torch.cuda.synchronize()
            rate = 100 / max(time.time() - t50, 1e-3)
            steps_total = max(args.warmup + 1, int(150 + 0.97 * (args.time_limit - (time.time() - t_train)) * rate))
            log(f"measured {rate:.1f} steps/s; the schedule spans {steps_total} steps")
        total = steps_total or 10 ** 6
        if step < args.warmup:
            lr = args.lr * (step + 1) / args.warmup
        else:
            pr = min(1.0, (step - args.warmup) / max(1, total - args.warmup))
            lr = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * pr)))
        for gr in opt.param_groups:
            gr["lr"] = lr
        hp, a, y = examples(tt, ts, args.windows, g)
        if pool is not None:
            hw, aw, yw = rollout_examples(pool, args.rollout_windows, g)
            hp, a, y = torch.cat((hp, hw)), torch.cat((a, aw)), torch.cat((y, yw))
        try:
            loss, _ = loss_of(fwd, hp, a, y)
        except Exception as e:
            if fwd is d:
                raise
            log(f"torch.compile failed ({type(e).__name__}: {e}); continuing eager")
            fwd = d
            loss, _ = loss_of(fwd, hp, a, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(d.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 100 == 0:
            log(f"step {step} loss {loss.item():.4f} lr {lr:.2e} elapsed {time.time() - t_train:.0f}s")
        if step % 1000 == 0:
            vl, hit, run = val_metrics()
            history.append({"step": step, "val_loss": vl, "val_hits": hit, "val_accepted_per_draft": run})
            log(f"step {step} val loss {vl:.4f} accepted/draft {run:.2f} hits {[round(x, 3) for x in hit]}")
            if val_written is not None:
                wl, whit, wrun = val_metrics(val_written)
                history[-1].update({"written_loss": wl, "written_hits": whit, "written_accepted_per_draft": wrun})
                log(f"step {step} written: loss {wl:.4f} accepted/draft {wrun:.2f} hits {[round(x, 3) for x in whit]}")
    train_wall = time.time() - t_train
    vl, hit, run = val_metrics()
    log(f"trained {step} steps in {train_wall:.0f}s: val loss {vl:.4f}, teacher-forced accepted/draft {run:.2f}, hits {[round(x, 3) for x in hit]}")
    written = {}
    if val_written is not None:
        wl, whit, wrun = val_metrics(val_written)
        written = {"written_loss": wl, "written_hits": whit, "written_accepted_per_draft": wrun}
        log(f"written by the target, ends banned: loss {wl:.4f}, accepted/draft {wrun:.2f}, hits {[round(x, 3) for x in whit]}")

    d = d.float().eval()
    target = target.float()
    gp = torch.Generator(device="cpu")
    gp.manual_seed(7)
    prompts = []
    for i in range(args.eval_prompts):
        s = int(val_starts[int(torch.randint(len(val_starts) - 1, (1,), generator=gp))])
        n = min([64, 512, 1536][i % 3], T)
        prompts.append(val_tokens[s:s + n].astype(np.int64).tolist())
    g_acc, g_hits = greedy_acceptance(target, d, prompts, args.eval_gen, device)
    log(f"greedy decoding of {len(prompts)} prompts x {args.eval_gen} tokens: accepted/draft {g_acc:.2f} of {B - 1}, hits {[round(x, 3) for x in g_hits]}")

    path = os.path.join(args.out, "drafter-f32.gguf")
    sha = export(d.cpu(), args, tmeta, path)
    log(f"wrote {path} sha256 {sha}")
    # Vectors for the Go forward pass: the F32 drafter in float32.
    d = d.cpu()
    vec = []
    hp, a, _ = val_sets[0]
    for i in range(4):
        j = i * (len(hp) // 4)
        h1, a1 = hp[j].float().cpu(), a[j].cpu()
        with torch.no_grad():
            lg = d(h1[None], a1[None])[0]
        top2 = lg.topk(2, -1).values
        vec.append({"hidden": h1.tolist(), "anchor": int(a1), "draft": lg.argmax(-1).tolist(),
                    "margin": (top2[:, 0] - top2[:, 1]).tolist()})
    with open(os.path.join(args.out, "vectors.json"), "w") as f:
        json.dump(vec, f)
    report = {
        "target": os.path.basename(args.target), "target_name": tmeta.get("general.name"),
        "target_params": target.n_params(), "params": d.n_params(),
        "config": {"dim": dim, "layers": args.layers, "heads": args.heads, "kv_heads": args.kv_heads,
                   "ffn": args.ffn, "block": B, "rope_base": args.rope_base, "hidden": tcfg.dim},
        "context": T, "windows": args.windows, "positions": P, "gamma": args.gamma, "lr": args.lr,
        "warmup": args.warmup, "weight_decay": args.wd, "steps": step, "steps_planned": steps_total, "train_wall_s": train_wall,
        "examples_seen": step * args.windows * P,
        "written_examples_seen": step * args.rollout_windows * PR if pool is not None else 0,
        "val_loss": vl, "val_hits": hit,
        "val_accepted_per_draft": run, "greedy_accepted_per_draft": g_acc, "greedy_hits": g_hits,
        "greedy_prompts": [len(p) for p in prompts], "greedy_gen": args.eval_gen, "history": history,
        "rollouts": {"windows": args.rollout_windows, "positions": PR, "len": R, "pool": args.rollout_pool,
                     "eog_banned": ban.tolist()} if pool is not None else None, **written,
        "f32_gguf_sha256": sha, "total_wall_s": time.time() - t_start, "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
    }
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    log(f"done in {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    main()
