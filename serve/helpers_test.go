package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const modelPath = "../../shared/models/stories260K.gguf"

// testServer is a real server on a loopback port.
type testServer struct {
	s      *Server
	url    string
	home   string
	cancel context.CancelFunc
	done   chan error
}

func needModel(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(modelPath); err != nil {
		t.Skipf("skipping: %s is absent (the shared test material lives beside the clone): %v", modelPath, err)
	}
}

// startServer starts a server on 127.0.0.1:0 with test defaults that mod
// may change; it is stopped at cleanup.
func startServer(t testing.TB, mod func(*Options)) *testServer {
	t.Helper()
	return startServerOn(t, mod, nil)
}

// startServerOn is startServer on a listener that wrap, when not nil,
// wraps (to shape the connections the server accepts).
func startServerOn(t testing.TB, mod func(*Options), wrap func(net.Listener) net.Listener) *testServer {
	t.Helper()
	needModel(t)
	opts := Options{
		ModelPath:   modelPath,
		Home:        t.TempDir(),
		StoreNoSync: true,
		Ctx:         512,
		Threads:     2,
		Addr:        "127.0.0.1:0",
		Logger:      slog.New(slog.DiscardHandler),
		Version:     "test",
	}
	if testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mod != nil {
		mod(&opts)
	}
	return serveOnListener(t, opts, wrap)
}

func serveOn(t testing.TB, opts Options) *testServer {
	t.Helper()
	return serveOnListener(t, opts, nil)
}

func serveOnListener(t testing.TB, opts Options, wrap func(net.Listener) net.Listener) *testServer {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{s: s, url: "http://" + ln.Addr().String(), home: opts.Home, cancel: cancel, done: make(chan error, 1)}
	go func() { ts.done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { ts.stop(t) })
	return ts
}

// stop shuts the server down and checks that Serve returned nil.
func (ts *testServer) stop(t testing.TB) {
	t.Helper()
	if ts.cancel == nil {
		return
	}
	ts.cancel()
	ts.cancel = nil
	if err := <-ts.done; err != nil {
		t.Errorf("Serve returned %v, want nil after a shutdown", err)
	}
}

// do sends a request and returns the response with its body read.
func (ts *testServer) do(t testing.TB, method, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1] // Go sends req.Host, not a Host header
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func (ts *testServer) post(t testing.TB, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	return ts.do(t, http.MethodPost, path, body, header...)
}

// postJSON posts v and decodes the answer into out, failing unless the
// status is 200.
func (ts *testServer) postJSON(t testing.TB, path string, v, out any, header ...string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := ts.post(t, path, string(b), header...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: got %d %s, want 200", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("POST %s: %v in %s", path, err, body)
	}
}

// sseEvents splits an SSE body into its data payloads (an "event:" line
// before the data is skipped).
func sseEvents(body []byte) []string {
	var out []string
	for _, block := range bytes.Split(body, []byte("\n\n")) {
		for _, line := range strings.Split(strings.TrimSpace(string(block)), "\n") {
			if rest, ok := strings.CutPrefix(line, "data: "); ok {
				out = append(out, rest)
			}
		}
	}
	return out
}

// writeKeys writes an API key file (mode 0600) and returns its path.
func writeKeys(t testing.TB, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
