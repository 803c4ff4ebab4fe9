package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/vfs"
	"github.com/muserhq/muser/store/vfs/errorfs"
)

// opLog records the file operations a store performs and fails the
// directory fsyncs of chunk directories while failSync is set.
type opLog struct {
	mu       sync.Mutex
	ops      []string
	failSync bool
}

func (l *opLog) MaybeError(op errorfs.Op, path string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, op.String()+" "+path)
	if op == errorfs.OpSyncDir && l.failSync && filepath.Base(filepath.Dir(path)) == "chunks" {
		return errorfs.ErrInjected
	}
	return nil
}

func (l *opLog) count(op errorfs.Op, path string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, o := range l.ops {
		if o == op.String()+" "+path {
			n++
		}
	}
	return n
}

// TestPutChunkOwesDirSync checks rule W1 for chunks received one by one:
// PutChunk leaves its directory's fsync to the next ledger commit, which
// pays it before committing; a commit whose owed fsync fails publishes
// nothing, and the debt stays owed until one succeeds.
func TestPutChunkOwesDirSync(t *testing.T) {
	log := &opLog{}
	dir := t.TempDir()
	s := storetest.Open(t, dir, store.Options{BlockTokens: 4, FS: errorfs.Wrap(vfs.Default, log)})
	id := packtest.Identity("owed")
	toks := packtest.Tokens(7, 12, 100)
	get := storetest.KV(id, nil, toks, 4, 256)
	refs := putChunks(t, s, get, 3)
	chunkDir := func(c pack.Digest) string {
		return filepath.Join(dir, "chunks", c.String()[:2])
	}
	for _, r := range refs {
		if got := log.count(errorfs.OpSyncDir, chunkDir(r.ID)); got != 0 {
			t.Errorf("directory of chunk %s fsynced %d times by PutChunk, want 0 (owed to the commit)", r.ID.Short(), got)
		}
	}
	m := &pack.Manifest{Identity: id, BlockTokens: 4, Tenant: pack.TenantTag(nil), Tokens: toks, Chunks: refs,
		Producer: "test", Generation: 1, Created: time.Unix(1, 0).UTC()}
	m.Root = pack.MerkleRoot(m.ChunkIDs())

	log.mu.Lock()
	log.failSync = true
	log.mu.Unlock()
	pid, _, err := s.PublishPack(context.Background(), m, store.PublishOptions{Source: "test"})
	if !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("publish with a failing owed directory fsync: got %v, want the injected error", err)
	}
	if _, err := s.Pack(pid); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("pack %s after a failed owed fsync: got %v, want ErrNotFound", pid.Short(), err)
	}

	log.mu.Lock()
	log.failSync = false
	log.mu.Unlock()
	before := map[pack.Digest]int{}
	for _, r := range refs {
		before[r.ID] = log.count(errorfs.OpSyncDir, chunkDir(r.ID))
	}
	pid2, isNew, err := s.PublishPack(context.Background(), m, store.PublishOptions{Source: "test"})
	if err != nil || !isNew || pid2 != pid {
		t.Fatalf("publish after the fault: got %s, new %v, %v; want %s, new, nil", pid2.Short(), isNew, err, pid.Short())
	}
	for _, r := range refs {
		if got := log.count(errorfs.OpSyncDir, chunkDir(r.ID)) - before[r.ID]; got < 1 {
			t.Errorf("directory of chunk %s fsynced %d times by the successful publish, want at least 1", r.ID.Short(), got)
		}
	}
}

// TestReopenOwesChunkDirs: chunks renamed by a process that ended before
// any commit paid their directories' fsyncs (here: closed without a
// commit, as a crash would leave them) are found by dedup after reopening;
// the first commit that names them must fsync their directories.
func TestReopenOwesChunkDirs(t *testing.T) {
	dir := t.TempDir()
	id := packtest.Identity("reopen")
	toks := packtest.Tokens(8, 12, 100)
	get := storetest.KV(id, nil, toks, 4, 256)
	s, err := store.Open(dir, store.Options{BlockTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	refs := putChunks(t, s, get, 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	log := &opLog{}
	s = storetest.Open(t, dir, store.Options{BlockTokens: 4, FS: errorfs.Wrap(vfs.Default, log)})
	m := &pack.Manifest{Identity: id, BlockTokens: 4, Tenant: pack.TenantTag(nil), Tokens: toks, Chunks: refs,
		Producer: "test", Generation: 1, Created: time.Unix(1, 0).UTC()}
	m.Root = pack.MerkleRoot(m.ChunkIDs())
	if _, isNew, err := s.PublishPack(context.Background(), m, store.PublishOptions{Source: "test"}); err != nil || !isNew {
		t.Fatalf("publish after reopening: new %v, %v; want new, nil", isNew, err)
	}
	for _, r := range refs {
		d := filepath.Join(dir, "chunks", r.ID.String()[:2])
		if got := log.count(errorfs.OpSyncDir, d); got < 1 {
			t.Errorf("directory %s of deduplicated chunk %s: fsynced %d times before the commit, want at least 1", d, r.ID.Short(), got)
		}
	}
}

// putChunks stores blocks 0..n-1 of get with PutChunk (no pack) and
// returns their references.
func putChunks(t *testing.T, s *store.Store, get func(int) ([]byte, error), n int) []pack.ChunkRef {
	t.Helper()
	var refs []pack.ChunkRef
	for i := range n {
		kv, err := get(i)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, pack.ChunkRef{ID: pack.ChunkID(kv), Size: uint32(len(kv))})
		if err := s.PutChunk(context.Background(), refs[i].ID, kv, "test"); err != nil {
			t.Fatal(err)
		}
	}
	return refs
}
