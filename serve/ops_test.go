package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/infertest"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) lines() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func withMsg(lines []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// opsMetric returns the value of the first sample of name (with labels
// matching the regexp labels) in a Prometheus text exposition.
func opsMetric(t *testing.T, body, name, labels string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		if ok, _ := regexp.MatchString(labels, m[1]); ok {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return v
		}
	}
	t.Fatalf("no sample %s%s in /metrics", name, labels)
	return 0
}

// TestLogsAndMetrics: one startup line with the configuration, no info
// line per /metrics scrape, the operator metrics, and a "stopped" line
// only from a server that listened.
func TestLogsAndMetrics(t *testing.T) {
	var logs syncBuffer
	ts := startServer(t, func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		o.Parallel = 2
	})
	system := infertest.Story(0, 220)
	ts.chat(t, chatBody(system, "Tell me a story.", 11, 4, nil))
	if err := ts.s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	warm := ts.chat(t, chatBody(system, "What did Lily do?", 5, 4, nil))
	if warm.cached == 0 {
		t.Fatalf("second request: no cached tokens")
	}
	for range 3 {
		if resp, _ := ts.do(t, "GET", "/metrics", ""); resp.StatusCode != 200 {
			t.Fatalf("GET /metrics: %d", resp.StatusCode)
		}
	}
	_, body := ts.do(t, "GET", "/metrics", "")
	m := string(body)
	for _, tc := range []struct {
		name, labels string
		min, max     float64
	}{
		{"muser_build_info", `version="test"`, 1, 1},
		{"muser_model_info", `model="stories260K"`, 1, 1},
		{"muser_slots", "", 2, 2},
		{"muser_ctx_tokens", "", 512, 512},
		{"muser_store_block_tokens", "", 64, 64},
		{"muser_store_packs", "", 1, 10},
		{"muser_restore_duration_seconds_count", "", 1, 1},
		{"muser_prefill_tokens_total", "", 1, 1e6},
		{"muser_prefill_seconds_total", "", 1e-9, 1e6},
		{"muser_prefill_tokens_per_second_count", "", 2, 2},
		{"muser_gc_evicted_packs_total", "", 0, 0},
	} {
		if v := opsMetric(t, m, tc.name, tc.labels); v < tc.min || v > tc.max {
			t.Errorf("%s%s: got %v, want %v to %v", tc.name, tc.labels, v, tc.min, tc.max)
		}
	}
	// gc through the admin endpoint counts its evictions; verify its time.
	ts.post(t, "/admin/v1/gc", `{"max_bytes":0}`)
	ts.post(t, "/admin/v1/verify", ``)
	_, body = ts.do(t, "GET", "/metrics", "")
	if v := opsMetric(t, string(body), "muser_gc_evicted_packs_total", ""); v < 1 {
		t.Errorf("after gc to 0 bytes: muser_gc_evicted_packs_total %v, want at least 1", v)
	}
	if v := opsMetric(t, string(body), "muser_verify_duration_seconds_count", ""); v != 1 {
		t.Errorf("after one verify: muser_verify_duration_seconds_count %v, want 1", v)
	}
	ts.stop(t)

	lines := logs.lines()
	start := withMsg(lines, "serving")
	if len(start) != 1 {
		t.Fatalf("got %d startup lines, want 1", len(start))
	}
	for k, want := range map[string]any{"slots": 2.0, "ctx": 512.0, "model": "stories260K", "store": ts.home, "access": "loopback, one tenant",
		"admin": "loopback", "max_queue": 64.0, "block_tokens": 64.0, "weights": "resident"} {
		if got := start[0][k]; got != want {
			t.Errorf("startup line %s: got %v, want %v", k, got, want)
		}
	}
	for _, l := range withMsg(lines, "request") {
		if l["path"] == "/metrics" {
			t.Errorf("a /metrics scrape was logged at info: %v", l)
		}
	}
	if n := len(withMsg(lines, "stopped")); n != 1 {
		t.Errorf("got %d stopped lines, want 1", n)
	}

	// A server that never listened says nothing of stopping.
	var quiet syncBuffer
	s, err := New(Options{ModelPath: modelPath, Home: t.TempDir(), StoreNoSync: true, Threads: 1,
		Logger: slog.New(slog.NewJSONHandler(&quiet, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if n := len(withMsg(quiet.lines(), "stopped")); n != 0 {
		t.Errorf("a server closed without Serve logged %d stopped lines, want 0", n)
	}
}
