package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/kvcache"
)

// TestSequentialClientNotRefused: with no queue (--max-queue 0) and one
// slot, a client that sends its requests one after the other is never
// refused: the slot that served the last request, still copying out its
// blocks for the store, is not busy.
func TestSequentialClientNotRefused(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.MaxQueue = -1 })
	for i := range 50 {
		// A new prompt of more than one block each time, so each request
		// publishes.
		p := strings.Repeat(fmt.Sprintf("Once upon a time, %d, there was a girl. ", i), 12)
		b, _ := json.Marshal(map[string]any{"prompt": p, "n_predict": 2})
		resp, body := ts.post(t, "/completion", string(b))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d, sent after the one before was answered: got %d %s, want 200", i, resp.StatusCode, bytes.TrimSpace(body))
		}
	}
}

// stepGate holds the scheduler's next forward pass once armed, as a long
// step of a large model would: entered is closed when a pass waits, and
// the pass goes on once release is called.
type stepGate struct {
	once, rel sync.Once
	armed     atomic.Bool
	entered   chan struct{}
	open      chan struct{}
}

func newStepGate() *stepGate {
	return &stepGate{entered: make(chan struct{}), open: make(chan struct{})}
}

// wait holds a forward pass until release, or until ctx ends (it
// returns ctx's error then, as a cancelled pass does).
func (g *stepGate) wait(ctx context.Context) error {
	if g.armed.Load() {
		g.once.Do(func() { close(g.entered) })
		select {
		case <-g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (g *stepGate) release() { g.rel.Do(func() { close(g.open) }) }

// forwardGate decides when a forward pass may run: wait returns once it
// may, or ctx's error (as a cancelled pass does).
type forwardGate interface {
	wait(ctx context.Context) error
}

// gatedDevice is the CPU engine with every forward pass through a gate.
type gatedDevice struct {
	engine.Device
	g forwardGate
}

func (d gatedDevice) Bind(w *engine.Weights, kv kvcache.DType) (engine.Backend, error) {
	be, err := d.Device.Bind(w, kv)
	if err != nil {
		return nil, err
	}
	return gatedBackend{be, d.g}, nil
}

type gatedBackend struct {
	engine.Backend
	g forwardGate
}

func (b gatedBackend) Forward(ctx context.Context, rows []engine.Row) error {
	if err := b.g.wait(ctx); err != nil {
		return err
	}
	return b.Backend.Forward(ctx, rows)
}

// TestAbandonedQueuePlaceFreed: a request whose client went away while it
// waited for a slot gives its queue place up at once, not only after the
// step the scheduler is computing (a long one for a large model): a new
// request that arrives during that step is queued and served, not refused
// with 429, and muser_queue_depth counts only the waiting.
func TestAbandonedQueuePlaceFreed(t *testing.T) {
	g := newStepGate()
	defer g.release()
	ts := startServer(t, func(o *Options) {
		o.MaxQueue = 1
		o.Device = gatedDevice{cpu.New(cpu.Options{Threads: 2}), g}
	})
	g.armed.Store(true)
	// The only slot's request is in a step that does not end yet.
	running := make(chan int, 1)
	go func() {
		resp, err := http.Post(ts.url+"/completion", "application/json", strings.NewReader(`{"prompt":"Once","n_predict":3}`))
		if err != nil {
			running <- 0
			return
		}
		resp.Body.Close()
		running <- resp.StatusCode
	}()
	<-g.entered
	// A request waits for the slot, then its client goes away.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/completions", strings.NewReader(`{"prompt":"Lily","max_tokens":2}`))
	gone := make(chan struct{})
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		close(gone)
	}()
	for ts.s.sched.QueueDepth() == 0 {
	}
	cancel()
	<-gone
	for routeCodes(t, ts, "POST /v1/completions")["499"] != "1" { // the server has ended its handler
	}
	_, m := ts.do(t, "GET", "/metrics", "")
	if d, md := ts.s.sched.QueueDepth(), metricValue(t, m, "muser_queue_depth"); d != 0 || md != 0 {
		t.Fatalf("after the only waiting request was abandoned: queue depth %d, muser_queue_depth %v; want 0 (its place free for the next request)", d, md)
	}
	// The queue's one place takes the next request, served once the
	// step ends.
	next := make(chan int, 1)
	go func() {
		resp, err := http.Post(ts.url+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`))
		if err != nil {
			next <- 0
			return
		}
		resp.Body.Close()
		next <- resp.StatusCode
	}()
	for ts.s.sched.QueueDepth() == 0 {
	}
	g.release()
	if code := <-next; code != http.StatusOK {
		t.Errorf("the request queued during the step: got %d, want 200", code)
	}
	if code := <-running; code != http.StatusOK {
		t.Errorf("the running request: got %d, want 200", code)
	}
}
