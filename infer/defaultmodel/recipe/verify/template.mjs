// Renders the default model's chat template with @huggingface/jinja (the
// Jinja engine of transformers.js, which node-llama-cpp uses for GGUF chat
// templates) and compares the output with the corpus text of the same
// conversations.
//
// Usage:
//   go run ./infer/defaultmodel/recipe/corpusgen -template /tmp/chat_template.jinja
//   go run ./infer/defaultmodel/recipe/corpusgen -template-cases /tmp/cases.json
//   node template.mjs /tmp/chat_template.jinja /tmp/cases.json
//
// Exit status 1 when any conversation renders differently, or when a
// conversation without tools does not render as plain ChatML.
import fs from "node:fs";
import { Template } from "@huggingface/jinja";

const [templatePath, casesPath] = process.argv.slice(2);
if (!templatePath || !casesPath) {
  console.error("usage: node template.mjs chat_template.jinja cases.json");
  process.exit(2);
}
const tmpl = new Template(fs.readFileSync(templatePath, "utf8"));
const cases = JSON.parse(fs.readFileSync(casesPath, "utf8"));
const render = (messages, tools, add_generation_prompt) =>
  tmpl.render({ messages, tools, add_generation_prompt, bos_token: "<s>", eos_token: "<|im_end|>" });

let equal = 0;
for (const [i, c] of cases.entries()) {
  const got = render(c.messages, c.tools, false);
  if (got === c.text) equal++;
  else if (equal + 3 > i) console.log(`DIFF case ${i}\n${JSON.stringify(got)}\nwant\n${JSON.stringify(c.text)}`);
}
console.log(`@huggingface/jinja: ${equal}/${cases.length} tool conversations render as the corpus text`);

const plain = [
  { role: "system", content: "You are a helpful assistant." },
  { role: "user", content: "What is 3 plus 4?" },
  { role: "assistant", content: "3 plus 4 is 7." },
  { role: "user", content: "Thanks!" },
];
const chatml = plain.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join("") + "<|im_start|>assistant\n";
const plainOK = render(plain, undefined, true) === chatml && render(plain, [], true) === chatml;
console.log(`conversation without tools renders as plain ChatML: ${plainOK}`);
process.exit(equal === cases.length && plainOK ? 0 : 1);
