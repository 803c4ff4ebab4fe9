package store

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store/vfs"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Defaults for Options fields left zero.
const (
	// DefaultBlockTokens is the block size of a new store.
	DefaultBlockTokens = 64
	// DefaultLockTimeout is how long Open waits for another process's lock
	// on the ledger before it returns ErrLocked.
	DefaultLockTimeout = 250 * time.Millisecond
	// DefaultOrphanGrace is how old an unreferenced chunk or manifest file
	// must be before gc deletes it.
	DefaultOrphanGrace = time.Hour
	// DefaultReceiptCount is the most receipts kept.
	DefaultReceiptCount = 10000
	// DefaultReceiptAge is how long a receipt is kept.
	DefaultReceiptAge = 30 * 24 * time.Hour
)

// Files and directories under a store's data directory.
const (
	ledgerFile    = "ledger.db"
	sealKeyFile   = "seal.key"
	chunksDir     = "chunks"
	packsDir      = "packs"
	quarantineDir = "quarantine"
	tempPrefix    = ".tmp-"
	// tempLedgerPrefix names a new ledger being built (createLedger).
	tempLedgerPrefix = ".tmp-ledger-"
)

// Options configure Open. The zero value opens (creating if needed) a
// read-write store with the defaults above.
type Options struct {
	// BlockTokens is the block size the caller expects. Zero accepts the
	// store's (DefaultBlockTokens for a new store); any other value must
	// equal it or Open returns a *BlockSizeError.
	BlockTokens int
	// MustExist makes Open fail with ErrNotFound instead of creating a
	// store where there is none.
	MustExist bool
	// ReadOnly opens the ledger shared and read-only; every change
	// returns ErrReadOnly.
	ReadOnly bool
	// LockTimeout bounds the wait for another process's lock on the
	// ledger (DefaultLockTimeout if zero).
	LockTimeout time.Duration
	// Node names this store as a producer in the manifests it publishes
	// and the seals it makes. Empty means the name recorded at creation
	// (the host name then).
	Node string
	// SealKey is the secret seals are made and checked with (at least
	// pack.MinSealKey bytes). Nil means the store's own key, read from
	// seal.key in the data directory (created with the store).
	SealKey []byte
	// OrphanGrace is how old an unreferenced file must be before gc
	// deletes it (DefaultOrphanGrace if zero; negative means no grace).
	OrphanGrace time.Duration
	// ReceiptCount and ReceiptAge bound receipt retention
	// (DefaultReceiptCount and DefaultReceiptAge if zero).
	ReceiptCount int
	ReceiptAge   time.Duration
	// NoSync skips every fsync (chunk files, manifests, directories and
	// the ledger), as bbolt's DB.NoSync does. A process crash still
	// leaves a whole pack or none (the page cache survives it) but a
	// power failure may not: for tests and benchmarks only.
	NoSync bool
	// NoDirectWrites writes the chunks a ChunkSink receives through the
	// page cache, as every other file, instead of with direct I/O
	// (ChunkWriteMode says which the store uses; a file system that
	// refuses direct I/O is written through the page cache anyway).
	NoDirectWrites bool
	// Logger receives the store's rare notices (the fallback from
	// direct I/O); slog.Default when nil.
	Logger *slog.Logger
	// FS is the file system (vfs.Default if nil); tests inject faults
	// through it.
	FS vfs.FS
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// Store is an open data directory. Its methods are safe for concurrent use
// by many goroutines; only one process may open a store read-write at a
// time.
type Store struct {
	dir   string
	opts  Options
	fs    vfs.FS
	db    *bolt.DB
	block int
	node  string
	key   []byte

	// wmu serialises everything that changes the ledger, the index or the
	// set of files: publish commits, gc, remove, quarantine.
	wmu sync.Mutex
	// mu guards the fields below; hold it only briefly.
	mu      sync.Mutex
	ix      *index
	leases  map[pack.Digest]int   // chunk and pack IDs in use by in-flight operations
	lastUse map[pack.Digest]int64 // last use (unix ns) not yet flushed to the ledger
	writing map[string]int        // directories with a temporary file being written
	gen     uint64                // last publish generation handed out
	dirs    sync.Map              // directories known to exist
	closed  bool
	// unsynced maps each chunk directory holding a rename whose directory
	// fsync is still owed (rule W1) to the sequence number of its latest
	// such rename; every ledger commit that names chunks pays the debt
	// first (syncPending).
	unsynced map[string]uint64
	// inflight counts, per chunk directory, the chunk writes between
	// their start and the recording of their rename in unsynced: while
	// one runs, syncPending keeps the directory listed, so that a commit
	// that deduplicates the chunk the moment its rename lands still pays
	// the directory's fsync.
	inflight map[string]int
	renames  uint64    // sequence of the renames recorded in unsynced
	opened   time.Time // when Open ran (the real clock, as file times are)
	// direct is how received chunks are written (ChunkWrites).
	direct directWrites
}

// Open opens the store in dir, creating it unless opts.MustExist. Another
// process holding the ledger makes Open fail after opts.LockTimeout with an
// error wrapping ErrLocked.
func Open(dir string, opts Options) (*Store, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.OrphanGrace == 0 {
		opts.OrphanGrace = DefaultOrphanGrace
	}
	if opts.ReceiptCount == 0 {
		opts.ReceiptCount = DefaultReceiptCount
	}
	if opts.ReceiptAge == 0 {
		opts.ReceiptAge = DefaultReceiptAge
	}
	if opts.BlockTokens < 0 || opts.BlockTokens > pack.MaxBlockTokens {
		return nil, fmt.Errorf("store %s: block size %d is outside 1..%d", dir, opts.BlockTokens, pack.MaxBlockTokens)
	}
	s := &Store{dir: dir, opts: opts, fs: opts.FS, ix: newIndex(),
		leases: map[pack.Digest]int{}, lastUse: map[pack.Digest]int64{}, writing: map[string]int{},
		unsynced: map[string]uint64{}, inflight: map[string]int{}, opened: time.Now()}
	if opts.NoDirectWrites {
		s.direct.mode = ChunkWriteMode{Known: true, Fallback: "the store was opened with NoDirectWrites"}
	}
	ledger := filepath.Join(dir, ledgerFile)
	if _, err := s.fs.Stat(ledger); errors.Is(err, fs.ErrNotExist) && (opts.MustExist || opts.ReadOnly) {
		return nil, fmt.Errorf("no store at %s (no %s): %w", dir, ledgerFile, ErrNotFound)
	}
	if !opts.ReadOnly {
		if err := s.fs.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("store %s: %w", dir, err)
		}
		if _, err := s.fs.Stat(ledger); errors.Is(err, fs.ErrNotExist) {
			if err := s.createLedger(ledger); err != nil {
				return nil, err
			}
		}
	}
	var db *bolt.DB
	err := guard(ledger, func() error {
		var err error
		db, err = bolt.Open(ledger, 0o600, &bolt.Options{Timeout: opts.LockTimeout, ReadOnly: opts.ReadOnly, NoSync: opts.NoSync})
		return err
	})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("store %s: %w (gave up after %v waiting for the lock on %s; is `muser serve` running?)", dir, ErrLocked, opts.LockTimeout, ledger)
		}
		return nil, fmt.Errorf("store %s: opening ledger: %w", dir, err)
	}
	s.db = db
	if err := guard(ledger, s.init); err != nil {
		_ = db.Close()
		return nil, err
	}
	if !opts.ReadOnly {
		s.oweExistingChunkDirs()
		s.removeTempLedgers()
	}
	return s, nil
}

