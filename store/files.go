package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store/vfs"
)

// chunkPath returns where chunk id lives: chunks/<first two hex digits>/<id>.
func (s *Store) chunkPath(id pack.Digest) string {
	h := id.String()
	return filepath.Join(s.dir, chunksDir, h[:2], h)
}

// manifestPath returns where the manifest of pack id lives.
func (s *Store) manifestPath(id pack.Digest) string {
	h := id.String()
	return filepath.Join(s.dir, packsDir, h[:2], h)
}

// ensureDir creates dir once per process. A directory it creates (the
// fan-out directory of a chunk or manifest, chunks/ itself in a new store)
// is an entry of its parent like a renamed file: the parent's fsync is
// owed to the next ledger commit (syncPending), which makes durable
// whatever the commit names below it.
func (s *Store) ensureDir(dir string) error {
	if _, ok := s.dirs.Load(dir); ok {
		return nil
	}
	var created []string // the missing directories, deepest first
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := s.fs.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		created = append(created, d)
	}
	if err := s.fs.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, d := range created {
		s.oweSync(filepath.Dir(d))
	}
	s.dirs.Store(dir, true)
	return nil
}

// oweSync records that dir holds a new entry whose directory fsync is
// owed to the next ledger commit (syncPending).
func (s *Store) oweSync(dir string) {
	if s.opts.NoSync {
		return
	}
	s.mu.Lock()
	s.oweSyncLocked(dir)
	s.mu.Unlock()
}

// oweSyncLocked is oweSync with s.mu held.
func (s *Store) oweSyncLocked(dir string) {
	s.renames++
	s.unsynced[dir] = s.renames
}

// writeDurable writes data to final following rule W1 of docs/kvpack.md:
// a temporary file in the same directory, written, fsynced, closed, then
// renamed over final. The directory's fsync, which makes the rename
// durable, is left to the caller when dirs is non-nil (dir is added to it,
// so that many files share one directory fsync before the ledger commit);
// with dirs nil it is done here.
func (s *Store) writeDurable(dir, final string, data []byte, dirs map[string]bool) error {
	t, err := s.createTemp(dir)
	if err != nil {
		return err
	}
	if _, err := t.f.Write(data); err != nil {
		t.abort()
		return fmt.Errorf("writing %s: %w", t.f.Name(), err)
	}
	return t.finish(final, dirs)
}

// tempFile is a temporary file being written in dir: the first step of
// rule W1. It is announced to the orphan sweep from before it exists
// until finish or abort, so that the sweep never takes it for a crash's
// leftover.
type tempFile struct {
	s    *Store
	dir  string
	f    vfs.File
	once sync.Once
}

// createTemp creates a temporary file in dir.
func (s *Store) createTemp(dir string) (*tempFile, error) {
	if err := s.ensureDir(dir); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.writing[dir]++
	s.mu.Unlock()
	t := &tempFile{s: s, dir: dir}
	f, err := s.fs.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		t.release()
		return nil, err
	}
	t.f = f
	return t, nil
}

// release withdraws the file's announcement to the orphan sweep.
func (t *tempFile) release() {
	t.once.Do(func() {
		t.s.mu.Lock()
		if t.s.writing[t.dir]--; t.s.writing[t.dir] <= 0 {
			delete(t.s.writing, t.dir)
		}
		t.s.mu.Unlock()
	})
}

// abort closes and removes the file.
func (t *tempFile) abort() {
	_ = t.f.Close()
	_ = t.s.fs.Remove(t.f.Name())
	t.release()
}

