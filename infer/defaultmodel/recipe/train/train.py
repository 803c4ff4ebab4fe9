"""Trains muser's default model and exports it as an F32 GGUF.

One run does everything after the corpus and tokenizer exist: tokenize the
corpus, train, evaluate greedy answers to the held-out questions, the
held-out tool-calling requests and a few story, chat and JSON prompts, and
write the GGUF (quantized to Q8_0 afterwards by the Go program in
../quantize). See ../README.md for the exact commands.

--preset default is the embedded model (8 layers, width 256, context 512);
--preset large is a bigger member of the family with the same tokenizer,
chat format and recipe (12 layers, width 512, context 1024; not embedded,
so not held to the 8 MB limit); --preset long is the same architecture
trained on 8,448-token sequences (8 a step, so both see about 65,536
tokens a step), the speculative-decoding benchmarks' target at 2,048 and
8,192 tokens of context.

Outputs in --out: model-f32.gguf, eval.json (greedy answers, token ids, and
grades), report.json (every figure the recipe records).
"""

import argparse
import hashlib
import json
import math
import multiprocessing as mp
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import ggufw
from evalcheck import check, check_tool, is_json_object
import tok as tokmod
from model import Config, Model, gguf_tensors

STORY_PROMPTS = ["Once upon a time", "One day, Tom went to the park.", "Lily had a red ball.", "The little dog was sad because"]
CHAT_PROMPTS = ["Tell me a story about a cat.", "Hello!", "What can you do?", "What is 2 plus 2?"]
# JSON-answer prompts (system, user): the reply must be a JSON object.
JSON_PROMPTS = [("Answer in JSON.", "How many legs does a cat have?"),
                ("Reply with a JSON object.", "What is the capital of Spain?"),
                ("Answer with a JSON object that matches this schema: {\"type\": \"object\", \"properties\": {\"thing\": {\"type\": \"string\"}, \"colour\": {\"type\": \"string\"}}, \"required\": [\"thing\", \"colour\"]}", "What colour is snow?")]
# The architectures of --preset; explicit --dim etc. override them.
PRESETS = {
    "default": {"dim": 256, "layers": 8, "heads": 8, "kv_heads": 4, "ffn": 768, "context": 512, "batch": 128, "name": "muser-default"},
    "large": {"dim": 512, "layers": 12, "heads": 8, "kv_heads": 4, "ffn": 1536, "context": 1024, "batch": 64, "name": "muser-default-large"},
    "long": {"dim": 512, "layers": 12, "heads": 8, "kv_heads": 4, "ffn": 1536, "context": 8448, "batch": 8, "name": "muser-default-long"},
}
# llama.cpp's enum llama_pooling_type: MEAN is 1 (NONE 0, CLS 2, LAST 3, RANK 4).
POOLING_MEAN = 1
# Texts whose tokenization llama.cpp must reproduce (with sampled corpus documents).
TOKENIZE_TEXTS = [
    "Hello world", " leading space", "double  space", "tab\there", "new\nline\n\n", "Xylophone ZEBRA 12345",
    "caf\u00e9 na\u00efve \u65e5\u672c \U0001F600", "<|im_start|>user\nhi<|im_end|>\n", "<s> </s> <unk> literal",
    "e-l-e-p-h-a-n-t.", "What is 3 + 4? 3 plus 4 is 7.", "", " ", "\n", "a\u00a0b",
    '<tool_call>\n{"name": "add", "arguments": {"a": 7, "b": 8}}\n</tool_call>',
    '<|im_start|>user\n<tool_response>\n{"temperature": -3, "sky": "snowy"}\n</tool_response><|im_end|>\n',
    '{\n  "animal": "cat",\n  "legs": 4\n}',
]


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


# ---- data ----------------------------------------------------------------

_TOK = None


def _init_worker(path):
    global _TOK
    _TOK = tokmod.Tok(path)


def _encode_chunk(docs):
    # docs: list of (kind, text). Each document: BOS + tokens, and stories end
    # with the end token (chats already end with <|im_end|>\n).
    out = []
    for (kind, _), ids in zip(docs, _TOK.encode_many([t for _, t in docs])):
        d = [_TOK.bos] + ids
        if kind == "story":
            d.append(_TOK.eos)
        out.append(np.asarray(d, dtype=np.uint16))
    return out


