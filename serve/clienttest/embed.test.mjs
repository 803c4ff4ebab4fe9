// Embeddings and /api/ps through the official OpenAI and Ollama clients,
// the Vercel AI SDK and LangChain, against `muser serve` with the
// embedded default model. embed_test.go starts the server (loopback, API
// keys on) and passes it in MUSER_URL, MUSER_KEY, MUSER_MODEL and
// MUSER_DIM (the model's embedding length).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { embed, embedMany } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { OpenAIEmbeddings } from '@langchain/openai';

const url = process.env.MUSER_URL;
const key = process.env.MUSER_KEY;
const model = process.env.MUSER_MODEL;
const dim = Number(process.env.MUSER_DIM);
assert.ok(url && key && model && dim > 0, 'MUSER_URL, MUSER_KEY, MUSER_MODEL and MUSER_DIM must be set');

const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
const ollama = new Ollama({ host: url, headers: { Authorization: `Bearer ${key}` } });
const provider = createOpenAICompatible({ name: 'muser', baseURL: `${url}/v1`, apiKey: key });

const texts = ['What is the capital of France?', 'Write a JSON object with a name.', 'The cat sat on the mat.'];

// unit checks that v is a unit-length vector of dim finite numbers.
function unit(v, what) {
  assert.equal(v.length, dim, `${what}: ${v.length} dimensions, want ${dim}`);
  let s = 0;
  for (const x of v) {
    assert.ok(Number.isFinite(x), `${what}: ${x} is not finite`);
    s += x * x;
  }
  assert.ok(Math.abs(Math.sqrt(s) - 1) < 1e-5, `${what}: length ${Math.sqrt(s)}, want 1`);
}

// same checks that two vectors hold the same float32 values (one from
// JSON text, one from base64 bytes, say).
function same(a, b, what) {
  assert.equal(a.length, b.length, `${what}: ${a.length} and ${b.length} dimensions`);
  for (let i = 0; i < a.length; i++) {
    assert.equal(Math.fround(a[i]), Math.fround(b[i]), `${what}: element ${i}: ${a[i]} and ${b[i]}`);
  }
}

let reference; // texts[0]'s embedding as JSON floats, through Ollama

test('ollama: embed, and the legacy embeddings', async () => {
  const r = await ollama.embed({ model, input: texts });
  assert.equal(r.embeddings.length, texts.length);
  r.embeddings.forEach((v, i) => unit(v, `embeddings[${i}]`));
  assert.ok(r.prompt_eval_count >= texts.length, `prompt_eval_count ${r.prompt_eval_count}`);
  assert.notDeepEqual(r.embeddings[0], r.embeddings[1]);
  reference = r.embeddings[0];
  const one = await ollama.embed({ model, input: texts[0] });
  same(one.embeddings[0], reference, 'one input and the same input in a batch');
  const legacy = await ollama.embeddings({ model, prompt: texts[0] });
  assert.equal(legacy.embedding.length, dim);
  let s = 0;
  for (const x of legacy.embedding) s += x * x;
  const n = Math.sqrt(s);
  assert.ok(n > 0, 'the legacy embedding is not zero');
  legacy.embedding.forEach((x, i) => assert.ok(Math.abs(x / n - reference[i]) < 1e-5, `legacy element ${i}: ${x / n} vs ${reference[i]}`));
});

test('ollama: ps lists the served model', async () => {
  const ps = await ollama.ps();
  assert.equal(ps.models.length, 1);
  const m = ps.models[0];
  assert.equal(m.model, `${model}:latest`);
  assert.equal(m.name, `${model}:latest`);
  assert.equal(m.size_vram, 0);
  assert.ok(m.size > 0 && /^[0-9a-f]{64}$/.test(m.digest), `size ${m.size}, digest ${m.digest}`);
  assert.ok(new Date(m.expires_at).getTime() > Date.now() + 100 * 365 * 24 * 3600 * 1000, `expires_at ${m.expires_at}`);
  assert.equal(m.details.format, 'gguf');
});

test('ollama: version is a semantic version', async () => {
  const v = await ollama.version();
  assert.match(v.version, /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/);
});

test('openai: embeddings.create (base64 by default, and float)', async () => {
  const r = await openai.embeddings.create({ model, input: texts[0] });
  assert.equal(r.object, 'list');
  assert.equal(r.model, model);
  assert.equal(r.data.length, 1);
  unit(r.data[0].embedding, 'base64');
  assert.ok(r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens, JSON.stringify(r.usage));
  const f = await openai.embeddings.create({ model, input: texts[0], encoding_format: 'float' });
  same(r.data[0].embedding, f.data[0].embedding, 'base64 and float');
  same(f.data[0].embedding, reference, 'openai and ollama');
  const many = await openai.embeddings.create({ model, input: texts });
  assert.deepEqual(many.data.map((d) => d.index), [0, 1, 2]);
  same(many.data[0].embedding, reference, 'batched');
  await assert.rejects(openai.embeddings.create({ model, input: texts[0], dimensions: 7 }), (err) => {
    assert.equal(err.status, 400);
    assert.equal(err.param, 'dimensions');
    return true;
  });
  await assert.rejects(openai.embeddings.create({ model, input: '' }), (err) => err.status === 400 && err.param === 'input');
});

test('ai sdk: embed and embedMany', async () => {
  const r = await embed({ model: provider.embeddingModel(model), value: texts[0], maxRetries: 0 });
  same(r.embedding, reference, 'ai sdk embed');
  assert.ok(r.usage.tokens > 0, `usage ${JSON.stringify(r.usage)}`);
  const m = await embedMany({ model: provider.embeddingModel(model), values: texts, maxRetries: 0 });
  assert.equal(m.embeddings.length, texts.length);
  same(m.embeddings[0], reference, 'ai sdk embedMany');
  m.embeddings.forEach((v, i) => unit(v, `embedMany[${i}]`));
});

test('langchain: OpenAIEmbeddings', async () => {
  const lc = new OpenAIEmbeddings({ model, apiKey: key, maxRetries: 0, configuration: { baseURL: `${url}/v1` } });
  const q = await lc.embedQuery(texts[0]);
  same(q, reference, 'langchain embedQuery');
  const docs = await lc.embedDocuments(texts);
  assert.equal(docs.length, texts.length);
  docs.forEach((v, i) => unit(v, `embedDocuments[${i}]`));
  same(docs[2], (await lc.embedQuery(texts[2])), 'a document and the same query');
});
