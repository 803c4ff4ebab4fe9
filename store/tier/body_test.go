package tier_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/tier"
)

// unsized serves chunk GETs without a length (as a chunked response
// does), and cuts the body of the cut-th such GET (counting from 1; 0
// cuts none) after half of its bytes, as a connection that drops would.
type unsized struct {
	cut  int32
	seen atomic.Int32
}

func (u *unsized) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/chunks/") || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	n := resp.ContentLength
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	if u.seen.Add(1) == u.cut {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, n/2), resp.Body}
	}
	return resp, nil
}

// unsizedCases are chunk GETs without a length: all whole, or the third
// cut short.
var unsizedCases = []struct {
	name string
	cut  int32
}{{"whole", 0}, {"cut short", 3}}

// unsizedReader returns a fixture, an empty store B and a reader of the
// fixture's tier whose chunk GETs come without a length (unsized).
func unsizedReader(t *testing.T, cut int32) (*fixture, *store.Store, *tier.Tier) {
	t.Helper()
	f := newFixture(t)
	cfg := f.config(testKey, "node-b")
	cfg.Transport = &unsized{cut: cut}
	tr, err := tier.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f, storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16}), tr
}

// TestInstallUnsizedBodies: chunk GETs whose responses give no length
// are read to the manifest's size and judged by their hashes, so whole
// ones install; a body that ends early is the connection's fault, not
// the chunk's: the install fails with ErrUnavailable, writes no receipt
// and leaves nothing visible, and a later install succeeds.
func TestInstallUnsizedBodies(t *testing.T) {
	ctx := context.Background()
	for _, tc := range unsizedCases {
		t.Run(tc.name, func(t *testing.T) {
			f, b, tr := unsizedReader(t, tc.cut)
			res, err := tr.Install(ctx, b, f.pack, f.id)
			if tc.cut == 0 {
				if err != nil || !res.New || res.ChunksFetched != 5 {
					t.Fatalf("install: got %+v, %v; want 5 chunks fetched, new", res, err)
				}
				if n, _ := restoreAll(t, b, f.id, f.salt, f.tokens); n != 80 {
					t.Fatalf("B restores %d tokens, want 80", n)
				}
				storetest.Check(t, b)
				return
			}
			var se *store.SourceError
			if !errors.Is(err, tier.ErrUnavailable) || errors.Is(err, pack.ErrRefused) || errors.As(err, &se) {
				t.Fatalf("install with a body cut short: got %v, want ErrUnavailable, no refusal", err)
			}
			if rs, _ := b.Receipts(store.ReceiptFilter{}); len(rs) != 0 {
				t.Fatalf("B holds %d receipts, want 0: a broken connection refuses nothing", len(rs))
			}
			if ps, _ := b.Packs(); len(ps) != 0 {
				t.Fatalf("B holds %d packs after the failed install, want 0", len(ps))
			}
			storetest.Check(t, b)
			if res, err := f.open(t, testKey, "node-b").Install(ctx, b, f.pack, f.id); err != nil || !res.New {
				t.Fatalf("install again: got %+v, %v", res, err)
			}
			storetest.Check(t, b)
		})
	}
}

// TestRestoreUnsizedBodies: the streamed restore reads chunk GETs
// without a length as Install does: whole ones restore; a body cut short
// fails the restore with ErrUnavailable and no receipt, after which the
// consumer discards what it got.
func TestRestoreUnsizedBodies(t *testing.T) {
	for _, tc := range unsizedCases {
		t.Run(tc.name, func(t *testing.T) {
			f, b, tr := unsizedReader(t, tc.cut)
			c := &consumer{t: t}
			n, _, err := tr.Restore(context.Background(), b, tier.RestoreRequest{Pack: f.pack, Identity: f.id, Salt: f.salt, Tokens: f.tokens}, c.put)
			if tc.cut == 0 {
				if err != nil || n != 80 || len(c.blocks) != 5 {
					t.Fatalf("restore: got %d tokens, %d blocks, %v; want 80, 5", n, len(c.blocks), err)
				}
				return
			}
			if n != 0 || !errors.Is(err, tier.ErrUnavailable) || errors.Is(err, pack.ErrRefused) {
				t.Fatalf("restore with a body cut short: got %d tokens, %v; want 0, ErrUnavailable, no refusal", n, err)
			}
			if len(c.blocks) == 5 {
				t.Fatal("put got every block, one of them from a body cut short")
			}
			if rs, _ := b.Receipts(store.ReceiptFilter{}); len(rs) != 0 {
				t.Fatalf("B holds %d receipts, want 0: a broken connection refuses nothing", len(rs))
			}
		})
	}
}
