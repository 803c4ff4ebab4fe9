package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/vfs"
	"github.com/muserhq/muser/store/vfs/errorfs"
)

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

// TestPutPackChunkFrom: a chunk streamed from a reader is hashed as it is
// written and takes its name only once it verified (rule W1); a wrong
// chunk is refused with a receipt, a failing or short source is the
// source's error without one, and in every failure no file is left under
// the chunk's name nor a temporary file.
func TestPutPackChunkFrom(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640,000 bytes: several pieces
	bigID := pack.ChunkID(big)
	flipped := bytes.Clone(big)
	flipped[len(flipped)-1] ^= 1
	readFault := errors.New("connection reset")
	pid := pack.ChunkID([]byte("the pack"))
	tests := []struct {
		name   string
		id     pack.Digest
		size   int64
		src    func() *countingReader
		wrote  bool
		reason pack.Reason // a refusal with this reason; "" for none
		source error       // a *store.ReadError wrapping this
	}{
		{name: "whole chunk", id: bigID, size: int64(len(big)), wrote: true,
			src: func() *countingReader { return &countingReader{r: bytes.NewReader(big)} }},
		{name: "reads no more than size", id: bigID, size: int64(len(big)), wrote: true,
			src: func() *countingReader {
				return &countingReader{r: bytes.NewReader(append(bytes.Clone(big), "extra"...))}
			}},
		{name: "one bit flipped", id: bigID, size: int64(len(big)), reason: pack.ReasonChunkDigest,
			src: func() *countingReader { return &countingReader{r: bytes.NewReader(flipped)} }},
		{name: "source ends early", id: bigID, size: int64(len(big)), source: io.ErrUnexpectedEOF,
			src: func() *countingReader { return &countingReader{r: bytes.NewReader(big[:300000])} }},
		{name: "source fails", id: bigID, size: int64(len(big)), source: readFault,
			src: func() *countingReader { return &countingReader{r: bytes.NewReader(big), limit: 200000, err: readFault} }},
		{name: "size zero", id: bigID, size: 0, reason: pack.ReasonOversize,
			src: func() *countingReader { return &countingReader{r: bytes.NewReader(big)} }},
		{name: "size beyond the largest chunk", id: bigID, size: pack.MaxChunkBytes + 1, reason: pack.ReasonOversize,
			src: func() *countingReader { return &countingReader{r: bytes.NewReader(big)} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := storetest.Open(t, dir, store.Options{})
			src := tt.src()
			wrote, err := s.PutPackChunkFrom(context.Background(), pid, tt.id, tt.size, src, "test:stream")
			if wrote != tt.wrote {
				t.Errorf("wrote: got %v, want %v", wrote, tt.wrote)
			}
			var re *store.RefusalError
			var rd *store.ReadError
			switch {
			case tt.reason != "":
				if !errors.As(err, &re) || re.Receipt.Reason != tt.reason || re.Receipt.Pack != pid || re.Receipt.Source != "test:stream" {
					t.Fatalf("got %v, want a %s refusal naming pack %s and the source", err, tt.reason, pid.Short())
				}
			case tt.source != nil:
				if !errors.As(err, &rd) || !errors.Is(err, tt.source) || rd.Chunk != tt.id {
					t.Fatalf("got %v, want a *store.ReadError for chunk %s wrapping %v", err, tt.id.Short(), tt.source)
				}
				if rs, _ := s.Receipts(store.ReceiptFilter{}); len(rs) != 0 {
					t.Fatalf("a source's fault wrote %d receipts, want 0", len(rs))
				}
			case err != nil:
				t.Fatalf("got %v, want nil", err)
			}
			got, rerr := os.ReadFile(chunkFile(dir, tt.id))
			switch {
			case tt.wrote && !bytes.Equal(got, big):
				t.Fatalf("chunk file: %d bytes (%v), want the chunk's %d", len(got), rerr, len(big))
			case !tt.wrote && !errors.Is(rerr, os.ErrNotExist):
				t.Fatalf("chunk file after a failure: got %d bytes (%v), want none", len(got), rerr)
			}
			if tt.wrote && src.n != len(big) {
				t.Errorf("read %d bytes from the source, want exactly %d", src.n, len(big))
			}
			if l := leftovers(t, dir); len(l) != 0 {
				t.Fatalf("files left behind: %s", strings.Join(l, ", "))
			}
			// Dedup (rule W4): a second put finds the chunk and reads
			// nothing.
			if tt.wrote {
				again := &countingReader{r: bytes.NewReader(big)}
				if w, err := s.PutPackChunkFrom(context.Background(), pid, tt.id, tt.size, again, "test:stream"); w || err != nil || again.n != 0 {
					t.Fatalf("second put: wrote %v, %v, read %d bytes; want false, nil, 0", w, err, again.n)
				}
			}
		})
	}
}

