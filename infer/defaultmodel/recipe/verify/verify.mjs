// Loads a GGUF of muser's default model in llama.cpp (through
// node-llama-cpp, CPU build) and compares it with the recipe's PyTorch
// evaluation (eval.json written by train/train.py):
//
//   - tokenization: llama.cpp's tokens of every recorded text (special
//     tokens parsed) must equal the SentencePiece tokens the model was
//     trained on;
//   - end of generation: <|im_end|> must be the EOS and an EOG token;
//   - greedy generation: for every held-out question, held-out tool request,
//     JSON prompt, story prompt and chat prompt, llama.cpp's greedy tokens
//     are compared with PyTorch's, and the question answers and tool calls
//     are graded with the rules of package evalset.
//
// Usage: node verify.mjs MODEL.gguf eval.json [report.json]
// Exit status 1 when tokenization differs or EOS/EOG is wrong; differences
// in generated tokens are reported, not fatal (Q8_0 weights may change a
// near-tie).
import fs from "node:fs";
import { getLlama } from "node-llama-cpp";

const [modelPath, evalPath, reportPath] = process.argv.slice(2);
if (!modelPath || !evalPath) {
  console.error("usage: node verify.mjs MODEL.gguf eval.json [report.json]");
  process.exit(2);
}
const ev = JSON.parse(fs.readFileSync(evalPath, "utf8"));
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath });
const ctx = await model.createContext({ contextSize: Math.min(1024, model.trainContextSize), sequences: 1, threads: 2 });
const seq = ctx.getSequence();

function check(q, reply) {
  if (q.match === "number") {
    const nums = (reply.match(/[0-9]+/g) || []).map((n) => n.replace(/^0+/, "") || "0");
    return nums.length > 0 && nums[nums.length - 1] === q.want;
  }
  if (q.match === "word") {
    const words = reply.match(/[\p{L}\p{N}-]+/gu) || [];
    return words.some((w) => w.toLowerCase() === q.want.toLowerCase());
  }
  if (q.match === "text") return reply.split(/\s+/).filter(Boolean).join(" ").includes(q.want);
  return false;
}

// The twins of evalset.ParseToolCall and ToolRequest.Check.
function parseToolCall(reply) {
  const i = reply.indexOf("<tool_call>");
  if (i < 0) return null;
  const body = reply.slice(i + "<tool_call>".length);
  const j = body.indexOf("</tool_call>");
  if (j < 0) return null;
  let c;
  try {
    c = JSON.parse(body.slice(0, j));
  } catch {
    return null;
  }
  const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  return isObj(c) && typeof c.name === "string" && isObj(c.arguments) ? c : null;
}
function jsonEqual(a, b) {
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return a === b;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a), kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
}
function checkTool(q, reply) {
  const c = parseToolCall(reply);
  return c !== null && c.name === q.name && jsonEqual(c.arguments, q.arguments);
}

async function greedy(prompt, max) {
  await seq.clearHistory();
  const out = [];
  if (max <= 0) return out;
  for await (const t of seq.evaluate(prompt, { temperature: 0 })) {
    if (model.isEogToken(t)) break;
    out.push(t);
    if (out.length >= max) break;
  }
  return out;
}

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
let fatal = false;
const report = { model: modelPath, tokenize: { total: 0, equal: 0, diffs: [] }, questions: [], tools: [], json: [], stories: [], chats: [] };

const imEnd = model.tokenize("<|im_end|>", true);
const eos = model.tokens.eos;
report.eos = eos;
report.bos = model.tokens.bos;
report.im_end = imEnd;
report.im_end_is_eog = imEnd.length === 1 && model.isEogToken(imEnd[0]);
report.chat_template = model.fileInfo.metadata?.tokenizer?.chat_template ?? null;
console.log(`bos ${model.tokens.bos} eos ${eos} <|im_end|> ${JSON.stringify(imEnd)} eog ${report.im_end_is_eog}`);
if (!(imEnd.length === 1 && eos === imEnd[0] && report.im_end_is_eog)) {
  console.log("FAIL: <|im_end|> must be one token, the EOS, and end generation");
  fatal = true;
}

