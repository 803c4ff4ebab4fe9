package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/vfs"
	"github.com/muserhq/muser/store/vfs/errorfs"
)

// sinkLog records the sink's file operations in order and fails the
// fsync of the failSync-th temporary chunk file (counting from 1; 0
// fails none).
type sinkLog struct {
	mu       sync.Mutex
	ops      []errorfs.Op
	syncs    int
	failSync int
	// renamesBeforeSync counts renames of chunk files that happened
	// while fewer chunk files had been fsynced than renamed.
	renamesBeforeSync int
	renames           int
	creates           int
}

func (l *sinkLog) MaybeError(op errorfs.Op, path string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	inChunks := strings.Contains(path, string(filepath.Separator)+"chunks"+string(filepath.Separator))
	if !inChunks {
		return nil
	}
	l.ops = append(l.ops, op)
	switch op {
	case errorfs.OpCreate:
		l.creates++
	case errorfs.OpSync:
		l.syncs++
		if l.syncs == l.failSync {
			return errorfs.ErrInjected
		}
	case errorfs.OpRename:
		l.renames++
		if l.renames > l.syncs {
			l.renamesBeforeSync++
		}
	}
	return nil
}

// sinkPack returns a manifest of n distinct 4-token blocks of 256 bytes
// and its chunks' bytes.
func sinkPack(t *testing.T, seed uint64, n int) (*pack.Manifest, [][]byte) {
	t.Helper()
	id := packtest.Identity("sink")
	toks := packtest.Tokens(seed, 4*n, 100)
	get := storetest.KV(id, nil, toks, 4, 256)
	m := &pack.Manifest{Identity: id, BlockTokens: 4, Tenant: pack.TenantTag(nil), Tokens: toks,
		Producer: "test", Generation: 1, Created: time.Unix(1, 0).UTC()}
	var data [][]byte
	for i := range n {
		kv, err := get(i)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, kv)
		m.Chunks = append(m.Chunks, pack.ChunkRef{ID: pack.ChunkID(kv), Size: uint32(len(kv))})
	}
	m.Root = pack.MerkleRoot(m.ChunkIDs())
	return m, data
}

// sinkTempFiles lists the temporary files left in the store's chunk
// directories.
func sinkTempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(filepath.Join(dir, "chunks"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), ".") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestChunkSink checks the receiver's pipelined chunk writes: bytes read
// in pieces are verified against their ID before anything is written,
// every file is fsynced before it is renamed to its ID (rule W1), a
// failed fsync poisons the sink and leaves no file under the chunk's ID,
// and a pack publishes only from chunks Close made durable.
func TestChunkSink(t *testing.T) {
	const n = 12
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// put feeds chunk i to the sink; it returns the reader.
		reader   func(i int, data []byte) io.Reader
		failSync int
		alter    int // index of a chunk whose bytes are altered (-1: none)
		syncers  int
	}{
		{name: "whole reads", reader: func(_ int, d []byte) io.Reader { return bytes.NewReader(d) }, alter: -1},
		{name: "one byte at a time", reader: func(_ int, d []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(d)) }, alter: -1, syncers: 1},
		{name: "half reads", reader: func(_ int, d []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(d)) }, alter: -1},
		{name: "altered chunk", reader: func(_ int, d []byte) io.Reader { return bytes.NewReader(d) }, alter: 5},
		{name: "failed fsync", reader: func(_ int, d []byte) io.Reader { return bytes.NewReader(d) }, alter: -1, failSync: 4, syncers: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			log := &sinkLog{failSync: tc.failSync}
			s := storetest.Open(t, dir, store.Options{BlockTokens: 4, FS: errorfs.Wrap(vfs.Default, log)})
			m, data := sinkPack(t, 40+uint64(len(tc.name)), n)
			pid := pack.Digest{1, 2, 3}
			k, err := s.NewChunkSink(pid, "peer:test", store.ChunkSinkOptions{Syncers: tc.syncers, PendingBytes: 600})
			if err != nil {
				t.Fatal(err)
			}
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				putErrs = map[int]error{}
			)
			for w := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < n; i += 3 {
						d := data[i]
						if i == tc.alter {
							d = bytes.Clone(d)
							d[len(d)/2] ^= 1
						}
						if err := k.Put(ctx, m.Chunks[i].ID, len(d), tc.reader(i, d)); err != nil {
							mu.Lock()
							putErrs[i] = err
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			closeErr := k.Close()
			if err := k.Put(ctx, m.Chunks[0].ID, len(data[0]), bytes.NewReader(data[0])); !errors.Is(err, store.ErrClosed) {
				t.Errorf("Put after Close: got %v, want ErrClosed", err)
			}
			if log.renamesBeforeSync != 0 {
				t.Errorf("%d chunk files renamed before as many were fsynced, want 0 (rule W1)", log.renamesBeforeSync)
			}
			if got := sinkTempFiles(t, dir); len(got) != 0 {
				t.Errorf("temporary files left after Close: %v", got)
			}
			held, err := s.MissingChunks(m.ChunkIDs())
			if err != nil {
				t.Fatal(err)
			}
			missing := map[pack.Digest]bool{}
			for _, id := range held {
				missing[id] = true
			}

			switch {
			case tc.alter >= 0:
				err := putErrs[tc.alter]
				var re *store.RefusalError
				if !errors.As(err, &re) || re.Receipt.Reason != pack.ReasonChunkDigest {
					t.Fatalf("altered chunk: got %v, want a chunk-digest refusal", err)
				}
				if re.Receipt.Pack != pid || re.Receipt.Source != "peer:test" || re.Receipt.Expected != m.Chunks[tc.alter].ID {
					t.Errorf("receipt %+v: want pack %s, source peer:test, expected chunk %s", re.Receipt, pid.Short(), m.Chunks[tc.alter].ID.Short())
				}
				if len(putErrs) != 1 || closeErr != nil {
					t.Errorf("other errors: puts %v, close %v; want none", putErrs, closeErr)
				}
				if !missing[m.Chunks[tc.alter].ID] || len(missing) != 1 {
					t.Errorf("missing chunks %v, want only the altered one", held)
				}
				if got := log.creates; got != n-1 {
					t.Errorf("%d chunk files created, want %d (none for refused bytes)", got, n-1)
				}
			case tc.failSync > 0:
				if !errors.Is(closeErr, errorfs.ErrInjected) {
					t.Fatalf("Close after a failed fsync: got %v, want the injected error", closeErr)
				}
				if len(missing) == 0 {
					t.Fatal("every chunk is under its ID although one fsync failed")
				}
				if log.renames != n-len(missing) {
					t.Errorf("%d renames for %d chunks present", log.renames, n-len(missing))
				}
				if _, _, err := s.PublishPack(ctx, m, store.PublishOptions{Source: "test"}); !errors.Is(err, store.ErrMissingChunks) {
					t.Errorf("publish with chunks missing: got %v, want ErrMissingChunks", err)
				}
			default:
				if len(putErrs) != 0 || closeErr != nil {
					t.Fatalf("puts %v, close %v; want no error", putErrs, closeErr)
				}
				if len(missing) != 0 || k.Written() != n {
					t.Fatalf("missing %v, written %d; want none missing, %d written", held, k.Written(), n)
				}
				got, _, err := s.PublishPack(ctx, m, store.PublishOptions{Source: "test"})
				if err != nil {
					t.Fatal(err)
				}
				blocks := 0
				if _, err := s.RestorePack(ctx, store.RestoreRequest{Pack: got, Identity: m.Identity}, func(i int, kv []byte) error {
					if !bytes.Equal(kv, data[i]) {
						t.Errorf("block %d restores to other bytes", i)
					}
					blocks++
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if blocks != n {
					t.Errorf("restored %d blocks, want %d", blocks, n)
				}
			}
		})
	}
}

