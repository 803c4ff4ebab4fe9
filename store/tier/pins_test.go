package tier_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/tier"
)

// TestPinPack: pins are named by a unique ID prefix of a pack the tier
// holds and verifies; an unpin also clears a pin whose manifest is gone;
// and the errors say not found, ambiguous or not hex.
func TestPinPack(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	pinned := func(id pack.Digest) bool {
		t.Helper()
		ps, err := f.tier.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Pack == id {
				return p.Pinned
			}
		}
		t.Fatalf("pack %s is not listed", id.Short())
		return false
	}
	short := f.pack.String()[:6]
	res, err := f.tier.PinPack(ctx, short, true)
	if err != nil || res.Pack != f.pack || !res.Pinned || res.Was {
		t.Fatalf("pin %s: got %+v, %v; want pack %s pinned, not before", short, res, err, f.pack.Short())
	}
	if !pinned(f.pack) {
		t.Fatal("the pinned pack is listed unpinned")
	}
	if res, err = f.tier.PinPack(ctx, f.pack.String(), true); err != nil || !res.Was {
		t.Fatalf("pin again: got %+v, %v; want it already pinned", res, err)
	}
	if res, err = f.tier.PinPack(ctx, short, false); err != nil || res.Pinned || !res.Was {
		t.Fatalf("unpin: got %+v, %v; want unpinned, pinned before", res, err)
	}
	if pinned(f.pack) {
		t.Fatal("the unpinned pack is listed pinned")
	}
	// A pin whose manifest is gone (evicted): pin refuses, unpin clears.
	if err := f.tier.Pin(ctx, f.pack); err != nil {
		t.Fatal(err)
	}
	f.removeObject(t, "manifests/"+f.pack.String())
	if _, err := f.tier.PinPack(ctx, short, true); !errors.Is(err, store.ErrNotFound) || !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("pin of a pack not in the tier: got %v, want ErrNotFound", err)
	}
	if res, err = f.tier.PinPack(ctx, short, false); err != nil || res.Pack != f.pack || !res.Was {
		t.Fatalf("unpin of a dangling pin: got %+v, %v; want it cleared", res, err)
	}
	if _, err := f.tier.PinPack(ctx, short, false); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unpin once the pin is gone: got %v, want ErrNotFound", err)
	}
	// A pack whose manifest does not verify cannot be pinned.
	p2 := storetest.Publish(t, f.a, f.id, f.salt, packtest.Tokens(31, 32, 500), 96).Pack
	if _, err := f.tier.Upload(ctx, f.a, p2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.open(t, []byte("another cluster's tier key, 32 b"), "x").PinPack(ctx, p2.String(), true); !errors.Is(err, pack.ErrCorrupt) {
		t.Fatalf("pin under another key: got %v, want the seal's refusal", err)
	}
	for _, tc := range []struct {
		prefix string
		is     error
	}{
		{"", pack.ErrInvalid},
		{"xyz", pack.ErrInvalid},
		{p2.String() + "0", pack.ErrInvalid},
		{otherID(p2), store.ErrNotFound},
	} {
		if _, err := f.tier.PinPack(ctx, tc.prefix, true); !errors.Is(err, tc.is) {
			t.Errorf("pin %q: got %v, want %v", tc.prefix, err, tc.is)
		}
	}
	// Two pins whose IDs share a prefix: unpin by that prefix is
	// ambiguous and names both.
	a, b := "ab"+p2.String()[2:], "ab"+f.pack.String()[2:]
	f.putObject(t, "pins/"+a, nil)
	f.putObject(t, "pins/"+b, nil)
	if _, err := f.tier.PinPack(ctx, "ab", false); !errors.Is(err, store.ErrAmbiguousID) {
		t.Errorf("unpin of an ambiguous prefix: got %v, want ErrAmbiguousID", err)
	}
	if res, err := f.tier.PinPack(ctx, a[:8], false); err != nil || res.Pack.String() != a {
		t.Errorf("unpin %s: got %+v, %v; want pin %s cleared", a[:8], res, err, a[:8])
	}
}

// otherID is id in hex with its last digit changed.
func otherID(id pack.Digest) string {
	h := id.String()
	if h[63] == '0' {
		return h[:63] + "1"
	}
	return h[:63] + "0"
}