// oweExistingChunkDirs lists every chunk directory already on disk as
// owing its fsync: a process that crashed may have renamed chunks into
// one without syncing it, and dedup trusts a chunk file's presence, so
// the first ledger commit after opening syncs them all (at most 256
// directories, once).
func (s *Store) oweExistingChunkDirs() {
	if s.opts.NoSync {
		return
	}
	root := filepath.Join(s.dir, chunksDir)
	ents, err := s.fs.ReadDir(root)
	if err != nil {
		return // no chunk directory yet: nothing can be owed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range ents {
		if e.IsDir() {
			s.renames++
			s.unsynced[filepath.Join(root, e.Name())] = s.renames
		}
	}
}

// createLedger makes a new store's ledger atomically: it is built and
// committed (fsynced) under a temporary name, then linked to its final
// name, which fails rather than replace a ledger another process created
// meanwhile, and the directory is fsynced. A process killed at any instant
// leaves either no ledger.db (no store: a read-only open finds none, the
// next read-write open creates it) or a whole one, never one without its
// meta bucket. A temporary ledger a kill left behind is removed by the
// next read-write open that creates or finds the store.
func (s *Store) createLedger(ledger string) error {
	f, err := os.CreateTemp(s.dir, tempLedgerPrefix+"*")
	if err != nil {
		return fmt.Errorf("store %s: creating ledger: %w", s.dir, err)
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp)
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: s.opts.LockTimeout, NoSync: s.opts.NoSync})
	if err != nil {
		return fmt.Errorf("store %s: creating ledger: %w", s.dir, err)
	}
	err = db.Update(s.initLedger)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store %s: initialising ledger: %w", s.dir, err)
	}
	if err := os.Link(tmp, ledger); err != nil {
		if _, serr := os.Lstat(ledger); serr == nil {
			return nil // another process created the store first: its ledger stands
		}
		return fmt.Errorf("store %s: creating ledger: %w", s.dir, err)
	}
	if err := s.syncDir(s.dir); err != nil {
		return fmt.Errorf("store %s: fsync: %w", s.dir, err)
	}
	return nil
}

