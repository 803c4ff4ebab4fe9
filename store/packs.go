package store

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/muserhq/muser/pack"
	bolt "go.etcd.io/bbolt"
)

// PackInfo describes a pack from its ledger record.
type PackInfo struct {
	ID pack.Digest `json:"id"`
	// Tokens and Blocks measure the token prefix it covers; it has one
	// chunk per block.
	Tokens int `json:"tokens"`
	Blocks int `json:"blocks"`
	// Bytes is the size of its chunks, counting a repeated chunk per
	// reference (other packs may share them).
	Bytes int64 `json:"bytes"`
	// ManifestBytes is the size of its manifest file.
	ManifestBytes int `json:"manifest_bytes"`
	// IdentityKey is the key of its identity.
	IdentityKey pack.Digest `json:"identity_key"`
	// Tenant is its tenant tag.
	Tenant      pack.Digest `json:"tenant"`
	Created     time.Time   `json:"created"`
	LastUse     time.Time   `json:"last_use"`
	Pinned      bool        `json:"pinned"`
	Quarantined bool        `json:"quarantined"`
	// Source says where it came from ("local", "import:PATH", "peer:NAME").
	Source string `json:"source"`
}

func (s *Store) info(id pack.Digest, r *packRecord) PackInfo {
	last := r.lastUse
	s.mu.Lock()
	if t, ok := s.lastUse[id]; ok && t > last {
		last = t
	}
	s.mu.Unlock()
	return s.infoAt(id, r, last)
}

// infoAt is info with the last use given; it takes no lock.
func (s *Store) infoAt(id pack.Digest, r *packRecord, last int64) PackInfo {
	return PackInfo{
		ID: id, Tokens: int(r.blocks) * s.block, Blocks: int(r.blocks), Bytes: int64(r.bytes),
		ManifestBytes: int(r.manifestSize), IdentityKey: r.identityKey, Tenant: r.tenant,
		Created: time.Unix(0, r.created).UTC(), LastUse: time.Unix(0, last).UTC(),
		Pinned: r.pinned(), Quarantined: r.quarantined(), Source: r.source,
	}
}

// Packs lists every pack, oldest first. A record that does not decode is
// skipped here and reported by Verify.
func (s *Store) Packs() ([]PackInfo, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	var out []PackInfo
	err := guard(s.ledgerPath(), func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			return eachPack(tx, func(_ []byte, id pack.Digest, r *packRecord) error {
				out = append(out, s.info(id, r))
				return nil
			})
		})
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return string(out[i].ID[:]) < string(out[j].ID[:])
	})
	return out, err
}

// Pack returns the description of pack id.
func (s *Store) Pack(id pack.Digest) (PackInfo, error) {
	if err := s.checkOpen(); err != nil {
		return PackInfo{}, err
	}
	r, err := s.packRecord(id)
	if err != nil {
		return PackInfo{}, err
	}
	return s.info(id, r), nil
}

// Manifest reads and verifies pack id's manifest (its bytes hash to id and
// its root checks) and returns it. It does not read chunks.
func (s *Store) Manifest(id pack.Digest) (*pack.Manifest, error) {
	if _, err := s.Pack(id); err != nil {
		return nil, err
	}
	m, _, err := s.readManifest(id)
	if err != nil {
		return nil, &PackError{Pack: id, Err: err}
	}
	return m, nil
}

// ResolvePack returns the pack whose hex ID starts with prefix (at least
// one digit; a full ID is accepted as is). No match wraps ErrNotFound; more
// than one wraps ErrAmbiguousID and lists them.
func (s *Store) ResolvePack(prefix string) (pack.Digest, error) {
	if err := s.checkOpen(); err != nil {
		return pack.Digest{}, err
	}
	p := strings.ToLower(prefix)
	if p == "" || len(p) > 64 {
		return pack.Digest{}, fmt.Errorf("%w: pack ID %q: want 1 to 64 hex digits", pack.ErrInvalid, prefix)
	}
	if strings.Trim(p, "0123456789abcdef") != "" {
		return pack.Digest{}, fmt.Errorf("%w: pack ID %q is not hex", pack.ErrInvalid, prefix)
	}
	lo, _ := hex.DecodeString(p[:len(p)/2*2])
	var hits []pack.Digest
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPacks).Cursor()
		for k, _ := c.Seek(lo); k != nil && bytes.HasPrefix(k, lo); k, _ = c.Next() {
			if id, err := digestKey(k); err == nil && strings.HasPrefix(id.String(), p) {
				hits = append(hits, id)
				if len(hits) > 8 {
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		return pack.Digest{}, err
	}
	switch len(hits) {
	case 0:
		return pack.Digest{}, fmt.Errorf("pack %q: %w", prefix, ErrNotFound)
	case 1:
		return hits[0], nil
	}
	names := make([]string, len(hits))
	for i, h := range hits {
		names[i] = h.Short()
	}
	return pack.Digest{}, fmt.Errorf("pack %q matches %s: %w", prefix, strings.Join(names, ", "), ErrAmbiguousID)
}

// Pin protects pack id from gc; Unpin lifts that. Both wrap ErrNotFound
// for an unknown pack.
func (s *Store) Pin(id pack.Digest) error { return s.setPinned(id, true) }

// Unpin makes pack id evictable by gc again.
func (s *Store) Unpin(id pack.Digest) error { return s.setPinned(id, false) }

func (s *Store) setPinned(id pack.Digest, pin bool) error {
	if err := s.checkWritable(); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPacks)
		v := b.Get(id[:])
		if v == nil {
			return fmt.Errorf("pack %s: %w", id.Short(), ErrNotFound)
		}
		r, err := decodePackRecord(v)
		if err != nil {
			return &LedgerError{Bucket: "packs", Key: id.String(), Err: err}
		}
		if pin {
			r.flags |= flagPinned
		} else {
			r.flags &^= flagPinned
		}
		return b.Put(id[:], r.encode())
	})
}

