package clienttest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/serve"
)

// TestJSEmbeddingClients runs embed.test.mjs against the embedded
// default model, served as `muser serve` serves it (pooling
// defaultmodel.Pooling).
func TestJSEmbeddingClients(t *testing.T) {
	missing := func(format string, a ...any) {
		t.Helper()
		if required() {
			t.Fatalf(format, a...)
		}
		t.Skipf(format, a...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed: %v", err)
	}
	for _, pkg := range []string{"openai", "ollama", "ai", "@ai-sdk/openai-compatible", "@langchain/openai"} {
		if _, err := os.Stat(filepath.Join("node_modules", pkg, "package.json")); err != nil {
			missing("the npm package %s is not installed; run npm ci --prefix serve/clienttest: %v", pkg, err)
		}
	}
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	const key = "sk-clienttest-embed-0123456789abcdef"
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte(key+" js\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	s, err := serve.New(serve.Options{Model: f, ModelName: defaultmodel.Name, FallbackPooling: defaultmodel.Pooling,
		Home: t.TempDir(), StoreNoSync: true, Ctx: 512, Parallel: 2, Threads: 2, APIKeysFile: keys, Logger: logger, Version: "0.1.0+gclienttest"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	dim, err := f.Meta.Uint64("llama.embedding_length")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "--test", "--test-reporter=spec", "embed.test.mjs")
	cmd.Env = append(os.Environ(), "MUSER_URL=http://"+ln.Addr().String(), "MUSER_KEY="+key, "MUSER_MODEL="+s.ModelID(),
		fmt.Sprintf("MUSER_DIM=%d", dim))
	out, err := cmd.CombinedOutput()
	t.Logf("node --test embed.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the JavaScript embeddings suite failed: %v", err)
	}
}
