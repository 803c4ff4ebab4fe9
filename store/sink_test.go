package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	return sinkPackSized(t, seed, n, 256)
}

// sinkPackSized is sinkPack with chunks of size bytes.
func sinkPackSized(t *testing.T, seed uint64, n, size int) (*pack.Manifest, [][]byte) {
	t.Helper()
	id := packtest.Identity("sink")
	toks := packtest.Tokens(seed, 4*n, 100)
	get := storetest.KV(id, nil, toks, 4, size)
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
			held, err := s.MissingChunks(m.Chunks)
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
	if missing, err := s.MissingChunks(m.Chunks); err != nil || len(missing) != 1 || missing[0] != m.Chunks[0].ID {
		t.Errorf("missing %v (%v), want only chunk 0", missing, err)
	}
}

// countingReader counts the bytes read through it and fails with err
// after limit bytes when err is set.
type countingReader struct {
	r     io.Reader
	n     int
	limit int
	err   error
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.err != nil && c.n+len(p) > c.limit {
		p = p[:max(c.limit-c.n, 0)]
		if len(p) == 0 {
			return 0, c.err
		}
	}
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// leftovers lists the files under dir/chunks that are not chunk files
// named by their IDs (temporary files a failed write left behind).
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(dir, "chunks"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if _, perr := pack.ParseDigest(d.Name()); perr != nil {
			out = append(out, path)
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

// TestChunkSinkStream: a chunk of many read pieces is hashed as it is
// read and takes its name only once it verified and was fsynced (rule
// W1); Put reads exactly the chunk's size from a longer source; a wrong
// chunk or a size out of bounds is refused with a receipt naming the
// pack and the source; a failing or short source is a *SourceError and
// writes no receipt; no failure leaves a file under the chunk's name nor
// a temporary file; and a second sink finds the chunk held (rule W4) and
// writes no file for it.
func TestChunkSinkStream(t *testing.T) {
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640,000 bytes: several pieces
	bigID := pack.ChunkID(big)
	flipped := bytes.Clone(big)
	flipped[len(flipped)-1] ^= 1
	readFault := errors.New("connection reset")
	pid := pack.ChunkID([]byte("the pack"))
	tests := []struct {
		name   string
		size   int
		src    func() *countingReader
		wrote  bool
		reason pack.Reason // a refusal with this reason; "" for none
		source error       // a *store.SourceError wrapping this
	}{
		{name: "whole chunk", size: len(big), wrote: true,
			src: func() *countingReader { return &countingReader{r: bytes.NewReader(big)} }},
		{name: "reads no more than size", size: len(big), wrote: true,
			src: func() *countingReader {
				return &countingReader{r: bytes.NewReader(append(bytes.Clone(big), "extra"...))}
			}},
		{name: "half reads", size: len(big), wrote: true,
			src: func() *countingReader { return &countingReader{r: iotest.HalfReader(bytes.NewReader(big))} }},
		{name: "one bit flipped", size: len(big), reason: pack.ReasonChunkDigest,
			src: func() *countingReader { return &countingReader{r: bytes.NewReader(flipped)} }},
		{name: "source ends early", size: len(big), source: io.ErrUnexpectedEOF,
			src: func() *countingReader { return &countingReader{r: bytes.NewReader(big[:300000])} }},
		{name: "source fails", size: len(big), source: readFault,
			src: func() *countingReader { return &countingReader{r: bytes.NewReader(big), limit: 200000, err: readFault} }},
		{name: "size zero", size: 0, reason: pack.ReasonOversize,
			src: func() *countingReader { return &countingReader{r: bytes.NewReader(big)} }},
		{name: "size beyond the largest chunk", size: pack.MaxChunkBytes + 1, reason: pack.ReasonOversize,
			src: func() *countingReader { return &countingReader{r: bytes.NewReader(big)} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := storetest.Open(t, dir, store.Options{})
			k, err := s.NewChunkSink(pid, "test:stream", store.ChunkSinkOptions{})
			if err != nil {
				t.Fatal(err)
			}
			src := tt.src()
			err = k.Put(ctx, bigID, tt.size, src)
			if cerr := k.Close(); cerr != nil {
				t.Fatalf("Close: got %v, want nil", cerr)
			}
			var re *store.RefusalError
			var se *store.SourceError
			rs, rerr := s.Receipts(store.ReceiptFilter{})
			if rerr != nil {
				t.Fatal(rerr)
			}
			switch {
			case tt.reason != "":
				if !errors.As(err, &re) || re.Receipt.Reason != tt.reason || re.Receipt.Pack != pid || re.Receipt.Source != "test:stream" {
					t.Fatalf("got %v, want a %s refusal naming pack %s and the source", err, tt.reason, pid.Short())
				}
				if len(rs) != 1 {
					t.Fatalf("a refusal wrote %d receipts, want 1", len(rs))
				}
			case tt.source != nil:
				if !errors.As(err, &se) || !errors.Is(err, tt.source) || se.Chunk != bigID {
					t.Fatalf("got %v, want a *store.SourceError for chunk %s wrapping %v", err, bigID.Short(), tt.source)
				}
				if errors.Is(err, pack.ErrRefused) {
					t.Fatalf("a source's fault is a refusal: %v", err)
				}
				if len(rs) != 0 {
					t.Fatalf("a source's fault wrote %d receipts, want 0", len(rs))
				}
			case err != nil:
				t.Fatalf("got %v, want nil", err)
			}
			got, ferr := os.ReadFile(chunkFile(dir, bigID))
			switch {
			case tt.wrote && !bytes.Equal(got, big):
				t.Fatalf("chunk file: %d bytes (%v), want the chunk's %d", len(got), ferr, len(big))
			case !tt.wrote && !errors.Is(ferr, os.ErrNotExist):
				t.Fatalf("chunk file after a failure: got %d bytes (%v), want none", len(got), ferr)
			}
			if tt.wrote && src.n != len(big) {
				t.Errorf("read %d bytes from the source, want exactly %d", src.n, len(big))
			}
			if l := leftovers(t, dir); len(l) != 0 {
				t.Fatalf("files left behind: %s", strings.Join(l, ", "))
			}
			// Dedup (rule W4): a second sink finds the chunk held, and a
			// Put of it reads and verifies but writes no file.
			k2, err := s.NewChunkSink(pid, "test:stream", store.ChunkSinkOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if held := k2.Held(bigID, len(big)); held != tt.wrote {
				t.Errorf("Held: got %v, want %v", held, tt.wrote)
			}
			if k2.Held(bigID, len(big)-1) {
				t.Error("Held with another size: got true, want false")
			}
			if tt.wrote {
				if err := k2.Put(ctx, bigID, len(big), bytes.NewReader(big)); err != nil {
					t.Fatalf("second Put: got %v, want nil", err)
				}
			}
			if err := k2.Close(); err != nil || k2.Written() != 0 {
				t.Fatalf("second sink: Close %v, %d written; want nil, 0", err, k2.Written())
			}
			if k2.Held(bigID, len(big)) {
				t.Error("Held after Close: got true, want false")
			}
		})
	}
}

// pauseSync blocks the fsync of the nth temporary chunk file (counting
// from 1) until release is closed, after closing reached.
type pauseSync struct {
	n       int
	mu      sync.Mutex
	seen    int
	reached chan struct{}
	release chan struct{}
}

func (p *pauseSync) MaybeError(op errorfs.Op, path string) error {
	if op != errorfs.OpSync || !strings.HasPrefix(filepath.Base(path), ".") ||
		!strings.Contains(path, string(filepath.Separator)+"chunks"+string(filepath.Separator)) {
		return nil
	}
	p.mu.Lock()
	p.seen++
	hit := p.seen == p.n
	p.mu.Unlock()
	if hit {
		close(p.reached)
		<-p.release
	}
	return nil
}

// TestChunkSinkGCWhileWriting: a gc with no grace, run while a worker
// holds a written, not yet fsynced temporary file and an earlier chunk
// is renamed but its pack not yet published, takes neither: the
// temporary file is announced (the orphan sweep leaves it) and the
// renamed chunk is leased until Close. The pack then publishes.
func TestChunkSinkGCWhileWriting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := &pauseSync{n: 2, reached: make(chan struct{}), release: make(chan struct{})}
	s := storetest.Open(t, dir, store.Options{BlockTokens: 4, FS: errorfs.Wrap(vfs.Default, p)})
	m, data := sinkPack(t, 91, 2)
	k, err := s.NewChunkSink(pack.Digest{7}, "peer:test", store.ChunkSinkOptions{Syncers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		if err := k.Put(ctx, m.Chunks[i].ID, len(data[i]), bytes.NewReader(data[i])); err != nil {
			t.Fatal(err)
		}
	}
	<-p.reached // one worker: chunk 0 is renamed, chunk 1 is being fsynced
	if rep, err := s.GC(ctx, store.GCOptions{MaxBytes: -1, Grace: -1}); err != nil || rep.Orphans != 0 {
		close(p.release)
		if err == nil {
			err = fmt.Errorf("gc took %d orphans, want 0", rep.Orphans)
		}
		t.Fatal(err)
	}
	tmp := leftovers(t, dir)
	_, statErr := os.Stat(chunkFile(dir, m.Chunks[0].ID))
	close(p.release)
	if len(tmp) != 1 {
		t.Errorf("temporary files after a gc with no grace: got %v, want the one being written kept", tmp)
	}
	if statErr != nil {
		t.Errorf("renamed chunk after a gc with no grace: %v, want it kept (leased)", statErr)
	}
	if err := k.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Fatalf("files left behind: %v", l)
	}
	if _, _, err := s.PublishPack(ctx, m, store.PublishOptions{Source: "test"}); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// failOp fails every operation op on a path under the chunks directory.
type failOp struct{ op errorfs.Op }

func (f failOp) MaybeError(op errorfs.Op, path string) error {
	if op == f.op && strings.Contains(path, string(filepath.Separator)+"chunks"+string(filepath.Separator)) {
		return errorfs.ErrInjected
	}
	return nil
}

// TestChunkSinkFaults: a write, EndDirect (before the tail of a direct
// write), fsync or rename of a chunk file that fails makes Close return
// the fault (a disk's, not the source's: no *SourceError, no receipt),
// names no chunk and leaves no temporary file.
func TestChunkSinkFaults(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("faulty disk "), 30000)
	id := pack.ChunkID(data)
	for _, op := range []errorfs.Op{errorfs.OpCreate, errorfs.OpWrite, errorfs.OpEndDirect, errorfs.OpSync, errorfs.OpRename} {
		t.Run(op.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := storetest.Open(t, dir, store.Options{FS: errorfs.Wrap(vfs.Default, failOp{op})})
			k, err := s.NewChunkSink(pack.Digest{3}, "test", store.ChunkSinkOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Put(ctx, id, len(data), bytes.NewReader(data)); err != nil {
				t.Fatalf("Put: got %v, want nil (the write is the worker's)", err)
			}
			err = k.Close()
			if !errors.Is(err, errorfs.ErrInjected) || k.Written() != 0 {
				t.Fatalf("Close: got %v, %d written; want the injected %s fault, 0 written", err, k.Written(), op)
			}
			var se *store.SourceError
			if errors.As(err, &se) || errors.Is(err, pack.ErrRefused) {
				t.Fatalf("a disk fault reported as the source's or as a refusal: %v", err)
			}
			if rs, _ := s.Receipts(store.ReceiptFilter{}); len(rs) != 0 {
				t.Fatalf("a disk fault wrote %d receipts, want 0", len(rs))
			}
			if _, err := os.Stat(chunkFile(dir, id)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("chunk file after the fault: got %v, want none", err)
			}
			if l := leftovers(t, dir); len(l) != 0 {
				t.Fatalf("files left behind: %v", l)
			}
		})
	}
}