for (const { text, ids } of ev.tokenize) {
  const got = Array.from(model.tokenize(text, true));
  report.tokenize.total++;
  if (same(got, ids)) report.tokenize.equal++;
  else report.tokenize.diffs.push({ text, want: ids, got });
}
console.log(`tokenization: ${report.tokenize.equal}/${report.tokenize.total} texts equal`);
for (const d of report.tokenize.diffs.slice(0, 5)) console.log("  DIFF", JSON.stringify(d));
if (report.tokenize.diffs.length) fatal = true;

let correct = 0, sameTokens = 0, n = 0;
for (const q of ev.questions) {
  const prompt = q.prompt_ids;
  const text = "<|im_start|>user\n" + q.prompt + "<|im_end|>\n<|im_start|>assistant\n";
  const tok = [model.tokens.bos, ...model.tokenize(text, true)];
  if (!same(tok, prompt)) {
    console.log(`FAIL: prompt tokens differ for ${JSON.stringify(q.prompt)}`);
    fatal = true;
  }
  const out = await greedy(prompt, 48);
  const reply = model.detokenize(out);
  const ok = check(q, reply);
  correct += ok;
  n++;
  const eq = same(out, q.output_ids);
  sameTokens += eq;
  report.questions.push({ prompt: q.prompt, want: q.want, reply, correct: ok, torch_reply: q.reply, torch_correct: q.correct, same_tokens: eq, prompt_ids: prompt, output_ids: out });
  console.log(`${ok ? "OK " : "BAD"} ${eq ? "=" : "≠"} ${JSON.stringify(q.prompt)} -> ${JSON.stringify(reply)}`);
}
console.log(`llama.cpp: ${correct}/${n} held-out questions correct; ${sameTokens}/${n} greedy outputs token-identical to PyTorch (PyTorch: ${ev.correct}/${ev.total})`);
report.correct = correct;
report.total = n;
report.same_tokens = sameTokens;

let toolsCorrect = 0, toolsSame = 0;
for (const q of ev.tools ?? []) {
  const tok = [model.tokens.bos, ...model.tokenize(q.text, true)];
  if (!same(tok, q.prompt_ids)) {
    console.log(`FAIL: prompt tokens differ for tool request ${JSON.stringify(q.prompt)}`);
    fatal = true;
  }
  const out = await greedy(q.prompt_ids, 96);
  const reply = model.detokenize(out);
  const ok = checkTool(q, reply);
  const eq = same(out, q.output_ids);
  toolsCorrect += ok;
  toolsSame += eq;
  report.tools.push({ prompt: q.prompt, name: q.name, arguments: q.arguments, reply, correct: ok, torch_reply: q.reply, torch_correct: q.correct, same_tokens: eq, prompt_ids: q.prompt_ids, output_ids: out });
  console.log(`${ok ? "OK " : "BAD"} ${eq ? "=" : "≠"} ${JSON.stringify(q.prompt)} -> ${JSON.stringify(reply)}`);
}
report.tools_correct = toolsCorrect;
report.tools_total = (ev.tools ?? []).length;
report.tools_same_tokens = toolsSame;
console.log(`llama.cpp: ${toolsCorrect}/${report.tools_total} held-out tool requests correct; ${toolsSame} greedy outputs token-identical to PyTorch (PyTorch: ${ev.tools_correct}/${ev.tools_total})`);

for (const [key, max] of [["json", 96], ["stories", 160], ["chats", 200]]) {
  for (const s of ev[key] ?? []) {
    const out = await greedy(s.prompt_ids, max);
    const eq = same(out, s.output_ids);
    report[key].push({ prompt: s.prompt, text: model.detokenize(out), same_tokens: eq, prompt_ids: s.prompt_ids, output_ids: out });
    console.log(`${eq ? "=" : "≠"} ${JSON.stringify(s.prompt)} -> ${JSON.stringify(model.detokenize(out))}`);
  }
}
if (reportPath) fs.writeFileSync(reportPath, JSON.stringify(report, null, 1) + "\n");
await model.dispose();
process.exit(fatal ? 1 : 0);
