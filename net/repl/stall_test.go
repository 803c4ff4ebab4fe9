package repl

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/muserhq/muser/net/cluster/clustertest"
	"github.com/muserhq/muser/net/transport"
	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/quic-go/quic-go"
)

// testStall is the stall timeout of the nodes under test: short, so that
// a stalled peer is given up on well within liveness.
const testStall = 300 * time.Millisecond

func withStall(d time.Duration) nodeOpt { return func(c *Config) { c.StallTimeout = d } }

// A sender that stops sending ends its transfer at the receiver after the
// stall timeout: a truncated receipt naming the stall, a refusal on the
// control stream, nothing published, and the chunks that did arrive kept.
func TestReceiverEndsStalledTransfer(t *testing.T) {
	cases := []struct {
		name string
		sent int // chunks written before the sender goes quiet
		open bool
	}{
		{"no chunk stream", 0, false},
		{"stream open, nothing sent", 0, true},
		{"quiet after one chunk", 1, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := newCluster(t, []string{"alpha", "beta"}, map[string][]nodeOpt{"beta": {withStall(testStall)}})
			alpha, beta := nodes[0], nodes[1]
			seed := uint64(90 + i)
			id, _ := publish(t, alpha.store, seed, 4)
			ctx := ctxT(t)
			rp := startRawPush(t, ctx, alpha, "beta", id, byte(seed))
			if tc.open {
				us, err := rp.s.conn.OpenUniStream(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer us.CancelWrite(0)
				if err := wire.Write(us, &wire.Chunks{Transfer: rp.need.Transfer}); err != nil {
					t.Fatal(err)
				}
				for _, c := range rp.need.Chunks[:tc.sent] {
					if err := rp.writeChunk(us, c); err != nil {
						t.Fatal(err)
					}
				}
			}
			msg, err := rp.readAnswer()
			if err != nil {
				t.Fatalf("reading beta's answer: %v", err)
			}
			r, ok := msg.(*wire.Refuse)
			if !ok || r.Code != wire.CodeTruncated || !strings.Contains(r.Detail, ErrStalled.Error()) {
				t.Fatalf("beta answered %+v, want a truncated refusal naming the stall", msg)
			}
			recs := receiptsFor(t, beta.store, pack.ReasonTruncated)
			if len(recs) != 1 || !strings.Contains(recs[0].Detail, ErrStalled.Error()) || recs[0].Pack != id {
				t.Fatalf("beta's truncated receipts %+v, want one for pack %s naming the stall", recs, id.Short())
			}
			if n := packCount(t, beta.store); n != 0 {
				t.Fatalf("beta holds %d packs after a stalled transfer", n)
			}
			var sentRefs []pack.ChunkRef
			for _, c := range rp.pr.Manifest().Chunks {
				if slices.Contains(rp.need.Chunks[:tc.sent], c.ID) && !slices.Contains(sentRefs, c) {
					sentRefs = append(sentRefs, c)
				}
			}
			if got, err := beta.store.MissingChunks(sentRefs); err != nil || len(got) != 0 || len(sentRefs) != tc.sent {
				t.Fatalf("chunks received before the stall (%d of %d sent): missing %v (%v), want kept", len(sentRefs), tc.sent, got, err)
			}
		})
	}
}

// stalledBeta is a receiver speaking as beta on its own endpoint that
// answers alpha's offer as far as answer says ("nothing", or "need": a
// need of every chunk, then it accepts the first chunk stream), then goes
// quiet: it keeps the connection open but reads nothing more. The channel
// reports when it has gone quiet.
func stalledBeta(t *testing.T, alpha, beta *node, answer string) <-chan error {
	t.Helper()
	ep, err := transport.Listen("127.0.0.1:0", transport.Config{TLS: beta.TLS(t), QUIC: transport.DefaultQUIC()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	clustertest.Admit(t, alpha.Node, "beta", ep.Addr().String())
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			ctx := ctxT(t)
			c, err := ep.Accept(ctx)
			if err != nil {
				return err
			}
			ctrl, err := c.AcceptStream(ctx)
			if err != nil {
				return err
			}
			msg, err := wire.Read(ctrl, wire.TypeOffer)
			if err != nil || answer == "nothing" {
				return err
			}
			m, err := pack.DecodeManifest(msg.(*wire.Offer).Manifest)
			if err != nil {
				return err
			}
			need := &wire.Need{Transfer: 1}
			for _, ch := range m.Chunks {
				if !slices.Contains(need.Chunks, ch.ID) {
					need.Chunks = append(need.Chunks, ch.ID)
				}
			}
			if err := wire.Write(ctrl, need); err != nil {
				return err
			}
			_, err = c.AcceptUniStream(ctx) // and never read it, nor answer done
			return err
		}()
	}()
	return errc
}

// A receiver that stops answering ends the push at the sender after the
// stall timeout, with ErrStalled: before its need, while the chunks wait
// for its window, and while the sender waits for its done.
func TestSenderEndsStalledTransfer(t *testing.T) {
	cases := []struct {
		name   string
		answer string
		blocks int
	}{
		{"no need", "nothing", 2},
		{"need, then no window", "need", 100}, // 6.4 MiB: past the stream's initial window
		{"need, then no done", "need", 2},     // fits the window: the sender waits for done
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := newCluster(t, []string{"alpha", "beta"}, map[string][]nodeOpt{"alpha": {withStall(testStall), func(c *Config) { c.Streams = 1 }}})
			alpha, beta := nodes[0], nodes[1]
			errc := stalledBeta(t, alpha, beta, tc.answer)
			id, _ := publish(t, alpha.store, uint64(95+i), tc.blocks)
			done := make(chan error, 1)
			go func() {
				_, err := alpha.repl.Push(context.Background(), "beta", id)
				done <- err
			}()
			if err := <-errc; err != nil {
				t.Fatalf("stalled receiver: %v", err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, ErrStalled) {
					t.Fatalf("push to a stalled receiver returned %v, want ErrStalled", err)
				}
			case <-time.After(liveness):
				t.Fatalf("push to a stalled receiver still waits after %v", liveness)
			}
		})
	}
}

// A control stream that brings no request is answered with a refusal
// after the stall timeout instead of holding its goroutine.
func TestControlStreamWithoutRequest(t *testing.T) {
	nodes := newCluster(t, []string{"alpha", "beta"}, map[string][]nodeOpt{"beta": {withStall(testStall)}})
	_, st := openControl(t, ctxT(t), nodes[0], "beta")
	// A stream is announced to the peer with its first bytes: send an
	// incomplete frame (one byte of a header).
	if _, err := st.Write([]byte{byte(wire.TypeOffer)}); err != nil {
		t.Fatal(err)
	}
	got := make(chan wire.Message, 1)
	go func() {
		m, _ := wire.Read(st, wire.TypeRefuse)
		got <- m
	}()
	select {
	case m := <-got:
		r, ok := m.(*wire.Refuse)
		if !ok || r.Code != wire.CodeCanceled || !strings.Contains(r.Detail, "no request") {
			t.Fatalf("beta answered %+v, want a canceled refusal saying no request came", m)
		}
	case <-time.After(liveness):
		st.CancelRead(quic.StreamErrorCode(wire.CodeCanceled))
		t.Fatalf("beta still holds a silent control stream after %v", liveness)
	}
}