// removeTempLedgers deletes temporary ledgers that processes killed while
// creating the store left behind. The caller holds the ledger's lock, so
// no creation can still be under way: a creator that lost its temporary
// file finds ledger.db present and uses it.
func (s *Store) removeTempLedgers() {
	ents, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempLedgerPrefix) && e.Type().IsRegular() {
			_ = s.fs.Remove(filepath.Join(s.dir, e.Name()))
		}
	}
}

// initLedger creates the buckets and the meta records of a new ledger.
func (s *Store) initLedger(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketMeta, bucketPacks, bucketBlocks, bucketChunks, bucketReceipts, bucketReplay} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if meta.Get(metaFormat) != nil {
		return nil
	}
	block := s.opts.BlockTokens
	if block == 0 {
		block = DefaultBlockTokens
	}
	node := s.opts.Node
	if node == "" {
		node, _ = os.Hostname()
		if node == "" {
			node = "local"
		}
	}
	for k, v := range map[string][]byte{
		string(metaFormat):      u32bytes(pack.FormatVersion),
		string(metaBlockTokens): u32bytes(uint32(block)),
		string(metaCreated):     u64bytes(uint64(s.opts.Now().UnixNano())),
		string(metaNode):        []byte(node),
		string(metaGeneration):  u64bytes(0),
		string(metaSealGen):     u64bytes(0),
	} {
		if err := meta.Put([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}

// init creates or checks the meta bucket, loads the seal key and rebuilds
// the index.
func (s *Store) init() error {
	fresh := true
	_ = s.db.View(func(tx *bolt.Tx) error {
		// A ledger is new only if it has no meta and no packs: a damaged
		// one that lost its meta must not be re-initialised over its data.
		m := tx.Bucket(bucketMeta)
		fresh = (m == nil || m.Get(metaFormat) == nil) && tx.Bucket(bucketPacks) == nil
		return nil
	})
	// Only a new ledger is written at open, so that opening an existing
	// store (to verify it, say) leaves its file untouched.
	if fresh && s.opts.ReadOnly {
		// A ledger with no meta and no packs was never initialised (a
		// process of an earlier build killed while creating the store):
		// there is no store yet, and a read-write open makes one.
		return fmt.Errorf("no store at %s (%s was never initialised): %w", s.dir, ledgerFile, ErrNotFound)
	}
	if !s.opts.ReadOnly && fresh {
		err := s.db.Update(s.initLedger)
		if err != nil {
			return fmt.Errorf("store %s: initialising ledger: %w", s.dir, err)
		}
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%w: ledger has no meta bucket", pack.ErrCorrupt)
		}
		format, ok := getU32(meta.Get(metaFormat))
		if !ok {
			return fmt.Errorf("%w: ledger meta/format is missing or malformed", pack.ErrCorrupt)
		}
		if format != pack.FormatVersion {
			return fmt.Errorf("%w: ledger format %d, this build reads %d", pack.ErrCorrupt, format, pack.FormatVersion)
		}
		block, ok := getU32(meta.Get(metaBlockTokens))
		if !ok || block == 0 || block > pack.MaxBlockTokens {
			return fmt.Errorf("%w: ledger meta/block_tokens is missing or out of range", pack.ErrCorrupt)
		}
		if s.opts.BlockTokens != 0 && s.opts.BlockTokens != int(block) {
			return &BlockSizeError{Dir: s.dir, Configured: s.opts.BlockTokens, Stored: int(block)}
		}
		s.block = int(block)
		s.node = s.opts.Node
		if s.node == "" {
			s.node = string(meta.Get(metaNode))
		}
		if s.gen, ok = getU64(meta.Get(metaGeneration)); !ok {
			return fmt.Errorf("%w: ledger meta/generation is missing or malformed", pack.ErrCorrupt)
		}
		return s.loadIndex(tx)
	})
	if err != nil {
		var bse *BlockSizeError
		if errors.As(err, &bse) {
			return err
		}
		return fmt.Errorf("store %s: %w", s.dir, err)
	}
	return s.loadKey()
}

// guard runs fn, which reads the ledger, turning a panic or a memory fault
// inside bbolt (which maps the file and trusts its page structure) into an
// error wrapping pack.ErrCorrupt that names the ledger file. It covers the
// reads that touch every record (open, verify, listings); a damaged
// ledger is then reported instead of crashing the process there.
func guard(ledger string, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: ledger %s is damaged (%v); move the data directory aside and restore a backup", pack.ErrCorrupt, ledger, r)
		}
	}()
	return fn()
}

// ledgerPath returns the ledger file's path.
func (s *Store) ledgerPath() string { return filepath.Join(s.dir, ledgerFile) }

