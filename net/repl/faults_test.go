package repl

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/quic-go/quic-go"
)

func TestIdentityMismatchNamesTheField(t *testing.T) {
	expect := testID
	expect.Quant = "Q8_0"
	nodes := newCluster(t, []string{"alpha", "beta"}, map[string][]nodeOpt{
		"beta": {func(c *Config) { c.Expect = func(pack.Identity) *pack.Identity { return &expect } }},
	})
	alpha, beta := nodes[0], nodes[1]
	id, _ := publish(t, alpha.store, 2, 4)
	_, err := alpha.repl.Push(ctxT(t), "beta", id)
	we := wantWire(t, err, wire.CodeIdentityMismatch, true)
	if !errors.Is(err, pack.ErrRefused) {
		t.Fatalf("%v is not pack.ErrRefused", err)
	}
	rs := receiptsFor(t, beta.store, pack.ReasonIdentityMismatch)
	if len(rs) != 1 {
		t.Fatalf("beta has %d identity-mismatch receipts, want 1", len(rs))
	}
	r := rs[0]
	want := []pack.FieldDiff{{Field: "quant", Want: `"Q8_0"`, Got: `"F32"`}}
	if !slices.Equal(r.Fields, want) || r.Source != "peer:alpha" || r.Pack != id {
		t.Fatalf("receipt %+v, want fields %v from peer:alpha for pack %s", r, want, id.Short())
	}
	if we.Receipt != r.ID {
		t.Fatalf("alpha was told receipt %q, beta recorded %q", we.Receipt, r.ID)
	}
	if packCount(t, beta.store) != 0 {
		t.Fatal("beta published the refused pack")
	}
}

// rawOffer sends one offer from n to peer on a fresh control stream and
// returns the first answer, then abandons the stream.
func rawOffer(t *testing.T, n *node, peer string, o *wire.Offer) wire.Message {
	t.Helper()
	_, st, msg := sendOffer(t, ctxT(t), n, peer, o)
	st.Close()
	st.CancelRead(0)
	return msg
}

// sendOffer sends offer o from n to peer on a new control stream and
// returns the session, the stream and the first answer.
func sendOffer(t *testing.T, ctx context.Context, n *node, peer string, o *wire.Offer) (*session, *quic.Stream, wire.Message) {
	t.Helper()
	s, st := openControl(t, ctx, n, peer)
	if err := wire.Write(st, o); err != nil {
		t.Fatal(err)
	}
	msg, err := wire.Read(st)
	if err != nil {
		t.Fatalf("reading the answer to a raw offer: %v", err)
	}
	return s, st, msg
}

