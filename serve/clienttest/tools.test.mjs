// Tool calling, n > 1 and the Responses API through real clients (the
// official OpenAI and Ollama clients, the Vercel AI SDK, LangChain)
// against `muser serve` with its embedded default model.
// tools_clienttest_test.go starts the server and runs this file with
// `node --test`, passing MUSER_URL, MUSER_KEY and MUSER_MODEL. Calls are
// forced with tool_choice (required or a named function), so they do not
// depend on what the model would choose.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { generateText, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';

const url = process.env.MUSER_URL;
const key = process.env.MUSER_KEY;
const model = process.env.MUSER_MODEL;
assert.ok(url && key && model, 'MUSER_URL, MUSER_KEY and MUSER_MODEL must be set');

const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
const ollama = new Ollama({ host: url, headers: { Authorization: `Bearer ${key}` } });

const weatherParams = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
const weather = { type: 'function', function: { name: 'get_weather', description: 'The weather in a city.', parameters: weatherParams } };
const clock = { type: 'function', function: { name: 'get_time', description: 'The time now.', parameters: { type: 'object', properties: {} } } };

test('openai: a forced tool call, streamed and not, then a tool message', async () => {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const req = { model, messages, tools: [weather, clock], tool_choice: { type: 'function', function: { name: 'get_weather' } },
    temperature: 0, max_completion_tokens: 120 };
  const first = await openai.chat.completions.create(req);
  const c = first.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.match(call.id, /^call_[0-9a-f]{24}$/);
  assert.equal(typeof JSON.parse(call.function.arguments).city, 'string');

  // Streamed: the call arrives as deltas (id and name, then arguments).
  const stream = await openai.chat.completions.create({ ...req, stream: true });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    for (const ch of chunk.choices) {
      for (const d of ch.delta.tool_calls ?? []) {
        if (!calls[d.index]) calls[d.index] = { id: d.id, name: d.function.name, arguments: '' };
        calls[d.index].arguments += d.function.arguments ?? '';
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_weather');
  assert.equal(calls[0].arguments, call.function.arguments);

  // The round trip: the assistant's call and the tool's answer go back.
  const second = await openai.chat.completions.create({ model, tools: [weather, clock], temperature: 0, max_completion_tokens: 16,
    messages: [...messages, c.message, { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ celsius: 21 }) }] });
  assert.equal(second.choices[0].message.role, 'assistant');
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens);
});

test('openai: n = 2, each choice its own seeded stream, usage summed', async () => {
  const req = { model, messages: [{ role: 'user', content: 'Tell me a story.' }], temperature: 1, max_completion_tokens: 12 };
  const two = await openai.chat.completions.create({ ...req, n: 2, seed: 7 });
  assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
  const a = await openai.chat.completions.create({ ...req, seed: 7 });
  const b = await openai.chat.completions.create({ ...req, seed: 8 });
  assert.equal(two.choices[0].message.content, a.choices[0].message.content);
  assert.equal(two.choices[1].message.content, b.choices[0].message.content);
  assert.equal(two.usage.completion_tokens, a.usage.completion_tokens + b.usage.completion_tokens);
  assert.equal(two.usage.prompt_tokens, a.usage.prompt_tokens);
  await assert.rejects(openai.chat.completions.create({ ...req, n: 17 }), (e) => e.status === 400 && e.param === 'n');
});

