package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/muserhq/muser/pack"
	bolt "go.etcd.io/bbolt"
)

// Internal refusal causes; reasonOf maps them to receipt codes.
var (
	errDivergent = errors.New("divergent KV")
	errBlockSize = errors.New("block size differs")
	errReplay    = errors.New("replayed nonce")
	errStale     = errors.New("stale generation")
	errTenant    = errors.New("tenant differs")
)

// PublishResult says what a publish did.
type PublishResult struct {
	// Pack is the ID of the pack covering the published tokens.
	Pack pack.Digest
	// New is false when the pack already existed (the publish refreshed
	// its last use and wrote nothing).
	New bool
	// ChunksWritten and BytesWritten count chunk files written; chunks
	// already on disk are not written again.
	ChunksWritten int
	BytesWritten  int64
}

// Publish records that tokens (a whole number of blocks from position 0)
// have the KV bytes get returns for each block, under identity id and the
// tenant of salt. It makes the pack covering exactly those tokens, or
// refreshes it if it exists. Blocks whose key the index already holds are
// not fetched (their KV is, by batch invariance, the chunk already
// stored); chunks already on disk are not rewritten; each chunk is hashed
// once. It satisfies infer.PrefixStore.
func (s *Store) Publish(ctx context.Context, id pack.Identity, salt []byte, tokens []int32,
	get func(block int) ([]byte, error)) error {
	_, err := s.PublishPrefix(ctx, id, salt, tokens, get)
	return err
}

// PublishPrefix is Publish returning what it did.
func (s *Store) PublishPrefix(ctx context.Context, id pack.Identity, salt []byte, tokens []int32,
	get func(block int) ([]byte, error)) (PublishResult, error) {
	var res PublishResult
	if err := s.checkWritable(); err != nil {
		return res, err
	}
	if err := id.Validate(); err != nil {
		return res, err
	}
	if id.Format != pack.FormatVersion {
		return res, fmt.Errorf("%w: identity format %d, this build writes %d", pack.ErrInvalid, id.Format, pack.FormatVersion)
	}
	if err := pack.CheckTokens(tokens, s.block); err != nil {
		return res, err
	}
	tenant := pack.TenantTag(salt)
	keys := pack.BlockKeys(id.Key(), tenant, tokens, s.block)
	chunks := make([]pack.ChunkRef, len(keys))
	known := make([]bool, len(keys))

	s.mu.Lock()
	if n := s.ix.nodes[keys[len(keys)-1]]; n != nil && !n.end.IsZero() {
		res.Pack = n.end
		s.lastUse[n.end] = s.now().UnixNano()
		s.mu.Unlock()
		return res, nil
	}
	var held []pack.Digest
	for i, k := range keys {
		if n := s.ix.nodes[k]; n != nil {
			chunks[i] = pack.ChunkRef{ID: n.chunk, Size: n.size}
			known[i] = true
			held = append(held, n.chunk)
			s.leases[n.chunk]++
		}
	}
	s.mu.Unlock()
	// The index names a block's chunk while any pack that uses it is
	// indexed, also after another pack's restore found the chunk's file
	// bad and moved it to quarantine/: reuse only a chunk the store holds
	// (W4), and write the others again from the block's KV.
	for i := range keys {
		if known[i] && !s.holds(chunks[i]) {
			known[i] = false
		}
	}
	release := func() {
		s.mu.Lock()
		for _, c := range held {
			if s.leases[c]--; s.leases[c] <= 0 {
				delete(s.leases, c)
			}
		}
		s.mu.Unlock()
	}
	defer func() { release() }()

	dirs := map[string]bool{}
	for i := range keys {
		if known[i] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		data, err := get(i)
		if err != nil {
			return res, fmt.Errorf("publish: block %d: %w", i, err)
		}
		if len(data) == 0 || len(data) > pack.MaxChunkBytes {
			return res, fmt.Errorf("%w: publish: block %d has %d bytes of KV, want 1..%d", pack.ErrInvalid, i, len(data), pack.MaxChunkBytes)
		}
		cid := pack.ChunkID(data)
		s.mu.Lock()
		s.leases[cid]++
		held = append(held, cid)
		s.mu.Unlock()
		wrote, err := s.putChunk(cid, data)
		if err != nil {
			return res, fmt.Errorf("publish: %w", err)
		}
		if wrote {
			res.ChunksWritten++
			res.BytesWritten += int64(len(data))
		}
		chunks[i] = pack.ChunkRef{ID: cid, Size: uint32(len(data))}
	}
	s.mu.Lock()
	s.gen++
	gen := s.gen
	s.mu.Unlock()
	m := &pack.Manifest{
		Identity: id, BlockTokens: s.block, Tenant: tenant, Tokens: tokens, Chunks: chunks,
		Producer: s.node, Generation: gen, Created: s.now().UTC(),
	}
	m.Root = pack.MerkleRoot(m.ChunkIDs())
	p, isNew, err := s.commitManifest(ctx, m, keys, SourceLocal, nil, dirs, true)
	res.Pack, res.New = p, isNew
	if !isNew {
		res.ChunksWritten, res.BytesWritten = 0, 0
	}
	return res, err
}

