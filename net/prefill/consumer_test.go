package prefill

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muserhq/muser/net/cluster/clustertest"
	"github.com/muserhq/muser/net/internal/leakcheck"
	"github.com/muserhq/muser/net/repl"
	"github.com/muserhq/muser/net/repl/repltest"
	"github.com/muserhq/muser/net/transport"
	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }

const (
	block = 16
	chunk = 32 << 10
)

var (
	engineID = packtest.Identity("prefill")
	salt     = []byte("tenant-a")
)

type member struct {
	*clustertest.Node
	store *store.Store
	node  *repl.Node
}

// lockedBuffer collects log output from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// setup starts a producer and a consumer; the consumer dials the producer
// at producerAddr when it is not empty (to test an unreachable producer).
func setup(t *testing.T, producerIsProducer bool) (prod, cons *member) {
	t.Helper()
	cn := clustertest.New(t, "producer", "consumer")
	var ms []*member
	for _, n := range cn {
		s := storetest.Open(t, n.Home, store.Options{BlockTokens: block, Node: n.Name, NoSync: true})
		q := transport.DefaultQUIC()
		q.HandshakeIdleTimeout = 300 * time.Millisecond
		cfg := repl.Config{Store: s, Cluster: n.Cluster, RevalidateEvery: -1, QUIC: q}
		if n.Name == "producer" && producerIsProducer {
			cfg.Prefiller = &repltest.SyntheticPrefiller{Store: s, Engine: engineID, ChunkSize: chunk}
		}
		rn, err := repl.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rn.Listen("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- rn.Serve(context.Background()) }()
		t.Cleanup(func() {
			rn.Close()
			<-done
		})
		ms = append(ms, &member{Node: n, store: s, node: rn})
	}
	clustertest.Admit(t, ms[1].Node, "producer", ms[0].node.Addr().String())
	clustertest.Admit(t, ms[0].Node, "consumer", ms[1].node.Addr().String())
	return ms[0], ms[1]
}

func localKV(tokens []int32, i int) []byte {
	b, _ := storetest.KV(engineID, salt, tokens, block, chunk)(i)
	return b
}

func TestPrepareRemote(t *testing.T) {
	_, cons := setup(t, true)
	c := &Consumer{Node: cons.node, Store: cons.store, Producer: "producer"}
	prompt := packtest.Tokens(3, 10*block+5, 300)
	// The consumer holds 4 blocks; the producer supplies the other 6.
	storetest.Publish(t, cons.store, engineID, salt, prompt[:4*block], chunk)
	out, err := c.Prepare(context.Background(), engineID, salt, prompt)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Remote || out.Cached != 4*block || out.Result.Moved != 6 || out.Result.Tokens != 10*block {
		t.Fatalf("outcome %+v, want remote, 4 blocks cached, 6 moved, 10 covered", out)
	}
	n, blocks, err := storetest.Restore(t, cons.store, engineID, salt, prompt)
	if err != nil || n != 10*block {
		t.Fatalf("restore after Prepare: %d tokens, %v; want %d", n, err, 10*block)
	}
	for i, b := range blocks {
		if !slices.Equal(b, localKV(prompt[:10*block], i)) {
			t.Fatalf("block %d differs from a local prefill", i)
		}
	}
	// Now everything whole is cached: no remote call.
	out, err = c.Prepare(context.Background(), engineID, salt, prompt)
	if err != nil || out.Remote || !strings.Contains(out.Skipped, "cached") {
		t.Fatalf("second Prepare = %+v, %v; want skipped as cached", out, err)
	}
	out, err = c.Prepare(context.Background(), engineID, salt, prompt[:block-1])
	if err != nil || out.Remote || !strings.Contains(out.Skipped, "less than one") {
		t.Fatalf("short prompt Prepare = %+v, %v; want skipped as short", out, err)
	}
}

func TestPrepareFallback(t *testing.T) {
	tests := []struct {
		desc        string
		isProducer  bool
		unreachable bool
		fallback    Fallback
		code        wire.Code // of the remote failure, when known
	}{
		{"not a producer, local", false, false, FallbackLocal, wire.CodeUnavailable},
		{"not a producer, fail", false, false, FallbackFail, wire.CodeUnavailable},
		{"unreachable, local", true, true, FallbackLocal, 0},
		{"unreachable, fail", true, true, FallbackFail, 0},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, cons := setup(t, tt.isProducer)
			if tt.unreachable {
				// Nothing answers on this port.
				clustertest.Admit(t, cons.Node, "producer", "127.0.0.1:9")
			}
			var logs lockedBuffer
			c := &Consumer{Node: cons.node, Store: cons.store, Producer: "producer", Fallback: tt.fallback,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			prompt := packtest.Tokens(4, 3*block, 300)
			out, err := c.Prepare(context.Background(), engineID, salt, prompt)
			if out.Remote || out.Err == nil {
				t.Fatalf("outcome %+v: want a remote failure recorded", out)
			}
			if tt.code != 0 {
				var we *wire.Error
				if !errors.As(out.Err, &we) || we.Code != tt.code {
					t.Fatalf("remote failure %v, want code %s", out.Err, tt.code)
				}
			}
			switch tt.fallback {
			case FallbackLocal:
				if err != nil {
					t.Fatalf("Prepare = %v, want nil (fall back to local prefill)", err)
				}
				if !strings.Contains(logs.String(), "prefilling locally") || !strings.Contains(logs.String(), "producer=producer") {
					t.Fatalf("log %q does not say why it fell back", logs.String())
				}
			case FallbackFail:
				if !errors.Is(err, ErrRemoteFailed) || !errors.Is(err, out.Err) {
					t.Fatalf("Prepare = %v, want ErrRemoteFailed wrapping %v", err, out.Err)
				}
			}
			if ps, _ := cons.store.Packs(); len(ps) != 0 {
				t.Fatalf("the consumer holds %d packs after a failed remote prefill", len(ps))
			}
		})
	}
}

