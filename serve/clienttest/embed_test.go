package clienttest

import (
	"fmt"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/serve"
)

// TestJSEmbeddingClients runs embed.test.mjs against the embedded
// default model, served as `muser serve` serves it (pooling
// defaultmodel.Pooling).
func TestJSEmbeddingClients(t *testing.T) {
	node := needNode(t, "openai", "ollama", "ai", "@ai-sdk/openai-compatible", "@langchain/openai")
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	dim, err := f.Meta.Uint64("llama.embedding_length")
	if err != nil {
		t.Fatal(err)
	}
	runSuite(t, node, "embed.test.mjs", "embeddings", serve.Options{Model: f, ModelName: defaultmodel.Name, FallbackPooling: defaultmodel.Pooling,
		StoreNoSync: true, Ctx: 512, Parallel: 2, Threads: 2, Version: "0.1.0+gclienttest"}, fmt.Sprintf("MUSER_DIM=%d", dim))
}
