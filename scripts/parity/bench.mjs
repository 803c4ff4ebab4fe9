// Times llama.cpp's tokenizer (through node-llama-cpp) on the text and
// vocabularies of infer/tokenizer's BenchmarkEncode and BenchmarkDecode:
// the peer for docs/benchmarks.md. An encode op is one
// tokenize(text, parse_special=true) of the 10 KiB text; a decode op is one
// detokenize(ids, special=false) of its ids. Both include node-llama-cpp's
// conversions between JavaScript and C++ (the string, the id array). Both
// sides are timed in CPU time (user + system, all threads), which a shared
// machine disturbs far less than wall time.
//
//   node bench.mjs [--shared DIR] [--seconds S]
//       prints "encode|decode name cpu-ns/op" for llama.cpp
//   node bench.mjs --compare [--rounds N] [--seconds S]
//       alternates N rounds of this and of `go test -bench` (so both see
//       the same machine load) and prints the medians and their ratios
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

// timeCPU runs op for about `seconds` of wall time, after a warm-up, and
// returns the CPU nanoseconds per call.
function timeCPU(op) {
  for (let i = 0; i < 3; i++) op();
  let n = 0;
  const cpu0 = process.cpuUsage();
  const deadline = process.hrtime.bigint() + BigInt(Math.round(seconds * 1e9));
  while (process.hrtime.bigint() < deadline) {
    op();
    n++;
  }
  const cpu = process.cpuUsage(cpu0);
  return ((cpu.user + cpu.system) * 1e3) / n;
}

// llamaRound times llama.cpp once on every vocabulary and returns CPU
// ns/op by operation and vocabulary.
async function llamaRound() {
  const out = {encode: {}, decode: {}};
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
      const ids = model.tokenize(text, true);
      out.encode[v.name] = timeCPU(() => model.tokenize(text, true));
      out.decode[v.name] = timeCPU(() => model.detokenize(ids, false));
      await model.dispose();
    }
  } finally {
    fs.rmSync(tmp, {recursive: true, force: true});
  }
  return out;
}

// goRound runs BenchmarkEncode and BenchmarkDecode once and returns CPU
// ns/op by operation and vocabulary.
function goRound() {
  const out = {encode: {}, decode: {}};
  const res = execFileSync("go", ["test", "-run", "^$", "-bench", "^Benchmark(Encode|Decode)$", "-benchtime", `${seconds}s`, "./infer/tokenizer"],
    {cwd: root, encoding: "utf8"});
  for (const m of res.matchAll(/^Benchmark(Encode|Decode)\/(\S+?)(?:-\d+)?\s.*?\s(\d+(?:\.\d+)?) cpu-ns\/op/gm)) {
    out[m[1].toLowerCase()][m[2]] = Number(m[3]);
  }
  return out;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

if (args.includes("--compare")) {
  const rounds = Number(opt("--rounds", "3"));
  const ours = {encode: {}, decode: {}}, theirs = {encode: {}, decode: {}};
  const add = (acc, res) => {
    for (const op of ["encode", "decode"]) for (const [k, v] of Object.entries(res[op])) (acc[op][k] ??= []).push(v);
  };
  for (let r = 0; r < rounds; r++) {
    add(ours, goRound());
    add(theirs, await llamaRound());
  }
  console.log("| vocabulary | encode: muser | llama.cpp | ratio | decode: muser | llama.cpp | ratio |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const v of vocabs) {
    const cells = [];
    for (const op of ["encode", "decode"]) {
      const a = median(ours[op][v.name] ?? [NaN]), b = median(theirs[op][v.name] ?? [NaN]);
      cells.push(`${(a / 1e3).toFixed(0)} µs`, `${(b / 1e3).toFixed(0)} µs`, (b / a).toFixed(2));
    }
    console.log(`| ${v.name} | ${cells.join(" | ")} |`);
  }
} else {
  const res = await llamaRound();
  for (const op of ["encode", "decode"]) for (const [k, v] of Object.entries(res[op])) console.log(`${op} ${k} ${v}`);
}