// TestChunkSinkRefusals: a reader that fails is a *SourceError and writes
// nothing; a size out of range is refused; a chunk the store holds is
// verified but not written again.
func TestChunkSinkRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	log := &sinkLog{}
	s := storetest.Open(t, dir, store.Options{BlockTokens: 4, FS: errorfs.Wrap(vfs.Default, log)})
	m, data := sinkPack(t, 77, 2)
	if err := s.PutChunk(ctx, m.Chunks[1].ID, data[1], "test"); err != nil {
		t.Fatal(err)
	}
	createsBefore := log.creates
	k, err := s.NewChunkSink(pack.Digest{9}, "peer:test", store.ChunkSinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		id    pack.Digest
		size  int
		r     io.Reader
		check func(error) bool
		want  string
	}{
		{"truncated source", m.Chunks[0].ID, len(data[0]), bytes.NewReader(data[0][:100]),
			func(err error) bool {
				var se *store.SourceError
				return errors.As(err, &se) && se.Chunk == m.Chunks[0].ID && errors.Is(err, io.ErrUnexpectedEOF)
			}, "a *SourceError for the chunk wrapping io.ErrUnexpectedEOF"},
		{"failing source", m.Chunks[0].ID, len(data[0]), iotest.ErrReader(errorfs.ErrInjected),
			func(err error) bool {
				var se *store.SourceError
				return errors.As(err, &se) && errors.Is(err, errorfs.ErrInjected)
			}, "a *SourceError wrapping the reader's error"},
		{"zero size", m.Chunks[0].ID, 0, bytes.NewReader(nil),
			func(err error) bool { return errors.Is(err, pack.ErrRefused) }, "a refusal"},
		{"over the limit", m.Chunks[0].ID, pack.MaxChunkBytes + 1, bytes.NewReader(nil),
			func(err error) bool { return errors.Is(err, pack.ErrRefused) }, "a refusal"},
		{"already held", m.Chunks[1].ID, len(data[1]), bytes.NewReader(data[1]),
			func(err error) bool { return err == nil }, "nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := k.Put(ctx, tc.id, tc.size, tc.r); !tc.check(err) {
				t.Errorf("got %v, want %s", err, tc.want)
			}
		})
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if got := log.creates - createsBefore; got != 0 {
		t.Errorf("the sink created %d chunk files, want 0", got)
	}
	if missing, err := s.MissingChunks(m.ChunkIDs()); err != nil || len(missing) != 1 || missing[0] != m.Chunks[0].ID {
		t.Errorf("missing %v (%v), want only chunk 0", missing, err)
	}
}
