// llama.cpp's side of muser's speculative-decoding benchmark
// (scripts/bench-draft.sh), driven at the level of engine-bench.mjs:
// node-llama-cpp 3.21.1's addon (context._ctx, llama_decode batches and a
// greedy AddonSampler), not its high-level sequence API, whose JavaScript
// scheduling cost more per call than a decode step on a loaded 2-core
// machine.
//
// Usage: node spec-engine-bench.mjs TARGET.gguf DRAFT.gguf TEXT [THREADS] [CTX] [GEN] [REPS] [DRAFT_MAX] [P_MIN]
//
// node-llama-cpp exposes no speculative-decoding call of llama.cpp's
// (common_speculative is not in the addon), so this script runs the loop
// of llama.cpp's speculative examples itself, on llama.cpp's decode:
//   - the draft context holds the same tokens as the target's; each round
//     it drafts greedily up to DRAFT_MAX tokens (default 16, llama.cpp's
//     --draft-max), stopping early at a token whose probability is under
//     P_MIN (default 0.75, llama.cpp's --draft-p-min);
//   - the target evaluates the last token and the drafts in one batch with
//     logits at every position, samples them in order with the greedy
//     sampler, keeps the drafts up to the first that differs and the token
//     sampled there, and removes the rejected drafts' KV cells.
// Protocol, the same as `muser bench --draft-model`: the first CTX tokens
// of TEXT (tokenized by llama.cpp, BOS first) are the context; GEN tokens
// are then generated greedily (end-of-generation banned), plain and
// speculative alternately REPS times each; the decode rate leaves out the
// first 8 tokens; the fastest run of each is reported, with the process's
// CPU seconds (process.cpuUsage) in it, and whether the speculative output
// equalled the plain output token for token (llama.cpp does not promise
// it: its kernels are not batch-invariant). Prints one JSON object.
import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [targetPath, draftPath, textPath, threadsArg = "2", ctxArg = "2048", genArg = "128", repsArg = "3",
    draftMaxArg = "16", pMinArg = "0.75"] = process.argv.slice(2);
if (!targetPath || !draftPath || !textPath) {
    console.error("usage: node spec-engine-bench.mjs TARGET.gguf DRAFT.gguf TEXT [THREADS] [CTX] [GEN] [REPS] [DRAFT_MAX] [P_MIN]");
    process.exit(2);
}
const threads = Number(threadsArg), nCtx = Number(ctxArg), nGen = Number(genArg), reps = Number(repsArg);
const draftMax = Number(draftMaxArg), pMin = Number(pMinArg);
const warmup = 8;
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: threads});
const target = await llama.loadModel({modelPath: targetPath, gpuLayers: 0});
const draft = await llama.loadModel({modelPath: draftPath, gpuLayers: 0});
let tokens = target.tokenize(fs.readFileSync(textPath, "utf8"));
if (target.tokens.bos != null) tokens = [target.tokens.bos, ...tokens];
if (tokens.length < nCtx) {
    console.error(`${textPath}: ${tokens.length} tokens, fewer than ${nCtx}`);
    process.exit(1);
}
const prompt = tokens.slice(0, nCtx);

const contextOptions = {contextSize: nCtx + nGen + draftMax + 8, batchSize: nCtx, threads: {ideal: threads, min: threads}, sequences: 1};
const tctx = (await target.createContext(contextOptions))._ctx;
const dctx = (await draft.createContext(contextOptions))._ctx;
// Greedy samplers that ban the end-of-generation tokens, as muser bench
// does, so every run generates GEN tokens.
function greedy(model) {
    const keys = [];
    for (const t of model.iterateAllTokens()) {
        if (model.isEogToken(t)) keys.push(t);
    }
    const s = new llama._bindings.AddonSampler(model._model);
    s.applyConfig({temperature: 0, tokenBiasKeys: Uint32Array.from(keys), tokenBiasValues: Float32Array.from(keys.map(() => -Infinity))});
    return s;
}
const tsamp = greedy(target), dsamp = greedy(draft);

async function decode(ctx, tokens, first, logitsFrom) {
    ctx.initBatch(tokens.length);
    const want = [];
    for (let i = logitsFrom; i < tokens.length; i++) want.push(i);
    const idx = ctx.addToBatch(0, first, Uint32Array.from(tokens), Uint32Array.from(want));
    await ctx.decodeBatch();
    return idx;
}

// One plain run: every token one decode step of the target.
async function plain() {
    tctx.disposeSequence(0);
    let idx = await decode(tctx, prompt, 0, nCtx - 1);
    const out = [], times = [];
    let tok = await tctx.sampleToken(idx[0], tsamp);
    for (;;) {
        out.push(tok);
        times.push(performance.now());
        if (out.length >= nGen) break;
        idx = await decode(tctx, [tok], nCtx + out.length - 1, 0);
        tok = await tctx.sampleToken(idx[0], tsamp);
    }
    return {out, times};
}

// The draft model's top token after a batch index, with its probability.
async function draftNext(idx) {
    if (!(pMin > 0)) return [await dctx.sampleToken(idx, dsamp), 1];
    const [tok, probs] = await dctx.sampleToken(idx, dsamp, true);
    let p = 1;
    if (probs) {
        for (let i = 0; i + 1 < probs.length; i += 2) {
            if (probs[i] === tok) {
                p = probs[i + 1];
                break;
            }
        }
    }
    return [tok, p];
}