// TestGCEvictsLeastRecentlyUsed: a pack installed by a node after a newer
// pack was uploaded is the more recently used; a budget for one pack
// evicts the other, whose use marker goes with it, and List reports each
// pack's last use.
func TestGCEvictsLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	// p2: uploaded after f.pack, sharing no chunks; B also finds it in
	// the tier when it makes it (a use).
	toks2 := packtest.Tokens(9, 48, 500)
	p2 := storetest.Publish(t, f.a, f.id, f.salt, toks2, 96).Pack
	if _, err := f.tier.Upload(ctx, f.a, p2); err != nil {
		t.Fatal(err)
	}
	if res, err := f.tier.Upload(ctx, f.a, p2); err != nil || !res.Existed {
		t.Fatalf("upload again: got %+v, %v; want it found in the tier", res, err)
	}
	cl := f.srv.Client()
	modified := func(name string) time.Time {
		t.Helper()
		st, err := cl.StatObject(ctx, f.bucket, f.prefix+"/"+name, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return st.LastModified
	}
	// Node B installs f.pack until its use marker is later than p2's
	// (object times have a resolution of a second on many servers: this
	// polls the marker's time, it sets no limit).
	b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16})
	tb := f.open(t, testKey, "node-b")
	for {
		if _, err := b.Remove(f.pack); err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		res, err := tb.Install(ctx, b, f.pack, f.id)
		if err != nil || !res.UseRecorded {
			t.Fatalf("install: got %+v, %v; want it installed and its use recorded", res, err)
		}
		if modified("uses/" + f.pack.String()).After(modified("uses/" + p2.String())) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	ps, err := f.tier.List(ctx)
	if err != nil || len(ps) != 2 {
		t.Fatalf("list: %d packs, %v; want 2", len(ps), err)
	}
	for _, p := range ps {
		if p.LastUse < p.Modified {
			t.Errorf("pack %s: last use %s before its upload %s", p.Pack.Short(), p.LastUse, p.Modified)
		}
	}
	// Room for one pack's chunks: the least recently used, p2, goes,
	// though f.pack was uploaded first; p2's use marker goes with it.
	rep, err := f.tier.GC(ctx, tier.GCOptions{MaxBytes: 5 * 96, DryRun: true})
	if err != nil || len(rep.Evicted) != 1 || rep.Evicted[0] != p2 {
		t.Fatalf("dry-run gc: got %+v, %v; want %s evicted", rep, err, p2.Short())
	}
	if _, err := cl.StatObject(ctx, f.bucket, f.prefix+"/uses/"+p2.String(), minio.StatObjectOptions{}); err != nil {
		t.Fatalf("a dry run deleted the use marker: %v", err)
	}
	rep, err = f.tier.GC(ctx, tier.GCOptions{MaxBytes: 5 * 96})
	if err != nil || len(rep.Evicted) != 1 || rep.Evicted[0] != p2 || rep.StaleUses != 1 {
		t.Fatalf("gc: got %+v, %v; want %s evicted and its use marker deleted", rep, err, p2.Short())
	}
	if _, err := cl.StatObject(ctx, f.bucket, f.prefix+"/uses/"+p2.String(), minio.StatObjectOptions{}); minio.ToErrorResponse(err).StatusCode != 404 {
		t.Fatalf("use marker of the evicted pack: got %v, want 404", err)
	}
	// A budget of zero evicts every unpinned pack, as in the local store.
	if err := f.tier.Pin(ctx, f.pack); err != nil {
		t.Fatal(err)
	}
	rep, err = f.tier.GC(ctx, tier.GCOptions{MaxBytes: 0})
	if err != nil || len(rep.Evicted) != 0 || rep.Pinned != 1 || rep.Packs != 1 {
		t.Fatalf("gc with a zero budget and the last pack pinned: got %+v, %v; want it kept", rep, err)
	}
	if _, err := f.tier.PinPack(ctx, f.pack.String(), false); err != nil {
		t.Fatal(err)
	}
	rep, err = f.tier.GC(ctx, tier.GCOptions{MaxBytes: 0})
	if err != nil || len(rep.Evicted) != 1 || rep.Evicted[0] != f.pack || rep.StaleUses != 1 {
		t.Fatalf("gc with a zero budget: got %+v, %v; want %s evicted with its use marker", rep, err, f.pack.Short())
	}
	// A use marker of a pack not in the tier (put while gc evicted it)
	// stays while younger than the grace period, then goes.
	stray := "uses/" + otherID(f.pack)
	f.putObject(t, stray, nil)
	if rep, err = f.tier.GC(ctx, tier.GCOptions{MaxBytes: tier.NoBudget}); err != nil || rep.StaleUses != 0 {
		t.Fatalf("gc with a young stray use marker: got %+v, %v; want it kept", rep, err)
	}
	cfg := f.config(testKey, "gc")
	cfg.Now = func() time.Time { return time.Now().Add(tier.MinGrace + time.Minute) }
	late, err := tier.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err = late.GC(ctx, tier.GCOptions{MaxBytes: tier.NoBudget}); err != nil || rep.StaleUses != 1 {
		t.Fatalf("gc past the grace period: got %+v, %v; want the stray use marker deleted", rep, err)
	}
	if _, err := cl.StatObject(ctx, f.bucket, f.prefix+"/"+stray, minio.StatObjectOptions{}); minio.ToErrorResponse(err).StatusCode != 404 {
		t.Fatalf("stray use marker after gc: got %v, want 404", err)
	}
}
