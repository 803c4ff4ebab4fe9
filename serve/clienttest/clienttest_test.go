package clienttest

import (
	"os"
	"testing"

	"github.com/muserhq/muser/serve"
)

const modelPath = "../../../shared/models/stories260K.gguf"

func TestJSClients(t *testing.T) {
	node := needNode(t, "openai", "ollama")
	if _, err := os.Stat(modelPath); err != nil {
		t.Skipf("skipping: %s is absent (the shared test material lives beside the clone): %v", modelPath, err)
	}
	runSuite(t, node, "client.test.mjs", "client", serve.Options{ModelPath: modelPath, StoreNoSync: true, Ctx: 512, Parallel: 2,
		Threads: 2, Version: "clienttest"})
}
