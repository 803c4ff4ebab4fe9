// Structured output through real clients against `muser serve` with the
// embedded default model: the OpenAI SDK's chat.completions.parse with a
// zod schema, the Vercel AI SDK's generateObject, LangChain's
// withStructuredOutput and the Ollama client's format. structured_test.go
// starts the server and passes it in MUSER_URL, MUSER_KEY and MUSER_MODEL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { Ollama } from 'ollama';
import { generateObject } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';

const url = process.env.MUSER_URL;
const key = process.env.MUSER_KEY;
const model = process.env.MUSER_MODEL;
assert.ok(url && key && model, 'MUSER_URL, MUSER_KEY and MUSER_MODEL must be set');

// Strings are bounded so that the small default model finishes.
const Person = z.object({
  name: z.string().max(12),
  age: z.number().int(),
  pet: z.enum(['cat', 'dog', 'fish']),
  tags: z.array(z.string().max(8)).max(3),
  nick: z.string().max(8).nullable(),
});

function checkPerson(p) {
  // zod's parse is the validation: it throws on any mismatch.
  const again = Person.parse(p);
  assert.deepEqual(again, p);
}

const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });

test('openai: chat.completions.parse with zodResponseFormat', async () => {
  for (const [i, prompt] of ['Tell me about a girl and her dog.', 'What is 2 plus 2?', 'Hello!'].entries()) {
    const completion = await openai.chat.completions.parse({
      model,
      messages: [{ role: 'user', content: prompt }],
      response_format: zodResponseFormat(Person, 'person'),
      max_completion_tokens: 200, temperature: 0.8, seed: 11 + i,
    });
    const choice = completion.choices[0];
    assert.equal(choice.finish_reason, 'stop', `finish_reason for ${JSON.stringify(choice.message.content)}`);
    assert.ok(choice.message.parsed, 'the SDK parsed the message');
    checkPerson(choice.message.parsed);
  }
});

test('openai: an invalid schema is a 400 naming the field', async () => {
  await assert.rejects(openai.chat.completions.create({
    model, messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'x', strict: true, schema: { type: 'string', pattern: 'a+' } } },
  }), (err) => {
    assert.equal(err.status, 400);
    assert.equal(err.param, 'response_format.json_schema.schema');
    assert.match(err.message, /pattern/);
    return true;
  });
});

test('vercel ai sdk: generateObject', async () => {
  const provider = createOpenAICompatible({ name: 'muser', baseURL: `${url}/v1`, apiKey: key, supportsStructuredOutputs: true });
  const { object, finishReason } = await generateObject({
    model: provider.chatModel(model),
    schema: Person,
    prompt: 'Describe a boy and his cat.',
    maxOutputTokens: 200, temperature: 0.5, seed: 3, maxRetries: 0,
  });
  assert.equal(finishReason, 'stop');
  checkPerson(object);
});

test('langchain: withStructuredOutput', async () => {
  const llm = new ChatOpenAI({ model, apiKey: key, configuration: { baseURL: `${url}/v1` }, temperature: 0, maxTokens: 200, maxRetries: 0 });
  const structured = llm.withStructuredOutput(Person, { name: 'person', method: 'jsonSchema', strict: true });
  const out = await structured.invoke('Tell me about a fish.');
  checkPerson(out);
});

test('ollama: chat and generate with format', async () => {
  const ollama = new Ollama({ host: url, headers: { Authorization: `Bearer ${key}` } });
  const schema = z.toJSONSchema(Person);
  const chat = await ollama.chat({ model, messages: [{ role: 'user', content: 'Who has a pet?' }], format: schema, stream: false, options: { seed: 9, num_predict: 200 } });
  assert.equal(chat.done_reason, 'stop');
  checkPerson(JSON.parse(chat.message.content));
  const gen = await ollama.generate({ model, prompt: 'A short JSON note:', format: 'json', stream: false, options: { temperature: 0, num_predict: 300 } });
  if (gen.done_reason === 'stop') {
    const v = JSON.parse(gen.response);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v));
  } else {
    assert.ok(gen.response.startsWith('{'), `response ${JSON.stringify(gen.response)}`);
  }
});
