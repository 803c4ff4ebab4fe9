package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/serve/dashboard"
)

// liveness bounds every wait of these tests: far above the time the
// server needs (the write timeouts below are a fraction of a second), it
// only keeps a server that never gets there from hanging the test.
const liveness = time.Minute

// stallTimeout is the write timeout of the servers whose clients stop
// reading.
const stallTimeout = 300 * time.Millisecond

// smallSendBuffers shrinks the kernel send buffer of every connection the
// server accepts, so that a client that stops reading stalls the server's
// writes after kilobytes rather than megabytes.
func smallSendBuffers(ln net.Listener) net.Listener { return smallSendListener{ln} }

type smallSendListener struct{ net.Listener }

func (l smallSendListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// passGate lets the first forward passes through and holds every later
// one until release: a generation that cannot end by itself (reach its
// token limit) while a test looks at what holds it.
type passGate struct {
	allowed int64
	passes  atomic.Int64
	open    chan struct{}
	once    sync.Once
}

func newPassGate(allowed int) *passGate {
	return &passGate{allowed: int64(allowed), open: make(chan struct{})}
}

func (g *passGate) wait(ctx context.Context) error {
	if g.passes.Add(1) <= g.allowed {
		return nil
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// holding reports whether a forward pass has reached the gate.
func (g *passGate) holding() bool { return g.passes.Load() > g.allowed }

func (g *passGate) release() { g.once.Do(func() { close(g.open) }) }

// stalledRequest sends a request on a connection of its own with a small
// receive buffer and never reads the answer: a client that stopped
// reading. The test closes the connection.
func stalledRequest(t *testing.T, ts *testServer, method, path, id, body string) net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(ts.url, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.(*net.TCPConn).SetReadBuffer(1 << 10)
	if _, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nX-Request-Id: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		method, path, addr, id, len(body), body); err != nil {
		t.Fatal(err)
	}
	return c
}

// eventually polls cond until it holds, failing the test with what when it
// does not within liveness.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(liveness); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, liveness)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// finishedRequest returns the dashboard's summary of the finished
// generation request id (the scheduler's own record of it), if there is
// one yet.
func finishedRequest(t *testing.T, ts *testServer, id string) (dashboard.RequestSummary, bool) {
	t.Helper()
	resp, body := ts.do(t, "GET", dashboard.StatePath, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", dashboard.StatePath, resp.StatusCode, body)
	}
	var st struct {
		Recent []dashboard.RequestSummary `json:"recent"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Recent {
		if r.ID == id {
			return r, true
		}
	}
	return dashboard.RequestSummary{}, false
}

// drainedByServer reads what the server sent on c until the server closes
// the connection, failing if it does not within liveness.
func drainedByServer(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(liveness))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Errorf("reading the abandoned response: %v; want the server to have closed the connection", err)
	}
}

// TestStalledStreamCancelled: a client that stops reading a streamed
// generation (and keeps its connection open) does not hold the server:
// once a write has made no progress for the write timeout, the write
// fails, the handler ends, and the generation is cancelled, its slot
// freed, as when a client goes away mid-stream. The request is counted
// and published as such a request is: code 200 (the answer had begun),
// finish "cancelled", its full blocks published.
func TestStalledStreamCancelled(t *testing.T) {
	const maxTokens, beforeGate = 600, 400
	user := []any{map[string]any{"role": "user", "content": "Hi"}}
	// Each case asks for log-probabilities so that every token carries
	// hundreds of bytes however the stream batches its events: the
	// tokens generated before the gate are far more than the connection
	// buffers hold. The Ollama cases keep the model from ending its
	// output early with a grammar (Ollama has no logit_bias).
	longString := map[string]any{"type": "string", "minLength": 4000}
	cases := []struct {
		name, route, path string
		body              func(ts *testServer) map[string]any
	}{
		{"openai-completions", "POST /v1/completions", "/v1/completions", func(ts *testServer) map[string]any {
			return map[string]any{"prompt": "Once", "stream": true, "max_tokens": maxTokens, "logprobs": 5, "seed": 1, "logit_bias": eogBias(ts)}
		}},
		{"openai-chat", "POST /v1/chat/completions", "/v1/chat/completions", func(ts *testServer) map[string]any {
			return map[string]any{"messages": user, "stream": true, "max_tokens": maxTokens, "logprobs": true, "top_logprobs": 20, "seed": 1, "logit_bias": eogBias(ts)}
		}},
		{"llama-completion", "POST /completion", "/completion", func(ts *testServer) map[string]any {
			return map[string]any{"prompt": "Once", "stream": true, "n_predict": maxTokens, "n_probs": 20, "seed": 1, "ignore_eos": true}
		}},
		{"ollama-generate", "POST /api/generate", "/api/generate", func(ts *testServer) map[string]any {
			return map[string]any{"model": "stories260K", "prompt": "Once", "logprobs": true, "top_logprobs": 20, "format": longString,
				"options": map[string]any{"num_predict": maxTokens, "seed": 1}}
		}},
		{"ollama-chat", "POST /api/chat", "/api/chat", func(ts *testServer) map[string]any {
			return map[string]any{"model": "stories260K", "messages": user, "logprobs": true, "top_logprobs": 20, "format": longString,
				"options": map[string]any{"num_predict": maxTokens, "seed": 1}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newPassGate(beforeGate)
			ts := startServerOn(t, func(o *Options) {
				o.Ctx = 1024
				o.WriteTimeout = stallTimeout
				o.Device = gatedDevice{cpu.New(cpu.Options{Threads: 2}), g}
			}, smallSendBuffers)
			t.Cleanup(g.release) // before the server stops (cleanups run last first)
			id := "stalled-" + c.name
			b, _ := json.Marshal(c.body(ts))
			conn := stalledRequest(t, ts, "POST", c.path, id, string(b))

			eventually(t, "the handler of a stream whose client stopped reading ends", func() bool {
				return len(routeCodes(t, ts, c.route)) > 0
			})
			if codes := routeCodes(t, ts, c.route); len(codes) != 1 || codes["200"] != "1" {
				t.Errorf("muser_requests_total for %s: got codes %v, want 200 once (the stream had begun, as for a client gone mid-stream)", c.route, codes)
			}
			g.release()
			var sum dashboard.RequestSummary
			eventually(t, "the scheduler finishes the abandoned request", func() bool {
				var ok bool
				sum, ok = finishedRequest(t, ts, id)
				return ok
			})
			if sum.Finish != "cancelled" || sum.Generated >= maxTokens {
				t.Errorf("the abandoned request finished %q after %d tokens; want cancelled, before its %d tokens", sum.Finish, sum.Generated, maxTokens)
			}
			eventually(t, "the slot is free", func() bool {
				_, m := ts.do(t, "GET", "/metrics", "")
				return metricValue(t, m, "muser_slots_busy") == 0 && metricValue(t, m, "muser_queue_depth") == 0
			})
			if err := ts.s.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Its full blocks are published, as a cancelled request's are
			// (when the stall came before it filled one, there are none).
			_, m := ts.do(t, "GET", "/metrics", "")
			ok, failed := opsMetric(t, string(m), "muser_publishes_total", `result="ok"`), opsMetric(t, string(m), "muser_publishes_total", `result="error"`)
			if full := sum.PromptTokens+sum.Generated > ts.s.Store().BlockTokens(); full && ok != 1 || failed != 0 {
				t.Errorf("muser_publishes_total: ok %v, error %v after a cancelled request of %d tokens; want ok 1 (its full blocks), error 0",
					ok, failed, sum.PromptTokens+sum.Generated)
			}
			drainedByServer(t, conn)
		})
	}
}

// TestStalledResponseReleased: the write timeout covers every route, not
// only generation streams: a whole JSON answer (POST /tokenize) and an
// admin export (which holds its pack's files against gc while it runs)
// whose client stops reading end their handlers too.
func TestStalledResponseReleased(t *testing.T) {
	var logs syncBuffer
	ts := startServerOn(t, func(o *Options) {
		o.WriteTimeout = stallTimeout
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}, smallSendBuffers)
	ts.chat(t, chatBody(infertest.Story(0, 220), "Tell me a story.", 11, 4, nil))
	if err := ts.s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	packs, err := ts.s.Store().Packs()
	if err != nil || len(packs) == 0 {
		t.Fatalf("no pack to export: %v", err)
	}

	t.Run("tokenize", func(t *testing.T) {
		b, _ := json.Marshal(map[string]any{"content": strings.Repeat("Once upon a time there was a little girl. ", 5000), "with_pieces": true})
		conn := stalledRequest(t, ts, "POST", "/tokenize", "stalled-tokenize", string(b))
		eventually(t, "the handler of a JSON answer whose client stopped reading ends", func() bool {
			return len(routeCodes(t, ts, "POST /tokenize")) > 0
		})
		drainedByServer(t, conn)
	})
	t.Run("admin-export", func(t *testing.T) {
		conn := stalledRequest(t, ts, "GET", "/admin/v1/packs/"+packs[0].ID.String()+"/export", "stalled-export", "")
		eventually(t, "the export whose client stopped reading ends", func() bool {
			for _, l := range withMsg(logs.lines(), "admin export failed mid-stream") {
				if l["request_id"] == "stalled-export" {
					return true
				}
			}
			return false
		})
		drainedByServer(t, conn)
	})
}

// TestSlowStreamNotCut: the write timeout bounds a write that makes no
// progress, not a stream: a stream whose generation pauses for longer
// than the timeout between two writes, read by its client, is whole; and
// an idle keep-alive connection that outlived the timeout still gets the
// server's own answers (a 400 for a malformed request), not a closed
// connection.
func TestSlowStreamNotCut(t *testing.T) {
	const timeout = 100 * time.Millisecond
	g := newPassGate(5)
	ts := startServer(t, func(o *Options) {
		o.WriteTimeout = timeout
		o.Device = gatedDevice{cpu.New(cpu.Options{Threads: 2}), g}
	})
	t.Cleanup(g.release)
	addr := strings.TrimPrefix(ts.url, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	b, _ := json.Marshal(map[string]any{"prompt": "Once", "stream": true, "max_tokens": 20, "seed": 1, "logit_bias": eogBias(ts)})
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(b), b)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Peek(1); err != nil { // the stream has begun
		t.Fatal(err)
	}
	eventually(t, "the generation reaches the gate", g.holding)
	time.Sleep(3 * timeout) // no write for longer than the timeout
	g.release()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	if evs := sseEvents(body); len(evs) == 0 || evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("the stream was cut: it ends %q", evs[max(len(evs)-2, 0):])
	}

	// The connection idles past the write timeout of the last response.
	time.Sleep(3 * timeout)
	fmt.Fprintf(conn, "NOT A REQUEST\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(liveness))
	bad, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatalf("a malformed request on an idle connection: %v; want the server's 400", err)
	}
	bad.Body.Close()
	if bad.StatusCode != http.StatusBadRequest {
		t.Errorf("a malformed request on an idle connection: got %d, want 400", bad.StatusCode)
	}
}
