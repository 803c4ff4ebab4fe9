package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store/vfs"
	bolt "go.etcd.io/bbolt"
)

// Subset selects a deterministic part of the chunks for a data read, as
// restic's --read-data-subset n/t: chunk c is in subset N of T when the
// first four bytes of its ID, big-endian, are N-1 modulo T. Reading
// subsets 1/T to T/T reads every chunk once.
type Subset struct{ N, T int }

// ParseSubset parses "n/t" with 1 <= n <= t.
func ParseSubset(s string) (Subset, error) {
	a, b, ok := strings.Cut(s, "/")
	n, err1 := strconv.Atoi(a)
	t, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || t < 1 || n < 1 || n > t {
		return Subset{}, fmt.Errorf("%w: subset %q: want n/t with 1 <= n <= t", pack.ErrInvalid, s)
	}
	return Subset{N: n, T: t}, nil
}

// String prints the subset as "n/t".
func (sub Subset) String() string { return fmt.Sprintf("%d/%d", sub.N, sub.T) }

// contains reports whether chunk id is in the subset (all when T is 0).
func (sub Subset) contains(id pack.Digest) bool {
	if sub.T <= 1 {
		return true
	}
	// In 64 bits: a T above 2^32-1 (ParseSubset accepts it) must not
	// wrap, which would name another subset or divide by zero.
	v := uint64(binary.BigEndian.Uint32(id[:4]))
	return v%uint64(sub.T) == uint64(sub.N-1)
}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Packs limits the check to these packs; empty checks the whole store,
	// including ledger-wide invariants (reference counts, the index).
	Packs []pack.Digest
	// NoData skips reading chunk data (structure, sizes and presence are
	// still checked).
	NoData bool
	// Subset limits the data read to a subset of the chunks (zero: all).
	Subset Subset
	// Quarantine quarantines every pack with a finding and records a
	// receipt for it (source "verify").
	Quarantine bool
	// Progress, when non-nil, is called after each chunk read with the
	// number done and the total.
	Progress func(done, total int)
}

// VerifyReport is the outcome of Verify.
type VerifyReport struct {
	// Findings lists every fault found: *PackError (naming the pack) and
	// *LedgerError values, in a stable order. Empty means OK.
	Findings []error
	// Packs is the number of packs checked; ChunksRead and BytesRead
	// measure the data read.
	Packs      int
	ChunksRead int
	BytesRead  int64
	// Orphans and OrphanBytes count unreferenced files (not faults: gc
	// reclaims them). Whole-store checks only.
	Orphans     int
	OrphanBytes int64
	// Quarantined lists packs this run quarantined.
	Quarantined []pack.Digest
}

type verifyPack struct {
	id    pack.Digest
	rec   *packRecord
	chain []chainEntry
	m     *pack.Manifest
	bad   bool
	chunk *pack.Digest // a chunk at fault, moved to quarantine with the pack
}