def load_corpus(args):
    if args.corpusgen:
        cmd = [args.corpusgen, "-seed", str(args.corpus_seed), "-size", str(args.corpus_size), "-o", args.corpus]
        log("generating corpus:", " ".join(cmd))
        subprocess.run(cmd, check=True)
    raw = os.path.getsize(args.corpus)
    docs = list(tokmod.read_docs(args.corpus))
    text_bytes = sum(len(t.encode("utf-8")) for _, t in docs)
    log(f"corpus: {len(docs)} documents, {text_bytes} text bytes ({raw} bytes of JSON lines)")
    chunks = [docs[i:i + 5000] for i in range(0, len(docs), 5000)]
    with mp.get_context("fork").Pool(args.workers, initializer=_init_worker, initargs=(args.tokenizer,)) as pool:
        enc = [d for part in pool.map(_encode_chunk, chunks) for d in part]
    return docs, enc, text_bytes, raw


def pack(enc):
    lens = np.fromiter((len(d) for d in enc), dtype=np.int64, count=len(enc))
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    return np.concatenate(enc), starts


# ---- evaluation ----------------------------------------------------------

@torch.no_grad()
def greedy(model, ids, max_new, stop, device):
    out = []
    x = list(ids)
    for _ in range(max_new):
        t = torch.tensor([x[-model.cfg.context:]], device=device)
        nxt = int(model(t)[0, -1].float().argmax())
        if nxt == stop:
            break
        out.append(nxt)
        x.append(nxt)
    return out


def evaluate(model, tk, questions, tool_requests, device, samples=()):
    model.eval()
    res = {"questions": [], "tools": [], "stories": [], "chats": [], "json": []}
    correct = 0
    for q in questions:
        prompt = [tk.bos] + tk.encode(tokmod.render_chat([{"role": "user", "content": q["prompt"]}]))
        out = greedy(model, prompt, 48, tk.eos, device)
        reply = tk.decode(out)
        ok = check(q, reply)
        correct += ok
        res["questions"].append({**q, "prompt_ids": prompt, "output_ids": out, "reply": reply, "correct": ok})
    tools_correct = 0
    for q in tool_requests:
        # q["text"] is the prompt as the chat template renders it (corpusgen -tool-eval).
        prompt = [tk.bos] + tk.encode(q["text"])
        out = greedy(model, prompt, 96, tk.eos, device)
        reply = tk.decode(out)
        ok = check_tool(q, reply)
        tools_correct += ok
        res["tools"].append({**q, "prompt_ids": prompt, "output_ids": out, "reply": reply, "correct": ok})
    for system, user in JSON_PROMPTS:
        prompt = [tk.bos] + tk.encode(tokmod.render_chat([{"role": "system", "content": system}, {"role": "user", "content": user}]))
        out = greedy(model, prompt, 96, tk.eos, device)
        reply = tk.decode(out)
        res["json"].append({"system": system, "prompt": user, "prompt_ids": prompt, "output_ids": out, "reply": reply, "valid": is_json_object(reply)})
    for p in STORY_PROMPTS:
        prompt = [tk.bos] + tk.encode(p)
        out = greedy(model, prompt, 160, tk.eos, device)
        res["stories"].append({"prompt": p, "prompt_ids": prompt, "output_ids": out, "text": tk.decode(out)})
    for p in CHAT_PROMPTS:
        prompt = [tk.bos] + tk.encode(tokmod.render_chat([{"role": "user", "content": p}]))
        out = greedy(model, prompt, 200, tk.eos, device)
        res["chats"].append({"prompt": p, "prompt_ids": prompt, "output_ids": out, "reply": tk.decode(out)})
    res["tokenize"] = [{"text": t, "ids": tk.encode(t)} for t in TOKENIZE_TEXTS + list(samples)]
    res["correct"] = correct
    res["total"] = len(questions)
    res["tools_correct"] = tools_correct
    res["tools_total"] = len(tool_requests)
    model.train()
    return res


# ---- export ----------------------------------------------------------------

