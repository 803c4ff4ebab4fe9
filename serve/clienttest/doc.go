// Package clienttest runs the official OpenAI and Ollama JavaScript
// clients against muser serve: clienttest_test.go starts a server on
// loopback with ../shared/models/stories260K.gguf and API keys, and runs
// client.test.mjs with `node --test`. embed_test.go serves the embedded
// default model (infer/defaultmodel, pooling defaultmodel.Pooling) and
// runs embed.test.mjs: openai embeddings.create (base64 and float), the
// Vercel AI SDK's embed and embedMany, LangChain's OpenAIEmbeddings, and
// ollama's embed, embeddings, ps and version.
//
// The npm packages are pinned in package.json and package-lock.json;
// install them with `npm ci --prefix serve/clienttest` (scripts/test.sh
// does). The test skips, saying why, when node or the packages are
// missing, except in CI (CI=true or MUSER_REQUIRE_NODE=1), where it
// fails instead.
package clienttest