test('openai: responses.create, streamed and not, continued by previous_response_id', async () => {
  const req = { model, input: 'Tell me a story about a cat.', instructions: 'You tell short stories.', max_output_tokens: 12, temperature: 0 };
  const whole = await openai.responses.create(req);
  assert.equal(whole.object, 'response');
  assert.ok(whole.output_text.length > 0);
  const stream = await openai.responses.create({ ...req, stream: true });
  let text = '';
  const types = [];
  let completed = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') completed = ev.response;
  }
  assert.equal(types[0], 'response.created');
  assert.equal(types.at(-1), 'response.' + completed.status);
  assert.ok(types.includes('response.output_item.added') && types.includes('response.output_text.done'));
  assert.equal(text, whole.output_text);
  assert.equal(completed.output[0].content[0].text, text);
  assert.equal(completed.usage.output_tokens, whole.usage.output_tokens);

  const next = await openai.responses.create({ ...req, input: 'And then?', previous_response_id: whole.id });
  assert.equal(next.previous_response_id, whole.id);
  assert.ok(next.usage.input_tokens > whole.usage.input_tokens + whole.usage.output_tokens - 1);
  const got = await openai.responses.retrieve(whole.id);
  assert.equal(got.id, whole.id);
});

test('openai: responses with a function tool and its output', async () => {
  const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city.', parameters: weatherParams, strict: true }];
  const r = await openai.responses.create({ model, input: 'Weather in Oslo?', tools, tool_choice: { type: 'function', name: 'get_weather' },
    max_output_tokens: 120, temperature: 0 });
  const call = r.output.find((o) => o.type === 'function_call');
  assert.ok(call, 'a function_call item');
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof JSON.parse(call.arguments).city, 'string');
  const next = await openai.responses.create({ model, previous_response_id: r.id, tools, max_output_tokens: 8, temperature: 0,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ celsius: 3 }) }] });
  assert.equal(next.status === 'completed' || next.status === 'incomplete', true);
});

test('vercel ai sdk: generateText with a tool', async () => {
  const provider = createOpenAICompatible({ name: 'muser', baseURL: `${url}/v1`, apiKey: key });
  let executed = null;
  const result = await generateText({
    model: provider(model),
    prompt: 'What is the weather in Paris?',
    tools: {
      get_weather: tool({
        description: 'The weather in a city.',
        inputSchema: z.object({ city: z.string() }),
        execute: async ({ city }) => { executed = city; return { city, celsius: 21 }; },
      }),
    },
    toolChoice: { type: 'tool', toolName: 'get_weather' },
    temperature: 0,
    maxOutputTokens: 120,
  });
  assert.equal(result.toolCalls.length, 1);
  assert.equal(result.toolCalls[0].toolName, 'get_weather');
  assert.equal(typeof result.toolCalls[0].input.city, 'string');
  assert.equal(executed, result.toolCalls[0].input.city);
  assert.equal(result.toolResults[0].output.celsius, 21);
});

test('langchain: bindTools', async () => {
  const llm = new ChatOpenAI({ model, apiKey: key, configuration: { baseURL: `${url}/v1` }, temperature: 0, maxTokens: 120, maxRetries: 0 });
  const withTools = llm.bindTools([{ name: 'get_weather', description: 'The weather in a city.', schema: z.object({ city: z.string() }) }],
    { tool_choice: 'get_weather' });
  const msg = await withTools.invoke('What is the weather in Paris?');
  assert.equal(msg.tool_calls.length, 1);
  assert.equal(msg.tool_calls[0].name, 'get_weather');
  assert.equal(typeof msg.tool_calls[0].args.city, 'string');
});

test('ollama: tools, a forced call and a tool message', async () => {
  const options = { temperature: 0, num_predict: 120 };
  const messages = [{ role: 'user', content: 'What is the weather in Rome?' }];
  const r = await ollama.chat({ model, messages, tools: [weather], tool_choice: 'required', options });
  assert.equal(r.done, true);
  assert.equal(r.message.tool_calls.length, 1);
  assert.equal(r.message.tool_calls[0].function.name, 'get_weather');
  assert.equal(typeof r.message.tool_calls[0].function.arguments.city, 'string');
  const r2 = await ollama.chat({ model, tools: [weather], options: { temperature: 0, num_predict: 8 },
    messages: [...messages, r.message, { role: 'tool', tool_name: 'get_weather', content: '{"celsius": 18}' }] });
  assert.equal(typeof r2.message.content, 'string');
  assert.ok(r2.prompt_eval_count > r.prompt_eval_count);
});
