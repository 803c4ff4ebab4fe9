package tier_test

import (
	"context"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/tier"
)

// forbidGet answers the GETs of one object (its key's suffix) with 403
// AccessDenied while on is set, as a bucket does for an object this
// node may list but not read (another tenant's ACL, an archived or
// customer-encrypted object).
type forbidGet struct {
	suffix string
	on     atomic.Bool
}

func (f *forbidGet) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.on.Load() && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, f.suffix) {
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`
		return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)), Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestIndexRefreshSkipsUnreadableManifest: one manifest object the
// bucket lists but will not serve (403) holds up neither the indexing of
// the others nor the refresh, and is indexed once it can be read.
func TestIndexRefreshSkipsUnreadableManifest(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	ids := []pack.Digest{f.pack}
	for i := range 2 {
		p := storetest.Publish(t, f.a, f.id, f.salt, packtest.Tokens(uint64(60+i), 32, 500), 96).Pack
		if _, err := f.tier.Upload(ctx, f.a, p); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p)
	}
	// The first manifest in the listing's order is the unreadable one.
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	cfg := f.config(testKey, "node-b")
	fg := &forbidGet{suffix: "/manifests/" + ids[0].String()}
	fg.on.Store(true)
	cfg.Transport = fg
	tr, err := tier.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ix := tier.NewIndex(tr)
	res, err := ix.Refresh(ctx)
	if err != nil || res.Added != 2 || ix.Len() != 2 {
		t.Fatalf("refresh with %s unreadable: got %+v, %v, %d packs indexed; want the other 2 indexed", ids[0].Short(), res, err, ix.Len())
	}
	if res.Unreadable != 1 || len(res.UnreadableErrs) != 1 {
		t.Errorf("refresh: got %d unreadable (%v), want 1", res.Unreadable, res.UnreadableErrs)
	}
	fg.on.Store(false)
	if res, err := ix.Refresh(ctx); err != nil || res.Added != 1 || ix.Len() != 3 {
		t.Fatalf("refresh once readable: got %+v, %v, %d packs indexed; want it added, 3 in all", res, err, ix.Len())
	}
}

// TestIndexReadsReplacedBadManifest: a manifest object that did not
// verify is ignored until it changes, not until the index is rebuilt:
// once it is replaced by the pack's valid manifest (a gc deleted the bad
// object and an uploader wrote the pack again, both between two
// refreshes), the next refresh indexes the pack.
func TestIndexReadsReplacedBadManifest(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	name := "manifests/" + f.pack.String()
	valid := f.object(t, name)
	bad := append([]byte(nil), valid...)
	bad[len(bad)-9] ^= 1
	f.putObject(t, name, bad)
	ix := tier.NewIndex(f.open(t, testKey, "node-b"))
	if res, err := ix.Refresh(ctx); err != nil || res.Bad != 1 || ix.Len() != 0 {
		t.Fatalf("refresh with a bad manifest: got %+v, %v, %d packs; want 1 bad, none indexed", res, err, ix.Len())
	}
	if res, err := ix.Refresh(ctx); err != nil || res.Bad != 0 || res.Added != 0 {
		t.Fatalf("refresh again: got %+v, %v; want the bad manifest not read again", res, err)
	}
	f.removeObject(t, name)
	f.putObject(t, name, valid)
	keys := pack.BlockKeys(f.id.Key(), pack.TenantTag(f.salt), f.tokens, 16)
	if res, err := ix.Refresh(ctx); err != nil || res.Added != 1 || ix.Len() != 1 {
		t.Fatalf("refresh after the manifest was replaced by a valid one: got %+v, %v, %d packs; want it added", res, err, ix.Len())
	}
	if p, d, ok := ix.Lookup(keys); !ok || p != f.pack || d != 5 {
		t.Fatalf("lookup: got %s, %d blocks, %v; want %s, 5", p.Short(), d, ok, f.pack.Short())
	}
}
