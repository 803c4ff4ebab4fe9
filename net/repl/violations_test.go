package repl

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/quic-go/quic-go"
)

// rawPush is a hand-driven push from n to peer: it sends a fresh offer of
// pack id and returns the control stream, the need and the pack reader.
type rawPush struct {
	t    *testing.T
	s    *session
	ctrl *quic.Stream
	need *wire.Need
	pr   *store.PackReader
}

func startRawPush(t *testing.T, ctx context.Context, n *node, peer string, id pack.Digest, nonce byte) *rawPush {
	t.Helper()
	s, st, need := offerRaw(t, ctx, n, peer, id, uint64(time.Now().UnixNano()), nonce)
	pr, err := n.store.OpenPack(id, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	return &rawPush{t: t, s: s, ctrl: st, need: need, pr: pr}
}

// offerRaw sends n's offer of pack id to peer, sealed with generation gen
// and a nonce made of the byte nonce, on a new control stream, and
// returns the session, the stream and the receiver's need.
func offerRaw(t *testing.T, ctx context.Context, n *node, peer string, id pack.Digest, gen uint64, nonce byte) (*session, *quic.Stream, *wire.Need) {
	t.Helper()
	offer := &wire.Offer{Manifest: manifestBytes(t, n, id), Seal: sealFor(t, n, peer, id, n.Name, gen, nonce)}
	s, st, msg := sendOffer(t, ctx, n, peer, offer)
	need, ok := msg.(*wire.Need)
	if !ok {
		t.Fatalf("answer %+v, want need", msg)
	}
	return s, st, need
}

// writeChunk writes chunk cid (read verified from the pack) on us and
// returns the write's error: a receiver that refuses the chunk may cut the
// stream as soon as it has read the frame's header.
func (r *rawPush) writeChunk(us *quic.SendStream, cid pack.Digest) error {
	r.t.Helper()
	m := r.pr.Manifest()
	for b, c := range m.Chunks {
		if c.ID != cid {
			continue
		}
		data, err := r.pr.ReadBlock(context.Background(), b, nil)
		if err != nil {
			r.t.Fatal(err)
		}
		hdr, err := wire.AppendChunkHeader(nil, cid, len(data))
		if err != nil {
			r.t.Fatal(err)
		}
		_, err = us.Write(append(hdr, data...))
		return err
	}
	r.t.Fatalf("chunk %s not in the pack", cid.Short())
	return nil
}

// readAnswer reads the receiver's final answer (within the liveness bound).
func (r *rawPush) readAnswer() (wire.Message, error) {
	type res struct {
		m   wire.Message
		err error
	}
	c := make(chan res, 1)
	go func() {
		m, err := wire.Read(r.ctrl, wire.TypeDone)
		c <- res{m, err}
	}()
	select {
	case x := <-c:
		return x.m, x.err
	case <-time.After(liveness):
		r.ctrl.CancelRead(0)
		r.t.Fatalf("no answer from the receiver after %v", liveness)
		return nil, nil
	}
}

// A chunk sent again after the last needed one is a protocol violation
// the receiver refuses with a receipt; it then publishes nothing and
// answers no done.
func TestChunkAfterLastRefusesTheTransfer(t *testing.T) {
	nodes := newCluster(t, []string{"alpha", "beta"}, nil)
	alpha, beta := nodes[0], nodes[1]
	id, _ := publish(t, alpha.store, 71, 4)
	ctx := ctxT(t)
	rp := startRawPush(t, ctx, alpha, "beta", id, 71)
	if len(rp.need.Chunks) != 4 {
		t.Fatalf("need lists %d chunks, want 4", len(rp.need.Chunks))
	}
	us, err := rp.s.conn.OpenUniStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.Write(us, &wire.Chunks{Transfer: rp.need.Transfer}); err != nil {
		t.Fatal(err)
	}
	for _, c := range rp.need.Chunks {
		if err := rp.writeChunk(us, c); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // the receiver has every needed chunk
	// Sent twice: a protocol violation, which the receiver may cut short.
	_ = rp.writeChunk(us, rp.need.Chunks[0])
	us.Close()

	msg, err := rp.readAnswer()
	rp.ctrl.Close()
	rs := receiptsFor(t, beta.store, pack.ReasonMalformed)
	if len(rs) != 1 || packCount(t, beta.store) != 0 {
		t.Fatalf("answer %#v (%v), %d malformed receipts, %d packs; want a refusal, one receipt, no pack", msg, err, len(rs), packCount(t, beta.store))
	}
	if r, ok := msg.(*wire.Refuse); !ok || r.Code != wire.CodeMalformed {
		t.Fatalf("answer %#v (%v), want a malformed refusal", msg, err)
	}
}

// A transfer from a peer revoked while it is in flight is recorded as
// truncated (docs/replication.md § 5), whichever of the session's end
// and the control stream's read reports the closed connection first: a
// race, so several rounds.
func TestRevokedMidTransferIsTruncated(t *testing.T) {
	for round := range 5 {
		nodes := newCluster(t, []string{"alpha", "beta"}, nil)
		alpha, beta := nodes[0], nodes[1]
		id, _ := publish(t, alpha.store, 72, 4)
		startRawPush(t, ctxT(t), alpha, "beta", id, 72) // in flight at beta: need sent
		if _, err := beta.Cluster.RemovePeer("alpha", nowT()); err != nil {
			t.Fatal(err)
		}
		beta.repl.mu.Lock()
		ep := beta.repl.ep
		beta.repl.mu.Unlock()
		if got := ep.Revalidate(); len(got) != 1 {
			t.Fatalf("revalidate dropped %v", got)
		}
		var rs []store.Receipt
		waitFor(t, fmt.Sprintf("round %d: a receipt for pack %s, whose transfer from revoked peer alpha beta abandoned", round, id.Short()), func() bool {
			var err error
			if rs, err = beta.store.Receipts(store.ReceiptFilter{Pack: id}); err != nil {
				t.Fatal(err)
			}
			return len(rs) > 0
		})
		if rs[0].Reason != pack.ReasonTruncated || packCount(t, beta.store) != 0 {
			t.Fatalf("round %d: receipt %+v and %d packs; want truncated and none", round, rs[0], packCount(t, beta.store))
		}
	}
}

// An offer sent again on the control stream during a transfer is a frame
// out of place, refused as malformed, not an interruption.
func TestSecondOfferIsMalformed(t *testing.T) {
	nodes := newCluster(t, []string{"alpha", "beta"}, nil)
	alpha, beta := nodes[0], nodes[1]
	id, _ := publish(t, alpha.store, 73, 4)
	ctx := ctxT(t)
	rp := startRawPush(t, ctx, alpha, "beta", id, 73)
	offer := &wire.Offer{Manifest: manifestBytes(t, alpha, id),
		Seal: sealFor(t, alpha, "beta", id, "alpha", uint64(time.Now().UnixNano()), 74)}
	if err := wire.Write(rp.ctrl, offer); err != nil {
		t.Fatal(err)
	}
	if _, err := rp.readAnswer(); err != nil {
		t.Fatal(err)
	}
	rp.ctrl.Close()
	rs, err := beta.store.Receipts(store.ReceiptFilter{Pack: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("receipts %+v, want 1", rs)
	}
	if rs[0].Reason != pack.ReasonMalformed {
		t.Fatalf("a second offer on the control stream was recorded as %s: %q", rs[0].Reason, rs[0].Detail)
	}
}

// A control stream whose first frame does not decode is refused as
// malformed, and the refusal is recorded as a receipt naming the peer
// (docs/replication.md § 5).
func TestMalformedFirstFrameHasReceipt(t *testing.T) {
	nodes := newCluster(t, []string{"alpha", "beta"}, nil)
	alpha, beta := nodes[0], nodes[1]
	_, st := openControl(t, ctxT(t), alpha, "beta")
	// A pull frame whose reference is not lower-case hex.
	if _, err := st.Write([]byte{byte(wire.TypePull), 2, 0, 0, 0, 1, 'Z'}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	msg, err := wire.Read(st)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := msg.(*wire.Refuse)
	if !ok || r.Code != wire.CodeMalformed {
		t.Fatalf("answer %+v, want a malformed refusal", msg)
	}
	rs := receiptsFor(t, beta.store, pack.ReasonMalformed)
	if r.Receipt == "" || len(rs) != 1 || rs[0].Source != "peer:alpha" {
		t.Fatalf("malformed refusal %+v with receipts %+v; want one receipt from peer:alpha whose ID the refusal carries", r, rs)
	}
}

// A pull whose reference is not 1 to 64 lower-case hex digits (after the
// lower-casing Pull does) is refused before any frame leaves: sent, the
// peer would refuse it as malformed with a receipt blaming this node.
func TestPullBadRefRefusedLocally(t *testing.T) {
	nodes := newCluster(t, []string{"alpha", "beta"}, nil)
	alpha, beta := nodes[0], nodes[1]
	ctx := ctxT(t)
	for _, ref := range []string{"zz", "ab/cd", "0x12"} {
		t.Run(ref, func(t *testing.T) {
			_, err := alpha.repl.Pull(ctx, "beta", ref)
			var werr *wire.Error
			if err == nil || errors.As(err, &werr) && werr.Remote {
				t.Fatalf("Pull(%q) = %v, want a local error", ref, err)
			}
			if rs := receiptsFor(t, beta.store, pack.ReasonMalformed); len(rs) != 0 {
				t.Fatalf("Pull(%q): beta recorded %d malformed receipts (%q), want none", ref, len(rs), rs[0].Detail)
			}
		})
	}
}
