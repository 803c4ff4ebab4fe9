package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/muserhq/muser/pack"
)

// streamPiece is how many bytes StageChunkFrom moves at a time: small
// enough that a piece read from the source is still in the CPU's cache
// when it is hashed and copied into the file, large enough that BLAKE3
// hashes it at full width and the system calls are few.
const streamPiece = 128 << 10

var piecePool = sync.Pool{New: func() any { b := make([]byte, streamPiece); return &b }}

// StagedChunk is a chunk streamed into a temporary file of the store and
// verified against its ID, not yet durable and not yet named: Commit
// completes rule W1 (fsync, close, rename to the ID), Abort removes it.
// Every StagedChunk must be committed or aborted; until then it holds a
// lease on the chunk and an open file. Splitting the two lets a caller
// keep reading the next chunk from the network while this one's fsync
// waits on the disk. A StagedChunk may be handed between goroutines but
// is not for concurrent use.
type StagedChunk struct {
	s    *Store
	id   pack.Digest
	tmp  *tempFile
	done func() // releases the lease and the rename's bookkeeping
	over bool
}

// Chunk returns the staged chunk's ID.
func (c *StagedChunk) Chunk() pack.Digest { return c.id }

// Commit fsyncs the staged chunk's file, closes it and renames it to the
// chunk's ID (rule W1; the directory's fsync is owed to the next ledger
// commit, as for PutChunk). On an error the file is removed. A second
// call does nothing.
func (c *StagedChunk) Commit() error {
	if c.over {
		return nil
	}
	c.over = true
	defer c.done()
	if err := c.tmp.finish(c.s.chunkPath(c.id), map[string]bool{}); err != nil {
		return fmt.Errorf("chunk %s: %w", c.id, err)
	}
	return nil
}

// Abort removes the staged chunk's file. A call after Commit does
// nothing.
func (c *StagedChunk) Abort() {
	if c.over {
		return
	}
	c.over = true
	c.tmp.abort()
	c.done()
}

// StageChunkFrom reads a chunk of size bytes from r as they arrive (a
// network body): each piece is hashed and written to a temporary file in
// one pass, so the bytes cross memory once instead of being buffered
// whole, hashed, then copied. It returns the chunk staged once all size
// bytes hashed to id; nothing is reachable under the chunk's name until
// Commit, so no unverified byte ever is, and a crash leaves at most a
// temporary file that the orphan sweep removes.
//
// It reads exactly size bytes and no more. When the store already holds
// the chunk with that size (rule W4) it reads nothing and returns nil.
// Bytes that do not hash to id are refused with a receipt naming pid and
// source (a *RefusalError), and a size out of bounds likewise; a source
// that fails or ends early returns a *ReadError wrapping its error and
// writes no receipt.
func (s *Store) StageChunkFrom(ctx context.Context, pid, id pack.Digest, size int64, r io.Reader, source string) (*StagedChunk, error) {
	if err := s.checkWritable(); err != nil {
		return nil, err
	}
	if size <= 0 || size > pack.MaxChunkBytes {
		return nil, s.refuse(pid, source, &pack.LimitError{Object: "chunk " + id.Short(), Field: "size", Got: uint64(max(size, 0)), Max: pack.MaxChunkBytes})
	}
	unlease := s.lease(id)
	path := s.chunkPath(id)
	if fi, err := s.fs.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == size {
		unlease()
		return nil, nil
	}
	dir := filepath.Dir(path)
	renamed := s.renaming(dir)
	done := func() { renamed(); unlease() }
	tmp, err := s.createTemp(dir)
	if err != nil {
		done()
		return nil, fmt.Errorf("chunk %s: %w", id, err)
	}
	c := &StagedChunk{s: s, id: id, tmp: tmp, done: done}
	if err := c.fill(ctx, pid, size, r, source); err != nil {
		c.Abort()
		return nil, err
	}
	return c, nil
}

// fill streams the chunk into its temporary file and checks its ID.
func (c *StagedChunk) fill(ctx context.Context, pid pack.Digest, size int64, r io.Reader, source string) error {
	bp := piecePool.Get().(*[]byte)
	defer piecePool.Put(bp)
	h := pack.NewChunkHasher()
	for left := size; left > 0; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("chunk %s: %w", c.id, err)
		}
		piece := (*bp)[:min(left, int64(len(*bp)))]
		n, err := io.ReadFull(r, piece)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return &ReadError{Chunk: c.id, Err: err}
		}
		_, _ = h.Write(piece[:n])
		if _, err := c.tmp.f.Write(piece[:n]); err != nil {
			return fmt.Errorf("chunk %s: writing %s: %w", c.id, c.tmp.f.Name(), err)
		}
		left -= int64(n)
	}
	var got pack.Digest
	copy(got[:], h.Sum(nil))
	if got != c.id {
		return c.s.refuse(pid, source, &pack.DigestError{Kind: pack.DigestChunk, Object: "received chunk", Expected: c.id, Actual: got})
	}
	return nil
}

// PutPackChunkFrom is StageChunkFrom then Commit: PutPackChunk for a
// chunk read from r as it arrives. It reports whether it wrote the chunk
// (false: the store already held it, and nothing was read).
func (s *Store) PutPackChunkFrom(ctx context.Context, pid, id pack.Digest, size int64, r io.Reader, source string) (bool, error) {
	c, err := s.StageChunkFrom(ctx, pid, id, size, r, source)
	if err != nil || c == nil {
		return false, err
	}
	if err := c.Commit(); err != nil {
		return false, err
	}
	return true, nil
}
