// Teacher-forced reference logits from llama.cpp (node-llama-cpp 3.21.1).
//
// Usage: node logits.mjs MODEL.gguf TOKENS.json OUT.bin [THREADS]
//
// TOKENS.json is a JSON array of token ids. For every position i the model
// sees tokens[0..i] and llama.cpp's next-token distribution is recorded.
// OUT.bin holds, for each position in order, the vocabulary's
// log-probabilities as little-endian float32 (n_vocab values; -Infinity where
// llama.cpp's float32 probability underflowed to 0). With a greedy sampler
// (temperature 0) node-llama-cpp returns softmax(logits) over the whole
// vocabulary, so these are the logits up to an additive constant per
// position. A JSON summary goes to stdout. Environment: CHUNK (tokens per
// evaluation, default 32), FLASH_ATTN=1 (llama.cpp's flash attention).
import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, tokensPath, outPath, threadsArg = "2"] = process.argv.slice(2);
if (!modelPath || !tokensPath || !outPath) {
    console.error("usage: node logits.mjs MODEL.gguf TOKENS.json OUT.bin [THREADS]");
    process.exit(2);
}
const tokens = JSON.parse(fs.readFileSync(tokensPath, "utf8"));
const threads = Number(threadsArg);
// Tokens per evaluation (llama.cpp batch): 32 by default, which also keeps
// at most 32 full distributions alive at once. CHUNK=1 evaluates one token
// at a time (llama.cpp's decode path), to measure how much llama.cpp
// agrees with itself under another batching.
const chunk = Number(process.env.CHUNK || "32");
if (!Number.isInteger(chunk) || chunk < 1) {
    console.error(`CHUNK=${process.env.CHUNK}: want a whole number of tokens per evaluation, at least 1`);
    process.exit(2);
}
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({
    contextSize: tokens.length + 8,
    batchSize: Math.min(512, tokens.length),
    threads: {ideal: threads, min: threads},
    sequences: 1,
    flashAttention: process.env.FLASH_ATTN === "1",
});
const seq = context.getSequence();
const out = fs.openSync(outPath, "w");
let nVocab = 0;
const started = Date.now();
for (let lo = 0; lo < tokens.length; lo += chunk) {
    const input = tokens.slice(lo, lo + chunk).map((t) => [t, {generateNext: {probabilities: true}}]);
    const res = await seq.controlledEvaluate(input);
    for (let i = 0; i < input.length; i++) {
        const probs = res[i]?.next?.probabilities;
        if (probs == null)
            throw new Error(`no probabilities for position ${lo + i}`);
        if (nVocab === 0)
            nVocab = probs.size;
        if (probs.size !== nVocab)
            throw new Error(`position ${lo + i}: ${probs.size} probabilities, want ${nVocab}`);
        const row = new Float32Array(nVocab).fill(-Infinity);
        for (const [id, p] of probs)
            row[id] = p > 0 ? Math.log(p) : -Infinity;
        fs.writeSync(out, Buffer.from(row.buffer));
    }
}
fs.closeSync(out);
console.log(JSON.stringify({
    model: modelPath,
    positions: tokens.length,
    n_vocab: nVocab,
    threads,
    node_llama_cpp: "3.21.1",
    chunk,
    seconds: (Date.now() - started) / 1000,
}));
await context.dispose();
await model.dispose();
await llama.dispose();
