package store

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"unsafe"

	"github.com/muserhq/muser/store/vfs"
)

// sinkBufAlign is the memory alignment of a ChunkSink's chunk buffers: a
// page, which satisfies the direct-I/O alignment of every common file
// system (vfs.DirectFile.Align). A file that asks for more is written
// through the page cache.
const sinkBufAlign = 4096

// alignedBuf returns n bytes whose first byte is sinkBufAlign-aligned
// (the Go heap never moves an object, so the alignment holds for the
// buffer's life).
func alignedBuf(n int) []byte {
	b := make([]byte, n+sinkBufAlign)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (sinkBufAlign - 1))
	return b[off : off+n : off+n]
}

// ChunkWriteMode says how the store writes the chunks a ChunkSink
// receives: with direct I/O (O_DIRECT: from the received buffer to the
// disk, no copy into the page cache) or through the page cache. The
// store finds out with its first received chunk file and keeps the
// answer: a file system that refuses direct I/O (tmpfs on older kernels,
// FUSE) is written through the page cache, logged once, never an error.
type ChunkWriteMode struct {
	// Known is false until the store has written a received chunk (or
	// was opened with Options.NoDirectWrites).
	Known bool
	// Direct is true when received chunks are written with direct I/O.
	Direct bool
	// Align is the direct-I/O alignment in bytes (0 without direct
	// I/O): the part of a chunk beyond the last multiple of Align, and a
	// chunk smaller than Align, is written through the page cache.
	Align int
	// Fallback says why the store writes through the page cache, when
	// it does.
	Fallback string
}

// directWrites is a store's ChunkWriteMode, decided once.
type directWrites struct {
	mu   sync.Mutex
	mode ChunkWriteMode
}

// ChunkWrites returns how the store writes received chunks.
func (s *Store) ChunkWrites() ChunkWriteMode {
	s.direct.mu.Lock()
	defer s.direct.mu.Unlock()
	return s.direct.mode
}

// setBuffered records that received chunks go through the page cache,
// and why, unless the store had already decided; the decision is logged
// once (Options.Logger, else slog.Default).
func (s *Store) setBuffered(why string) { s.fallBack(why, false) }

// directRefused records that a direct write failed with EINVAL on a
// file the file system opened with O_DIRECT: the store writes received
// chunks through the page cache from now on, even if it had decided on
// direct writes (logged once).
func (s *Store) directRefused(err error) {
	s.fallBack("a direct write was refused: "+err.Error(), true)
}

// fallBack switches received chunks to page-cache writes for reason why
// when the store has not decided yet, or (overrideDirect) when it had
// decided on direct writes, and logs the switch.
func (s *Store) fallBack(why string, overrideDirect bool) {
	s.direct.mu.Lock()
	m := s.direct.mode
	change := !m.Known || overrideDirect && m.Direct
	if change {
		s.direct.mode = ChunkWriteMode{Known: true, Fallback: why}
	}
	s.direct.mu.Unlock()
	if !change {
		return
	}
	log := s.opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Info("store: received chunks are written through the page cache", "dir", s.dir, "reason", why)
}

// createChunkTemp creates the temporary file for a received chunk of
// data in dir: open for direct I/O when the store writes with it, data
// is at least one alignment unit and aligned in memory; otherwise a
// plain temporary file.
func (s *Store) createChunkTemp(dir string, data []byte) (vfs.File, error) {
	s.direct.mu.Lock()
	mode := s.direct.mode
	s.direct.mu.Unlock()
	dc, ok := s.fs.(vfs.DirectCreator)
	if !ok && !mode.Known {
		s.setBuffered("the file system layer offers no direct I/O")
		mode = s.ChunkWrites()
	}
	if mode.Known && (!mode.Direct || len(data) < mode.Align ||
		uintptr(unsafe.Pointer(unsafe.SliceData(data)))%uintptr(mode.Align) != 0) {
		return s.fs.CreateTemp(dir, tempPrefix+"*")
	}
	f, err := dc.CreateTempDirect(dir, tempPrefix+"*")
	if errors.Is(err, vfs.ErrNoDirect) {
		s.setBuffered(err.Error())
		return s.fs.CreateTemp(dir, tempPrefix+"*")
	}
	if err != nil {
		return nil, err
	}
	if !mode.Known {
		s.direct.mu.Lock()
		if !s.direct.mode.Known {
			s.direct.mode = ChunkWriteMode{Known: true, Direct: true, Align: f.Align()}
		}
		s.direct.mu.Unlock()
	}
	return f, nil
}

// writeChunkFile writes data to f, a file createChunkTemp made: on a
// direct file, the longest aligned prefix with direct I/O in one write,
// then direct I/O turned off and the tail (if any) written through the
// page cache; on any other file, in one write.
func writeChunkFile(f vfs.File, data []byte) error {
	d, ok := f.(vfs.DirectFile)
	if !ok {
		_, err := f.Write(data)
		return err
	}
	align := d.Align()
	body := len(data) &^ (align - 1)
	if uintptr(unsafe.Pointer(unsafe.SliceData(data)))%uintptr(align) != 0 {
		body = 0 // not aligned in memory: everything through the page cache
	}
	if body > 0 {
		if _, err := d.Write(data[:body]); err != nil {
			return fmt.Errorf("direct write: %w", err)
		}
	}
	if body == len(data) {
		return nil
	}
	if err := d.EndDirect(); err != nil {
		return err
	}
	_, err := d.Write(data[body:])
	return err
}
