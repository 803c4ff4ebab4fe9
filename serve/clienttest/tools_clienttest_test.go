package clienttest

import (
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/serve"
)

// TestJSClientsTools runs tools.test.mjs (tool calling, n > 1 and the
// Responses API through the OpenAI, Ollama, Vercel AI SDK and LangChain
// clients) against the embedded default model, as `muser serve` without
// --model serves it.
func TestJSClientsTools(t *testing.T) {
	node := needNode(t, "openai", "ollama", "ai", "@ai-sdk/openai-compatible", "@langchain/openai", "@langchain/core", "zod")
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	runSuite(t, node, "tools.test.mjs", "tools", serve.Options{Model: f, ModelName: defaultmodel.Name,
		StoreNoSync: true, Ctx: 1024, Parallel: 2, Threads: 2, Version: "clienttest"})
}
