// Package clienttest runs the official OpenAI and Ollama JavaScript
// clients against muser serve: clienttest_test.go starts a server on
// loopback with ../shared/models/stories260K.gguf and API keys, and runs
// client.test.mjs with `node --test`. embed_test.go serves the embedded
// default model (infer/defaultmodel, pooling defaultmodel.Pooling) and
// runs embed.test.mjs: openai embeddings.create (base64 and float), the
// Vercel AI SDK's embed and embedMany, LangChain's OpenAIEmbeddings, and
// ollama's embed, embeddings, ps and version.
// client.test.mjs with `node --test`. structured_test.go starts a second
// server with the embedded default model (infer/defaultmodel, the chat
// model) and runs structured.test.mjs: structured output through the
// OpenAI SDK's chat.completions.parse with zod, the Vercel AI SDK's
// generateObject, LangChain's withStructuredOutput and the Ollama client's
// format, each answer validated by parsing it with the zod schema.
// tools_clienttest_test.go serves the default model the same way and
// runs tools.test.mjs: tool calling, n > 1 and the Responses API through
// the OpenAI and Ollama clients, the Vercel AI SDK and LangChain, with
// calls forced by tool_choice.
//
// The npm packages are pinned in package.json and package-lock.json;
// install them with `npm ci --prefix serve/clienttest` (scripts/test.sh
// does). The test skips, saying why, when node or the packages are
// missing, except in CI (CI=true or MUSER_REQUIRE_NODE=1), where it
// fails instead.
//
// # Structured output
//
// structured_test.go serves the embedded default model (infer/defaultmodel,
// the chat model) and runs structured.test.mjs: structured output through
// the OpenAI SDK's chat.completions.parse with zod, the Vercel AI SDK's
// generateObject, LangChain's withStructuredOutput and the Ollama client's
// format, each answer validated by parsing it with the zod schema.
package clienttest
