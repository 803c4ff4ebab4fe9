package tier_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/tier"
)

// consumer records the blocks a restore hands over, in order.
type consumer struct {
	t      *testing.T
	blocks [][]byte
	// during, when set, runs inside each put.
	during func()
}

func (c *consumer) put(i int, kv []byte) error {
	if i != len(c.blocks) {
		c.t.Fatalf("put called for block %d, want %d", i, len(c.blocks))
	}
	c.blocks = append(c.blocks, bytes.Clone(kv))
	if c.during != nil {
		c.during()
	}
	return nil
}

// checkBlocks checks that got are the first blocks of want.
func checkBlocks(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) > len(want) {
		t.Fatalf("got %d blocks, the pack has %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("block %d differs from the pack's", i)
		}
	}
}

func TestRestoreStreamsThenInstalls(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	_, want := restoreAll(t, f.a, f.id, f.salt, f.tokens)
	b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16})
	// While the restore hands blocks over, the store holds nothing of
	// the pack: nothing is written before the install.
	c := &consumer{t: t, during: func() {
		if m, err := b.Match(f.id, f.salt, f.tokens); err != nil || m.Blocks != 0 {
			t.Errorf("during the restore B matches %d blocks (%v), want 0", m.Blocks, err)
		}
	}}
	tr := f.open(t, testKey, "node-b")
	n, fetched, err := tr.Restore(ctx, b, tier.RestoreRequest{Pack: f.pack, Identity: f.id, Salt: f.salt, Tokens: f.tokens}, c.put)
	if err != nil || n != 80 {
		t.Fatalf("restore: got %d tokens, %v; want 80", n, err)
	}
	checkBlocks(t, c.blocks, want)
	if len(c.blocks) != 5 || fetched.BytesFetched() != 5*96 {
		t.Fatalf("restore: got %d blocks, %d bytes; want 5 blocks of 96 bytes", len(c.blocks), fetched.BytesFetched())
	}
	if ps, _ := b.Packs(); len(ps) != 0 {
		t.Fatalf("B holds %d packs before the install, want 0", len(ps))
	}
	res, err := fetched.Install(ctx)
	if err != nil || !res.New || res.ChunksFetched != 5 {
		t.Fatalf("install: got %+v, %v; want new, 5 chunks", res, err)
	}
	if _, err := fetched.Install(ctx); !errors.Is(err, tier.ErrFetchedUsed) {
		t.Fatalf("second install: got %v, want ErrFetchedUsed", err)
	}
	if n, got := restoreAll(t, b, f.id, f.salt, f.tokens); n != 80 {
		t.Fatalf("B restores %d tokens after the install, want 80", n)
	} else {
		checkBlocks(t, got, want)
	}
	// A prompt that shares two blocks with the pack gets those two; the
	// store's copies of the chunks are read, verified, in place of GETs.
	prompt := append(append([]int32(nil), f.tokens[:40]...), 9, 9, 9)
	c = &consumer{t: t}
	n, fetched, err = tr.Restore(ctx, b, tier.RestoreRequest{Pack: f.pack, Identity: f.id, Salt: f.salt, Tokens: prompt}, c.put)
	if err != nil || n != 32 || fetched.BytesFetched() != 0 {
		t.Fatalf("restore of a shorter prompt: got %d tokens, %d bytes fetched, %v; want 32, 0", n, fetched.BytesFetched(), err)
	}
	checkBlocks(t, c.blocks, want)
	storetest.Check(t, b)
}

