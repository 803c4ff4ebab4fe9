package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store/vfs"
)

// Defaults of ChunkSinkOptions.
const (
	// DefaultSinkSyncers is how many chunk files a ChunkSink writes and
	// fsyncs at once. Concurrent fsyncs of different files share the
	// filesystem's journal commits, so many in flight cost far less than
	// one after another (docs/benchmarks.md, "Replication").
	DefaultSinkSyncers = 16
	// DefaultSinkPendingBytes bounds the bytes of verified chunks a
	// ChunkSink holds in memory, read but not yet written to their
	// files, beyond which Put waits.
	DefaultSinkPendingBytes = 64 << 20
)

// sinkReadSize is the most bytes Put asks its reader for at once, and
// the piece it hashes at once: small enough that a piece is hashed while
// it is still in the CPU's cache, large enough for BLAKE3's SIMD paths.
const sinkReadSize = 128 << 10

// ChunkSinkOptions qualify NewChunkSink.
type ChunkSinkOptions struct {
	// Syncers is how many chunk files are written and fsynced at once
	// (DefaultSinkSyncers when zero).
	Syncers int
	// PendingBytes bounds the chunk bytes held in memory between Put's
	// read and the file's write (DefaultSinkPendingBytes when zero; one
	// chunk is always let through, whatever its size).
	PendingBytes int64
}

// ChunkSink stores the chunks a transfer receives for one pack: it is the
// store's one way to take chunks from a stream (a replication peer's
// chunk stream, a fleet tier's GETs). Put reads
// a chunk from its source, hashing the bytes as they arrive (one pass: a
// piece is hashed right after it is read), and refuses bytes that are not
// the chunk (a receipt naming the pack and the source) before anything is
// written. Background workers then write each verified chunk to a
// temporary file in its directory, fsync it, close it and rename it to
// its ID, several at once, while Put goes on with the next chunk — rule W1
// of docs/kvpack.md in the same order as PutChunk, with the file system
// taken off the receiving goroutine. The directory fsyncs are owed to the
// next ledger commit, as for PutChunk. Close waits until every chunk Put
// accepted is durable and renamed (or failed); the caller publishes the
// pack only after Close returned nil. No unverified byte ever reaches a
// file, and a chunk's ID names a file only once its bytes are fsynced.
//
// The write of a chunk file uses direct I/O where the file system offers
// it (ChunkWriteMode): Put reads the chunk into a page-aligned buffer,
// and the worker writes its aligned body from that buffer straight to
// the disk in one write, with no copy into the page cache, then the tail
// (the bytes past the last multiple of the alignment) through the page
// cache; a chunk smaller than the alignment is written through the page
// cache whole. The temporary file, fsync, rename order is the same.
//
// Put and Held are safe for concurrent use (one sink per pack, fed by
// several transfers at once). Close waits for the Puts in progress; a
// Put after Close returns ErrClosed.
type ChunkSink struct {
	s       *Store
	pid     pack.Digest
	source  string
	queue   chan *sinkChunk
	workers sync.WaitGroup
	bufs    sync.Pool
	puts    sync.WaitGroup // Puts in progress; Close waits for them

	mu      sync.Mutex
	room    *sync.Cond // signalled when pending bytes are released
	pending int64      // bytes read by Put and not yet written
	limit   int64
	err     error // the first failure of a worker: poisons the sink
	leases  []pack.Digest
	closed  bool
	written int
}

// sinkChunk is a verified chunk waiting to be written.
type sinkChunk struct {
	id   pack.Digest
	buf  *[]byte
	size int
}

// sinkFile is a written, not yet durable, temporary chunk file.
type sinkFile struct {
	f     vfs.File
	tmp   string
	final string
	done  func() // ends the write's announcements (writing, renaming)
}

// NewChunkSink returns a sink for the chunks of pack pid (an offer Admit
// accepted) arriving from source; refusals' receipts name both.
func (s *Store) NewChunkSink(pid pack.Digest, source string, opts ChunkSinkOptions) (*ChunkSink, error) {
	if err := s.checkWritable(); err != nil {
		return nil, err
	}
	if opts.Syncers <= 0 {
		opts.Syncers = DefaultSinkSyncers
	}
	if opts.PendingBytes <= 0 {
		opts.PendingBytes = DefaultSinkPendingBytes
	}
	k := &ChunkSink{s: s, pid: pid, source: source, limit: opts.PendingBytes,
		queue: make(chan *sinkChunk, 4*opts.Syncers)}
	k.room = sync.NewCond(&k.mu)
	for range opts.Syncers {
		k.workers.Add(1)
		go k.worker()
	}
	return k, nil
}

