package tier_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/tier"
)

func TestVerifyNamesEveryFault(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rep, err := f.tier.Verify(ctx, tier.VerifyOptions{Expect: &f.id})
	if err != nil || len(rep.Findings) != 0 || rep.Packs != 1 || rep.Chunks != 5 {
		t.Fatalf("verify of a sound tier: got %+v, %v; want 1 pack, 5 chunks, no findings", rep, err)
	}
	// A second pack whose manifest is then sealed with a foreign key.
	toks2 := packtest.Tokens(8, 32, 500)
	p2 := storetest.Publish(t, f.a, f.id, f.salt, toks2, 96).Pack
	if _, err := f.tier.Upload(ctx, f.a, p2); err != nil {
		t.Fatal(err)
	}
	m2, _ := f.a.Manifest(p2)
	mb2, _ := m2.Marshal()
	seal, _ := pack.NewSeal([]byte("a foreign key, not the cluster's"), p2, "mallory", 1, [pack.NonceSize]byte{})
	obj, _ := tier.EncodeObject(seal, mb2)
	f.putObject(t, "manifests/"+p2.String(), obj)
	f.removeObject(t, "chunks/"+f.m.Chunks[0].ID.String())
	c1 := f.object(t, "chunks/"+f.m.Chunks[1].ID.String())
	f.putObject(t, "chunks/"+f.m.Chunks[1].ID.String(), c1[:10])
	c2 := f.object(t, "chunks/"+f.m.Chunks[2].ID.String())
	c2[0] ^= 0x80
	f.putObject(t, "chunks/"+f.m.Chunks[2].ID.String(), c2)
	rep, err = f.tier.Verify(ctx, tier.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		key  string
		pack pack.Digest
		is   error
		text string
	}{
		{"manifests/" + p2.String(), p2, pack.ErrRefused, "seal"},
		{"chunks/" + f.m.Chunks[0].ID.String(), f.pack, tier.ErrNotFound, "missing"},
		{"chunks/" + f.m.Chunks[1].ID.String(), f.pack, pack.ErrCorrupt, "truncated"},
		{"chunks/" + f.m.Chunks[2].ID.String(), f.pack, pack.ErrCorrupt, "digest"},
	}
	if len(rep.Findings) != len(want) {
		t.Fatalf("findings: got %d (%v), want %d", len(rep.Findings), rep.Findings, len(want))
	}
	for i, w := range want {
		g := rep.Findings[i]
		if !strings.HasSuffix(g.Key, w.key) || g.Pack != w.pack || !errors.Is(g, w.is) || !strings.Contains(g.Error(), w.text) {
			t.Errorf("finding %d: got %v (key %s), want %s of pack %s, %v, mentioning %q", i, g, g.Key, w.key, w.pack.Short(), w.is, w.text)
		}
	}
}

func TestListAndPins(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.tier.Pin(ctx, f.pack); err != nil {
		t.Fatal(err)
	}
	ps, err := f.tier.List(ctx)
	if err != nil || len(ps) != 1 {
		t.Fatalf("list: got %v, %v; want one pack", ps, err)
	}
	p := ps[0]
	if p.Pack != f.pack || p.Tokens != 80 || p.Blocks != 5 || p.Producer != "node-a" || p.Uploader != "node-a" || !p.Pinned || p.Err != "" {
		t.Fatalf("list: got %+v, want pack %s, 80 tokens, 5 blocks, node-a, pinned", p, f.pack.Short())
	}
}

