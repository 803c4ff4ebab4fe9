// Loads the GGUF files written by ./gen (muser's GGUF writer and
// quantizers) in llama.cpp through node-llama-cpp, evaluates a few tokens
// of each, and checks:
//   - every file loads and gives finite next-token probabilities;
//   - stories260K re-encoded by muser greedily continues "Once upon a time"
//     exactly as llama2.c's golden output says;
//   - muser's Q8_0 re-quantization of stories260K gives the same greedy
//     tokens for the first steps;
//   - each quantized tiny model's next-token distribution stays close (in
//     total variation) to its F32 "twin", whose weights are exactly the
//     values muser's dequantizer decodes from the quantized blocks: if
//     llama.cpp read muser's blocks differently from muser, the two would
//     differ by far more than llama.cpp's own activation rounding. The
//     distance to the original F32 model (which includes the quantization
//     error itself) is printed for comparison.
// Usage: node check.mjs DIR GOLDEN_TEXT
import {getLlama} from "node-llama-cpp";
import fs from "node:fs";
import path from "node:path";

const [dir, goldenPath] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
let failures = 0;
const fail = (msg) => { console.log("FAIL " + msg); failures++; };

// evaluate returns, for each of `steps` greedy steps after `prompt`, the
// chosen token and the full probability map.
async function evaluate(file, prompt, steps) {
    const model = await llama.loadModel({modelPath: path.join(dir, file)});
    const context = await model.createContext({contextSize: 256, batchSize: 64, threads: 1});
    const seq = context.getSequence();
    const out = [];
    let input = prompt;
    for (let i = 0; i < steps; i++) {
        const it = seq.evaluateWithMetadata(input, {probabilities: true}, {temperature: 0});
        const {value} = await it.next();
        await it.return();
        for (const [tok, p] of value.probabilities) {
            if (!Number.isFinite(p)) fail(`${file}: probability of token ${tok} is ${p}`);
        }
        out.push({token: value.token, probs: value.probabilities});
        input = [value.token];
    }
    const text = model.detokenize(out.map((s) => s.token));
    await context.dispose();
    await model.dispose();
    return {steps: out, text};
}

function tv(a, b) {
    let d = 0;
    const keys = new Set([...a.keys(), ...b.keys()]);
    for (const k of keys) d += Math.abs((a.get(k) ?? 0) - (b.get(k) ?? 0));
    return d / 2;
}

const prompt = [1, 403, 407, 261, 378]; // BOS "Once upon a time"
const golden = fs.readFileSync(goldenPath, "utf8");

const story = await evaluate("stories260K-rewritten.gguf", prompt, 24);
const want = golden.slice("Once upon a time".length, "Once upon a time".length + story.text.length);
console.log(`stories260K-rewritten: ${JSON.stringify(story.text)}`);
if (story.text !== want) fail(`rewritten stories260K continues ${JSON.stringify(story.text)}, golden ${JSON.stringify(want)}`);

const q8 = await evaluate("stories260K-q8_0.gguf", prompt, 24);
console.log(`stories260K-q8_0:      ${JSON.stringify(q8.text)}`);
let agree = 0;
while (agree < q8.steps.length && q8.steps[agree].token === story.steps[agree].token) agree++;
console.log(`  greedy tokens equal to F32 for the first ${agree} of 24 steps; TV at step 0: ${tv(q8.steps[0].probs, story.steps[0].probs).toFixed(4)}`);
if (agree < 8) fail(`stories260K-q8_0 diverges from F32 after ${agree} tokens`);

const tinyPrompt = [1, 403, 407, 261, 378, 11, 300];
const base = await evaluate("tiny-f32.gguf", tinyPrompt, 4);
const limit = 0.05;
for (const name of ["f16", "bf16", "q8_0", "q5_0", "q5_1", "q4_0", "q4_1", "q4_k"]) {
    const file = `tiny-${name}.gguf`;
    const r = await evaluate(file, tinyPrompt, 1);
    const twin = await evaluate(`tiny-${name}-twin.gguf`, tinyPrompt, 1);
    const dTwin = tv(r.steps[0].probs, twin.steps[0].probs);
    const dOrig = tv(r.steps[0].probs, base.steps[0].probs);
    console.log(`${file}: loads; TV distance to its F32 twin ${dTwin.toFixed(4)} (limit ${limit}), to the unquantized model ${dOrig.toFixed(4)}`);
    if (dTwin > limit) fail(`${file}: TV distance ${dTwin} to its twin exceeds ${limit}`);
}
console.log(failures === 0 ? "OK" : `${failures} failures`);
process.exit(failures === 0 ? 0 : 1);
