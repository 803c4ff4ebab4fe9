package store

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"sort"
	"time"

	"github.com/muserhq/muser/pack"
	bolt "go.etcd.io/bbolt"
)

// GCOptions configure GC.
type GCOptions struct {
	// MaxBytes is the budget for Stats.Bytes (chunk and manifest bytes of
	// live packs). Negative means no budget: only quarantined packs and
	// orphans go.
	MaxBytes int64
	// DryRun computes and reports without changing anything.
	DryRun bool
	// Grace overrides Options.OrphanGrace for this run (zero: keep it;
	// negative: no grace, every unleased orphan goes).
	Grace time.Duration
}

// GCReport says what GC removed (or, in a dry run, would remove).
type GCReport struct {
	// Removed lists evicted and quarantined packs and the files freed.
	Removed RemoveResult
	// Orphans and OrphanBytes count unreferenced files past the grace
	// period: chunks and manifests no pack references, files moved to
	// quarantine/, and temporary files of interrupted writes (those
	// older than the store's Open go whatever their age).
	Orphans     int
	OrphanBytes int64
	// Before and After are Stats.Bytes around the run.
	Before, After int64
	// OverBudget is set when pinned and in-use packs alone exceed
	// MaxBytes, so the budget could not be met.
	OverBudget bool
}

// GC keeps the store within a byte budget. Quarantined packs always go;
// then unpinned packs are evicted least recently used first until
// Stats.Bytes is at most MaxBytes. A pack in use by an in-flight restore
// is not evicted, and no chunk file that a surviving pack or an in-flight
// publish or restore references is deleted (rule D1). Finally orphan
// files older than the grace period are deleted (rule D2).
func (s *Store) GC(ctx context.Context, opts GCOptions) (GCReport, error) {
	var rep GCReport
	if err := s.checkWritable(); err != nil {
		if !(opts.DryRun && errors.Is(err, ErrReadOnly)) {
			return rep, err
		}
	}
	grace := s.opts.OrphanGrace
	if opts.Grace != 0 {
		grace = opts.Grace
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	st, err := s.Stats()
	if err != nil {
		return rep, err
	}
	rep.Before = st.Bytes

	type cand struct {
		id      pack.Digest
		rec     *packRecord
		lastUse int64
		chunks  []pack.Digest
	}
	var cands []cand
	refs := map[pack.Digest]uint32{}
	sizes := map[pack.Digest]uint32{}
	err = s.db.View(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketChunks).ForEach(func(k, v []byte) error {
			id, err := digestKey(k)
			if err != nil {
				return nil
			}
			if r, err := decodeChunkRecord(v); err == nil {
				refs[id], sizes[id] = r.refs, r.size
			}
			return nil
		}); err != nil {
			return err
		}
		bb := tx.Bucket(bucketBlocks)
		return eachPack(tx, func(k []byte, id pack.Digest, r *packRecord) error {
			c := cand{id: id, rec: r, lastUse: r.lastUse}
			if cv := bb.Get(k); cv != nil {
				chain, _ := decodeChain(cv)
				for _, e := range chain {
					c.chunks = append(c.chunks, e.chunk)
				}
			}
			cands = append(cands, c)
			return nil
		})
	})
	if err != nil {
		return rep, err
	}
	s.mu.Lock()
	for i := range cands {
		if t, ok := s.lastUse[cands[i].id]; ok && t > cands[i].lastUse {
			cands[i].lastUse = t
		}
	}
	leased := func(id pack.Digest) bool { return s.leases[id] > 0 }
	var evict []pack.Digest
	var plan RemoveResult // what the eviction frees, for a dry run's report
	bytes := st.Bytes
	take := func(c cand) {
		evict = append(evict, c.id)
		plan.Packs = append(plan.Packs, s.infoAt(c.id, c.rec, c.lastUse))
		plan.ManifestBytes += int64(c.rec.manifestSize)
		bytes -= int64(c.rec.manifestSize)
		for _, ch := range c.chunks {
			if refs[ch] == 0 {
				continue
			}
			if refs[ch]--; refs[ch] == 0 {
				bytes -= int64(sizes[ch])
				plan.Chunks++
				plan.ChunkBytes += int64(sizes[ch])
			}
		}
	}
	var lru []cand
	for _, c := range cands {
		switch {
		case c.rec.quarantined():
			take(c)
		case !c.rec.pinned() && !leased(c.id):
			lru = append(lru, c)
		}
	}
	s.mu.Unlock()
	sort.Slice(lru, func(i, j int) bool {
		a, b := lru[i], lru[j]
		if a.lastUse != b.lastUse {
			return a.lastUse < b.lastUse
		}
		if a.rec.created != b.rec.created {
			return a.rec.created < b.rec.created
		}
		return string(a.id[:]) < string(b.id[:])
	})
	if opts.MaxBytes >= 0 {
		for _, c := range lru {
			if bytes <= opts.MaxBytes {
				break
			}
			take(c)
		}
		rep.OverBudget = bytes > opts.MaxBytes
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	switch {
	case opts.DryRun:
		rep.Removed = plan
	case len(evict) > 0:
		rep.Removed, err = s.removeLocked(evict)
		if err != nil {
			return rep, err
		}
	}
	rep.Orphans, rep.OrphanBytes, err = s.sweepOrphans(grace, opts.DryRun)
	if err != nil {
		return rep, err
	}
	if opts.DryRun {
		rep.After = bytes
		return rep, nil
	}
	st, err = s.Stats()
	rep.After = st.Bytes
	return rep, err
}