func TestGC(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	// A second, later pack sharing no chunks.
	toks2 := packtest.Tokens(9, 48, 500)
	p2 := storetest.Publish(t, f.a, f.id, f.salt, toks2, 96).Pack
	if _, err := f.tier.Upload(ctx, f.a, p2); err != nil {
		t.Fatal(err)
	}
	later := func(d time.Duration) *tier.Tier {
		cfg := f.config(testKey, "gc")
		cfg.Now = func() time.Time { return time.Now().Add(d) }
		tr, err := tier.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	// A collector with the wrong key sees no manifest verify: it refuses
	// to delete anything.
	wrong := f.open(t, []byte("another cluster's tier key, 32 b"), "gc")
	if rep, err := wrong.GC(ctx, tier.GCOptions{MaxBytes: 1}); !errors.Is(err, tier.ErrWrongKey) || rep.BadManifests != 2 {
		t.Fatalf("gc with the wrong key: got %+v, %v; want ErrWrongKey with 2 bad manifests", rep, err)
	}
	if _, err := f.tier.GC(ctx, tier.GCOptions{Grace: time.Hour}); err == nil {
		t.Fatal("gc with a grace shorter than MinGrace: got nil, want an error")
	}
	// Within budget: nothing happens.
	rep, err := f.tier.GC(ctx, tier.GCOptions{MaxBytes: 1 << 30})
	if err != nil || len(rep.Evicted) != 0 || rep.DeletedChunks != 0 || rep.Packs != 2 || rep.Chunks != 8 {
		t.Fatalf("gc within budget: got %+v, %v; want 2 packs, 8 chunks, nothing done", rep, err)
	}
	// Over budget (room for 3 chunks): the older pack goes, but its
	// chunks are younger than the grace period and stay.
	rep, err = f.tier.GC(ctx, tier.GCOptions{MaxBytes: 3 * 96})
	if err != nil || len(rep.Evicted) != 1 || rep.Evicted[0] != f.pack || rep.DeletedChunks != 0 || rep.Young != 5 {
		t.Fatalf("gc over budget: got %+v, %v; want %s evicted, 5 young chunks kept", rep, err, f.pack.Short())
	}
	// A dry run past the grace period deletes nothing but counts 5.
	g := later(tier.MinGrace + time.Minute)
	rep, err = g.GC(ctx, tier.GCOptions{MaxBytes: tier.NoBudget, DryRun: true})
	if err != nil || rep.DeletedChunks != 5 {
		t.Fatalf("dry-run gc after the grace period: got %+v, %v; want 5 chunks", rep, err)
	}
	rep, err = g.GC(ctx, tier.GCOptions{MaxBytes: tier.NoBudget})
	if err != nil || rep.DeletedChunks != 5 || rep.DeletedBytes != 5*96 || rep.Packs != 1 {
		t.Fatalf("gc after the grace period: got %+v, %v; want 5 chunks (480 bytes) deleted, 1 pack left", rep, err)
	}
	vr, err := f.tier.Verify(ctx, tier.VerifyOptions{})
	if err != nil || len(vr.Findings) != 0 || vr.Packs != 1 || vr.Chunks != 3 {
		t.Fatalf("verify after gc: got %+v, %v; want the surviving pack whole", vr, err)
	}
	// A pinned pack survives any budget.
	if err := f.tier.Pin(ctx, p2); err != nil {
		t.Fatal(err)
	}
	rep, err = g.GC(ctx, tier.GCOptions{MaxBytes: 1})
	if err != nil || len(rep.Evicted) != 0 || rep.Pinned != 1 {
		t.Fatalf("gc of a pinned pack: got %+v, %v; want it kept", rep, err)
	}
}

// TestGCSparesChunksAnUploadReuses is rule G1: an uploader that finds a
// chunk older than RefreshAge re-puts it, so a gc running later does not
// delete a chunk a new manifest names.
func TestGCSparesChunksAnUploadReuses(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	late := func(d time.Duration, producer string) *tier.Tier {
		cfg := f.config(testKey, producer)
		cfg.Now = func() time.Time { return time.Now().Add(d) }
		tr, err := tier.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	// Evict the pack: its chunks are now unreferenced.
	if rep, err := f.tier.GC(ctx, tier.GCOptions{MaxBytes: 1}); err != nil || len(rep.Evicted) != 1 {
		t.Fatalf("evict: got %+v, %v", rep, err)
	}
	// Seven hours later (past RefreshAge) a node uploads the same pack
	// again: it must re-put every chunk rather than rely on them.
	res, err := late(7*time.Hour, "node-c").Upload(ctx, f.a, f.pack)
	if err != nil || res.ChunksPut != 5 || res.ChunksHeld != 0 {
		t.Fatalf("upload after RefreshAge: got %+v, %v; want 5 chunks re-put", res, err)
	}
	// A gc past the grace period keeps them: the manifest names them.
	g := late(tier.MinGrace+time.Minute, "gc")
	if rep, err := g.GC(ctx, tier.GCOptions{MaxBytes: tier.NoBudget}); err != nil || rep.DeletedChunks != 0 || rep.Packs != 1 {
		t.Fatalf("gc: got %+v, %v; want nothing deleted", rep, err)
	}
	vr, err := g.Verify(ctx, tier.VerifyOptions{})
	if err != nil || len(vr.Findings) != 0 || vr.Chunks != 5 {
		t.Fatalf("verify: got %+v, %v; want the pack whole", vr, err)
	}
}

func TestUploaderQueue(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a := storetest.Open(t, "", store.Options{Node: "node-a", BlockTokens: 16})
	id := packtest.Identity("q")
	var packs []pack.Digest
	for i := range 4 {
		packs = append(packs, storetest.Publish(t, a, id, nil, packtest.Tokens(uint64(100+i), 32, 500), 64).Pack)
	}
	// A server that is down: the uploader retries, then gives up.
	e.srv.Stop()
	u := tier.NewUploader(e.open(t, testKey, "node-a"), a, tier.UploaderOptions{Queue: 3, Attempts: 2, Backoff: time.Millisecond})
	for _, p := range packs[:3] {
		if err := u.Enqueue(p); err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
	if err := u.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if st := u.Stats(); st.Uploaded != 0 || st.Dropped != 3 || st.Retries != 3 {
		t.Fatalf("with the server down: got %+v, want 3 dropped after 3 retries", st)
	}
	if err := u.Enqueue(packs[3]); !errors.Is(err, tier.ErrClosed) {
		t.Fatalf("enqueue after close: got %v, want ErrClosed", err)
	}
	// Back up: everything queued is flushed by Close.
	e.srv.Restart()
	tr := e.open(t, testKey, "node-a")
	u = tier.NewUploader(tr, a, tier.UploaderOptions{Queue: 8, Backoff: time.Millisecond})
	for _, p := range packs {
		if err := u.Enqueue(p); err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
	if err := u.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if st := u.Stats(); st.Uploaded != 4 || st.Dropped != 0 || st.Bytes != 4*2*64 {
		t.Fatalf("flush: got %+v, want 4 uploaded, %d bytes", st, 4*2*64)
	}
	ls, err := tr.List(ctx)
	if err != nil || len(ls) != 4 {
		t.Fatalf("list after flush: got %d packs (%v), want 4", len(ls), err)
	}
}

func TestReadThrough(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16})
	rt := tier.NewReadThrough(f.open(t, testKey, "node-b"), b, tier.ReadThroughOptions{})
	if err := rt.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// A prompt extending A's pack by more tokens: the tier supplies the
	// 80 it holds.
	prompt := append(append([]int32(nil), f.tokens...), 1, 2, 3)
	if got, res := rt.Read(ctx, f.id, f.salt, prompt); got != tier.OutcomeHit || res.Tokens != 80 {
		t.Fatalf("first read: got %s %+v, want a hit of 80 tokens", got, res)
	}
	if n, _ := restoreAll(t, b, f.id, f.salt, prompt); n != 80 {
		t.Fatalf("restored %d tokens after the hit, want 80", n)
	}
	// Now the store holds it: a miss, without a request to the tier.
	if rt.Holds(f.id, f.salt, prompt) {
		t.Fatal("Holds after the install: got true, want false (the store holds the pack)")
	}
	if got, _ := rt.Read(ctx, f.id, f.salt, prompt); got != tier.OutcomeMiss {
		t.Fatalf("second read: got %s, want miss", got)
	}
	// A prefix of 2 blocks of it is served by the same pack.
	c := storetest.Open(t, "", store.Options{Node: "node-c", BlockTokens: 16})
	rc := tier.NewReadThrough(f.open(t, testKey, "node-c"), c, tier.ReadThroughOptions{})
	if err := rc.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := rc.Read(ctx, f.id, []byte("tenant-2"), prompt); got != tier.OutcomeMiss {
		t.Fatalf("another tenant: got %s, want miss", got)
	}
	if got, _ := rc.Read(ctx, packtest.Identity("other"), f.salt, prompt); got != tier.OutcomeMiss {
		t.Fatalf("another identity: got %s, want miss", got)
	}
	// The server down: unavailable.
	if !rc.Holds(f.id, f.salt, prompt) {
		t.Fatal("Holds before the read: got false, want true")
	}
	f.srv.Stop()
	if got, _ := rc.Read(ctx, f.id, f.salt, prompt); got != tier.OutcomeUnavailable {
		t.Fatalf("server down: got %s, want unavailable", got)
	}
	if rc.Holds(f.id, f.salt, prompt) {
		t.Fatal("Holds while the tier is skipped: got true, want false")
	}
	if got, _ := rc.Read(ctx, f.id, f.salt, prompt); got != tier.OutcomeUnavailable {
		t.Fatalf("read while the tier is skipped: got %s, want unavailable", got)
	}
	stats, _ := rc.Stats()
	if stats[tier.OutcomeUnavailable] != 2 || stats[tier.OutcomeMiss] != 2 {
		t.Fatalf("stats: got %v, want 2 unavailable, 2 misses", stats)
	}
	if n, _ := restoreAll(t, c, f.id, f.salt, prompt); n != 0 {
		t.Fatalf("C restored %d tokens with the tier down, want 0", n)
	}
}

// TestReadThroughConcurrent: requests for the same prompt at once
// install the pack once.
func TestReadThroughConcurrent(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16})
	rt := tier.NewReadThrough(f.open(t, testKey, "node-b"), b, tier.ReadThroughOptions{})
	if err := rt.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { rt.Read(ctx, f.id, f.salt, f.tokens) })
	}
	wg.Wait()
	stats, bytes := rt.Stats()
	if stats[tier.OutcomeHit] != 1 || stats[tier.OutcomeMiss] != 3 || bytes != 5*96 {
		t.Fatalf("4 concurrent reads: got %v and %d bytes fetched, want 1 hit, 3 misses, %d bytes", stats, bytes, 5*96)
	}
	if n, _ := restoreAll(t, b, f.id, f.salt, f.tokens); n != 80 {
		t.Fatalf("restored %d tokens, want 80", n)
	}
}

