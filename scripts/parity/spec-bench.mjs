// llama.cpp's side of muser's speculative-decoding benchmark
// (scripts/bench-draft.sh): node-llama-cpp 3.21.1's token predictors.
//
// Usage: node spec-bench.mjs TARGET.gguf DRAFT.gguf TEXT [THREADS] [CTX] [GEN] [REPS]
//
// Protocol, the same as `muser bench --draft-*`: the first CTX tokens of
// TEXT (tokenized by llama.cpp, BOS first) are the context; GEN tokens are
// then generated greedily (end-of-generation banned) through LlamaContextSequence.evaluate, without a
// predictor, with InputLookupTokenPredictor (prompt lookup) and with
// DraftSequenceTokenPredictor on DRAFT (a draft model), each REPS times in a
// fresh context; the decode rate leaves out the first 8 tokens and the
// fastest run is reported. Prints one JSON object per lane, with whether
// its tokens equal the run without a predictor.
import fs from "node:fs";
import {getLlama, LlamaLogLevel, InputLookupTokenPredictor, DraftSequenceTokenPredictor, TokenBias} from "node-llama-cpp";

const [targetPath, draftPath, textPath, threadsArg = "2", ctxArg = "2048", genArg = "128", repsArg = "3"] = process.argv.slice(2);
if (!targetPath || !draftPath || !textPath) {
    console.error("usage: node spec-bench.mjs TARGET.gguf DRAFT.gguf TEXT [THREADS] [CTX] [GEN] [REPS]");
    process.exit(2);
}
const threads = Number(threadsArg), nCtx = Number(ctxArg), nGen = Number(genArg), reps = Number(repsArg);
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
// End-of-generation tokens are banned (as muser bench does), so every run
// generates GEN tokens.
function eogBans(model) {
    const bias = new TokenBias(model.tokenizer);
    for (const t of model.iterateAllTokens()) {
        if (model.isEogToken(t)) bias.set(t, "never");
    }
    return bias;
}
const bias = eogBans(target), draftBias = eogBans(draft);
const contextOptions = {contextSize: nCtx + nGen + 64, batchSize: 512, threads: {ideal: threads, min: threads}, sequences: 1};

async function run(lane) {
    const context = await target.createContext(contextOptions);
    let draftContext = null, predictor;
    if (lane === "lookup") {
        predictor = new InputLookupTokenPredictor();
        // LlamaCompletion and LlamaChat tell it the input; evaluate does not.
        predictor.updateInputTokens(prompt);
    } else if (lane === "model") {
        draftContext = await draft.createContext(contextOptions);
        predictor = new DraftSequenceTokenPredictor(draftContext.getSequence(), {evaluateOptions: {tokenBias: draftBias}});
    }
    const seq = context.getSequence({tokenPredictor: predictor});
    const out = [], times = [];
    for await (const tok of seq.evaluate(prompt, {temperature: 0, tokenBias: bias, yieldEogToken: true})) {
        out.push(tok);
        times.push(performance.now());
        if (out.length >= nGen) break;
    }
    const stats = seq.tokenPredictions;
    await context.dispose();
    if (draftContext) await draftContext.dispose();
    return {out, secs: (times[times.length - 1] - times[warmup]) / 1000, stats};
}

const best = {}, outs = {}, stats = {};
for (let r = 0; r < reps; r++) {
    for (const lane of ["plain", "lookup", "model"]) {
        const res = await run(lane);
        if (!(lane in best) || res.secs < best[lane]) best[lane] = res.secs;
        outs[lane] = res.out;
        stats[lane] = res.stats;
    }
}
const n = nGen - 1 - warmup;
for (const lane of ["lookup", "model"]) {
    const s = stats[lane];
    console.log(JSON.stringify({
        engine: "llama.cpp (node-llama-cpp 3.21.1)",
        model: targetPath,
        threads,
        lane,
        draft_model: lane === "model" ? draftPath : undefined,
        text: textPath,
        context_tokens: nCtx,
        gen_tokens: nGen,
        temperature: 0,
        plain_decode_tok_s: n / best.plain,
        draft_decode_tok_s: n / best[lane],
        speedup: best.plain / best[lane],
        drafted: s.validated + s.refuted,
        accepted: s.validated,
        acceptance_rate: s.validated / Math.max(1, s.validated + s.refuted),
        identical: outs[lane].length === outs.plain.length && outs[lane].every((t, i) => t === outs.plain[i]),
    }));
}
await target.dispose();
await draft.dispose();
await llama.dispose();