func TestRestoreRefusals(t *testing.T) {
	cases := append(refusalCases(), refusalCase{name: "another tenant's salt", reason: pack.ReasonUnauthorized, block: -1})
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			_, want := restoreAll(t, f.a, f.id, f.salt, f.tokens)
			tr, expect := tt.reader(t, f)
			salt := f.salt
			if tt.reason == pack.ReasonUnauthorized {
				salt = []byte("tenant-2")
			}
			b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16})
			c := &consumer{t: t}
			n, fetched, err := tr.Restore(context.Background(), b, tier.RestoreRequest{Pack: f.pack, Identity: expect, Salt: salt, Tokens: f.tokens}, c.put)
			if n != 0 || fetched != nil {
				t.Errorf("restore: got %d tokens and an install, want neither", n)
			}
			// The blocks handed over before the fault are the pack's own
			// (verified), and none is past it; the error tells the
			// consumer to discard them.
			checkBlocks(t, c.blocks, want)
			if len(c.blocks) > max(tt.block, 0) {
				t.Errorf("put got %d blocks; the first damaged block is %d", len(c.blocks), tt.block)
			}
			checkRefused(t, f, b, err, tt.reason)
			if lack, _ := b.MissingChunks(f.m.Chunks); len(lack) != 5 {
				t.Errorf("B holds %d of the pack's chunks after a refused restore, want 0", 5-len(lack))
			}
		})
	}
}

// onChunkGet calls do as the nth GET of a chunk object goes out.
type onChunkGet struct {
	n    int32
	seen atomic.Int32
	do   func()
}

func (o *onChunkGet) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/chunks/") && o.seen.Add(1) == o.n {
		o.do()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestInstallAfterRestoreAborted: the install that follows a streamed
// restore stops midway (the S3 server dies, or the install is cancelled
// as at a shutdown); the store is left without the pack and sound, and a
// later restore and install complete.
func TestInstallAfterRestoreAborted(t *testing.T) {
	tests := []struct {
		name string
		// abort returns the action that stops the install.
		abort func(f *fixture, cancel context.CancelFunc) func()
	}{
		{name: "server killed", abort: func(f *fixture, _ context.CancelFunc) func() { return f.srv.Stop }},
		{name: "context cancelled", abort: func(_ *fixture, cancel context.CancelFunc) func() { return cancel }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			_, want := restoreAll(t, f.a, f.id, f.salt, f.tokens)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg := f.config(testKey, "node-b")
			// The restore GETs the 5 chunks; the install's second GET
			// stops it.
			cfg.Transport = &onChunkGet{n: 7, do: tt.abort(f, cancel)}
			tr, err := tier.Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16})
			c := &consumer{t: t}
			req := tier.RestoreRequest{Pack: f.pack, Identity: f.id, Salt: f.salt, Tokens: f.tokens}
			n, fetched, err := tr.Restore(context.Background(), b, req, c.put)
			if err != nil || n != 80 {
				t.Fatalf("restore: got %d tokens, %v; want 80", n, err)
			}
			checkBlocks(t, c.blocks, want)
			// A GET cut short is the tier unavailable either way (the
			// read-through tells a cancelled request apart by its context).
			if _, err := fetched.Install(ctx); !errors.Is(err, tier.ErrUnavailable) || errors.Is(err, pack.ErrRefused) {
				t.Fatalf("install: got %v, want ErrUnavailable and no refusal", err)
			}
			if ps, _ := b.Packs(); len(ps) != 0 {
				t.Fatalf("B holds %d packs after the aborted install, want 0", len(ps))
			}
			if n, _ := restoreAll(t, b, f.id, f.salt, f.tokens); n != 0 {
				t.Fatalf("B restores %d tokens, want 0", n)
			}
			storetest.Check(t, b)
			f.srv.Stop() // when the install was cancelled, a restart all the same
			f.srv.Restart()
			n, fetched, err = f.open(t, testKey, "node-b").Restore(context.Background(), b, req, (&consumer{t: t}).put)
			if err != nil || n != 80 {
				t.Fatalf("restore again: got %d tokens, %v; want 80", n, err)
			}
			if res, err := fetched.Install(context.Background()); err != nil || !res.New {
				t.Fatalf("install again: got %+v, %v", res, err)
			}
			if n, _ := restoreAll(t, b, f.id, f.salt, f.tokens); n != 80 {
				t.Fatalf("B restores %d tokens after the install, want 80", n)
			}
			storetest.Check(t, b)
		})
	}
}