// One speculative run.
async function speculative() {
    tctx.disposeSequence(0);
    dctx.disposeSequence(0);
    let idx = await decode(tctx, prompt, 0, nCtx - 1);
    // The draft context holds the prompt but its last token, which each
    // round feeds with what follows.
    await decode(dctx, prompt.slice(0, -1), 0, nCtx);
    let dPast = nCtx - 1; // tokens in the draft context
    const out = [], times = [];
    let last = await tctx.sampleToken(idx[0], tsamp);
    out.push(last);
    times.push(performance.now());
    let nPast = nCtx; // tokens in the target context (last not yet fed)
    let pending = [prompt[nCtx - 1], last]; // history the draft has not seen
    let drafted = 0, accepted = 0, steps = 0;
    while (out.length < nGen) {
        // Draft.
        const d = [];
        const room = Math.min(draftMax, nGen - out.length - 1);
        if (room > 0) {
            let di = await decode(dctx, pending, dPast, pending.length - 1);
            dPast += pending.length;
            pending = [];
            for (;;) {
                const [t, p] = await draftNext(di[0]);
                if (p < pMin && d.length > 0) break;
                d.push(t);
                if (d.length >= room || p < pMin) break;
                di = await decode(dctx, [t], dPast, 0);
                dPast++;
            }
        }
        // Verify: last and the drafts, logits at every position.
        idx = await decode(tctx, [last, ...d], nPast, 0);
        steps++;
        let j = 0;
        let tok;
        for (;;) {
            tok = await tctx.sampleToken(idx[j], tsamp);
            out.push(tok);
            times.push(performance.now());
            if (out.length >= nGen || j >= d.length || tok !== d[j]) break;
            j++;
        }
        drafted += d.length;
        accepted += j;
        // The target keeps last and the j accepted drafts.
        nPast += 1 + j;
        tctx.removeTokenCellsFromSequence(0, nPast, -1);
        // The draft context fed last (if it drafted) and its drafts but
        // the final one: keep what was accepted.
        const dKeep = Math.min(dPast, nPast);
        if (dPast > dKeep) dctx.removeTokenCellsFromSequence(0, dKeep, -1);
        dPast = dKeep;
        last = tok;
        // The draft has yet to see the history from dKeep up to and
        // including last (position nPast).
        pending = [];
        for (let i = dKeep; i <= nPast; i++) pending.push(i < nCtx ? prompt[i] : out[i - nCtx]);
    }
    return {out: out.slice(0, nGen), times: times.slice(0, nGen), drafted, accepted, steps};
}

const cpuSecs = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
};
let bestPlain = Infinity, bestSpec = Infinity, cpuPlain = 0, cpuSpec = 0, want = null, stats = null, firstDiff = -1;
for (let r = 0; r < reps; r++) {
    for (const mode of ["plain", "spec"]) {
        const c0 = cpuSecs();
        const res = mode === "plain" ? await plain() : await speculative();
        const cpu = cpuSecs() - c0;
        const secs = (res.times[res.times.length - 1] - res.times[warmup]) / 1000;
        if (want == null) want = res.out;
        else if (mode === "spec") {
            const i = res.out.findIndex((t, i) => t !== want[i]);
            if (i >= 0 && (firstDiff < 0 || i < firstDiff)) firstDiff = i;
        }
        if (mode === "plain" && secs < bestPlain) [bestPlain, cpuPlain] = [secs, cpu];
        if (mode === "spec") {
            if (secs < bestSpec) [bestSpec, cpuSpec] = [secs, cpu];
            stats = res;
        }
    }
}
const n = nGen - 1 - warmup;
console.log(JSON.stringify({
    engine: "llama.cpp (node-llama-cpp 3.21.1, addon)",
    model: targetPath,
    threads,
    lane: "model",
    draft_model: draftPath,
    draft_max: draftMax,
    draft_p_min: pMin,
    text: textPath,
    context_tokens: nCtx,
    gen_tokens: nGen,
    temperature: 0,
    plain_decode_tok_s: n / bestPlain,
    draft_decode_tok_s: n / bestSpec,
    speedup: bestPlain / bestSpec,
    plain_wall_s: bestPlain,
    draft_wall_s: bestSpec,
    // CPU seconds of the whole run (prefill included), not only the
    // measured tokens.
    plain_run_cpu_s: cpuPlain,
    draft_run_cpu_s: cpuSpec,
    drafted: stats.drafted,
    accepted: stats.accepted,
    acceptance_rate: stats.accepted / Math.max(1, stats.drafted),
    tokens_per_step: (nGen - 1) / Math.max(1, stats.steps),
    // llama.cpp's kernels are not batch-invariant: a verification batch's
    // logits may differ in the last bits from a one-token step's, and a
    // greedy choice at a near-tie then differs. first_difference is the
    // first generated token where a speculative run left the plain run
    // (-1: none did).
    identical: firstDiff < 0,
    first_difference: firstDiff,
}));
tsamp.dispose();
dsamp.dispose();
await target.dispose();
await draft.dispose();
await llama.dispose();
