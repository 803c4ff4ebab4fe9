package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const storiesModel = "../../../shared/models/stories260K.gguf"

// servingCLI is a `muser serve` run in this process, as main runs it.
type servingCLI struct {
	url    string        // the base URL from its ready line
	code   <-chan int    // its exit status, once it has returned
	stderr *bytes.Buffer // what it wrote to stderr
}

// serveCLI starts `muser serve --model model --home home` on a loopback
// port, with ctx as its interrupt, and waits for the ready line.
func serveCLI(t *testing.T, ctx context.Context, model, home string) servingCLI {
	t.Helper()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"serve", "--model", model, "--home", home, "--addr", "127.0.0.1:0", "--ctx", "256",
			"--threads", "2", "--log-level", "warn"}, strings.NewReader(""), pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no ready line: %v (stderr %s)", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	_, url, ok := strings.Cut(strings.TrimSpace(line), " ready on ")
	if !ok {
		t.Fatalf("got %q, want a line with the URL", line)
	}
	url, _, _ = strings.Cut(url, " ")
	return servingCLI{url: url, code: code, stderr: &stderr}
}

// TestServeLifecycle runs `muser serve` as main does, waits for its URL,
// serves a request, interrupts it (as SIGINT would, through the context)
// and checks it exits 0 with the store closed.
func TestServeLifecycle(t *testing.T) {
	if _, err := os.Stat(storiesModel); err != nil {
		t.Skipf("skipping: %s is absent: %v", storiesModel, err)
	}
	home := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := serveCLI(t, ctx, storiesModel, home)
	resp, err := http.Post(srv.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Once upon a time","max_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("completion: got %d, want 200", resp.StatusCode)
	}
	cancel()
	if c := <-srv.code; c != exitOK {
		t.Errorf("got exit status %d after the interrupt, want 0 (stderr %s)", c, srv.stderr.String())
	}
	// The store was closed: another process (here, another open) can open it.
	c, out, errOut := tokenizerCLI(t, "", "pack", "ls", "--home", home)
	if c != exitOK {
		t.Errorf("pack ls after serve: got %d (%s%s), want 0", c, out, errOut)
	}
}

func TestServeUsage(t *testing.T) {
	if _, err := os.Stat(storiesModel); err != nil {
		t.Skipf("skipping: %s is absent: %v", storiesModel, err)
	}
	loose := filepath.Join(t.TempDir(), "keys")
	os.WriteFile(loose, []byte("sk-aaaaaaaaaaaaaaaaaaaa alice\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"beyond loopback", []string{"--addr", "0.0.0.0:0"}, exitUsage, "refusing to listen beyond loopback without --api-keys"},
		{"bad parallel", []string{"--parallel", "0"}, exitUsage, "--parallel 0"},
		{"bad budget", []string{"--store-max-bytes", "lots"}, exitUsage, "--store-max-bytes"},
		{"loose key file", []string{"--api-keys", loose}, exitFailure, "mode 0644 lets group or others access the keys"},
		{"missing model", []string{"--model", "/nonexistent.gguf"}, exitNotFound, "nonexistent.gguf"},
		{"arguments", []string{"extra"}, exitUsage, "takes no arguments"},
		{"bad fallback", []string{"--prefill-node", "p", "--prefill-fallback", "remote"}, exitUsage, `--prefill-fallback "remote": want local or fail`},
		{"producer without listener", []string{"--role", "producer"}, exitUsage, "--role producer needs --repl-addr"},
		{"bad role", []string{"--role", "consumer", "--repl-addr", "127.0.0.1:0"}, exitUsage, `--role "consumer": want producer`},
		{"twice the same peer", []string{"--replicate-to", "b", "--replicate-to", "b"}, exitUsage, "--replicate-to b given twice"},
		{"no cluster", []string{"--repl-addr", "127.0.0.1:0"}, exitFailure, "cluster.json is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--model", storiesModel, "--home", t.TempDir()}, tc.args...)
			c, _, errOut := tokenizerCLI(t, "", args...)
			if c != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Errorf("got %d %q, want %d with %q", c, errOut, tc.code, tc.msg)
			}
		})
	}
}
