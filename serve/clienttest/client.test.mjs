// The official OpenAI and Ollama JavaScript clients against a running
// `muser serve`. clienttest_test.go starts the server (stories260K on
// loopback, API keys on) and runs this file with `node --test`; it passes
// the server in MUSER_URL, MUSER_KEY and MUSER_MODEL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Ollama } from 'ollama';

const url = process.env.MUSER_URL;
const key = process.env.MUSER_KEY;
const model = process.env.MUSER_MODEL;
assert.ok(url && key && model, 'MUSER_URL, MUSER_KEY and MUSER_MODEL must be set');

const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
const ollama = new Ollama({ host: url, headers: { Authorization: `Bearer ${key}` } });

function story(n) {
  const words = ('once upon a time there was a little girl named lily she liked to play with her ball in the park ' +
    'one day she saw a big dog the dog was happy and wanted to play too they ran and laughed all day long').split(' ');
  const out = [];
  for (let i = 0; i < n; i++) out.push(words[(i * 7 + Math.floor(i / words.length)) % words.length]);
  return out.join(' ');
}

// metric returns one sample from /metrics.
async function metric(name) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  assert.ok(line, `${name} is exposed`);
  return Number(line.slice(name.length + 1));
}

// published waits until no finished request's blocks are still being
// published (a request is counted as pending before its answer is sent).
async function published() {
  while ((await metric('muser_publish_pending')) > 0) await new Promise((r) => setTimeout(r, 20));
}

test('openai: models', async () => {
  const list = await openai.models.list();
  const ids = list.data.map((m) => m.id);
  assert.deepEqual(ids, [model]);
  const one = await openai.models.retrieve(model);
  assert.equal(one.id, model);
  assert.equal(one.object, 'model');
});

test('openai: chat completion, streamed and not, same seed same text', async () => {
  const req = {
    model,
    messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: [{ type: 'text', text: 'A story, please.' }] }],
    max_completion_tokens: 16, seed: 42, temperature: 0.8,
  };
  const whole = await openai.chat.completions.create(req);
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices.length, 1);
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(typeof whole.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
  assert.equal(whole.usage.completion_tokens <= 16, true);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);
  assert.equal(typeof whole.usage.prompt_tokens_details.cached_tokens, 'number');

  const stream = await openai.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage = null;
  let finish = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 3);
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.ok(usage, 'a usage chunk was sent');
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
  assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
});

test('openai: completions, streamed and not, with stop and logprobs', async () => {
  const req = { model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0, logprobs: 2 };
  const whole = await openai.completions.create(req);
  assert.equal(whole.object, 'text_completion');
  const text = whole.choices[0].text;
  assert.ok(text.startsWith(', there was'), `greedy text ${JSON.stringify(text)}`);
  assert.equal(whole.choices[0].logprobs.tokens.join(''), text);
  assert.equal(whole.choices[0].logprobs.top_logprobs.length, whole.usage.completion_tokens);

  let streamed = '';
  for await (const chunk of await openai.completions.create({ ...req, stream: true })) {
    streamed += chunk.choices[0]?.text ?? '';
  }
  assert.equal(streamed, text);

  const cut = await openai.completions.create({ ...req, stop: [' little'] });
  assert.equal(cut.choices[0].finish_reason, 'stop');
  assert.equal(cut.choices[0].text, text.slice(0, text.indexOf(' little')));
});

test('openai: a shared prefix is served from the store', async () => {
  const system = story(200);
  const first = await openai.chat.completions.create({
    model, messages: [{ role: 'system', content: system }, { role: 'user', content: 'First.' }], max_tokens: 4, seed: 1,
  });
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  await published();
  assert.ok((await metric('muser_publishes_total{result="ok"}')) >= 1);
  const second = await openai.chat.completions.create({
    model, messages: [{ role: 'system', content: system }, { role: 'user', content: 'Second.' }], max_tokens: 4, seed: 1,
  });
  assert.ok(second.usage.prompt_tokens_details.cached_tokens > 0,
    `cached_tokens ${second.usage.prompt_tokens_details.cached_tokens}`);
  assert.ok(second.usage.prompt_tokens_details.cached_tokens < second.usage.prompt_tokens);
});

test('openai: errors have OpenAI\'s shape', async () => {
  await assert.rejects(
    openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], temprature: 1 }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.equal(err.status, 400);
      assert.equal(err.code, 'unknown_field');
      assert.equal(err.param, 'temprature');
      assert.equal(err.type, 'invalid_request_error');
      assert.match(err.message, /unknown field "temprature"/);
      return true;
    });
  await assert.rejects(
    openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], n: 17 }),
    (err) => err instanceof OpenAI.BadRequestError && err.code === 'invalid_value' && err.param === 'n');
  await assert.rejects(
    openai.chat.completions.create({ model, messages: [{ role: 'user', content: story(400) }] }),
    (err) => err instanceof OpenAI.BadRequestError && err.code === 'context_length_exceeded' && /the context holds/.test(err.message));
  await assert.rejects(
    openai.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }),
    (err) => err instanceof OpenAI.NotFoundError && err.code === 'model_not_found');
  const stranger = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'sk-not-a-key-0123456789', maxRetries: 0 });
  await assert.rejects(stranger.models.list(),
    (err) => err instanceof OpenAI.AuthenticationError && err.status === 401 && err.code === 'invalid_api_key');
});

test('ollama: list, show, version', async () => {
  const list = await ollama.list();
  assert.equal(list.models.length, 1);
  assert.equal(list.models[0].name, `${model}:latest`);
  assert.equal(list.models[0].details.format, 'gguf');
  const show = await ollama.show({ model });
  assert.equal(typeof show.template, 'string');
  assert.equal(show.model_info['general.architecture'], 'llama');
  const v = await ollama.version();
  assert.equal(typeof v.version, 'string');
});

test('ollama: generate and chat, streamed and not', async () => {
  const options = { num_predict: 10, temperature: 0, repeat_penalty: 1 };
  const whole = await ollama.generate({ model, prompt: 'Once upon a time', raw: true, options });
  assert.equal(whole.done, true);
  assert.equal(whole.eval_count, 10);
  assert.ok(whole.response.startsWith(', there was'), `greedy text ${JSON.stringify(whole.response)}`);
  assert.ok(Array.isArray(whole.context) && whole.context.length > 10);
  let text = '';
  let last = null;
  for await (const part of await ollama.generate({ model, prompt: 'Once upon a time', raw: true, options, stream: true })) {
    text += part.response;
    last = part;
  }
  assert.equal(text, whole.response);
  assert.equal(last.done, true);
  assert.equal(last.done_reason, 'length');

  const chat = await ollama.chat({ model, messages: [{ role: 'user', content: 'Hello' }], options: { num_predict: 6, seed: 5 } });
  assert.equal(chat.message.role, 'assistant');
  let streamed = '';
  for await (const part of await ollama.chat({ model, messages: [{ role: 'user', content: 'Hello' }], options: { num_predict: 6, seed: 5 }, stream: true })) {
    streamed += part.message.content;
  }
  assert.equal(streamed, chat.message.content);
});

test('ollama: errors', async () => {
  await assert.rejects(ollama.generate({ model, prompt: 'x', format: 'yaml' }), (err) => {
    assert.equal(err.name, 'ResponseError');
    assert.equal(err.status_code, 400);
    assert.match(err.error, /format/);
    return true;
  });
  await assert.rejects(ollama.show({ model: 'llama3' }), (err) => err.status_code === 404);
  const stranger = new Ollama({ host: url });
  await assert.rejects(stranger.list(), (err) => err.status_code === 401);
});