// Verify checks the store as restic check does: every pack's record,
// manifest (hash, decoding, Merkle root), block chain and chunk files
// (presence, size, and unless NoData the BLAKE3 of every chunk in
// Subset), and for a whole-store run the chunk reference counts and the
// radix index against the ledger. It reports every finding rather than
// stopping at the first; the error return is for failures to run at all.
func (s *Store) Verify(ctx context.Context, opts VerifyOptions) (VerifyReport, error) {
	var rep VerifyReport
	if err := s.checkOpen(); err != nil {
		return rep, err
	}
	if opts.Quarantine {
		if err := s.checkWritable(); err != nil {
			return rep, err
		}
	}
	whole := len(opts.Packs) == 0
	var packs []*verifyPack
	chunkRecs := map[pack.Digest]chunkRecord{}
	find := func(id pack.Digest, err error) {
		rep.Findings = append(rep.Findings, &PackError{Pack: id, Err: err})
	}
	ledger := func(bucket string, key []byte, err error) {
		rep.Findings = append(rep.Findings, &LedgerError{Bucket: bucket, Key: fmt.Sprintf("%x", key), Err: err})
	}
	chains := map[pack.Digest][]chainEntry{}

	// Pass 1: the ledger, in one read transaction, under wmu so that no
	// commit, removal or quarantine lands between this snapshot, the index
	// comparison and the leases that keep gc off what is being checked.
	s.wmu.Lock()
	err := guard(s.ledgerPath(), func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			pb, bb, cb := tx.Bucket(bucketPacks), tx.Bucket(bucketBlocks), tx.Bucket(bucketChunks)
			load := func(id pack.Digest) {
				v := pb.Get(id[:])
				if v == nil {
					find(id, fmt.Errorf("no ledger record: %w", ErrNotFound))
					return
				}
				vp := &verifyPack{id: id}
				r, err := decodePackRecord(v)
				if err != nil {
					ledger("packs", id[:], err)
					return
				}
				vp.rec = r
				if cv := bb.Get(id[:]); cv != nil {
					c, err := decodeChain(cv)
					if err != nil {
						ledger("blocks", id[:], err)
						vp.bad = true
					}
					vp.chain = c
				}
				packs = append(packs, vp)
			}
			if whole {
				if err := pb.ForEach(func(k, _ []byte) error {
					id, err := digestKey(k)
					if err != nil {
						ledger("packs", k, err)
						return nil
					}
					load(id)
					return nil
				}); err != nil {
					return err
				}
				if err := bb.ForEach(func(k, v []byte) error {
					id, err := digestKey(k)
					if err != nil {
						ledger("blocks", k, err)
						return nil
					}
					if pb.Get(k) == nil {
						ledger("blocks", k, errors.New("block chain of a pack that has no record"))
					}
					if c, err := decodeChain(v); err == nil {
						chains[id] = c
					}
					return nil
				}); err != nil {
					return err
				}
				return cb.ForEach(func(k, v []byte) error {
					id, err := digestKey(k)
					if err != nil {
						ledger("chunks", k, err)
						return nil
					}
					r, err := decodeChunkRecord(v)
					if err != nil {
						ledger("chunks", k, err)
						return nil
					}
					chunkRecs[id] = r
					return nil
				})
			}
			for _, id := range opts.Packs {
				load(id)
			}
			return cb.ForEach(func(k, v []byte) error {
				if id, err := digestKey(k); err == nil {
					if r, err := decodeChunkRecord(v); err == nil {
						chunkRecs[id] = r
					}
				}
				return nil
			})
		})
	})
	if err == nil && whole {
		quarantined := map[pack.Digest]bool{}
		for _, vp := range packs {
			if vp.rec.quarantined() {
				quarantined[vp.id] = true
			}
		}
		for _, d := range s.indexDiffs(chains, quarantined) {
			ledger("blocks", []byte("index"), errors.New(d))
		}
	}
	var leased []pack.Digest
	for _, vp := range packs {
		leased = append(leased, vp.id)
		for _, e := range vp.chain {
			leased = append(leased, e.chunk)
		}
	}
	defer s.lease(leased...)()
	s.wmu.Unlock()
	if err != nil {
		return rep, err
	}
	sort.Slice(packs, func(i, j int) bool { return string(packs[i].id[:]) < string(packs[j].id[:]) })
	rep.Packs = len(packs)

	// Pass 2: each pack's manifest against its record and chain; chunk
	// files' presence and size.
	type use struct {
		vp    *verifyPack
		block int
	}
	users := map[pack.Digest][]use{}
	sizes := map[pack.Digest]uint32{}
	refs := map[pack.Digest]uint32{}
	for _, vp := range packs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		q := vp.rec.quarantined()
		if q {
			find(vp.id, ErrQuarantined)
			vp.bad = true
		}
		if vp.chain == nil {
			find(vp.id, fmt.Errorf("%w: no block chain in the ledger", pack.ErrCorrupt))
			vp.bad = true
		}
		// Reference counts follow the ledger's chains, quarantined or not.
		for _, e := range vp.chain {
			refs[e.chunk]++
		}
		if q {
			continue
		}
		m, _, err := s.readManifest(vp.id)
		if err != nil {
			find(vp.id, err)
			vp.bad = true
			continue
		}
		vp.m = m
		keys := m.BlockKeys()
		for _, p := range s.recordMismatches(vp.rec, m, keys) {
			find(vp.id, fmt.Errorf("%w: ledger record disagrees with the manifest: %s", pack.ErrCorrupt, p))
			vp.bad = true
		}
		if vp.chain == nil {
			vp.bad = true
		} else if len(vp.chain) != len(keys) {
			find(vp.id, fmt.Errorf("%w: block chain has %d entries, the manifest %d blocks", pack.ErrCorrupt, len(vp.chain), len(keys)))
			vp.bad = true
		} else {
			for i, e := range vp.chain {
				if e.key != keys[i] || e.chunk != m.Chunks[i].ID || e.size != m.Chunks[i].Size {
					find(vp.id, fmt.Errorf("%w: block chain entry %d disagrees with the manifest", pack.ErrCorrupt, i))
					vp.bad = true
					break
				}
			}
		}
		for i, c := range m.Chunks {
			users[c.ID] = append(users[c.ID], use{vp, i})
			sizes[c.ID] = c.Size
			if r, ok := chunkRecs[c.ID]; !ok {
				find(vp.id, &ChunkFault{Block: i, Chunk: c.ID, Err: fmt.Errorf("%w: no chunk record in the ledger", pack.ErrCorrupt)})
				vp.bad = true
			} else if r.size != c.Size {
				find(vp.id, &ChunkFault{Block: i, Chunk: c.ID, Err: fmt.Errorf("%w: ledger says %d bytes, manifest %d", pack.ErrCorrupt, r.size, c.Size)})
				vp.bad = true
			}
		}
	}

	// Pass 3: chunk files, each once.
	ids := make([]pack.Digest, 0, len(users))
	for id := range users {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	toRead := map[pack.Digest]bool{}
	for _, id := range ids {
		if !opts.NoData && opts.Subset.contains(id) {
			toRead[id] = true
		}
	}
	report := func(id pack.Digest, err error) {
		for _, u := range users[id] {
			find(u.vp.id, &ChunkFault{Block: u.block, Chunk: id, Err: err})
			u.vp.bad = true
			if u.vp.chunk == nil && !errors.Is(err, errMissing) {
				c := id
				u.vp.chunk = &c
			}
		}
	}
	var buf []byte
	done := 0
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		ref := pack.ChunkRef{ID: id, Size: sizes[id]}
		if !toRead[id] {
			fi, err := s.fs.Stat(s.chunkPath(id))
			switch {
			case errors.Is(err, fs.ErrNotExist):
				report(id, fmt.Errorf("%s: %w", s.chunkPath(id), errMissing))
			case err != nil:
				report(id, fmt.Errorf("%w: %w", pack.ErrCorrupt, err))
			case !fi.Mode().IsRegular():
				report(id, fmt.Errorf("%w: %s: %w", pack.ErrCorrupt, s.chunkPath(id), vfs.ErrNotRegular))
			case fi.Size() != int64(ref.Size):
				report(id, fmt.Errorf("%s: %w: %d bytes, want %d", s.chunkPath(id), errSize, fi.Size(), ref.Size))
			}
			continue
		}
		data, err := s.readChunk(ref, buf)
		if err != nil {
			// Every fault of one chunk file is a finding of the packs
			// that use it (an unreadable file as much as a wrong one),
			// and the check goes on with the next.
			if !errors.Is(err, errMissing) && !errors.Is(err, errSize) && !errors.Is(err, pack.ErrCorrupt) {
				err = fmt.Errorf("%w: %w", pack.ErrCorrupt, err)
			}
			report(id, err)
		} else {
			buf = data[:cap(data)]
			rep.BytesRead += int64(len(data))
		}
		rep.ChunksRead++
		done++
		if opts.Progress != nil {
			opts.Progress(done, len(toRead))
		}
	}

	if whole {
		s.verifyRefs(&rep, chunkRecs, refs, ledger)
	}
	sortFindings(rep.Findings)

	if opts.Quarantine {
		for _, vp := range packs {
			if !vp.bad || vp.rec == nil || vp.rec.quarantined() {
				continue
			}
			var cause error
			for _, f := range rep.Findings {
				var pe *PackError
				if errors.As(f, &pe) && pe.Pack == vp.id {
					cause = pe.Err
					break
				}
			}
			if cause == nil {
				cause = fmt.Errorf("%w: failed verification", pack.ErrCorrupt)
			}
			if err := s.quarantine(vp.id, vp.chunk); err != nil {
				return rep, err
			}
			_ = s.refuse(vp.id, SourceVerify, cause)
			rep.Quarantined = append(rep.Quarantined, vp.id)
		}
	}
	return rep, nil
}

