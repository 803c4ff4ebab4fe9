// Times llama.cpp's tokenizer (through node-llama-cpp) on the text and
// vocabularies of infer/tokenizer's BenchmarkEncode: the peer for
// docs/benchmarks.md. An op is one tokenize(text, parse_special=true) of
// the 10 KiB text, including node-llama-cpp's conversion of the string and
// of the result.
//
//   node bench.mjs [--shared DIR] [--seconds S]
//       prints "name ns/op" for llama.cpp, one line per vocabulary
//   node bench.mjs --compare [--rounds N] [--seconds S]
//       alternates N rounds of this and of `go test -bench BenchmarkEncode`
//       (so both see the same machine load) and prints the medians and
//       their ratio
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {fileURLToPath} from "node:url";
import {execFileSync} from "node:child_process";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
import {patchGGUF} from "./gguf-patch.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const shared = path.resolve(opt("--shared", path.join(root, "../shared")));
const seconds = Number(opt("--seconds", "2"));
const text = fs.readFileSync(path.join(root, "infer/tokenizer/testdata/bench.txt"), "utf8");

// Keep in step with benchVocabs in infer/tokenizer/bench_test.go.
const vocabs = [
  {name: "stories260K", file: "models/stories260K.gguf"},
  {name: "llama-spm", file: "vocab/ggml-vocab-llama-spm.gguf"},
  {name: "phi-3", file: "vocab/ggml-vocab-phi-3.gguf"},
  {name: "gpt-2", file: "vocab/ggml-vocab-gpt-2.gguf"},
  {name: "gpt-2+llama-bpe", file: "vocab/ggml-vocab-gpt-2.gguf", pre: "llama-bpe"},
  {name: "gpt-neox", file: "vocab/ggml-vocab-gpt-neox.gguf"},
  {name: "falcon", file: "vocab/ggml-vocab-falcon.gguf"},
  {name: "deepseek-llm", file: "vocab/ggml-vocab-deepseek-llm.gguf"},
];

async function llamaRound() {
const out = {};
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "muser-bench-"));
try {
  for (const v of vocabs) {
    let modelPath = path.join(shared, v.file);
    if (v.pre) {
      const p = path.join(tmp, path.basename(v.file));
      patchGGUF(modelPath, p, {"tokenizer.ggml.pre": v.pre});
      modelPath = p;
    }
    const model = await llama.loadModel({modelPath, vocabOnly: true});
    for (let i = 0; i < 3; i++) model.tokenize(text, true);
    let n = 0;
    const start = process.hrtime.bigint();
    const deadline = start + BigInt(Math.round(seconds * 1e9));
    let now = start;
    while (now < deadline) {
      model.tokenize(text, true);
      n++;
      now = process.hrtime.bigint();
    }
    out[v.name] = Number(now - start) / n;
    await model.dispose();
  }
} finally {
  fs.rmSync(tmp, {recursive: true, force: true});
}
return out;
}

// goRound runs BenchmarkEncode once and returns ns/op by vocabulary.
function goRound() {
  const out = {};
  const res = execFileSync("go", ["test", "-run", "^$", "-bench", "^BenchmarkEncode$", "-benchtime", `${seconds}s`, "./infer/tokenizer"],
    {cwd: root, encoding: "utf8"});
  for (const m of res.matchAll(/^BenchmarkEncode\/(\S+?)(?:-\d+)?\s+\d+\s+(\d+(?:\.\d+)?) ns\/op/gm)) out[m[1]] = Number(m[2]);
  return out;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

if (args.includes("--compare")) {
  const rounds = Number(opt("--rounds", "3"));
  const ours = {}, theirs = {};
  for (let r = 0; r < rounds; r++) {
    for (const [k, v] of Object.entries(goRound())) (ours[k] ??= []).push(v);
    for (const [k, v] of Object.entries(await llamaRound())) (theirs[k] ??= []).push(v);
  }
  console.log("| vocabulary | muser µs/op | llama.cpp µs/op | llama.cpp ÷ muser |");
  console.log("|---|---:|---:|---:|");
  for (const v of vocabs) {
    const a = median(ours[v.name] ?? [NaN]), b = median(theirs[v.name] ?? [NaN]);
    console.log(`| ${v.name} | ${(a / 1e3).toFixed(0)} | ${(b / 1e3).toFixed(0)} | ${(b / a).toFixed(2)} |`);
  }
} else {
  for (const [k, v] of Object.entries(await llamaRound())) console.log(`${k} ${v}`);
}