def export(model, tk, cfg, path, name, chat_template):
    w = ggufw.Writer()
    w.string("general.architecture", "llama")
    w.string("general.name", name)
    w.u32("general.file_type", 0)  # all F32
    w.u32("general.alignment", ggufw.ALIGN)
    w.u32("llama.vocab_size", cfg.vocab_size)
    w.u32("llama.context_length", cfg.context)
    w.u32("llama.embedding_length", cfg.dim)
    w.u32("llama.block_count", cfg.n_layers)
    w.u32("llama.feed_forward_length", cfg.ffn_dim)
    w.u32("llama.rope.dimension_count", cfg.head_dim)
    w.u32("llama.attention.head_count", cfg.n_heads)
    w.u32("llama.attention.head_count_kv", cfg.n_kv_heads)
    w.f32("llama.attention.layer_norm_rms_epsilon", cfg.norm_eps)
    w.f32("llama.rope.freq_base", cfg.rope_base)
    w.u32("llama.pooling_type", POOLING_MEAN)
    tokens, scores, types = tk.gguf_vocab()
    w.string("tokenizer.ggml.model", "llama")
    w.string("tokenizer.ggml.pre", "default")
    w.strings("tokenizer.ggml.tokens", tokens)
    w.f32s("tokenizer.ggml.scores", scores)
    w.i32s("tokenizer.ggml.token_type", types)
    w.u32("tokenizer.ggml.bos_token_id", tk.bos)
    w.u32("tokenizer.ggml.eos_token_id", tk.eos)
    w.u32("tokenizer.ggml.unknown_token_id", tk.sp.unk_id())
    w.bool("tokenizer.ggml.add_bos_token", True)
    w.bool("tokenizer.ggml.add_eos_token", False)
    w.bool("tokenizer.ggml.add_space_prefix", False)
    w.string("tokenizer.chat_template", chat_template)
    for n, a in gguf_tensors(model):
        w.tensor(n, a, ggufw.GGML_F32)
    w.write(path)
    # Read it back: every tensor must equal the model's.
    meta, ts = ggufw.read(path)
    for n, a in gguf_tensors(model):
        if not np.array_equal(ts[n][2], a):
            raise RuntimeError(f"{path}: tensor {n} does not read back equal")
    assert meta["tokenizer.ggml.tokens"] == tokens
    assert meta["tokenizer.chat_template"] == chat_template and meta["llama.pooling_type"] == POOLING_MEAN
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def q8_size(model, vocab_meta_bytes):
    """Estimated Q8_0 file size: 2-D weights at 34 bytes per 32, norms F32."""
    n = 0
    for name, a in gguf_tensors(model):
        n += a.size * 34 // 32 if a.ndim == 2 else a.size * 4
        n += 64 + len(name) + 31
    return n + vocab_meta_bytes + 4096


# ---- training ----------------------------------------------------------------

