package tier_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/tier"
	"github.com/muserhq/muser/store/tier/tiertest"
)

// killer kills the S3 server as the nth request of method on a chunk
// object goes out: the server dies in the middle of a transfer.
type killer struct {
	srv    *tiertest.Server
	method string
	n      int32
	seen   atomic.Int32
}

func (k *killer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == k.method && strings.Contains(r.URL.Path, "/chunks/") && k.seen.Add(1) == k.n {
		k.srv.Stop()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestServerKilledMidUpload(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a := storetest.Open(t, "", store.Options{Node: "node-a", BlockTokens: 16})
	id := packtest.Identity("kill")
	p := storetest.Publish(t, a, id, nil, packtest.Tokens(3, 16*6, 500), 80).Pack
	cfg := e.config(testKey, "node-a")
	cfg.Transport = &killer{srv: e.srv, method: http.MethodPut, n: 3}
	tr, err := tier.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Upload(ctx, a, p); !errors.Is(err, tier.ErrUnavailable) {
		t.Fatalf("upload with the server killed: got %v, want ErrUnavailable", err)
	}
	e.srv.Restart()
	good := e.open(t, testKey, "node-a")
	rep, err := good.Verify(ctx, tier.VerifyOptions{})
	if err != nil || rep.Packs != 0 || len(rep.Findings) != 0 {
		t.Fatalf("after the interrupted upload: got %+v, %v; want no manifest (chunks alone are invisible)", rep, err)
	}
	res, err := good.Upload(ctx, a, p)
	if err != nil || res.Existed || res.ChunksPut+res.ChunksHeld != 6 {
		t.Fatalf("upload again: got %+v, %v; want the manifest written over 6 chunks", res, err)
	}
	if rep, err := good.Verify(ctx, tier.VerifyOptions{}); err != nil || rep.Packs != 1 || len(rep.Findings) != 0 {
		t.Fatalf("verify: got %+v, %v; want 1 sound pack", rep, err)
	}
}

func TestServerKilledMidRestore(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16})
	cfg := f.config(testKey, "node-b")
	cfg.Transport = &killer{srv: f.srv, method: http.MethodGet, n: 3}
	tr, err := tier.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Install(ctx, b, f.pack, f.id)
	if !errors.Is(err, tier.ErrUnavailable) || errors.Is(err, pack.ErrRefused) {
		t.Fatalf("install with the server killed: got %v, want ErrUnavailable and no refusal", err)
	}
	if ps, _ := b.Packs(); len(ps) != 0 {
		t.Fatalf("B holds %d packs after the interrupted install, want 0", len(ps))
	}
	if rs, _ := b.Receipts(store.ReceiptFilter{}); len(rs) != 0 {
		t.Fatalf("B holds %d receipts, want 0: an unreachable tier refuses nothing", len(rs))
	}
	if n, _ := restoreAll(t, b, f.id, f.salt, f.tokens); n != 0 {
		t.Fatalf("B restores %d tokens, want 0", n)
	}
	storetest.Check(t, b)
	f.srv.Restart()
	res, err := f.open(t, testKey, "node-b").Install(ctx, b, f.pack, f.id)
	if err != nil || !res.New {
		t.Fatalf("install after the restart: got %+v, %v", res, err)
	}
	if n, _ := restoreAll(t, b, f.id, f.salt, f.tokens); n != 80 {
		t.Fatalf("B restores %d tokens, want 80", n)
	}
	storetest.Check(t, b)
}
