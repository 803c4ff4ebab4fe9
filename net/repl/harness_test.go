package repl

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/muserhq/muser/net/cluster/clustertest"
	"github.com/muserhq/muser/net/internal/leakcheck"
	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/quic-go/quic-go"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }

// Test geometry: small blocks and chunks keep tests fast; 64 KiB chunks
// keep QUIC's per-packet overhead and the manifest small against the KV.
const (
	testBlock = 16
	testChunk = 64 << 10
)

var testID = packtest.Identity("repl")

// node is one member of a test cluster with its own store and a listening
// replication node.
type node struct {
	*clustertest.Node
	store *store.Store
	repl  *Node
}

type nodeOpt func(*Config)

// newCluster starts a cluster of listening nodes on 127.0.0.1, each with a
// real store in its own data directory, every registry holding every
// other's address.
func newCluster(t *testing.T, names []string, opts map[string][]nodeOpt) []*node {
	t.Helper()
	cnodes := clustertest.New(t, names...)
	nodes := make([]*node, len(cnodes))
	for i, cn := range cnodes {
		s := storetest.Open(t, cn.Home, store.Options{BlockTokens: testBlock, Node: cn.Name, NoSync: true})
		cfg := Config{Store: s, Cluster: cn.Cluster, RevalidateEvery: -1,
			Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
		for _, o := range opts[cn.Name] {
			o(&cfg)
		}
		rn, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rn.Listen("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- rn.Serve(context.Background()) }()
		t.Cleanup(func() {
			if err := rn.Close(); err != nil {
				t.Errorf("close %s: %v", cn.Name, err)
			}
			if err := <-done; err != nil {
				t.Errorf("serve %s: %v", cn.Name, err)
			}
		})
		nodes[i] = &node{Node: cn, store: s, repl: rn}
	}
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				clustertest.Admit(t, a.Node, b.Name, b.repl.Addr().String())
			}
		}
	}
	return nodes
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// publish publishes n blocks of synthetic KV on s and returns the pack ID
// and tokens.
func publish(t *testing.T, s *store.Store, seed uint64, blocks int) (pack.Digest, []int32) {
	t.Helper()
	tokens := packtest.Tokens(seed, blocks*testBlock, 512)
	res := storetest.Publish(t, s, testID, []byte("tenant"), tokens, testChunk)
	return res.Pack, tokens
}

// restoreAll restores every block of pack id from s, verified, and returns
// the blocks' bytes.
func restoreAll(t *testing.T, s *store.Store, id pack.Digest) [][]byte {
	t.Helper()
	m, err := s.Manifest(id)
	if err != nil {
		t.Fatalf("manifest of %s: %v", id.Short(), err)
	}
	var blocks [][]byte
	if _, err := s.RestorePack(context.Background(), store.RestoreRequest{Pack: id, Identity: m.Identity},
		func(i int, kv []byte) error {
			blocks = append(blocks, append([]byte(nil), kv...))
			return nil
		}); err != nil {
		t.Fatalf("restore %s: %v", id.Short(), err)
	}
	return blocks
}

// wantWire checks that err is a *wire.Error with code and side remote.
func wantWire(t *testing.T, err error, code wire.Code, remote bool) *wire.Error {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) {
		t.Fatalf("got %v, want a *wire.Error %s", err, code)
	}
	if we.Code != code || we.Remote != remote {
		t.Fatalf("got %v (code %s, remote %v), want code %s, remote %v", err, we.Code, we.Remote, code, remote)
	}
	return we
}

// receiptFor returns the receipts of s with reason r.
func receiptsFor(t *testing.T, s *store.Store, r pack.Reason) []store.Receipt {
	t.Helper()
	rs, err := s.Receipts(store.ReceiptFilter{Reason: r})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func packCount(t *testing.T, s *store.Store) int {
	t.Helper()
	ps, err := s.Packs()
	if err != nil {
		t.Fatal(err)
	}
	return len(ps)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

func storeKV(tokens []int32) func(int) ([]byte, error) {
	return storetest.KV(testID, []byte("tenant"), tokens, testBlock, testChunk)
}

// liveness bounds a wait for something that must happen, so that a test
// that would hang fails naming what it waited for. It is no performance
// bound: every such wait ends in milliseconds when the code is right.
const liveness = 2 * time.Minute

// waitFor waits until cond holds, and fails the test, saying what, if it
// does not within the liveness bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting, after %v, for %s", liveness, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func nowT() time.Time { return time.Now() }

// openControl opens a control stream from n to peer on their session and
// returns both.
func openControl(t *testing.T, ctx context.Context, n *node, peer string) (*session, *quic.Stream) {
	t.Helper()
	s, err := n.repl.session(ctx, peer)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.conn.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}