// commitManifest writes m's manifest file and commits the pack to the
// ledger and the index (rules W2, W3). Every chunk m names must be on disk
// and leased by the caller; one whose file left the store before the
// commit (quarantine moves a faulty file even if it is leased) is a
// *MissingChunksError, and nothing is committed. With seal non-nil the replay ledger is
// checked and advanced in the same transaction. It returns the pack's ID
// and whether it is new: a pack already covering the same identity,
// tenant and tokens is kept and its ID returned (a seal is then still
// checked and spent). A chunk that differs
// from the one the index holds for the same block key is a divergent
// refusal, as are a replayed or stale seal; each is recorded with a
// receipt.
func (s *Store) commitManifest(ctx context.Context, m *pack.Manifest, keys []pack.Digest, source string,
	seal *pack.Seal, dirs map[string]bool, local bool) (pack.Digest, bool, error) {
	mb, err := m.Marshal()
	if err != nil {
		return pack.Digest{}, false, err
	}
	pid := pack.PackID(mb)
	defer s.lease(pid)()
	mpath := s.manifestPath(pid)
	if err := s.writeDurable(filepath.Dir(mpath), mpath, mb, dirs); err != nil {
		return pid, false, fmt.Errorf("pack %s: writing manifest: %w", pid.Short(), err)
	}
	if err := s.syncDirs(dirs); err != nil {
		return pid, false, err
	}
	if err := s.syncPending(); err != nil {
		return pid, false, err
	}
	if err := ctx.Err(); err != nil {
		return pid, false, err
	}
	chain := make([]chainEntry, len(keys))
	for i, k := range keys {
		chain[i] = chainEntry{key: k, chunk: m.Chunks[i].ID, size: m.Chunks[i].Size}
	}

	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.checkWritable(); err != nil {
		return pid, false, err
	}
	// Re-check against the index under wmu: no other commit can run now.
	s.mu.Lock()
	var existing pack.Digest
	if n := s.ix.nodes[keys[len(keys)-1]]; n != nil && !n.end.IsZero() {
		existing = n.end
	}
	var diverge error
	for i, k := range keys {
		if n := s.ix.nodes[k]; n != nil && n.chunk != m.Chunks[i].ID {
			diverge = fmt.Errorf("%w: block %d: the store holds chunk %s for this identity, tenant and prefix, the pack has %s", errDivergent, i, n.chunk, m.Chunks[i].ID)
			break
		}
	}
	s.mu.Unlock()
	if !existing.IsZero() {
		if existing != pid {
			_ = s.fs.Remove(mpath) // an orphan otherwise; gc would reclaim it
		}
		if seal != nil {
			// The offer is accepted although it adds nothing: its seal
			// is spent all the same (rule T2), or the same offer could
			// be accepted again, and publish once the pack has gone.
			err := s.db.Update(func(tx *bolt.Tx) error { return s.checkReplay(tx, seal, true) })
			if errors.Is(err, errReplay) || errors.Is(err, errStale) {
				return pid, false, s.refuse(pid, source, err)
			}
			if err != nil {
				return pid, false, err
			}
		}
		s.touch(existing)
		return existing, false, nil
	}
	if diverge != nil {
		return pid, false, s.refuse(pid, source, diverge)
	}
	// Rule W3: every chunk the commit names is on disk as the commit
	// lands. Files leave chunks/ only under wmu (removal, gc and
	// quarantine, which moves a file found faulty even after another
	// operation wrote a good one in its place), so none can leave
	// between this check and the commit.
	if missing, _ := s.MissingChunks(m.Chunks); len(missing) > 0 {
		return pid, false, &MissingChunksError{Pack: pid, Chunks: missing}
	}
	now := s.now().UnixNano()
	rec := &packRecord{
		blocks: uint32(len(keys)), bytes: m.Bytes(), manifestSize: uint32(len(mb)),
		identityKey: m.Identity.Key(), tenant: m.Tenant, endKey: keys[len(keys)-1],
		created: m.Created.UnixNano(), lastUse: now, source: source,
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		if seal != nil {
			if err := s.checkReplay(tx, seal, true); err != nil {
				return err
			}
		}
		if tx.Bucket(bucketPacks).Get(pid[:]) != nil {
			// The ledger holds this very pack, and the index does not:
			// it was quarantined (rule Q1 keeps its record and chain so
			// that its chunk references can be released). Its chain and
			// references are this manifest's: the new record replaces
			// the flagged one, and nothing is counted twice.
			if err := putPack(tx, pid, rec, chain); err != nil {
				return err
			}
		} else if err := addPack(tx, pid, rec, chain); err != nil {
			return err
		}
		if local {
			meta := tx.Bucket(bucketMeta)
			if g, ok := getU64(meta.Get(metaGeneration)); !ok || g < m.Generation {
				if err := meta.Put(metaGeneration, u64bytes(m.Generation)); err != nil {
					return err
				}
			}
		}
		return s.flushLastUse(tx)
	})
	if errors.Is(err, errReplay) || errors.Is(err, errStale) {
		return pid, false, s.refuse(pid, source, err)
	}
	if err != nil {
		return pid, false, err
	}
	s.mu.Lock()
	s.ix.add(pid, chain)
	s.mu.Unlock()
	return pid, true, nil
}

