package clienttest

import (
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/serve"
)

// TestJSStructured runs structured.test.mjs (structured output through
// the OpenAI SDK, the Vercel AI SDK, LangChain and the Ollama client)
// against a server of the embedded default model, the chat model.
func TestJSStructured(t *testing.T) {
	node := needNode(t, "openai", "ollama", "ai", "@ai-sdk/openai-compatible", "@langchain/openai", "zod")
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	runSuite(t, node, "structured.test.mjs", "structured-output", serve.Options{Model: f, ModelName: defaultmodel.Name,
		StoreNoSync: true, Ctx: 512, Parallel: 2, Threads: 2, Version: "clienttest"})
}