// Put reads chunk id, size bytes, from r and verifies it; a worker
// writes, fsyncs and renames it in the background (see ChunkSink). It
// reads exactly size bytes and no more, so r may be a stream that goes
// on with the next chunk, or a body whose length was not given: the hash
// decides. A chunk whose file the store already holds with that size is
// read and verified but not written again (rule W4; Held lets a caller
// skip it before reading). Bytes that do not hash to id, and a size out
// of bounds, are refused with a receipt naming the sink's pack and
// source (a *RefusalError). A reader that fails or ends before size
// bytes returns a *SourceError wrapping its error (io.ErrUnexpectedEOF
// for an early end) and writes no receipt: the fault is the source's,
// not the chunk's. A failed write, fsync or rename of an earlier chunk
// poisons the sink, and every later Put returns that error.
func (k *ChunkSink) Put(ctx context.Context, id pack.Digest, size int, r io.Reader) error {
	if err := k.s.checkWritable(); err != nil {
		return err
	}
	if size <= 0 || size > pack.MaxChunkBytes {
		return k.s.refuse(k.pid, k.source, &pack.LimitError{Object: "chunk " + id.Short(), Field: "size", Got: uint64(max(size, 0)), Max: pack.MaxChunkBytes})
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return fmt.Errorf("chunk sink of pack %s: %w", k.pid.Short(), ErrClosed)
	}
	k.puts.Add(1)
	defer k.puts.Done()
	// Wait for room: the bytes between read and write are bounded.
	for k.err == nil && k.pending > 0 && k.pending+int64(size) > k.limit {
		k.room.Wait()
	}
	if k.err != nil {
		err := k.err
		k.mu.Unlock()
		return err
	}
	k.pending += int64(size)
	// The lease keeps gc from deleting the file between its rename and
	// the publish that follows Close.
	k.leases = append(k.leases, id)
	k.mu.Unlock()
	k.s.lease(id)

	buf := k.getBuf(size)
	queued := false
	defer func() {
		if !queued {
			k.release(buf, size)
		}
	}()
	b := (*buf)[:size]
	h := pack.NewChunkHasher()
	for off := 0; off < size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := r.Read(b[off:min(size, off+sinkReadSize)])
		if n > 0 {
			_, _ = h.Write(b[off : off+n])
			off += n
		}
		if off == size {
			break
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return &SourceError{Chunk: id, Err: err}
		}
	}
	var got pack.Digest
	h.Sum(got[:0])
	if got != id {
		return k.s.refuse(k.pid, k.source, &pack.DigestError{Kind: pack.DigestChunk, Object: "received chunk", Expected: id, Actual: got})
	}
	if k.s.holds(pack.ChunkRef{ID: id, Size: uint32(size)}) {
		return nil
	}
	select {
	case k.queue <- &sinkChunk{id: id, buf: buf, size: size}:
		queued = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Held reports whether the store already holds chunk id as a file of
// size bytes (rule W4), for a caller that can skip a chunk before it
// begins to read it (a GET not yet sent): a held chunk need not be Put.
// Either way the chunk is leased until Close, like a chunk Put accepted,
// so that gc does not take it before the publish that follows. After
// Close it reports false.
func (k *ChunkSink) Held(id pack.Digest, size int) bool {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return false
	}
	k.puts.Add(1) // Close releases the leases only after this one is taken
	defer k.puts.Done()
	k.leases = append(k.leases, id)
	k.mu.Unlock()
	k.s.lease(id)
	return size > 0 && size <= pack.MaxChunkBytes && k.s.holds(pack.ChunkRef{ID: id, Size: uint32(size)})
}

// release returns a chunk's buffer and its pending bytes.
func (k *ChunkSink) release(buf *[]byte, size int) {
	k.bufs.Put(buf)
	k.mu.Lock()
	k.pending -= int64(size)
	k.mu.Unlock()
	k.room.Broadcast()
}

// Close waits until every chunk Put wrote is fsynced and renamed to its
// ID, releases the sink's leases and returns the first failure (nil when
// every chunk is durable but for its directory's fsync, which the next
// ledger commit pays).
func (k *ChunkSink) Close() error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return fmt.Errorf("chunk sink of pack %s: %w", k.pid.Short(), ErrClosed)
	}
	k.closed = true
	k.mu.Unlock()
	k.puts.Wait()
	close(k.queue)
	k.workers.Wait()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.s.releaseAll(k.leases)
	k.leases = nil
	return k.err
}