// loadIndex rebuilds the radix index from the blocks bucket, leaving out
// quarantined packs.
func (s *Store) loadIndex(tx *bolt.Tx) error {
	b, pb := tx.Bucket(bucketBlocks), tx.Bucket(bucketPacks)
	if b == nil || pb == nil {
		return fmt.Errorf("%w: ledger has no blocks or packs bucket", pack.ErrCorrupt)
	}
	return b.ForEach(func(k, v []byte) error {
		if rv := pb.Get(k); rv != nil {
			if r, err := decodePackRecord(rv); err == nil && r.quarantined() {
				return nil // quarantined packs are never matched
			}
		}
		id, err := digestKey(k)
		if err != nil {
			return fmt.Errorf("blocks bucket: %w", err)
		}
		c, err := decodeChain(v)
		if err != nil {
			return fmt.Errorf("blocks/%s: %w", id, err)
		}
		s.ix.add(id, c)
		return nil
	})
}

// loadKey reads the seal key, creating it for a new store.
func (s *Store) loadKey() error {
	if s.opts.SealKey != nil {
		if len(s.opts.SealKey) < pack.MinSealKey {
			return fmt.Errorf("%w: seal key is %d bytes, need at least %d", pack.ErrInvalid, len(s.opts.SealKey), pack.MinSealKey)
		}
		s.key = s.opts.SealKey
		return nil
	}
	path := filepath.Join(s.dir, sealKeyFile)
	key, err := readFileLimit(s.fs, path, 4096)
	if errors.Is(err, fs.ErrNotExist) && !s.opts.ReadOnly {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		if err := s.writeDurable(s.dir, path, key, nil); err != nil {
			return fmt.Errorf("store %s: creating seal key: %w", s.dir, err)
		}
		s.key = key
		return nil
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // read-only store without a key: it cannot export
		}
		return fmt.Errorf("store %s: reading seal key: %w", s.dir, err)
	}
	if len(key) < pack.MinSealKey {
		return fmt.Errorf("store %s: seal key %s is %d bytes, need at least %d", s.dir, path, len(key), pack.MinSealKey)
	}
	s.key = key
	return nil
}

// Close flushes pending last-use times and closes the ledger. In-flight
// operations must have returned.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	var err error
	s.mu.Lock()
	pending := len(s.lastUse)
	s.mu.Unlock()
	if !s.opts.ReadOnly && pending > 0 {
		err = s.db.Update(func(tx *bolt.Tx) error { return s.flushLastUse(tx) })
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// Dir returns the store's data directory.
func (s *Store) Dir() string { return s.dir }

// BlockTokens returns the number of tokens in one block (fixed per store).
func (s *Store) BlockTokens() int { return s.block }

// Node returns the producer name this store publishes and seals under.
func (s *Store) Node() string { return s.node }

func (s *Store) now() time.Time { return s.opts.Now() }

// checkWritable returns ErrClosed or ErrReadOnly when the store cannot
// change.
func (s *Store) checkWritable() error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("store %s: %w", s.dir, ErrReadOnly)
	}
	return nil
}

func (s *Store) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// lease marks ids as in use so that gc does not delete their files; the
// returned function releases them.
func (s *Store) lease(ids ...pack.Digest) func() {
	s.mu.Lock()
	for _, id := range ids {
		s.leases[id]++
	}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		for _, id := range ids {
			if s.leases[id]--; s.leases[id] <= 0 {
				delete(s.leases, id)
			}
		}
		s.mu.Unlock()
	}
}

// touch records that pack id was used now; the time reaches the ledger
// with the next write (LRU order survives restarts, to within that).
func (s *Store) touch(id pack.Digest) {
	s.mu.Lock()
	s.lastUse[id] = s.now().UnixNano()
	s.mu.Unlock()
}

// flushLastUse writes pending last-use times into their pack records.
func (s *Store) flushLastUse(tx *bolt.Tx) error {
	s.mu.Lock()
	pending := s.lastUse
	s.lastUse = map[pack.Digest]int64{}
	s.mu.Unlock()
	b := tx.Bucket(bucketPacks)
	for id, t := range pending {
		v := b.Get(id[:])
		if v == nil {
			continue
		}
		r, err := decodePackRecord(v)
		if err != nil {
			continue // verify reports it
		}
		if t > r.lastUse {
			r.lastUse = t
			if err := b.Put(id[:], r.encode()); err != nil {
				return err
			}
		}
	}
	return nil
}

func digestKey(k []byte) (pack.Digest, error) {
	var d pack.Digest
	if len(k) != len(d) {
		return d, fmt.Errorf("%w: key of %d bytes, want 32", pack.ErrCorrupt, len(k))
	}
	copy(d[:], k)
	return d, nil
}