// finish completes rule W1 for the written file: fsynced, closed, renamed
// over final; the directory's fsync is left to the caller when dirs is
// non-nil (as writeDurable says). On an error the file is removed.
func (t *tempFile) finish(final string, dirs map[string]bool) (err error) {
	defer t.release()
	s, f, tmp := t.s, t.f, t.f.Name()
	defer func() {
		if err != nil {
			_ = s.fs.Remove(tmp)
		}
	}()
	if err = s.sync(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err = s.fs.Rename(tmp, final); err != nil {
		return err
	}
	if dirs != nil {
		dirs[t.dir] = true
		return nil
	}
	return s.syncDir(t.dir)
}

func (s *Store) sync(f vfs.File) error {
	if s.opts.NoSync {
		return nil
	}
	return f.Sync()
}

func (s *Store) syncDir(dir string) error {
	if s.opts.NoSync {
		return nil
	}
	return s.fs.SyncDir(dir)
}

// syncDirs fsyncs each directory in dirs (rule W1's last step).
func (s *Store) syncDirs(dirs map[string]bool) error {
	list := make([]string, 0, len(dirs))
	for d := range dirs {
		list = append(list, d)
	}
	return s.syncDirList(list)
}

// dirSyncParallel is how many directory fsyncs a commit runs at once: a
// pack's chunks spread over up to 256 directories, and fsyncs issued
// together share the filesystem's journal commits instead of waiting for
// one each.
const dirSyncParallel = 16

// syncDirList fsyncs every directory in list, dirSyncParallel at a time,
// and returns the first failure once all have ended.
func (s *Store) syncDirList(list []string) error {
	if s.opts.NoSync || len(list) == 0 {
		return nil
	}
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(dirSyncParallel, len(list)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(list); i = int(next.Add(1) - 1) {
				if err := s.syncDir(list[i]); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("fsync directory %s: %w", list[i], err)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// renaming records that a chunk write into dir has begun; the returned
// function, called once the write is over (renamed or failed), records
// that dir holds a rename whose directory fsync is owed to the next ledger
// commit (syncPending). Between the two, syncPending keeps dir listed:
// another operation may find the chunk (dedup) the moment it is renamed
// and commit a pack that names it.
func (s *Store) renaming(dir string) (done func()) {
	if s.opts.NoSync {
		return func() {}
	}
	s.mu.Lock()
	s.inflight[dir]++
	s.oweSyncLocked(dir)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.inflight[dir]--; s.inflight[dir] == 0 {
			delete(s.inflight, dir)
		}
		s.oweSyncLocked(dir)
		s.mu.Unlock()
	}
}

// syncPending fsyncs every directory that holds a chunk rename not yet
// made durable (rule W1: before any ledger commit that references the
// chunk). A commit calls it after its own writes: whatever chunk it names
// — written by itself, by a concurrent transfer, or found by dedup — has
// its rename durable once it returns. An entry is dropped only if no
// rename into its directory happened since the fsync began; a concurrent
// caller that finds it still listed fsyncs it again, which is harmless.
func (s *Store) syncPending() error {
	s.mu.Lock()
	if len(s.unsynced) == 0 {
		s.mu.Unlock()
		return nil
	}
	snap := make(map[string]uint64, len(s.unsynced))
	for d, seq := range s.unsynced {
		snap[d] = seq
	}
	s.mu.Unlock()
	list := make([]string, 0, len(snap))
	for d := range snap {
		list = append(list, d)
	}
	if err := s.syncDirList(list); err != nil {
		return err
	}
	s.mu.Lock()
	for d, seq := range snap {
		if s.unsynced[d] == seq && s.inflight[d] == 0 {
			delete(s.unsynced, d)
		}
	}
	s.mu.Unlock()
	return nil
}

// putChunk makes chunk data (whose ID is id, already computed by the
// caller) durable unless a file of the right size is already there (dedup,
// rule W4). It reports whether it wrote. The caller holds a lease on id.
// The chunk's directory fsync is owed to the next ledger commit
// (syncPending, which every commit runs before it names chunks), so that
// a publish or transfer of many chunks pays each directory once, and a
// commit that deduplicates a chunk another operation just renamed pays
// that rename's directory fsync too.
func (s *Store) putChunk(id pack.Digest, data []byte) (bool, error) {
	path := s.chunkPath(id)
	if fi, err := s.fs.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == int64(len(data)) {
		return false, nil
	}
	dir := filepath.Dir(path)
	done := s.renaming(dir)
	defer done()
	// A dirs map of its own: writeDurable leaves the directory fsync to
	// the caller, here syncPending.
	if err := s.writeDurable(dir, path, data, map[string]bool{}); err != nil {
		return false, fmt.Errorf("chunk %s: %w", id, err)
	}
	return true, nil
}

// errMissing marks a chunk or manifest file that is not on disk.
var errMissing = errors.New("file missing")

// errSize marks a chunk file whose size differs from the manifest's.
var errSize = errors.New("wrong size")

// readChunk reads chunk ref into buf (grown as needed) and verifies it
// against its ID (rule R2). A file that is absent wraps errMissing; one of
// the wrong size wraps errSize; wrong bytes give a *pack.DigestError.
func (s *Store) readChunk(ref pack.ChunkRef, buf []byte) ([]byte, error) {
	data, err := s.readExact(s.chunkPath(ref.ID), int64(ref.Size), buf)
	if err != nil {
		return nil, err
	}
	if got := pack.ChunkID(data); got != ref.ID {
		// The caller's *ChunkFault names the block and chunk.
		return nil, &pack.DigestError{Kind: pack.DigestChunk, Expected: ref.ID, Actual: got}
	}
	return data, nil
}

// ReadChunk reads chunk ref into buf (grown as needed) and verifies it
// against its ID (rule R2); gc does not delete the file while it is
// read. It serves a reader that holds a manifest naming the chunk but no
// pack of this store (the fleet tier's streamed restore, for the chunks
// the store already holds). A fault is returned as it is, with no
// receipt and no quarantine: the caller fetches the chunk elsewhere.
func (s *Store) ReadChunk(ref pack.ChunkRef, buf []byte) ([]byte, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	defer s.lease(ref.ID)()
	data, err := s.readChunk(ref, buf)
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", ref.ID.Short(), err)
	}
	return data, nil
}

// readExact reads the file at path, which must be exactly size bytes, into
// buf.
func (s *Store) readExact(path string, size int64, buf []byte) ([]byte, error) {
	f, err := s.fs.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, errMissing)
	}
	if err != nil {
		return nil, notRegular(err)
	}
	defer f.Close()
	if cap(buf) < int(size)+1 {
		buf = make([]byte, size+1)
	}
	buf = buf[:size+1]
	n, err := io.ReadFull(f, buf)
	switch {
	case err == nil:
		return nil, fmt.Errorf("%s: %w: longer than %d bytes", path, errSize, size)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		if int64(n) != size {
			return nil, fmt.Errorf("%s: %w: %d bytes, want %d", path, errSize, n, size)
		}
		return buf[:n], nil
	default:
		return nil, err
	}
}

