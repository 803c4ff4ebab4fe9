package clienttest

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/serve"
)

// TestJSClientsTools runs tools.test.mjs (tool calling, n > 1 and the
// Responses API through the OpenAI, Ollama, Vercel AI SDK and LangChain
// clients) against the embedded default model, as `muser serve` without
// --model serves it.
func TestJSClientsTools(t *testing.T) {
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
	for _, pkg := range []string{"openai", "ollama", "ai", "@ai-sdk/openai-compatible", "@langchain/openai", "@langchain/core", "zod"} {
		if _, err := os.Stat(filepath.Join("node_modules", pkg, "package.json")); err != nil {
			missing("the npm package %s is not installed; run npm ci --prefix serve/clienttest: %v", pkg, err)
		}
	}
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	const key = "sk-clienttest-0123456789abcdef"
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte(key+" js\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	s, err := serve.New(serve.Options{Model: f, ModelName: defaultmodel.Name, Home: t.TempDir(), StoreNoSync: true, Ctx: 1024,
		Parallel: 2, Threads: 2, APIKeysFile: keys, Logger: logger, Version: "clienttest"})
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
	cmd := exec.Command(node, "--test", "--test-reporter=spec", "tools.test.mjs")
	cmd.Env = append(os.Environ(), "MUSER_URL=http://"+ln.Addr().String(), "MUSER_KEY="+key, "MUSER_MODEL="+s.ModelID())
	out, err := cmd.CombinedOutput()
	t.Logf("node --test tools.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the JavaScript tools suite failed: %v", err)
	}
}
