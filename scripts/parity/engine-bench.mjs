// llama.cpp's side of muser's engine benchmark (scripts/bench.sh).
//
// Usage: node engine-bench.mjs MODEL.gguf [THREADS] [PROMPT_TOKENS] [GEN_TOKENS] [REPS]
//
// Protocol, the same as `muser bench`: the prompt is token i = (1 + 7919·i)
// mod n_vocab; prefill evaluates it in one batch (batch size = prompt
// length) into an empty sequence; decode then feeds GEN_TOKENS tokens one at
// a time after all but the last prompt token, each the greedy choice after
// the previous one. Each is repeated
// REPS times in a fresh sequence and the fastest run is reported. Peak RSS
// is the process's VmHWM (it includes node's own ~50 MB). Prints one JSON
// object.
import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, threadsArg = "2", promptArg = "512", genArg = "128", repsArg = "3"] = process.argv.slice(2);
if (!modelPath) {
    console.error("usage: node engine-bench.mjs MODEL.gguf [THREADS] [PROMPT_TOKENS] [GEN_TOKENS] [REPS]");
    process.exit(2);
}
const threads = Number(threadsArg), nPrompt = Number(promptArg), nGen = Number(genArg), reps = Number(repsArg);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: threads});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const nVocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
const prompt = Array.from({length: nPrompt}, (_, i) => (1 + 7919 * i) % nVocab);
const context = await model.createContext({
    contextSize: nPrompt + nGen + 8,
    batchSize: nPrompt,
    threads: {ideal: threads, min: threads},
    sequences: 1,
});
// The measurement drives llama.cpp through node-llama-cpp's addon (the
// pinned 3.21.1 internals: context._ctx is the AddonContext, a greedy
// AddonSampler picks tokens), so it times llama_decode and sampling as
// llama-bench does, without the JavaScript scheduling of the high-level
// sequence API (which on this 2-core machine added 10–400 ms per call).
const ctx = context._ctx;
const sampler = new llama._bindings.AddonSampler(model._model);
sampler.applyConfig({temperature: 0});
const decode = async (tokens, firstIndex, wantLogits) => {
    ctx.initBatch(tokens.length);
    const idx = ctx.addToBatch(0, firstIndex, Uint32Array.from(tokens),
        Uint32Array.from(wantLogits ? [tokens.length - 1] : []));
    await ctx.decodeBatch();
    return idx;
};
let bestPrefill = Infinity, bestDecode = Infinity;
for (let r = 0; r < reps; r++) {
    ctx.disposeSequence(0);
    let t0 = performance.now();
    await decode(prompt, 0, true);
    bestPrefill = Math.min(bestPrefill, (performance.now() - t0) / 1000);
    // Decode: all but the last prompt token as context, then each step
    // evaluates one token and samples the next greedily.
    ctx.disposeSequence(0);
    await decode(prompt.slice(0, -1), 0, false);
    let tok = prompt[nPrompt - 1];
    t0 = performance.now();
    for (let i = 0; i < nGen; i++) {
        const idx = await decode([tok], nPrompt - 1 + i, true);
        tok = await ctx.sampleToken(idx[0], sampler);
    }
    bestDecode = Math.min(bestDecode, (performance.now() - t0) / 1000);
}
sampler.dispose();
const status = fs.readFileSync("/proc/self/status", "utf8");
const hwm = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
console.log(JSON.stringify({
    engine: "llama.cpp (node-llama-cpp 3.21.1)",
    model: modelPath,
    threads,
    prompt_tokens: nPrompt,
    gen_tokens: nGen,
    prefill_tok_s: nPrompt / bestPrefill,
    decode_tok_s: nGen / bestDecode,
    peak_rss_bytes: hwm,
}));
await context.dispose();
await model.dispose();
await llama.dispose();
