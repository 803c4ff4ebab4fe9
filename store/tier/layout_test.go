package tier_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/tier"
)

// A key under manifests/ that is not manifests/HEX (here a copy of a
// valid manifest object filed under a folder) is no pack: verify reports
// the folder once and counts one pack.
func TestVerifyFolderUnderManifests(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	obj := f.object(t, "manifests/"+f.pack.String())
	f.putObject(t, "manifests/backup/manifests/"+f.pack.String(), obj)
	rep, err := f.tier.Verify(ctx, tier.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Packs != 1 || len(rep.Findings) != 1 {
		t.Fatalf("verify: got %d packs and findings %v; want 1 pack and 1 finding (manifests/backup/manifests/%s: not a pack ID)",
			rep.Packs, rep.Findings, f.pack.Short())
	}
}

// A tier at s3://BUCKET/fleet/a leaves alone the objects of a tier at
// s3://BUCKET/fleet/a/chunks (ParseURL accepts both): they are not its
// chunks.
func TestGCLeavesNestedTierAlone(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t) // a pack in tier fleet/a
	nested := *f.env
	nested.prefix = f.prefix + "/chunks"
	y := nested.open(t, testKey, "node-y")
	p2 := storetest.Publish(t, f.a, f.id, f.salt, packtest.Tokens(42, 48, 500), 96).Pack
	if _, err := y.Upload(ctx, f.a, p2); err != nil {
		t.Fatal(err)
	}
	if vr, err := y.Verify(ctx, tier.VerifyOptions{}); err != nil || len(vr.Findings) != 0 || vr.Packs != 1 {
		t.Fatalf("nested tier before gc: %+v, %v", vr, err)
	}
	cfg := f.config(testKey, "gc")
	cfg.Now = func() time.Time { return time.Now().Add(tier.MinGrace + time.Minute) }
	g, err := tier.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := g.GC(ctx, tier.GCOptions{MaxBytes: tier.NoBudget})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Chunks == 0 {
		t.Fatalf("gc of fleet/a listed no chunks of its own: %+v", rep)
	}
	vr, err := y.Verify(ctx, tier.VerifyOptions{})
	if err != nil || len(vr.Findings) != 0 || vr.Packs != 1 {
		t.Fatalf("nested tier fleet/a/chunks after a gc of fleet/a: got %d packs, findings %v (%v); want its pack whole", vr.Packs, vr.Findings, err)
	}
}