// recordMismatches lists the fields in which a pack record disagrees with
// its verified manifest.
func (s *Store) recordMismatches(r *packRecord, m *pack.Manifest, keys []pack.Digest) []string {
	var out []string
	mb, _ := m.Marshal()
	check := func(ok bool, field string) {
		if !ok {
			out = append(out, field)
		}
	}
	check(int(r.blocks) == len(m.Chunks), "blocks")
	check(r.bytes == m.Bytes(), "bytes")
	check(int(r.manifestSize) == len(mb), "manifest size")
	check(r.identityKey == m.Identity.Key(), "identity key")
	check(r.tenant == m.Tenant, "tenant")
	check(len(keys) > 0 && r.endKey == keys[len(keys)-1], "end key")
	check(m.BlockTokens == s.block, "block size")
	return out
}

// indexDiffs compares the in-memory index with one rebuilt from the
// ledger's chains (leaving out quarantined packs). The caller holds wmu.
func (s *Store) indexDiffs(chains map[pack.Digest][]chainEntry, quarantined map[pack.Digest]bool) []string {
	want := newIndex()
	for id, c := range chains {
		if !quarantined[id] {
			want.add(id, c)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.ix
	var diffs []string
	if len(got.nodes) != len(want.nodes) {
		diffs = append(diffs, fmt.Sprintf("index has %d nodes, the ledger's chains %d", len(got.nodes), len(want.nodes)))
	}
	for k, w := range want.nodes {
		g := got.nodes[k]
		switch {
		case g == nil:
			diffs = append(diffs, fmt.Sprintf("index lacks block %s", k.Short()))
		case g.refs != w.refs || g.chunk != w.chunk || g.end != w.end || g.depth != w.depth:
			diffs = append(diffs, fmt.Sprintf("index block %s differs from the ledger", k.Short()))
		}
		if len(diffs) > 10 {
			break
		}
	}
	return diffs
}

// verifyRefs checks reference counts against the packs' chains (all from
// one ledger snapshot) and counts orphan chunk files.
func (s *Store) verifyRefs(rep *VerifyReport, recs map[pack.Digest]chunkRecord, refs map[pack.Digest]uint32,
	ledger func(string, []byte, error)) {
	for id, r := range recs {
		if want := refs[id]; r.refs != want {
			ledger("chunks", id[:], fmt.Errorf("reference count %d, packs reference it %d times", r.refs, want))
		}
	}
	// Orphans are reported, not counted as faults.
	_ = s.walkFiles(filepath.Join(s.dir, chunksDir), func(path string, fi fs.FileInfo) {
		if id, err := pack.ParseDigest(fi.Name()); err != nil || refs[id] == 0 {
			if _, known := recs[id]; err == nil && known {
				return
			}
			rep.Orphans++
			rep.OrphanBytes += fi.Size()
		}
	})
}

// sortFindings orders findings by pack ID, then message, so reports are
// stable.
func sortFindings(f []error) {
	key := func(e error) string {
		var pe *PackError
		if errors.As(e, &pe) {
			return "1" + pe.Pack.String() + e.Error()
		}
		return "2" + e.Error()
	}
	sort.SliceStable(f, func(i, j int) bool { return key(f[i]) < key(f[j]) })
}