func sealFor(t *testing.T, n *node, to string, id pack.Digest, producer string, gen uint64, nonce byte) pack.Seal {
	t.Helper()
	secret, err := n.Cluster.LinkSecret()
	if err != nil {
		t.Fatal(err)
	}
	s, err := pack.NewSeal(LinkKey(secret, n.Name, to), id, producer, gen, [pack.NonceSize]byte{nonce, 1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func manifestBytes(t *testing.T, n *node, id pack.Digest) []byte {
	t.Helper()
	m, err := n.store.Manifest(id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSealReplayStale: a replayed offer, a stale generation, a seal by
// the wrong key and one naming another producer are refused with receipts
// naming the peer, before any chunk moves.
func TestSealReplayStale(t *testing.T) {
	var (
		mu       sync.Mutex
		captured []pack.Seal
	)
	nodes := newCluster(t, []string{"alpha", "beta", "gamma"}, map[string][]nodeOpt{
		"alpha": {func(c *Config) {
			c.sealed = func(s pack.Seal) { mu.Lock(); captured = append(captured, s); mu.Unlock() }
		}},
	})
	alpha, beta, gamma := nodes[0], nodes[1], nodes[2]
	id, _ := publish(t, alpha.store, 3, 4)
	if _, err := alpha.repl.Push(ctxT(t), "beta", id); err != nil {
		t.Fatal(err)
	}
	mb := manifestBytes(t, alpha, id)
	accepted := captured[0]

	tests := []struct {
		desc   string
		from   *node
		offer  *wire.Offer
		reason pack.Reason
		peer   string
	}{
		{"replayed offer", alpha, &wire.Offer{Manifest: mb, Seal: accepted}, pack.ReasonReplay, "alpha"},
		{"stale generation", alpha, &wire.Offer{Manifest: mb, Seal: sealFor(t, alpha, "beta", id, "alpha", accepted.Generation-1, 9)},
			pack.ReasonStaleGeneration, "alpha"},
		{"same generation, new nonce", alpha, &wire.Offer{Manifest: mb, Seal: sealFor(t, alpha, "beta", id, "alpha", accepted.Generation, 10)},
			pack.ReasonStaleGeneration, "alpha"},
		{"sealed for another receiver", alpha, &wire.Offer{Manifest: mb, Seal: sealFor(t, alpha, "gamma", id, "alpha", accepted.Generation+1, 11)},
			pack.ReasonBadSeal, "alpha"},
		{"another producer's name", gamma, &wire.Offer{Manifest: mb, Seal: sealFor(t, gamma, "beta", id, "alpha", accepted.Generation+1, 12)},
			pack.ReasonBadSeal, "gamma"},
		{"manifest altered under the seal", alpha, &wire.Offer{Manifest: append(slices.Clone(mb[:len(mb)-1]), mb[len(mb)-1]^1),
			Seal: sealFor(t, alpha, "beta", id, "alpha", accepted.Generation+1, 13)}, pack.ReasonBadSeal, "alpha"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			before := len(receiptsFor(t, beta.store, tt.reason))
			msg := rawOffer(t, tt.from, "beta", tt.offer)
			r, ok := msg.(*wire.Refuse)
			if !ok || r.Code != wire.CodeForReason(tt.reason) {
				t.Fatalf("answer %+v, want a refusal %s", msg, tt.reason)
			}
			rs := receiptsFor(t, beta.store, tt.reason)
			if len(rs) != before+1 {
				t.Fatalf("%d %s receipts, want %d", len(rs), tt.reason, before+1)
			}
			last := rs[len(rs)-1]
			if last.Source != "peer:"+tt.peer || last.ID != r.Receipt {
				t.Fatalf("receipt %+v; want source peer:%s and ID %q", last, tt.peer, r.Receipt)
			}
			t.Logf("refused: %s", r.Detail)
		})
	}
	// The genuine sender still gets through afterwards.
	id2, _ := publish(t, alpha.store, 4, 4)
	if _, err := alpha.repl.Push(ctxT(t), "beta", id2); err != nil {
		t.Fatalf("a fresh push after the refusals: %v", err)
	}
}

// TestCorruptChunkRefused: a sender whose chunk bytes change after they
// were read and verified (bad memory, a bug, a hostile node) is refused
// with a chunk-digest receipt naming it; nothing is published; a clean
// retry moves only the chunks not yet stored.
func TestCorruptChunkRefused(t *testing.T) {
	var (
		target  atomic.Value
		stored  atomic.Int64
		corrupt atomic.Bool
	)
	nodes := newCluster(t, []string{"alpha", "beta"}, map[string][]nodeOpt{
		"alpha": {func(c *Config) {
			c.Streams = 1 // chunks arrive in order, so the count before the fault is exact
			c.corrupt = func(id pack.Digest, data []byte) {
				if corrupt.Load() && id == target.Load().(pack.Digest) {
					data[len(data)/2] ^= 0x10
				}
			}
		}},
		"beta": {func(c *Config) { c.OnChunk = func(string, pack.Digest, int) { stored.Add(1) } }},
	})
	alpha, beta := nodes[0], nodes[1]
	id, _ := publish(t, alpha.store, 5, 12)
	m, _ := alpha.store.Manifest(id)
	target.Store(m.Chunks[7].ID)
	corrupt.Store(true)

	_, err := alpha.repl.Push(ctxT(t), "beta", id)
	we := wantWire(t, err, wire.CodeChunkDigest, true)
	if !errors.Is(err, pack.ErrRefused) || we.Receipt == "" {
		t.Fatalf("%v: want a refusal with a receipt", err)
	}
	rs := receiptsFor(t, beta.store, pack.ReasonChunkDigest)
	if len(rs) != 1 || rs[0].Source != "peer:alpha" || rs[0].Expected != m.Chunks[7].ID || rs[0].Actual == rs[0].Expected {
		t.Fatalf("receipts %+v, want one chunk-digest from peer:alpha expecting chunk 7's ID", rs)
	}
	if rs[0].Pack != id {
		t.Fatalf("chunk-digest receipt names pack %s, want %s", rs[0].Pack.Short(), id.Short())
	}
	if packCount(t, beta.store) != 0 {
		t.Fatal("a pack became visible after a refused chunk")
	}
	if got := stored.Load(); got != 7 {
		t.Fatalf("beta stored %d chunks before the corrupt one, want 7", got)
	}

	corrupt.Store(false)
	res, err := alpha.repl.Push(ctxT(t), "beta", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 12-7 {
		t.Fatalf("retry moved %d chunks, want %d (the 7 verified before the fault were kept)", res.Moved, 12-7)
	}
	if got, want := restoreAll(t, beta.store, id), restoreAll(t, alpha.store, id); !equalBlocks(got, want) {
		t.Fatal("the retried pack restores to other bytes")
	}
}

// TestInterruptedPushResumes: the sender stops mid-transfer; the receiver
// shows no pack, keeps what it verified, and the retry moves the rest.
func TestInterruptedPushResumes(t *testing.T) {
	const blocks, stopAt = 20, 6
	var (
		stored  atomic.Int64
		reached = make(chan struct{})
		release = make(chan struct{})
	)
	nodes := newCluster(t, []string{"alpha", "beta"}, map[string][]nodeOpt{
		"alpha": {func(c *Config) { c.Streams = 1 }},
		"beta": {func(c *Config) {
			c.OnChunk = func(string, pack.Digest, int) {
				if stored.Add(1) == stopAt {
					close(reached)
					<-release
				}
			}
		}},
	})
	alpha, beta := nodes[0], nodes[1]
	id, _ := publish(t, alpha.store, 6, blocks)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := alpha.repl.Push(ctx, "beta", id)
		errc <- err
	}()
	<-reached
	cancel() // the sender gives up mid-transfer
	err := <-errc
	close(release)
	if err == nil {
		t.Fatal("the interrupted push succeeded")
	}
	// However the sender's resets reach beta (control stream first, or a
	// chunk stream cut inside a frame), the one receipt says truncated.
	var rs []store.Receipt
	waitFor(t, "beta's receipt for the interrupted transfer", func() bool {
		var err error
		rs, err = beta.store.Receipts(store.ReceiptFilter{Pack: id})
		if err != nil {
			t.Fatal(err)
		}
		return len(rs) > 0
	})
	if packCount(t, beta.store) != 0 {
		t.Fatal("a partial pack is visible")
	}
	if r := rs[0]; len(rs) != 1 || r.Reason != pack.ReasonTruncated || r.Source != "peer:alpha" {
		t.Fatalf("receipts %+v, want one truncated receipt for pack %s from peer:alpha", rs, id.Short())
	}
	kept := stored.Load()
	res, err := alpha.repl.Push(ctxT(t), "beta", id)
	if err != nil {
		t.Fatal(err)
	}
	if int64(res.Moved) != blocks-kept {
		t.Fatalf("retry moved %d chunks, want %d (%d kept)", res.Moved, blocks-kept, kept)
	}
	if got, want := restoreAll(t, beta.store, id), restoreAll(t, alpha.store, id); !equalBlocks(got, want) {
		t.Fatal("the resumed pack restores to other bytes")
	}
}

// TestPushCanceledWhileReceiverStalls: a receiver that asks for chunks
// and then stops reading them (and ignores the control stream's reset)
// holds the sender's chunk stream at its flow-control window; canceling
// the push still ends it, as canceled.
func TestPushCanceledWhileReceiverStalls(t *testing.T) {
	const blocks = 100 // 6.4 MiB: more than a stream's initial window
	var sent atomic.Int64
	nodes := newCluster(t, []string{"alpha", "beta"}, map[string][]nodeOpt{
		"alpha": {func(c *Config) {
			c.Streams = 1
			c.OnSent = func(string, pack.Digest, int) { sent.Add(1) }
		}},
	})
	alpha, beta := nodes[0], nodes[1]
	id, _ := publish(t, alpha.store, 40, blocks)
	stalled := stalledBeta(t, alpha, beta, "need")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := alpha.repl.Push(ctx, "beta", id)
		errc <- err
	}()
	if err := <-stalled; err != nil {
		t.Fatalf("stalled receiver: %v", err)
	}
	// A 4 MiB window holds 63 chunks and their headers: from the 60th on,
	// the sender is at most a few writes from the window's edge.
	waitFor(t, "alpha to send 60 chunks", func() bool { return sent.Load() >= 60 })
	time.Sleep(50 * time.Millisecond) // to be blocked there when cancel comes; the fix passes either way
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, &wire.Error{Code: wire.CodeCanceled}) {
			t.Fatalf("canceled push returned %v, want canceled", err)
		}
		if n := sent.Load(); n >= blocks {
			t.Fatalf("all %d chunks were sent: the receiver's window never held the sender back; the test proves nothing", n)
		}
	case <-time.After(liveness):
		t.Fatalf("a canceled push still waits after %v: its chunk stream is stuck at the stalled receiver's window (%d chunks sent)", liveness, sent.Load())
	}
}

func TestRemovedPeerIsRefused(t *testing.T) {
	nodes := newCluster(t, []string{"alpha", "beta"}, nil)
	alpha, beta := nodes[0], nodes[1]
	id, _ := publish(t, alpha.store, 8, 2)
	if _, err := alpha.repl.Push(ctxT(t), "beta", id); err != nil {
		t.Fatal(err)
	}
	if _, err := beta.Cluster.RemovePeer("alpha", nowT()); err != nil {
		t.Fatal(err)
	}
	beta.repl.mu.Lock()
	ep := beta.repl.ep
	beta.repl.mu.Unlock()
	alpha.repl.mu.Lock()
	s := alpha.repl.outbound["beta"]
	alpha.repl.mu.Unlock()
	if got := ep.Revalidate(); len(got) != 1 || got[0] != "alpha" {
		t.Fatalf("beta dropped %q, want [alpha]", got)
	}
	// alpha's live connection is closed with the revocation code.
	<-s.conn.Context().Done()
	if _, err := s.conn.OpenStream(ctxT(t)); !errors.Is(err, &wire.Error{Code: wire.CodeRevoked}) {
		t.Fatalf("alpha's connection after revocation: %v, want revoked", err)
	}
	// A new connection is refused at the handshake, with a receipt.
	id2, _ := publish(t, alpha.store, 9, 2)
	_, err := alpha.repl.Push(ctxT(t), "beta", id2)
	if !errors.Is(err, pack.ErrRefused) {
		t.Fatalf("push from a removed node = %v, want refused", err)
	}
	rs := receiptsFor(t, beta.store, pack.ReasonUnauthorized)
	if len(rs) == 0 || rs[len(rs)-1].Source != "peer:alpha" {
		t.Fatalf("beta's unauthorized receipts %+v, want one from peer:alpha", rs)
	}
	if packCount(t, beta.store) != 1 {
		t.Fatal("the removed node's pack was published")
	}
}

// TestTooManyChunkStreams: a sender may not open more than MaxStreams
// chunk streams for one transfer (each holds a chunk in memory).
func TestTooManyChunkStreams(t *testing.T) {
	var mu sync.Mutex
	var last pack.Seal
	nodes := newCluster(t, []string{"alpha", "beta"}, map[string][]nodeOpt{
		"alpha": {func(c *Config) { c.sealed = func(s pack.Seal) { mu.Lock(); last = s; mu.Unlock() } }},
	})
	alpha, beta := nodes[0], nodes[1]
	id, _ := publish(t, alpha.store, 30, 4)
	ctx := ctxT(t)
	// A first push establishes the generation; the raw offer goes above it.
	id0, _ := publish(t, alpha.store, 31, 1)
	if _, err := alpha.repl.Push(ctx, "beta", id0); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	gen := last.Generation + 1
	mu.Unlock()
	s, st, need := offerRaw(t, ctx, alpha, "beta", id, gen, 40)
	for range MaxStreams + 1 {
		us, err := s.conn.OpenUniStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.Write(us, &wire.Chunks{Transfer: need.Transfer}); err != nil {
			t.Fatal(err)
		}
	}
	msg, err := wire.Read(st, wire.TypeDone)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := msg.(*wire.Refuse)
	if !ok || r.Code != wire.CodeOversize {
		t.Fatalf("answer %+v, want an oversize refusal", msg)
	}
	st.Close()
	if rs := receiptsFor(t, beta.store, pack.ReasonOversize); len(rs) != 1 || rs[0].Source != "peer:alpha" {
		t.Fatalf("oversize receipts %+v, want one from peer:alpha", rs)
	}
}
