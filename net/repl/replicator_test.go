package repl

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muserhq/muser/net/cluster/clustertest"
	"github.com/muserhq/muser/net/transport"
	"github.com/muserhq/muser/pack"
)

// TestReplicator: packs are pushed as they are published, and pushes to a
// peer that cannot be reached are retried until it can.
func TestReplicator(t *testing.T) {
	quick := func(c *Config) {
		q := transport.DefaultQUIC()
		q.HandshakeIdleTimeout = 200 * time.Millisecond
		c.QUIC = q
	}
	nodes := newCluster(t, []string{"alpha", "beta"}, map[string][]nodeOpt{"alpha": {quick}})
	alpha, beta := nodes[0], nodes[1]

	// beta is unreachable at first: a proxy that drops everything.
	var open atomic.Bool
	gate := newFlipProxy(t, beta.repl.Addr(), func(int64) bool { return false }, func() bool { return !open.Load() })
	clustertest.Admit(t, alpha.Node, "beta", gate.addr())

	var failures atomic.Int64
	r := NewReplicator(alpha.repl, "beta", ReplicatorOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		OnResult: func(_ Result, err error) {
			if err != nil {
				failures.Add(1)
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	var ids []pack.Digest
	for i := range 5 {
		id, _ := publish(t, alpha.store, uint64(100+i), 3)
		ids = append(ids, id)
		if !r.Enqueue(id) {
			t.Fatal("Enqueue refused a pack with room in the queue")
		}
	}
	waitFor(t, "two failed pushes behind the closed gate", func() bool { return failures.Load() >= 2 })
	if packCount(t, beta.store) != 0 {
		t.Fatal("a pack crossed a closed gate")
	}
	// Flush gives up when its context ends and says how many are left.
	short, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	left := r.Flush(short)
	stop()
	if left != len(ids) || r.Pending() != len(ids) {
		t.Fatalf("Flush behind a closed gate left %d, Pending %d; want %d", left, r.Pending(), len(ids))
	}
	open.Store(true)
	if left := r.Flush(context.Background()); left != 0 || r.Pending() != 0 {
		t.Fatalf("Flush with the gate open left %d, Pending %d; want 0", left, r.Pending())
	}
	if got := r.Stats().Pushed; got != len(ids) {
		t.Fatalf("after Flush: pushed %d, want %d", got, len(ids))
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	for _, id := range ids {
		if got, want := restoreAll(t, beta.store, id), restoreAll(t, alpha.store, id); !equalBlocks(got, want) {
			t.Fatalf("pack %s differs on beta", id.Short())
		}
	}
	st := r.Stats()
	if st.Retries == 0 || st.Refused != 0 || st.Dropped != 0 {
		t.Fatalf("stats %+v, want retries and no refusals or drops", st)
	}
}

func TestReplicatorQueueBounds(t *testing.T) {
	nodes := newCluster(t, []string{"alpha", "beta"}, nil)
	r := NewReplicator(nodes[0].repl, "beta", ReplicatorOptions{Queue: 2})
	a, b, c := pack.Digest{1}, pack.Digest{2}, pack.Digest{3}
	if !r.Enqueue(a) || !r.Enqueue(b) || !r.Enqueue(a) {
		t.Fatal("Enqueue refused with room, or refused a pack already queued")
	}
	if r.Enqueue(c) {
		t.Fatal("Enqueue accepted a third pack into a queue of two")
	}
	if got := r.Stats().Dropped; got != 1 {
		t.Fatalf("dropped %d, want 1", got)
	}
}
