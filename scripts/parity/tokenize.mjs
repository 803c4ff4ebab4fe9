// Generates the token-parity vectors in infer/tokenizer/testdata/parity/:
// llama.cpp (through node-llama-cpp, pinned in package.json) tokenizes and
// detokenizes the corpus of corpus.mjs with every vocabulary in
// ../shared/vocab, with stories260K, and with variants of those files whose
// metadata is patched to select other pre-tokenizers. See README.md.
//
//   node tokenize.mjs [--shared DIR] [--out DIR] [--only NAME]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import crypto from "node:crypto";
import {createRequire} from "node:module";
import {fileURLToPath} from "node:url";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
import {corpus} from "./corpus.mjs";
import {patchGGUF} from "./gguf-patch.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const shared = path.resolve(opt("--shared", path.join(root, "../shared")));
const outDir = path.resolve(opt("--out", path.join(root, "infer/tokenizer/testdata/parity")));
const only = opt("--only", null);

const require = createRequire(import.meta.url);
let nlcDir = path.dirname(require.resolve("node-llama-cpp"));
while (!fs.existsSync(path.join(nlcDir, "package.json"))) nlcDir = path.dirname(nlcDir);
const nlcVersion = JSON.parse(fs.readFileSync(path.join(nlcDir, "package.json"), "utf8")).version;
const llamaCpp = JSON.parse(fs.readFileSync(path.join(nlcDir, "llama/llama.cpp.info.json"), "utf8"));

// Variants: a base file and the metadata to patch into it. The name is the
// vector file's name.
const variants = [];
for (const f of fs.readdirSync(path.join(shared, "vocab")).filter((f) => f.endsWith(".gguf")).sort()) {
  variants.push({name: f.replace(/^ggml-vocab-/, "").replace(/\.gguf$/, ""), base: `vocab/${f}`, set: {}});
}
variants.push({name: "stories260K", base: "models/stories260K.gguf", set: {}});
// Pre-tokenizers no shared file uses, run on GPT-2's vocabulary (one per
// distinct splitter and flag set), and SentencePiece without the space prefix.
const pres = [
  "llama-bpe", "dbrx", "chatglm-bpe", "qwen2", "stablelm2", "qwen35", "seed-coder", "bailingmoe",
  "minicpm5", "smollm", "command-r", "poro-chat", "bloom", "viking", "deepseek-v3", "tekken",
  "gpt-4o", "jais-2", "laguna", "olmo", "trillion", "default", "gemma4", "sarvam-moe",
];
for (const pre of pres) {
  variants.push({name: `gpt-2+pre=${pre}`, base: "vocab/ggml-vocab-gpt-2.gguf", set: {"tokenizer.ggml.pre": pre}});
}
variants.push({
  name: "llama-spm+add_space_prefix=false",
  base: "vocab/ggml-vocab-llama-spm.gguf",
  set: {"tokenizer.ggml.add_space_prefix": false},
});

// The texts exactly as llama.cpp receives them: node-llama-cpp passes JS
// strings as UTF-8, with lone surrogates replaced by U+FFFD.
const texts = [...new Set(corpus.map((s) => Buffer.from(s, "utf8").toString("utf8")))];

const sha256 = (buf) => crypto.createHash("sha256").update(buf).digest("hex");

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "muser-parity-"));
fs.mkdirSync(outDir, {recursive: true});
try {
  for (const v of variants) {
    if (only && v.name !== only) continue;
    const basePath = path.join(shared, v.base);
    let modelPath = basePath;
    if (Object.keys(v.set).length > 0) {
      modelPath = path.join(tmp, path.basename(v.base));
      patchGGUF(basePath, modelPath, v.set);
    }
    const model = await llama.loadModel({modelPath, vocabOnly: true});
    const m = model._model; // the addon: token attributes and EOG flags
    const n = model.fileInfo.metadata.tokenizer.ggml.tokens.length;

    // Attributes (llama_token_attr) of every token whose attributes are not
    // just NORMAL, and the end-of-generation tokens.
    const attrs = [];
    const eog = [];
    // A digest of detokenize([id]) for every id, in both modes.
    const pieces = {plain: crypto.createHash("sha256"), special: crypto.createHash("sha256")};
    const t1 = Date.now();
    for (let id = 0; id < n; id++) {
      const a = m.getTokenAttributes(id);
      if (a !== 4) attrs.push([id, a]);
      if (m.isEogToken(id)) eog.push(id);
      pieces.plain.update(model.detokenize([id], false) + "\0");
      pieces.special.update(model.detokenize([id], true) + "\0");
    }
    console.error(`  tokens: ${Date.now() - t1} ms`);

    // A case lists "special" (parse_special on), "detok" (detokenize with
    // special off) and "detokSpecial" (detokenize of "special", special on)
    // only where they differ from "ids" and "text".
    const t0 = Date.now();
    const cases = texts.map((text) => {
      const ids = model.tokenize(text, false);
      const special = model.tokenize(text, true);
      const c = {text, ids};
      if (JSON.stringify(special) !== JSON.stringify(ids)) c.special = special;
      const detok = model.detokenize(ids, false);
      if (detok !== text) c.detok = detok;
      const detokSpecial = model.detokenize(special, true);
      if (detokSpecial !== text) c.detokSpecial = detokSpecial;
      return c;
    });
    console.error(`  corpus: ${Date.now() - t0} ms`);

    const t = model.tokens;
    const vec = {
      name: v.name,
      file: v.base,
      sha256: sha256(fs.readFileSync(basePath)),
      set: v.set,
      nodeLlamaCpp: nlcVersion,
      llamaCpp: llamaCpp,
      vocabSize: n,
      bos: t.bos ?? -1,
      eos: t.eos ?? -1,
      eot: t.eot ?? -1,
      addBos: t.shouldPrependBosToken,
      addEos: t.shouldAppendEosToken,
      eog,
      attrs,
      pieceDigest: {plain: pieces.plain.digest("hex"), special: pieces.special.digest("hex")},
      cases,
    };
    // One case per line keeps the files reviewable and diffs small.
    const head = JSON.stringify({...vec, cases: undefined, attrs: undefined}, null, 1).replace(/\n}$/, "");
    const body = [
      head + ",",
      ` "attrs": ${JSON.stringify(attrs)},`,
      ` "cases": [`,
      cases.map((c) => "  " + JSON.stringify(c)).join(",\n"),
      " ]",
      "}",
      "",
    ].join("\n");
    fs.writeFileSync(path.join(outDir, `${v.name}.json`), body);
    console.log(`${v.name}: ${cases.length} cases, ${n} tokens`);
    await model.dispose();
  }
} finally {
  fs.rmSync(tmp, {recursive: true, force: true});
}