// TestIndexDropRepoints: when the manifest serving a prefix disappears,
// a refresh points its block keys at another pack holding them.
func TestIndexDropRepoints(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	short := storetest.Publish(t, f.a, f.id, f.salt, f.tokens[:48], 96).Pack
	if _, err := f.tier.Upload(ctx, f.a, short); err != nil {
		t.Fatal(err)
	}
	ix := tier.NewIndex(f.tier)
	if res, err := ix.Refresh(ctx); err != nil || res.Added != 2 {
		t.Fatalf("refresh: got %+v, %v; want 2 added", res, err)
	}
	keys := pack.BlockKeys(f.id.Key(), pack.TenantTag(f.salt), f.tokens, 16)
	if p, d, ok := ix.Lookup(keys); !ok || p != f.pack || d != 5 {
		t.Fatalf("lookup: got %s, %d blocks, %v; want %s, 5", p.Short(), d, ok, f.pack.Short())
	}
	if p, d, ok := ix.Lookup(keys[:3]); !ok || p != f.pack || d != 3 {
		t.Fatalf("lookup of 3 blocks: got %s, %d, %v; want the longer pack %s, 3", p.Short(), d, ok, f.pack.Short())
	}
	f.removeObject(t, "manifests/"+f.pack.String())
	if res, err := ix.Refresh(ctx); err != nil || res.Removed != 1 || ix.Len() != 1 {
		t.Fatalf("refresh after the removal: got %+v, %v, %d packs; want 1 removed, 1 left", res, err, ix.Len())
	}
	if p, d, ok := ix.Lookup(keys); !ok || p != short || d != 3 {
		t.Fatalf("lookup after the removal: got %s, %d blocks, %v; want %s, 3", p.Short(), d, ok, short.Short())
	}
}

// TestReadThroughCloseWithoutStart: Close of a read-through never started
// returns at once rather than after its Timeout.
func TestReadThroughCloseWithoutStart(t *testing.T) {
	f := newFixture(t)
	b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16})
	rt := tier.NewReadThrough(f.open(t, testKey, "node-b"), b, tier.ReadThroughOptions{Timeout: time.Minute})
	t0 := time.Now()
	rt.Close()
	if el := time.Since(t0); el > 10*time.Second {
		t.Fatalf("close without start took %v, want at once", el)
	}
}
