package clienttest

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/serve"
)

// required reports whether missing node tooling must fail the test.
func required() bool { return os.Getenv("CI") == "true" || os.Getenv("MUSER_REQUIRE_NODE") == "1" }

// needNode returns node's path once node and the npm packages pkgs are
// installed; otherwise it skips the test (fails it when required).
func needNode(t *testing.T, pkgs ...string) string {
	t.Helper()
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
	for _, pkg := range pkgs {
		if _, err := os.Stat(filepath.Join("node_modules", pkg, "package.json")); err != nil {
			missing("the npm package %s is not installed; run npm ci --prefix serve/clienttest: %v", pkg, err)
		}
	}
	return node
}

// runSuite serves opts (its Home, API keys file and Logger filled in here)
// on 127.0.0.1:0 and runs `node --test script` against it, with
// MUSER_URL, MUSER_KEY, MUSER_MODEL and env in its environment; what
// describes the suite in the failure.
func runSuite(t *testing.T, node, script, what string, opts serve.Options, env ...string) {
	t.Helper()
	const key = "sk-clienttest-0123456789abcdef"
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte(key+" js\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	opts.Home, opts.APIKeysFile = t.TempDir(), keys
	s, err := serve.New(opts)
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
	cmd := exec.Command(node, "--test", "--test-reporter=spec", script)
	cmd.Env = append(os.Environ(), "MUSER_URL=http://"+ln.Addr().String(), "MUSER_KEY="+key, "MUSER_MODEL="+s.ModelID())
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test %s:\n%s", script, out)
	if err != nil {
		t.Fatalf("the JavaScript %s suite failed: %v", what, err)
	}
}