// TestStageChunkFrom: a staged chunk has no name until Commit, survives a
// gc that takes every orphan meanwhile (its temporary file is announced),
// and Abort leaves nothing behind.
func TestStageChunkFrom(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("staged chunk "), 30000)
	id := pack.ChunkID(data)
	for _, commit := range []bool{true, false} {
		t.Run(map[bool]string{true: "commit", false: "abort"}[commit], func(t *testing.T) {
			dir := t.TempDir()
			s := storetest.Open(t, dir, store.Options{})
			c, err := s.StageChunkFrom(ctx, pack.Digest{}, id, int64(len(data)), bytes.NewReader(data), "test")
			if err != nil || c == nil || c.Chunk() != id {
				t.Fatalf("stage: got %v, %v; want chunk %s staged", c, err, id.Short())
			}
			if _, err := os.Stat(chunkFile(dir, id)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("chunk file before Commit: got %v, want none", err)
			}
			if l := leftovers(t, dir); len(l) != 1 {
				t.Fatalf("temporary files while staged: got %v, want 1", l)
			}
			if _, err := s.GC(ctx, store.GCOptions{MaxBytes: -1, Grace: -1}); err != nil {
				t.Fatal(err)
			}
			if l := leftovers(t, dir); len(l) != 1 {
				t.Fatalf("temporary files after a gc with no grace: got %v, want the staged one kept", l)
			}
			if commit {
				if err := c.Commit(); err != nil {
					t.Fatalf("commit: %v", err)
				}
				if got, err := os.ReadFile(chunkFile(dir, id)); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("chunk file after Commit: %d bytes, %v; want the chunk", len(got), err)
				}
			} else {
				c.Abort()
				if _, err := os.Stat(chunkFile(dir, id)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("chunk file after Abort: got %v, want none", err)
				}
			}
			c.Abort() // after either: nothing
			if err := c.Commit(); err != nil {
				t.Fatalf("a second Commit: got %v, want nil", err)
			}
			if l := leftovers(t, dir); len(l) != 0 {
				t.Fatalf("files left behind: %v", l)
			}
		})
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

// TestStageChunkFromFaults: a write that fails while staging, or an
// fsync or rename that fails in Commit, returns the fault, names no
// chunk and leaves no temporary file.
func TestStageChunkFromFaults(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("faulty disk "), 30000)
	id := pack.ChunkID(data)
	for _, op := range []errorfs.Op{errorfs.OpWrite, errorfs.OpSync, errorfs.OpRename} {
		t.Run(op.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := storetest.Open(t, dir, store.Options{FS: errorfs.Wrap(vfs.Default, failOp{op})})
			wrote, err := s.PutPackChunkFrom(ctx, pack.Digest{}, id, int64(len(data)), bytes.NewReader(data), "test")
			if wrote || !errors.Is(err, errorfs.ErrInjected) {
				t.Fatalf("got %v, %v; want the injected %s fault", wrote, err, op)
			}
			var re *store.ReadError
			if errors.As(err, &re) {
				t.Fatalf("a disk fault reported as the source's: %v", err)
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