// RemoveResult says what Remove or GC deleted.
type RemoveResult struct {
	// Packs are the packs removed.
	Packs []PackInfo
	// Chunks and ChunkBytes count chunk files deleted (chunks still used by
	// another pack or by an in-flight operation stay).
	Chunks     int
	ChunkBytes int64
	// ManifestBytes counts manifest files deleted.
	ManifestBytes int64
}

// Remove deletes packs, pinned or not: first from the ledger and the index
// in one transaction, then their manifest files and the chunk files no
// other pack references (rule D1). Unknown IDs wrap ErrNotFound and
// nothing is removed; an ID given more than once is removed once.
func (s *Store) Remove(ids ...pack.Digest) (RemoveResult, error) {
	if err := s.checkWritable(); err != nil {
		return RemoveResult{}, err
	}
	seen := make(map[pack.Digest]bool, len(ids))
	var uniq []pack.Digest
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.removeLocked(uniq)
}

// removeLocked removes packs; the caller holds wmu.
func (s *Store) removeLocked(ids []pack.Digest) (RemoveResult, error) {
	var res RemoveResult
	type gone struct {
		id          pack.Digest
		chain       []chainEntry
		quarantined bool
	}
	var removed []gone
	var freed []pack.Digest
	sizes := map[pack.Digest]uint32{}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := s.flushLastUse(tx); err != nil {
			return err
		}
		pb, bb := tx.Bucket(bucketPacks), tx.Bucket(bucketBlocks)
		for _, id := range ids {
			v := pb.Get(id[:])
			if v == nil {
				return fmt.Errorf("pack %s: %w", id.Short(), ErrNotFound)
			}
			r, err := decodePackRecord(v)
			if err != nil {
				return &LedgerError{Bucket: "packs", Key: id.String(), Err: err}
			}
			res.Packs = append(res.Packs, s.info(id, r))
			res.ManifestBytes += int64(r.manifestSize)
			var chain []chainEntry
			if cv := bb.Get(id[:]); cv != nil {
				chain, _ = decodeChain(cv)
			}
			refs := make([]pack.Digest, 0, len(chain))
			for _, e := range chain {
				refs = append(refs, e.chunk)
				sizes[e.chunk] = e.size
			}
			f, err := dropRefs(tx, refs)
			if err != nil {
				return err
			}
			freed = append(freed, f...)
			if err := pb.Delete(id[:]); err != nil {
				return err
			}
			if err := bb.Delete(id[:]); err != nil {
				return err
			}
			removed = append(removed, gone{id, chain, r.quarantined()})
		}
		return nil
	})
	if err != nil {
		return RemoveResult{}, err
	}
	for _, c := range freed {
		res.Chunks++
		res.ChunkBytes += int64(sizes[c])
	}
	s.mu.Lock()
	for _, g := range removed {
		if !g.quarantined {
			s.ix.remove(g.id, g.chain)
		}
		delete(s.lastUse, g.id)
	}
	s.mu.Unlock()
	// Files last (rule D1); a crash here leaves orphans for gc.
	for _, g := range removed {
		s.deleteUnleased(g.id, s.manifestPath(g.id))
	}
	for _, c := range freed {
		if !s.deleteUnleased(c, s.chunkPath(c)) {
			res.Chunks--
			res.ChunkBytes -= int64(sizes[c])
		}
	}
	return res, nil
}

// deleteUnleased deletes the file at path unless id is leased by an
// in-flight operation, holding mu so that no lease can start in between.
// It reports whether the file is gone.
func (s *Store) deleteUnleased(id pack.Digest, path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases[id] > 0 {
		return false
	}
	err := s.fs.Remove(path)
	return err == nil || errors.Is(err, fs.ErrNotExist)
}

// Stats summarises the store.
type Stats struct {
	Packs       int `json:"packs"`
	Pinned      int `json:"pinned"`
	Quarantined int `json:"quarantined"`
	// Chunks and ChunkBytes count distinct chunks referenced by packs.
	Chunks     int   `json:"chunks"`
	ChunkBytes int64 `json:"chunk_bytes"`
	// ManifestBytes is the size of all manifest files.
	ManifestBytes int64 `json:"manifest_bytes"`
	// Bytes = ChunkBytes + ManifestBytes: what gc's budget measures.
	Bytes int64 `json:"bytes"`
	// IndexNodes is the number of blocks in the radix index.
	IndexNodes int `json:"index_nodes"`
	// BlockTokens is the store's block size.
	BlockTokens int `json:"block_tokens"`
}

// Stats returns the store's totals from the ledger.
func (s *Store) Stats() (Stats, error) {
	if err := s.checkOpen(); err != nil {
		return Stats{}, err
	}
	var st Stats
	err := guard(s.ledgerPath(), func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			if err := eachPack(tx, func(_ []byte, _ pack.Digest, r *packRecord) error {
				st.Packs++
				if r.pinned() {
					st.Pinned++
				}
				if r.quarantined() {
					st.Quarantined++
				}
				st.ManifestBytes += int64(r.manifestSize)
				return nil
			}); err != nil {
				return err
			}
			return tx.Bucket(bucketChunks).ForEach(func(k, v []byte) error {
				r, err := decodeChunkRecord(v)
				if err != nil {
					return nil
				}
				st.Chunks++
				st.ChunkBytes += int64(r.size)
				return nil
			})
		})
	})
	st.Bytes = st.ChunkBytes + st.ManifestBytes
	st.BlockTokens = s.block
	s.mu.Lock()
	st.IndexNodes = len(s.ix.nodes)
	s.mu.Unlock()
	return st, err
}