def apply_preset(args):
    """Fills the architecture, batch and name left unset from --preset."""
    p = PRESETS[args.preset]
    for key in ("dim", "layers", "heads", "kv_heads", "ffn", "context", "batch", "name"):
        if getattr(args, key) is None:
            setattr(args, key, p[key])


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    p = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True, help="corpusgen JSON lines (.gz allowed); written first when --corpusgen is given")
    ap.add_argument("--corpusgen", help="corpusgen binary to generate the corpus with")
    ap.add_argument("--corpus-seed", type=int, default=1)
    ap.add_argument("--corpus-size", type=int, default=500_000_000)
    ap.add_argument("--tokenizer", required=True, help="SentencePiece model; trained from the corpus when absent")
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--eval", required=True, help="held-out questions (corpusgen -eval)")
    ap.add_argument("--tool-eval", required=True, help="held-out tool requests with rendered prompts (corpusgen -tool-eval)")
    ap.add_argument("--chat-template", required=True, help="the chat template to export (corpusgen -template)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="default", help="architecture, batch and name; --dim etc. override")
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default=None, help="general.name (default: the preset's)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="training steps; 0 picks them from the measured step rate and --time-limit")
    ap.add_argument("--batch", type=int, default=None, help="sequences per step (default: the preset's; every preset sees about 65,536 tokens a step)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--time-limit", type=float, default=360, help="training seconds: with --steps 0 the step count is fitted to it; training stops at it regardless (recorded)")
    ap.add_argument("--eval-every", type=int, default=1000)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--dim", type=int, default=None)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--heads", type=int, default=None)
    ap.add_argument("--kv-heads", type=int, default=None)
    ap.add_argument("--ffn", type=int, default=None)
    ap.add_argument("--context", type=int, default=None)
    args = ap.parse_args()
    apply_preset(args)
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    log(f"torch {torch.__version__}, device {device}" + (f" ({torch.cuda.get_device_name()})" if device == "cuda" else ""))
    import sentencepiece
    log(f"sentencepiece {sentencepiece.__version__}, numpy {np.__version__}, python {sys.version.split()[0]}")

    if not os.path.exists(args.tokenizer):
        if args.corpusgen and not os.path.exists(args.corpus):
            subprocess.run([args.corpusgen, "-seed", str(args.corpus_seed), "-size", str(args.corpus_size), "-o", args.corpus], check=True)
            args.corpusgen = None
        log("training tokenizer", args.tokenizer)
        tokmod.train(args.corpus, args.tokenizer[:-len(".model")], args.vocab, seed=args.seed, threads=args.workers)
    tk = tokmod.Tok(args.tokenizer)
    log(f"tokenizer: {tk.n_vocab} pieces, bos {tk.bos}, im_start {tk.im_start}, im_end/eos {tk.eos}")
    with open(args.eval) as f:
        questions = json.load(f)
    with open(args.tool_eval) as f:
        tool_requests = json.load(f)
    with open(args.chat_template, encoding="utf-8") as f:
        chat_template = f.read()
    for q in tool_requests:
        if len(tk.encode(q["text"])) + 1 + 96 > args.context:
            raise SystemExit(f"tool request {q['prompt']!r}: prompt and reply do not fit the {args.context}-token context")

    t0 = time.time()
    docs, enc, text_bytes, raw_bytes = load_corpus(args)
    samples = [t for _, t in docs[-40:]]
    n_val = max(1, len(enc) // 200)
    train_tokens, train_starts = pack(enc[:-n_val])
    val_tokens, val_starts = pack(enc[-n_val:])
    del docs, enc
    log(f"tokenized in {time.time() - t0:.1f}s: {len(train_tokens)} train tokens ({len(train_starts)} docs), {len(val_tokens)} val tokens ({len(val_starts)} docs)")

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    cfg = Config(vocab_size=tk.n_vocab, dim=args.dim, n_layers=args.layers, n_heads=args.heads,
                 n_kv_heads=args.kv_heads, ffn_dim=args.ffn, context=args.context)
    model = Model(cfg).to(device)
    tokens, scores, _ = tk.gguf_vocab()
    est = q8_size(model, sum(len(t.encode()) + 8 for t in tokens) + 8 * len(tokens) + 2048)
    log(f"model: {model.n_params()} parameters, config {cfg.to_dict()}, estimated Q8_0 file {est} bytes")
    if args.preset == "default" and est > 8_000_000:
        raise SystemExit(f"estimated Q8_0 size {est} exceeds 8,000,000 bytes")

    T = cfg.context
    tt = torch.from_numpy(train_tokens.astype(np.int32)).to(device)
    vt = torch.from_numpy(val_tokens.astype(np.int32)).to(device)
    ts = torch.from_numpy(train_starts[train_starts + T + 1 <= len(train_tokens)]).to(device)
    vs = torch.from_numpy(val_starts[val_starts + T + 1 <= len(val_tokens)]).to(device)
    ar = torch.arange(T + 1, device=device)
    g = torch.Generator(device=device)
    g.manual_seed(args.seed)

    def batch(tokens_, starts_, n, gen):
        s = starts_[torch.randint(len(starts_), (n,), device=device, generator=gen)]
        b = tokens_[s[:, None] + ar].long()
        return b[:, :-1], b[:, 1:]

    gv = torch.Generator(device=device)
    gv.manual_seed(12345)
    val_batches = [batch(vt, vs, min(args.batch, 64), gv) for _ in range(8)]

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt_kw = {"fused": True} if device == "cuda" else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **opt_kw)
    fwd = model
    if args.compile and hasattr(torch, "compile"):
        fwd = torch.compile(model)
    amp = torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=(device == "cuda"))

    def loss_of(m, x, y):
        with amp:
            logits = m(x)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))

    @torch.no_grad()
    def val_loss():
        model.eval()
        ls = [float(loss_of(model, x, y)) for x, y in val_batches]
        model.train()
        return sum(ls) / len(ls)

    history = []
    recent = []
    t_train = time.time()
    step = 0
    stopped_by_time = False
    tok_per_step = args.batch * T
    auto = args.steps <= 0
    if auto:
        # Run the warmup, measure the step rate over steps [20, 120), then fix
        # the total so that training ends near --time-limit. The schedule is
        # then a pure function of the recorded step count.
        args.steps = 10 ** 9
        if args.warmup <= 120:
            raise SystemExit("--steps 0 (auto) needs --warmup above 120")
    t_measure = None
    while step < args.steps:
        if time.time() - t_train > args.time_limit:
            stopped_by_time = True
            log(f"time limit {args.time_limit}s reached at step {step}")
            break
        if auto and step == 20:
            if device == "cuda":
                torch.cuda.synchronize()
            t_measure = time.time()
        if auto and step == 120:
            if device == "cuda":
                torch.cuda.synchronize()
            rate = 100 / (time.time() - t_measure)
            left = args.time_limit - (time.time() - t_train)
            args.steps = max(args.warmup + 1, int(120 + 0.97 * left * rate))
            log(f"measured {rate:.1f} steps/s; training for {args.steps} steps")
        lr = lr_at(step, args)
        for gr in opt.param_groups:
            gr["lr"] = lr
        x, y = batch(tt, ts, args.batch, g)
        try:
            loss = loss_of(fwd, x, y)
        except Exception as e:  # torch.compile failures fall back to eager
            if fwd is model:
                raise
            log(f"torch.compile failed ({type(e).__name__}: {e}); continuing eager")
            fwd = model
            loss = loss_of(fwd, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0 or step == args.steps:
            lv = float(loss)
            recent = (recent + [lv])[-8:]
            if step % 100 == 0 or step == args.steps:
                el = time.time() - t_train
                log(f"step {step} loss {lv:.4f} lr {lr:.2e} elapsed {el:.0f}s {step * tok_per_step / el / 1e6:.2f}M tok/s")
        if step % args.eval_every == 0 or step == args.steps:
            vl = val_loss()
            history.append({"step": step, "train_loss": float(loss), "val_loss": vl, "elapsed_s": time.time() - t_train})
            log(f"step {step} val loss {vl:.4f}")
    train_wall = time.time() - t_train
    final_val = val_loss()
    final_train = sum(recent) / max(1, len(recent))
    log(f"trained {step} steps in {train_wall:.0f}s; final train loss (mean of last {len(recent)} logged) {final_train:.4f}, val loss {final_val:.4f}")

    model = model.float()
    ev = evaluate(model, tk, questions, tool_requests, device, samples)
    log(f"held-out questions correct: {ev['correct']}/{ev['total']}")
    for q in ev["questions"]:
        log(f"  {'OK ' if q['correct'] else 'BAD'} {q['prompt']!r} -> {q['reply']!r}")
    log(f"held-out tool requests correct: {ev['tools_correct']}/{ev['tools_total']}")
    for q in ev["tools"]:
        log(f"  {'OK ' if q['correct'] else 'BAD'} {q['prompt']!r} -> {q['reply']!r}")
    for s in ev["json"]:
        log(f"  {'JSON' if s['valid'] else 'NOT JSON'} {s['prompt']!r} -> {s['reply']!r}")
    for s in ev["stories"] + ev["chats"]:
        log(f"  {s['prompt']!r} -> {s.get('text', s.get('reply'))!r}")
    with open(os.path.join(args.out, "eval.json"), "w") as f:
        json.dump(ev, f, indent=1)

    gguf_path = os.path.join(args.out, "model-f32.gguf")
    sha = export(model.cpu(), tk, cfg, gguf_path, args.name, chat_template)
    log(f"wrote {gguf_path} sha256 {sha}")
    report = {
        "seed": args.seed, "corpus_seed": args.corpus_seed, "corpus_json_bytes": raw_bytes, "corpus_text_bytes": text_bytes,
        "train_tokens": int(len(train_tokens)), "val_tokens": int(len(val_tokens)),
        "train_docs": int(len(train_starts)), "val_docs": int(len(val_starts)),
        "vocab": tk.n_vocab, "config": cfg.to_dict(), "params": model.n_params(),
        "steps": step, "steps_planned": args.steps, "stopped_by_time": stopped_by_time,
        "batch": args.batch, "context": T, "tokens_seen": step * tok_per_step,
        "lr": args.lr, "warmup": args.warmup, "min_lr_frac": args.min_lr_frac, "schedule": "linear warmup, cosine decay",
        "weight_decay": args.wd, "betas": [0.9, 0.95], "grad_clip": 1.0, "precision": "bf16 autocast, fp32 master weights",
        "compile": bool(args.compile), "final_train_loss": final_train, "final_val_loss": final_val,
        "train_wall_s": train_wall, "total_wall_s": time.time() - t_start, "history": history,
        "eval_correct": ev["correct"], "eval_total": ev["total"],
        "tool_eval_correct": ev["tools_correct"], "tool_eval_total": ev["tools_total"],
        "json_valid": sum(s["valid"] for s in ev["json"]), "json_total": len(ev["json"]),
        "preset": args.preset, "name": args.name, "f32_gguf_sha256": sha,
        "torch": torch.__version__, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
    }
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    log(f"done in {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    main()