// notRegular marks an open's refusal of something that is not a regular
// file (vfs.ErrNotRegular: a directory, FIFO, device or symbolic link in
// place of a chunk or manifest) as corruption of that entry, so that
// verify reports it as a finding and a restore quarantines the pack; other
// errors pass as they are. The store never blocks on such a file: vfs
// opens with O_NOFOLLOW|O_NONBLOCK and checks the type with fstat.
func notRegular(err error) error {
	if errors.Is(err, vfs.ErrNotRegular) {
		return fmt.Errorf("%w: %w", pack.ErrCorrupt, err)
	}
	return err
}

// readFileLimit reads a whole file of at most limit bytes.
func readFileLimit(fsys vfs.FS, path string, limit int64) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, &pack.LimitError{Object: path, Field: "file size", Got: uint64(fi.Size()), Max: uint64(limit)}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &pack.LimitError{Object: path, Field: "file size", Got: uint64(len(b)), Max: uint64(limit)}
	}
	return b, nil
}

// readManifest reads the manifest of pack id and checks it against the ID
// and the root (rule R1). Faults are *pack.DigestError, decode errors, or
// errMissing.
func (s *Store) readManifest(id pack.Digest) (*pack.Manifest, []byte, error) {
	b, err := readFileLimit(s.fs, s.manifestPath(id), pack.MaxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("manifest %s: %w", s.manifestPath(id), errMissing)
	}
	if err != nil {
		return nil, nil, notRegular(err)
	}
	if got := pack.PackID(b); got != id {
		return nil, b, &pack.DigestError{Kind: pack.DigestManifest, Object: "manifest", Expected: id, Actual: got}
	}
	m, err := pack.DecodeManifest(b)
	if err != nil {
		return nil, b, err
	}
	if err := m.CheckRoot(); err != nil {
		return nil, b, err
	}
	return m, b, nil
}

// moveToQuarantine moves a faulty file out of the content-addressed tree
// into quarantine/, so that nothing dedups against it and an operator can
// inspect it. A missing file is not an error.
func (s *Store) moveToQuarantine(path, name string) error {
	dir := filepath.Join(s.dir, quarantineDir)
	if err := s.ensureDir(dir); err != nil {
		return err
	}
	err := s.fs.Rename(path, filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.syncDir(filepath.Dir(path))
}
