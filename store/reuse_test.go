package store_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/vfs"
	"github.com/muserhq/muser/store/vfs/errorfs"
)

// What a store reuses, and when it must not: chunks it holds (rule W4),
// packs it quarantined (Q1), packs removed while they are read.

// A publish reuses an indexed block's chunk only while its file exists:
// after A's restore moved a chunk it shares with B to quarantine/, B's
// chain still names it in the index, and A published again must write
// the chunk again instead of committing a pack that names a missing file.
func TestPublishAfterSharedChunkQuarantined(t *testing.T) {
	ctx := context.Background()
	s := storetest.OpenUnchecked(t, "", store.Options{BlockTokens: 4})
	id, toks := packtest.Identity("x"), packtest.Tokens(7, 12, 32000)
	storetest.Publish(t, s, id, salt, toks, chunkSize)          // B: 3 blocks
	a := storetest.Publish(t, s, id, salt, toks[:8], chunkSize) // A: B's first 2
	m, err := s.Manifest(a.Pack)
	if err != nil {
		t.Fatal(err)
	}
	flip(t, chunkFile(s.Dir(), m.Chunks[0].ID), 3)
	if _, _, err := storetest.Restore(t, s, id, salt, toks[:8]); err == nil {
		t.Fatal("a restore through a damaged chunk succeeded")
	}
	res, err := s.PublishPrefix(ctx, id, salt, toks[:8], storetest.KV(id, salt, toks[:8], 4, chunkSize))
	if err != nil {
		t.Fatal(err)
	}
	if res.ChunksWritten != 1 {
		t.Errorf("publish again wrote %d chunks, want 1 (the quarantined one)", res.ChunksWritten)
	}
	if n, _, err := storetest.Restore(t, s, id, salt, toks[:8]); err != nil || n != 8 {
		t.Fatalf("publish again gave %+v; restore: %d tokens, %v; want 8", res, n, err)
	}
}

// Importing a quarantined pack again replaces its record without counting
// its chunk references twice: verify finds nothing, and a removal frees
// every chunk.
func TestImportQuarantinedPackAgain(t *testing.T) {
	ctx := context.Background()
	s := storetest.OpenUnchecked(t, "", store.Options{BlockTokens: 4})
	id, toks := packtest.Identity("x"), packtest.Tokens(8, 8, 32000)
	p := storetest.Publish(t, s, id, salt, toks, chunkSize).Pack
	var file bytes.Buffer
	if err := s.Export(ctx, p, &file); err != nil {
		t.Fatal(err)
	}
	flip(t, manifestFile(s.Dir(), p), 10)
	if _, _, err := storetest.Restore(t, s, id, salt, toks); err == nil {
		t.Fatal("a restore of a damaged manifest succeeded")
	}
	if _, err := s.Import(ctx, &file, store.ImportOptions{Source: "import:t"}); err != nil {
		t.Fatal(err)
	}
	if n, _, err := storetest.Restore(t, s, id, salt, toks); err != nil || n != len(toks) {
		t.Fatalf("restore after the import: %d tokens, %v", n, err)
	}
	rep, err := s.Verify(ctx, store.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("finding in a sound store: %v", f)
	}
	rm, err := s.Remove(p)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(); rm.Chunks != 2 || st.Chunks != 0 {
		t.Errorf("remove freed %d chunks, %d chunk records left; want 2, 0", rm.Chunks, st.Chunks)
	}
}

// transferPair is a sender store holding one 4-block pack of chunks of
// size bytes, and an empty receiving store under the same cluster key.
func transferPair(t *testing.T, seed uint64, size int) (src, dst *store.Store, m *pack.Manifest, offer store.Offer) {
	t.Helper()
	src = storetest.Open(t, "", store.Options{BlockTokens: 4, SealKey: clusterKey, Node: "node-a"})
	dst = storetest.OpenUnchecked(t, "", store.Options{BlockTokens: 4, SealKey: clusterKey})
	p := storetest.Publish(t, src, packtest.Identity("rp"), salt, packtest.Tokens(seed, 16, 500), size).Pack
	m, err := src.Manifest(p)
	if err != nil {
		t.Fatal(err)
	}
	seal, err := pack.NewSeal(clusterKey, p, "node-a", 1, [pack.NonceSize]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	return src, dst, m, store.Offer{Manifest: mustRead(t, manifestFile(src.Dir(), p)), Seal: seal}
}

// placeEntry puts something other than the chunk's file at its path.
func placeEntry(t *testing.T, path string, make func(path string) error) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := make(path); err != nil {
		t.Fatal(err)
	}
}