func TestParseFallback(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Fallback
		ok   bool
	}{{"local", FallbackLocal, true}, {"", FallbackLocal, true}, {"fail", FallbackFail, true}, {"remote", 0, false}} {
		got, err := ParseFallback(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseFallback(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrBadFallback) {
			t.Errorf("error %v does not wrap ErrBadFallback", err)
		}
		if tt.ok && got.String() != map[Fallback]string{FallbackLocal: "local", FallbackFail: "fail"}[got] {
			t.Errorf("String() = %q", got.String())
		}
	}
}

// TestPrepareRedialWait: after the producer could not be reached, Prepare
// does not dial it again until the wait has passed (under both policies),
// the wait doubles with each further failure, and a reachable producer
// resets it.
func TestPrepareRedialWait(t *testing.T) {
	for _, fb := range []Fallback{FallbackLocal, FallbackFail} {
		t.Run(fb.String(), func(t *testing.T) {
			prod, cons := setup(t, true)
			clustertest.Admit(t, cons.Node, "producer", "127.0.0.1:9") // nothing answers
			now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
			c := &Consumer{Node: cons.node, Store: cons.store, Producer: "producer", Fallback: fb,
				now: func() time.Time { return now }}
			prompt := packtest.Tokens(5, 3*block, 300)
			check := func(step string, wantDial bool) Outcome {
				t.Helper()
				out, err := c.Prepare(context.Background(), engineID, salt, prompt)
				var de *repl.DialError
				if !errors.As(out.Err, &de) || de.Peer != "producer" {
					t.Fatalf("%s: remote failure %v, want a repl.DialError for producer", step, out.Err)
				}
				if dialled := out.Skipped == ""; dialled != wantDial {
					t.Fatalf("%s: dialled %v (skipped %q), want %v", step, dialled, out.Skipped, wantDial)
				}
				if fb == FallbackFail && !errors.Is(err, ErrRemoteFailed) {
					t.Fatalf("%s: Prepare = %v, want ErrRemoteFailed", step, err)
				}
				if fb == FallbackLocal && err != nil {
					t.Fatalf("%s: Prepare = %v, want nil", step, err)
				}
				return out
			}
			check("first failure", true)
			check("within the wait", false)
			now = now.Add(MinRedialWait)
			check("after the first wait", true)
			now = now.Add(MinRedialWait) // the wait has doubled
			out := check("within the doubled wait", false)
			if !strings.Contains(out.Skipped, "could not be reached") {
				t.Fatalf("skipped %q does not say why", out.Skipped)
			}
			now = now.Add(MinRedialWait)
			check("after the doubled wait", true)

			// The producer is back: a call after the wait reaches it and
			// the next failure starts again from the shortest wait.
			clustertest.Admit(t, cons.Node, "producer", prod.node.Addr().String())
			now = now.Add(MaxRedialWait)
			if out, err := c.Prepare(context.Background(), engineID, salt, prompt); err != nil || !out.Remote {
				t.Fatalf("producer back: Prepare = %+v, %v; want remote", out, err)
			}
			if c.wait != 0 || c.down != nil {
				t.Fatalf("after a success: wait %v, down %v; want reset", c.wait, c.down)
			}
		})
	}
}
