package tier_test

import (
	"context"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store/tier"
)

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
