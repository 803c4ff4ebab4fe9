package repl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

func TestPushAndPull(t *testing.T) {
	nodes := newCluster(t, []string{"alpha", "beta", "gamma"}, nil)
	alpha, beta, gamma := nodes[0], nodes[1], nodes[2]
	ctx := ctxT(t)
	id, tokens := publish(t, alpha.store, 1, 12)

	res, err := alpha.repl.Push(ctx, "beta", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pack != id || res.Chunks != 12 || res.Moved != 12 || res.MovedBytes != 12*testChunk || res.Tokens != 12*testBlock {
		t.Fatalf("push result %+v, want 12 of 12 chunks of pack %s moved", res, id.Short())
	}
	// The received pack verifies and serves a prefix hit.
	want := restoreAll(t, alpha.store, id)
	if got := restoreAll(t, beta.store, id); !equalBlocks(got, want) {
		t.Fatal("beta's copy of the pack restores to other bytes than alpha's")
	}
	n, err := beta.store.Restore(ctx, testID, []byte("tenant"), append(tokens, 1, 2, 3), func(int, []byte) error { return nil })
	if err != nil || n != len(tokens) {
		t.Fatalf("beta prefix hit: %d tokens, %v; want %d", n, err, len(tokens))
	}
	info, err := beta.store.Pack(id)
	if err != nil || info.Source != "peer:alpha" {
		t.Fatalf("beta's pack record %+v, %v; want source peer:alpha", info, err)
	}

	// Pushing again moves nothing: the receiver holds every chunk.
	res, err = alpha.repl.Push(ctx, "beta", id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 0 {
		t.Fatalf("second push moved %d chunks, want 0", res.Moved)
	}

	// gamma pulls it from beta by a prefix of its ID.
	res, err = gamma.repl.Pull(ctx, "beta", id.String()[:10])
	if err != nil {
		t.Fatal(err)
	}
	if res.Pack != id || res.Moved != 12 || !res.New {
		t.Fatalf("pull result %+v, want pack %s, 12 chunks moved, new", res, id.Short())
	}
	if got := restoreAll(t, gamma.store, id); !equalBlocks(got, want) {
		t.Fatal("gamma's copy restores to other bytes")
	}
	// A pull of a pack beta does not hold.
	_, err = gamma.repl.Pull(ctx, "beta", strings.Repeat("f", 64))
	we := wantWire(t, err, wire.CodeNotFound, true)
	if !strings.Contains(we.Detail, "not found") {
		t.Fatalf("detail %q, want it to say not found", we.Detail)
	}
}

func equalBlocks(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestDelta: a pack whose first half the receiver holds moves half its
// bytes; the bytes on the wire are within 5% of the missing chunks' size.
func TestDelta(t *testing.T) {
	nodes := newCluster(t, []string{"alpha", "beta"}, nil)
	alpha, beta := nodes[0], nodes[1]
	ctx := ctxT(t)
	const blocks = 64
	id, tokens := publish(t, alpha.store, 7, blocks)
	// beta computed the first half itself: same KV bytes (batch
	// invariance), so the same chunks.
	half := storePublish(t, beta.store, tokens[:blocks/2*testBlock])
	if half == id {
		t.Fatal("the half pack has the full pack's ID")
	}
	res, err := alpha.repl.Push(ctx, "beta", id)
	if err != nil {
		t.Fatal(err)
	}
	missing := int64(blocks/2) * testChunk
	if res.Moved != blocks/2 || res.MovedBytes != missing {
		t.Fatalf("moved %d chunks (%d bytes), want %d (%d bytes)", res.Moved, res.MovedBytes, blocks/2, missing)
	}
	// Every packet counted once: QUIC's bytes sent less what it declared
	// lost and sent again (a loaded host drops loopback datagrams; that is
	// not the delta rule's doing). The raw count is logged too.
	once := res.WireBytes - res.LostBytes
	ratio := float64(once) / float64(missing)
	t.Logf("delta push: %d bytes on the wire (%d with %d retransmitted) for %d missing chunk bytes (%.4f×); the full pack is %d bytes",
		once, res.WireBytes, res.LostBytes, missing, ratio, res.Bytes)
	if ratio < 1 || ratio > 1.05 {
		t.Fatalf("bytes on the wire %d = %.4f× the missing chunks' %d, want within [1, 1.05]", once, ratio, missing)
	}
	if got, want := restoreAll(t, beta.store, id), restoreAll(t, alpha.store, id); !equalBlocks(got, want) {
		t.Fatal("the delta-received pack restores to other bytes")
	}
}

func storePublish(t *testing.T, s *store.Store, tokens []int32) pack.Digest {
	t.Helper()
	res, err := s.PublishPrefix(context.Background(), testID, []byte("tenant"), tokens, storeKV(tokens))
	if err != nil {
		t.Fatal(err)
	}
	return res.Pack
}

// TestPushSenderCannotProve: a chunk file of the sender's own pack is
// damaged on disk. The sender reads only verified chunks, so the push
// fails closed with CodeInternal naming the pack, the sender quarantines
// it, and the receiver publishes nothing.
func TestPushSenderCannotProve(t *testing.T) {
	nodes := newCluster(t, []string{"alpha", "beta"}, nil)
	alpha, beta := nodes[0], nodes[1]
	ctx := ctxT(t)
	id, _ := publish(t, alpha.store, 3, 12)
	m, err := alpha.store.Manifest(id)
	if err != nil {
		t.Fatal(err)
	}
	h := m.Chunks[7].ID.String()
	path := filepath.Join(alpha.Home, "chunks", h[:2], h)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 1
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	_, err = alpha.repl.Push(ctx, "beta", id)
	we := wantWire(t, err, wire.CodeInternal, false)
	if !strings.Contains(we.Detail, "cannot prove pack "+id.Short()) {
		t.Fatalf("detail %q, want it to say the sender cannot prove pack %s", we.Detail, id.Short())
	}
	info, err := alpha.store.Pack(id)
	if err != nil || !info.Quarantined {
		t.Fatalf("alpha's pack after the push: %+v, %v; want it quarantined", info, err)
	}
	if n := packCount(t, beta.store); n != 0 {
		t.Fatalf("beta holds %d packs, want 0", n)
	}
	// Leave alpha's store clean for the harness's final check.
	if _, err := alpha.store.Remove(id); err != nil {
		t.Fatal(err)
	}
}