// addPack puts a pack record and its chain and takes its chunk references.
func addPack(tx *bolt.Tx, pid pack.Digest, rec *packRecord, chain []chainEntry) error {
	if err := putPack(tx, pid, rec, chain); err != nil {
		return err
	}
	cb := tx.Bucket(bucketChunks)
	for _, e := range chain {
		r := chunkRecord{size: e.size}
		if v := cb.Get(e.chunk[:]); v != nil {
			old, err := decodeChunkRecord(v)
			if err != nil {
				return fmt.Errorf("chunks/%s: %w", e.chunk, err)
			}
			r.refs = old.refs
		}
		r.refs++
		if err := cb.Put(e.chunk[:], r.encode()); err != nil {
			return err
		}
	}
	return nil
}

// putPack puts a pack record and its chain.
func putPack(tx *bolt.Tx, pid pack.Digest, rec *packRecord, chain []chainEntry) error {
	if err := tx.Bucket(bucketPacks).Put(pid[:], rec.encode()); err != nil {
		return err
	}
	return tx.Bucket(bucketBlocks).Put(pid[:], encodeChain(chain))
}

// dropRefs releases a pack's chunk references and returns the chunks left
// with none (their records deleted).
func dropRefs(tx *bolt.Tx, ids []pack.Digest) ([]pack.Digest, error) {
	cb := tx.Bucket(bucketChunks)
	var freed []pack.Digest
	for _, id := range ids {
		v := cb.Get(id[:])
		if v == nil {
			continue
		}
		r, err := decodeChunkRecord(v)
		if err != nil || r.refs <= 1 {
			if err := cb.Delete(id[:]); err != nil {
				return nil, err
			}
			freed = append(freed, id)
			continue
		}
		r.refs--
		if err := cb.Put(id[:], r.encode()); err != nil {
			return nil, err
		}
	}
	return freed, nil
}