// sweepOrphans deletes (or with dry only counts) files under chunks/ and
// packs/ that the ledger does not reference, that no in-flight operation
// leases, and that are older than grace; files in quarantine/ older than
// grace; and temporary files older than grace or than the store's Open
// (rule D2). A temporary file from before Open is a crash's leftover: the
// ledger's lock makes this process the store's only writer. No temporary
// file goes while a write is in progress in its directory. The caller holds wmu, so the ledger cannot gain a
// reference meanwhile except through a leased, in-flight commit.
func (s *Store) sweepOrphans(grace time.Duration, dry bool) (int, int64, error) {
	chunks := map[pack.Digest]bool{}
	packs := map[pack.Digest]bool{}
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, x := range []struct {
			b   []byte
			set map[pack.Digest]bool
		}{{bucketChunks, chunks}, {bucketPacks, packs}} {
			if err := tx.Bucket(x.b).ForEach(func(k, _ []byte) error {
				if id, err := digestKey(k); err == nil {
					x.set[id] = true
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	cutoff := s.now().Add(-grace)
	var n int
	var size int64
	for _, x := range []struct {
		dir  string
		refd map[pack.Digest]bool
	}{{chunksDir, chunks}, {packsDir, packs}} {
		err := s.walkFiles(filepath.Join(s.dir, x.dir), func(path string, fi fs.FileInfo) {
			name := fi.Name()
			id, perr := pack.ParseDigest(name)
			if perr == nil && x.refd[id] {
				return
			}
			if perr != nil && !tempName(name) {
				return // not ours: leave it
			}
			if grace > 0 && fi.ModTime().After(cutoff) && (perr == nil || !fi.ModTime().Before(s.opened)) {
				return
			}
			if dry {
				n++
				size += fi.Size()
				return
			}
			if perr == nil {
				if !s.deleteUnleased(id, path) {
					return
				}
			} else if !s.deleteTemp(path) {
				return
			}
			n++
			size += fi.Size()
		})
		if err != nil {
			return n, size, err
		}
	}
	qn, qsize, err := s.sweepQuarantine(cutoff, grace, dry)
	return n + qn, size + qsize, err
}

// sweepQuarantine deletes (or with dry only counts) the files in
// quarantine/ older than grace: evidence kept for an operator to inspect
// for that long, never read again by the store.
func (s *Store) sweepQuarantine(cutoff time.Time, grace time.Duration, dry bool) (int, int64, error) {
	dir := filepath.Join(s.dir, quarantineDir)
	ents, err := s.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	var n int
	var size int64
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if grace > 0 && fi.ModTime().After(cutoff) {
			continue
		}
		if !dry {
			path := filepath.Join(dir, e.Name())
			if tempName(e.Name()) {
				if !s.deleteTemp(path) {
					continue
				}
			} else if err := s.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return n, size, err
			}
		}
		n++
		size += fi.Size()
	}
	if n > 0 && !dry {
		if err := s.syncDir(dir); err != nil {
			return n, size, err
		}
	}
	return n, size, nil
}

// walkFiles calls fn for each regular file one level of fan-out below root.
func (s *Store) walkFiles(root string, fn func(path string, fi fs.FileInfo)) error {
	subs, err := s.fs.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, sub := range subs {
		if !sub.IsDir() {
			continue
		}
		dir := filepath.Join(root, sub.Name())
		ents, err := s.fs.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			fn(filepath.Join(dir, e.Name()), fi)
		}
	}
	return nil
}

// deleteTemp deletes a temporary file unless a write is in progress in its
// directory, holding mu so that none can start in between. It reports
// whether the file is gone.
func (s *Store) deleteTemp(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writing[filepath.Dir(path)] > 0 {
		return false
	}
	err := s.fs.Remove(path)
	return err == nil || errors.Is(err, fs.ErrNotExist)
}