// Rule G4: a gc that has run MaxGCTime deletes nothing more, manifests
// (evictions) included.
func TestGCEvictsNothingPastMaxGCTime(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	calls := 0
	cfg := f.config(testKey, "gc")
	cfg.Now = func() time.Time {
		calls++
		if calls == 1 {
			return time.Now()
		}
		return time.Now().Add(tier.MaxGCTime + time.Minute) // the mark phase took over MaxGCTime
	}
	g, err := tier.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := g.GC(ctx, tier.GCOptions{MaxBytes: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Evicted) != 0 {
		t.Fatalf("gc past MaxGCTime evicted %v (stopped=%v); want nothing deleted", rep.Evicted, rep.Stopped)
	}
}

// deleteBeforeGet deletes the object a GET is for just before the GET is
// sent, as a concurrent gc on another node would.
type deleteBeforeGet struct {
	e    *env
	part string
	done bool
}

func (d *deleteBeforeGet) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, d.part) && !d.done {
		d.done = true
		key := strings.TrimPrefix(r.URL.Path, "/"+d.e.bucket+"/")
		_ = d.e.srv.Client().RemoveObject(context.Background(), d.e.bucket, key, minio.RemoveObjectOptions{})
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A manifest evicted by another node's gc between Verify's listing and
// its GET is gone, not a fault: verify of a sound tier finds nothing.
func TestVerifyManifestGoneAfterListing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	cfg := f.config(testKey, "verify")
	cfg.Transport = &deleteBeforeGet{e: f.env, part: "/manifests/"}
	v, err := tier.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := v.Verify(ctx, tier.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 0 {
		t.Fatalf("verify: got findings %v; want none (the manifest was deleted, as gc does)", rep.Findings)
	}
}

// reuploadBeforeDelete: before gc's first HEAD or DELETE of a manifest key
// after its listing, another node's gc deletes the bad object there and an
// uploader writes the pack's valid manifest in its place (a conditional
// put on an absent key).
type reuploadBeforeDelete struct {
	e     *env
	part  string
	valid []byte
	done  bool
}

func (d *reuploadBeforeDelete) RoundTrip(r *http.Request) (*http.Response, error) {
	if (r.Method == http.MethodDelete || r.Method == http.MethodHead) && strings.Contains(r.URL.Path, d.part) && !d.done {
		d.done = true
		key := strings.TrimPrefix(r.URL.Path, "/"+d.e.bucket+"/")
		cl := d.e.srv.Client()
		_ = cl.RemoveObject(context.Background(), d.e.bucket, key, minio.RemoveObjectOptions{})
		var o minio.PutObjectOptions
		o.SetMatchETagExcept("*")
		_, _ = cl.PutObject(context.Background(), d.e.bucket, key, bytes.NewReader(d.valid), int64(len(d.valid)), o)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A manifest object that did not verify when gc listed it, and was
// replaced since by a valid upload of the pack, is not deleted: gc checks
// its time again (as rule G4 does for chunks) before deleting it.
func TestGCKeepsManifestReuploadedSinceListing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	// Another pack, so that the gc's key is seen to be right.
	p2 := storetest.Publish(t, f.a, f.id, f.salt, packtest.Tokens(43, 32, 500), 96).Pack
	if _, err := f.tier.Upload(ctx, f.a, p2); err != nil {
		t.Fatal(err)
	}
	name := "manifests/" + f.pack.String()
	valid := f.object(t, name)
	bad := append([]byte(nil), valid...)
	bad[len(bad)-9] ^= 1
	f.putObject(t, name, bad)
	cfg := f.config(testKey, "gc")
	cfg.Now = func() time.Time { return time.Now().Add(tier.MinGrace + time.Minute) }
	cfg.Transport = &reuploadBeforeDelete{e: f.env, part: "/" + name, valid: valid}
	g, err := tier.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := g.GC(ctx, tier.GCOptions{MaxBytes: tier.NoBudget})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := f.tier.Manifest(ctx, f.pack); err != nil {
		t.Fatalf("after gc (%+v): the valid manifest uploaded during the gc is gone: %v", rep, err)
	}
}

// Keys under chunks/ that are not chunks/HEX (a README, an interrupted
// copy's temporary file, a digest in upper case or with a suffix) are not
// the layout's: gc past the grace period neither counts them as chunks
// nor deletes them, while it still sweeps a real unreferenced chunk.
func TestGCLeavesStrayKeysUnderChunks(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t) // one pack of 5 chunks of 96 bytes
	hex := f.m.Chunks[0].ID.String()
	strays := map[string][]byte{
		"chunks/README":                  []byte("chunks of the fleet tier; do not edit\n"),
		"chunks/abc.tmp":                 []byte("half a chunk"),
		"chunks/" + strings.ToUpper(hex): f.object(t, "chunks/"+hex),
		"chunks/" + hex + ".bak":         f.object(t, "chunks/"+hex),
		"chunks/" + hex[:len(hex)-1]:     []byte("63 digits"),
	}
	for name, data := range strays {
		f.putObject(t, name, data)
	}
	orphan := []byte("a chunk no manifest names")
	f.putObject(t, "chunks/"+pack.ChunkID(orphan).String(), orphan)

	cfg := f.config(testKey, "gc")
	cfg.Now = func() time.Time { return time.Now().Add(tier.MinGrace + time.Minute) }
	g, err := tier.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := g.GC(ctx, tier.GCOptions{MaxBytes: tier.NoBudget})
	if err != nil {
		t.Fatal(err)
	}
	want := tier.GCReport{Packs: 1, Chunks: 6, Bytes: 5*96 + int64(len(orphan)), Strays: len(strays),
		DeletedChunks: 1, DeletedBytes: int64(len(orphan))}
	if rep.Packs != want.Packs || rep.Chunks != want.Chunks || rep.Bytes != want.Bytes || rep.Strays != want.Strays ||
		rep.DeletedChunks != want.DeletedChunks || rep.DeletedBytes != want.DeletedBytes {
		t.Errorf("gc: got %+v; want %+v (the orphan chunk deleted, the stray keys counted apart)", rep, want)
	}
	for name, data := range strays {
		if got := f.object(t, name); !bytes.Equal(got, data) {
			t.Errorf("after gc: %s holds %q; want it untouched (%d bytes)", name, got, len(data))
		}
	}
	if vr, err := g.Verify(ctx, tier.VerifyOptions{}); err != nil || len(vr.Findings) != 0 || vr.Packs != 1 {
		t.Fatalf("verify after gc: got %+v, %v; want the pack whole", vr, err)
	}
}

// Keys under manifests/ that are not manifests/HEX (a README, a
// temporary file) are no manifests: with every pack evicted they are not
// "manifests that do not verify under the key", so gc past the grace
// period does not stop with ErrWrongKey and sweeps the evicted pack's
// chunks.
func TestGCStrayKeysUnderManifestsAreNoWrongKey(t *testing.T) {
	for _, name := range []string{"README", "upload.tmp", "not-hex-" + strings.Repeat("z", 56)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t) // one pack of 5 chunks of 96 bytes
			if rep, err := f.tier.GC(ctx, tier.GCOptions{MaxBytes: 0}); err != nil || len(rep.Evicted) != 1 {
				t.Fatalf("evict: got %+v, %v; want the pack evicted", rep, err)
			}
			f.putObject(t, "manifests/"+name, []byte("notes on this tier\n"))
			cfg := f.config(testKey, "gc")
			cfg.Now = func() time.Time { return time.Now().Add(tier.MinGrace + time.Minute) }
			g, err := tier.Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := g.GC(ctx, tier.GCOptions{MaxBytes: tier.NoBudget})
			if err != nil || rep.DeletedChunks != 5 {
				t.Fatalf("gc with manifests/%s and no pack: got %+v, %v; want the 5 unreferenced chunks deleted", name, rep, err)
			}
		})
	}
}