// An entry in a chunk's place that is not a regular file of its size is
// missing to Admit (so the sender sends the chunk) and to PublishPack
// (so no pack names it), the two verdicts agreeing.
func TestAdmitAndPublishPackCountOnlyWholeFiles(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		place func(t *testing.T, want []byte) func(path string) error
	}{
		{"truncated", func(t *testing.T, want []byte) func(string) error {
			return func(p string) error { return os.WriteFile(p, want[:10], 0o600) }
		}},
		{"link of the chunk's size", func(t *testing.T, want []byte) func(string) error {
			// A link's lstat size is the length of its target.
			return func(p string) error {
				return os.Symlink(strings.Repeat("./", 96)+strings.Repeat("y", len(want)-192), p)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst, m, offer := transferPair(t, 41, 256)
			c0 := m.Chunks[0].ID
			placeEntry(t, chunkFile(dst.Dir(), c0), tc.place(t, mustRead(t, chunkFile(src.Dir(), c0))))
			_, missing, err := dst.Admit(ctx, offer, store.AdmitOptions{Source: "peer:node-a"})
			if err != nil {
				t.Fatal(err)
			}
			if len(missing) != len(m.Chunks) || missing[0] != c0 {
				t.Fatalf("admit lists %v missing of the %d chunks, want all, chunk 0 first", missing, len(m.Chunks))
			}
			for _, c := range m.Chunks[1:] {
				if err := dst.PutChunk(ctx, c.ID, mustRead(t, chunkFile(src.Dir(), c.ID)), "peer:node-a"); err != nil {
					t.Fatal(err)
				}
			}
			var me *store.MissingChunksError
			if _, _, err := dst.PublishPack(ctx, m, store.PublishOptions{Seal: &offer.Seal, Source: "peer:node-a"}); !errors.As(err, &me) || len(me.Chunks) != 1 || me.Chunks[0] != c0 {
				t.Fatalf("publish with chunk 0's entry %s: %v, want a MissingChunksError naming it", tc.name, err)
			}
			if err := os.Remove(chunkFile(dst.Dir(), c0)); err != nil {
				t.Fatal(err)
			}
			if err := dst.PutChunk(ctx, c0, mustRead(t, chunkFile(src.Dir(), c0)), "peer:node-a"); err != nil {
				t.Fatal(err)
			}
			if _, _, err := dst.PublishPack(ctx, m, store.PublishOptions{Seal: &offer.Seal, Source: "peer:node-a"}); err != nil {
				t.Fatalf("publish once the chunk is whole: %v", err)
			}
		})
	}
}

// onOpen runs fn once when the file at path is opened.
type onOpen struct {
	path string
	once sync.Once
	fn   func()
}

func (o *onOpen) MaybeError(op errorfs.Op, path string) error {
	if op == errorfs.OpOpen && path == o.path {
		o.once.Do(o.fn)
	}
	return nil
}

// A pack removed while a restore reads its manifest (so before the
// restore leases its chunks) is not found: no receipt, no quarantine.
func TestRestoreOfPackRemovedMeanwhile(t *testing.T) {
	inj := &onOpen{}
	s := storetest.OpenUnchecked(t, "", store.Options{BlockTokens: 4, FS: errorfs.Wrap(vfs.Default, inj)})
	id := packtest.Identity("x")
	p := storetest.Publish(t, s, id, salt, packtest.Tokens(9, 8, 32000), chunkSize).Pack
	var removeErr error
	inj.path, inj.fn = manifestFile(s.Dir(), p), func() { _, removeErr = s.Remove(p) }
	_, err := s.RestorePack(context.Background(), store.RestoreRequest{Pack: p, Identity: id}, func(int, []byte) error { return nil })
	if removeErr != nil {
		t.Fatal(removeErr)
	}
	rs, rerr := s.Receipts(store.ReceiptFilter{})
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, store.ErrNotFound) || len(rs) != 0 {
		t.Fatalf("restore of a pack removed meanwhile: %v and %d receipts; want ErrNotFound and none", err, len(rs))
	}
}

// A directory the store creates (chunks/ and packs/ in a new store, their
// fan-out directories) is an entry of its parent: the parent is fsynced
// before the publish that needs it returns (rule W1), as for a renamed
// file.
func TestNewDirectoriesFsyncedInParent(t *testing.T) {
	type op struct {
		op   errorfs.Op
		path string
	}
	var (
		mu  sync.Mutex
		ops []op
	)
	rec := errorfs.InjectorFunc(func(o errorfs.Op, path string) error {
		mu.Lock()
		ops = append(ops, op{o, path})
		mu.Unlock()
		return nil
	})
	dir := t.TempDir()
	s := storetest.Open(t, dir, store.Options{BlockTokens: 4, FS: errorfs.Wrap(vfs.Default, rec)})
	id := packtest.Identity("x")
	storetest.Publish(t, s, id, salt, packtest.Tokens(3, 8, 32000), chunkSize)
	mu.Lock()
	defer mu.Unlock()
	for _, sub := range []string{"chunks", "packs"} {
		top := filepath.Join(dir, sub)
		first := -1 // the first creation of a directory below top
		for i, o := range ops {
			if o.op == errorfs.OpMkdirAll && strings.HasPrefix(o.path, top+string(filepath.Separator)) {
				first = i
				break
			}
		}
		if first < 0 {
			t.Fatalf("no directory created below %s", top)
		}
		for _, parent := range []string{dir, top} {
			synced := false
			for _, o := range ops[first:] {
				synced = synced || o.op == errorfs.OpSyncDir && o.path == parent
			}
			if !synced {
				t.Errorf("%s: no fsync of %s after its new directories were created", sub, parent)
			}
		}
	}
}

