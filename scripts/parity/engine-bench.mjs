// llama.cpp's side of muser's engine benchmark (scripts/bench.sh).
//
// Usage: node engine-bench.mjs MODEL.gguf [THREADS] [PROMPT_TOKENS] [GEN_TOKENS] [REPS]
//
// Protocol, the same as `muser bench`: the prompt is token i = (1 + 7919·i)
// mod n_vocab; prefill evaluates it in one batch (batch size = prompt
// length) into an empty sequence; decode then feeds GEN_TOKENS tokens one at
// a time, each the greedy choice after the previous one. Each is repeated
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
let bestPrefill = Infinity, bestDecode = Infinity;
for (let r = 0; r < reps; r++) {
    const seq = context.getSequence();
    let t0 = performance.now();
    await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1).concat(prompt.slice(-1)));
    bestPrefill = Math.min(bestPrefill, (performance.now() - t0) / 1000);
    await seq.clearHistory();
    // Decode: prefill all but the last prompt token, then every step
    // evaluates one token and samples greedily.
    await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1));
    let n = 0;
    t0 = performance.now();
    for await (const _ of seq.evaluate(prompt.slice(-1), {temperature: 0})) {
        if (++n >= nGen)
            break;
    }
    bestDecode = Math.min(bestDecode, (performance.now() - t0) / 1000);
    seq.dispose();
}
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