// Written returns how many chunk files the sink made durable so far.
func (k *ChunkSink) Written() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.written
}

// worker writes, fsyncs, closes and renames the chunks Put verified.
func (k *ChunkSink) worker() {
	defer k.workers.Done()
	for c := range k.queue {
		k.mu.Lock()
		failed := k.err != nil
		k.mu.Unlock()
		if failed {
			k.release(c.buf, c.size)
			continue
		}
		path := k.s.chunkPath(c.id)
		sf, err := k.s.writeTemp(filepath.Dir(path), (*c.buf)[:c.size])
		k.release(c.buf, c.size)
		if err == nil {
			sf.final = path
			err = k.s.finishTemp(sf)
		}
		if err != nil {
			k.poison(fmt.Errorf("chunk %s: %w", c.id, err))
			continue
		}
		k.mu.Lock()
		k.written++
		k.mu.Unlock()
	}
}

// poison records err as the sink's failure unless one is recorded, and
// returns the recorded one.
func (k *ChunkSink) poison(err error) error {
	k.mu.Lock()
	if k.err == nil {
		k.err = err
	}
	err = k.err
	k.mu.Unlock()
	k.room.Broadcast() // Puts waiting for room see the failure
	return err
}

// getBuf returns a buffer of at least n bytes, page-aligned for direct
// I/O: chunks of one model are all the same size, so a recycled buffer
// fits the next chunk.
func (k *ChunkSink) getBuf(n int) *[]byte {
	if p, ok := k.bufs.Get().(*[]byte); ok && cap(*p) >= n {
		return p
	}
	b := alignedBuf(n)
	return &b
}

// writeTemp is the first half of writeDurable for a chunk file: the
// temporary file in dir, written (with direct I/O where the store uses
// it: createChunkTemp, writeChunkFile) but neither fsynced nor closed. The
// write is announced (writing: the orphan sweep leaves the directory's
// temporary files alone; renaming: the next commit owes dir's fsync)
// until finishTemp or dropTemp ends it.
func (s *Store) writeTemp(dir string, data []byte) (*sinkFile, error) {
	if err := s.ensureDir(dir); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.writing[dir]++
	s.mu.Unlock()
	renamed := s.renaming(dir)
	done := func() {
		renamed()
		s.mu.Lock()
		if s.writing[dir]--; s.writing[dir] <= 0 {
			delete(s.writing, dir)
		}
		s.mu.Unlock()
	}
	f, err := s.createChunkTemp(dir, data)
	if err != nil {
		done()
		return nil, err
	}
	err = writeChunkFile(f, data)
	if _, direct := f.(vfs.DirectFile); direct && errors.Is(err, syscall.EINVAL) {
		// The file system took O_DIRECT at open but refuses the
		// write: from now on the store writes through the page
		// cache, and this chunk goes to a new plain file.
		_ = f.Close()
		_ = s.fs.Remove(f.Name())
		s.directRefused(err)
		if f, err = s.fs.CreateTemp(dir, tempPrefix+"*"); err != nil {
			done()
			return nil, err
		}
		err = writeChunkFile(f, data)
	}
	sf := &sinkFile{f: f, tmp: f.Name(), done: done}
	if err != nil {
		s.dropTemp(sf)
		return nil, fmt.Errorf("writing %s: %w", sf.tmp, err)
	}
	return sf, nil
}

// finishTemp is the second half: fsync, close, rename over the final name
// (rule W1; the directory's fsync is owed to the next ledger commit). On
// failure the temporary file is removed.
func (s *Store) finishTemp(sf *sinkFile) (err error) {
	defer sf.done()
	defer func() {
		if err != nil {
			_ = s.fs.Remove(sf.tmp)
		}
	}()
	if err = s.sync(sf.f); err != nil {
		_ = sf.f.Close()
		return fmt.Errorf("fsync %s: %w", sf.tmp, err)
	}
	if err = sf.f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", sf.tmp, err)
	}
	return s.fs.Rename(sf.tmp, sf.final)
}

// dropTemp closes and removes a written temporary file that will not be
// renamed.
func (s *Store) dropTemp(sf *sinkFile) {
	_ = sf.f.Close()
	_ = s.fs.Remove(sf.tmp)
	sf.done()
}