// TestReadThroughRestore: the server's restore through the tier hands
// over the tier's verified blocks, then installs the pack in the
// background; a request for the pack while that install runs waits for
// it and restores locally, and the store shows no pack until the install
// published it whole.
func TestReadThroughRestore(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	_, want := restoreAll(t, f.a, f.id, f.salt, f.tokens)
	installing, release := make(chan struct{}), make(chan struct{})
	cfg := f.config(testKey, "node-b")
	// The restore GETs the 5 chunks; the install's first GET waits.
	cfg.Transport = &onChunkGet{n: 6, do: func() { close(installing); <-release }}
	tr, err := tier.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16})
	rt := tier.NewReadThrough(tr, b, tier.ReadThroughOptions{})
	defer rt.Close()
	if err := rt.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	prompt := append(append([]int32(nil), f.tokens...), 1, 2, 3)
	c := &consumer{t: t}
	if n, err := rt.Restore(ctx, f.id, f.salt, prompt, c.put); err != nil || n != 80 {
		t.Fatalf("restore through the tier: got %d tokens, %v; want 80", n, err)
	}
	checkBlocks(t, c.blocks, want)
	<-installing
	if n, _ := restoreAll(t, b, f.id, f.salt, prompt); n != 0 {
		t.Fatalf("B restores %d tokens while the install runs, want 0", n)
	}
	second := make(chan error, 1)
	c2 := &consumer{t: t}
	go func() {
		n, err := rt.Restore(ctx, f.id, f.salt, prompt, c2.put)
		if err == nil && n != 80 {
			err = errors.New("not 80 tokens")
		}
		second <- err
	}()
	close(release)
	if err := <-second; err != nil {
		t.Fatalf("restore during the install: %v", err)
	}
	checkBlocks(t, c2.blocks, want)
	stats, fetched := rt.Stats()
	if stats[tier.OutcomeHit] != 1 || stats[tier.OutcomeMiss] != 1 || fetched != 2*5*96 {
		t.Fatalf("stats: got %v, %d bytes; want 1 hit, 1 miss, %d bytes (restore and install)", stats, fetched, 2*5*96)
	}
	storetest.Check(t, b)
}

// gatedGet holds the GET of one object (its key's suffix) until open is
// closed or the request is cancelled.
type gatedGet struct {
	suffix string
	open   <-chan struct{}
}

func (g *gatedGet) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, g.suffix) {
		select {
		case <-g.open:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestReadThroughRestoreRefused: a chunk that fails its check refuses the
// pack; when put already had blocks the error reaches the caller (who
// discards them), else the store's restore serves the request. The
// damaged chunk's GET waits until put has had the blocks before it, so
// which of the two happens does not depend on which GET ends first.
func TestReadThroughRestoreRefused(t *testing.T) {
	tests := []struct {
		name    string
		block   int
		wantErr bool
	}{
		{name: "first block", block: 0},
		{name: "midway", block: 3, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			key := "chunks/" + f.m.Chunks[tt.block].ID.String()
			o := f.object(t, key)
			o[5] ^= 1
			f.putObject(t, key, o)
			before := make(chan struct{})
			c := &consumer{t: t}
			c.during = func() {
				if len(c.blocks) == tt.block {
					close(before)
				}
			}
			if tt.block == 0 {
				close(before)
			}
			cfg := f.config(testKey, "node-b")
			cfg.Transport = &gatedGet{suffix: key, open: before}
			tr, err := tier.Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			b := storetest.Open(t, "", store.Options{Node: "node-b", BlockTokens: 16})
			rt := tier.NewReadThrough(tr, b, tier.ReadThroughOptions{})
			defer rt.Close()
			if err := rt.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			n, err := rt.Restore(ctx, f.id, f.salt, f.tokens, c.put)
			if n != 0 || (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, pack.ErrRefused)) {
				t.Fatalf("restore: got %d tokens, %v; want 0 and an error %v", n, err, tt.wantErr)
			}
			if len(c.blocks) > tt.block {
				t.Fatalf("put got %d blocks; block %d is damaged", len(c.blocks), tt.block)
			}
			if stats, _ := rt.Stats(); stats[tier.OutcomeRefused] != 1 {
				t.Fatalf("stats: got %v, want 1 refused", stats)
			}
			if ps, _ := b.Packs(); len(ps) != 0 {
				t.Fatalf("B holds %d packs, want 0", len(ps))
			}
			storetest.Check(t, b)
		})
	}
}
