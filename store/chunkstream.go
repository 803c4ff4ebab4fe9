package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store/vfs"
)

// streamPiece is how many bytes PutPackChunkFrom moves at a time: small
// enough that a piece read from the source is still in the CPU's cache
// when it is hashed and copied into the file, large enough that BLAKE3
// hashes it at full width and the system calls are few.
const streamPiece = 128 << 10

var piecePool = sync.Pool{New: func() any { b := make([]byte, streamPiece); return &b }}

// PutPackChunkFrom is PutPackChunk for a chunk of size bytes read from r
// as they arrive (a network body): each piece is hashed and written to
// the chunk's temporary file in one pass, so the bytes cross memory once
// instead of being buffered whole, hashed, then copied. Rule W1 holds as
// for PutPackChunk: the temporary file is fsynced and renamed to the
// chunk's ID only after all size bytes hashed to id, so no unverified
// byte is ever reachable under a chunk's name, and a crash leaves at most
// a temporary file that the orphan sweep removes.
//
// It reads exactly size bytes and no more. When the store already holds
// the chunk with that size (rule W4) it reads nothing and reports false.
// Bytes that do not hash to id are refused with a receipt naming pid and
// source (a *RefusalError), and a size out of bounds likewise; a source
// that fails or ends early returns a *ReadError wrapping its error and
// writes no receipt.
func (s *Store) PutPackChunkFrom(ctx context.Context, pid, id pack.Digest, size int64, r io.Reader, source string) (bool, error) {
	if err := s.checkWritable(); err != nil {
		return false, err
	}
	if size <= 0 || size > pack.MaxChunkBytes {
		return false, s.refuse(pid, source, &pack.LimitError{Object: "chunk " + id.Short(), Field: "size", Got: uint64(max(size, 0)), Max: pack.MaxChunkBytes})
	}
	defer s.lease(id)()
	path := s.chunkPath(id)
	if fi, err := s.fs.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == size {
		return false, nil
	}
	dir := filepath.Dir(path)
	done := s.renaming(dir)
	defer done()
	var bad *pack.DigestError
	err := s.writeDurableFunc(dir, path, func(f vfs.File) error {
		bp := piecePool.Get().(*[]byte)
		defer piecePool.Put(bp)
		h := pack.NewChunkHasher()
		for left := size; left > 0; {
			if err := ctx.Err(); err != nil {
				return err
			}
			piece := (*bp)[:min(left, int64(len(*bp)))]
			n, err := io.ReadFull(r, piece)
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return &ReadError{Chunk: id, Err: err}
			}
			_, _ = h.Write(piece[:n])
			if _, err := f.Write(piece[:n]); err != nil {
				return fmt.Errorf("writing %s: %w", f.Name(), err)
			}
			left -= int64(n)
		}
		var got pack.Digest
		copy(got[:], h.Sum(nil))
		if got != id {
			bad = &pack.DigestError{Kind: pack.DigestChunk, Object: "received chunk", Expected: id, Actual: got}
			return bad
		}
		return nil
	}, map[string]bool{})
	switch {
	case bad != nil:
		return false, s.refuse(pid, source, bad)
	case err != nil:
		var re *ReadError
		if errors.As(err, &re) {
			return false, err
		}
		return false, fmt.Errorf("chunk %s: %w", id, err)
	}
	return true, nil
}