// onRename runs fn once when a file is renamed to a path ending in suffix.
type onRename struct {
	suffix string
	once   sync.Once
	fired  bool
	fn     func()
}

func (o *onRename) MaybeError(op errorfs.Op, path string) error {
	if op == errorfs.OpRename && o.suffix != "" && strings.HasSuffix(path, o.suffix) {
		o.once.Do(func() { o.fired = true; o.fn() })
	}
	return nil
}

// A restore that finds a chunk file faulty quarantines its pack (rule Q1)
// while another publish of the same tokens (which the quarantine took out
// of the index, so it writes every block) puts a good file under the
// chunk's name: here it writes the chunk just before the quarantine's
// move, and commits once the quarantine is done. No pack may then be
// visible without its chunk: the publish commits a whole pack or fails
// (and a retry succeeds). A missing file is not moved at all: whatever
// appears under its name after the failed open is not the file that
// failed.
func TestRestoreFaultWhilePublishRewritesChunk(t *testing.T) {
	tests := []struct {
		name   string
		damage func(path string) error
		reason pack.Reason
	}{
		{"missing", os.Remove, pack.ReasonMissingChunk},
		{"truncated", func(path string) error { return os.Truncate(path, 7) }, pack.ReasonTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			inj := &onRename{}
			s := storetest.OpenUnchecked(t, "", store.Options{BlockTokens: 4, FS: errorfs.Wrap(vfs.Default, inj)})
			id := packtest.Identity("x")
			toks := packtest.Tokens(9, 12, 32000)
			a := storetest.Publish(t, s, id, salt, toks, chunkSize).Pack
			m, err := s.Manifest(a)
			if err != nil {
				t.Fatal(err)
			}
			x := m.Chunks[1].ID
			if err := tt.damage(chunkFile(s.Dir(), x)); err != nil {
				t.Fatal(err)
			}
			// B's publish writes block 1's chunk before it asks for block 2.
			var b store.PublishResult
			var perr error
			written := make(chan struct{})
			published := make(chan struct{})
			kv := storetest.KV(id, salt, toks, 4, chunkSize)
			publishB := func() {
				defer close(published)
				var once sync.Once
				b, perr = s.PublishPrefix(ctx, id, salt, toks, func(i int) ([]byte, error) {
					if i == 2 {
						once.Do(func() { close(written) })
					}
					return kv(i)
				})
			}
			inj.suffix, inj.fn = x.String()+".chunk", func() {
				go publishB()
				select {
				case <-written:
				case <-published:
				}
			}
			_, err = s.RestorePack(ctx, store.RestoreRequest{Pack: a, Identity: id}, func(int, []byte) error { return nil })
			var re *store.RefusalError
			if !errors.As(err, &re) || re.Receipt.Reason != tt.reason {
				t.Fatalf("restore of the damaged pack: got %v, want a %s refusal", err, tt.reason)
			}
			if !inj.fired {
				go publishB() // nothing was moved: publish B now
			}
			<-published
			if perr != nil {
				if !errors.Is(perr, store.ErrMissingChunks) {
					t.Fatalf("publish B: got %v, want success or %v", perr, store.ErrMissingChunks)
				}
				b, perr = s.PublishPrefix(ctx, id, salt, toks, kv)
			}
			if perr != nil || !b.New || b.Pack == a {
				t.Fatalf("publish B: got %+v, %v; want a new pack", b, perr)
			}
			ps, err := s.Packs()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if p.Quarantined {
					continue
				}
				if n, err := s.RestorePack(ctx, store.RestoreRequest{Pack: p.ID, Identity: id}, func(int, []byte) error { return nil }); err != nil || n != p.Tokens {
					t.Fatalf("visible pack %s restores %d of %d tokens: %v", p.ID.Short(), n, p.Tokens, err)
				}
			}
			_, err = os.Stat(filepath.Join(s.Dir(), "quarantine", x.String()+".chunk"))
			if moved := err == nil; moved != (tt.name != "missing") {
				t.Fatalf("chunk file moved to quarantine/: %v, want %v", moved, tt.name != "missing")
			}
		})
	}
}
