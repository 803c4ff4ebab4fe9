package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/muserhq/muser/pack"
	bolt "go.etcd.io/bbolt"
)

// Match is the longest cached prefix of a request.
type Match struct {
	// Pack is a pack whose tokens start with the matched prefix.
	Pack pack.Digest
	// Blocks and Tokens measure the prefix (Tokens = Blocks*BlockTokens).
	Blocks, Tokens int
}

// Match finds the longest block-aligned prefix of tokens cached under
// identity id and the tenant of salt, without reading any data. Its cost
// is one hash and one map lookup per block of the prefix. A miss returns
// a zero Match.
func (s *Store) Match(id pack.Identity, salt []byte, tokens []int32) (Match, error) {
	if err := s.checkOpen(); err != nil {
		return Match{}, err
	}
	m, _, _ := s.match(id, salt, tokens, false)
	return m, nil
}

// match does Match under s.mu and, with lease set, leases the pack and the
// matched chunks; release undoes that.
func (s *Store) match(id pack.Identity, salt []byte, tokens []int32, lease bool) (Match, []pack.Digest, func()) {
	keys := pack.BlockKeys(id.Key(), pack.TenantTag(salt), tokens, s.block)
	s.mu.Lock()
	defer s.mu.Unlock()
	depth, n := s.ix.match(keys)
	if depth == 0 {
		return Match{}, nil, func() {}
	}
	p, ok := s.ix.packThrough(n)
	if !ok {
		return Match{}, nil, func() {}
	}
	m := Match{Pack: p, Blocks: depth, Tokens: depth * s.block}
	if !lease {
		return m, nil, func() {}
	}
	path := s.ix.path(n)
	ids := make([]pack.Digest, 0, len(path)+1)
	ids = append(ids, p)
	for _, nd := range path {
		ids = append(ids, nd.chunk)
	}
	for _, x := range ids {
		s.leases[x]++
	}
	return m, keys[:depth], func() {
		s.mu.Lock()
		for _, x := range ids {
			if s.leases[x]--; s.leases[x] <= 0 {
				delete(s.leases, x)
			}
		}
		s.mu.Unlock()
	}
}

// Restore finds the longest cached block-aligned prefix of tokens under
// (id, salt), verifies it and hands each block's KV bytes to put in order,
// block 0 first; the slice is valid only during the call. It returns the
// number of tokens restored (0 on a miss). The manifest is hashed to its
// pack ID and its Merkle root recomputed before the first chunk is read,
// and each chunk is re-hashed before put sees it; any fault quarantines
// the pack, records a receipt and returns a *RefusalError (wrapping
// pack.ErrRefused) after which the caller must discard what put received.
// It satisfies infer.PrefixStore.
func (s *Store) Restore(ctx context.Context, id pack.Identity, salt []byte, tokens []int32,
	put func(block int, kv []byte) error) (int, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	for i, t := range tokens {
		if t < 0 {
			return 0, fmt.Errorf("%w: token %d at position %d is negative", pack.ErrInvalid, t, i)
		}
	}
	m, keys, release := s.match(id, salt, tokens, true)
	defer release()
	if m.Blocks == 0 {
		return 0, nil
	}
	tenant := pack.TenantTag(salt)
	return s.restore(ctx, RestoreRequest{Pack: m.Pack, Identity: id, Blocks: m.Blocks,
		Tokens: tokens[:m.Tokens], tenant: &tenant, keys: keys}, SourceLocal, put)
}

// RestoreRequest asks RestorePack for a verified prefix of one pack.
type RestoreRequest struct {
	// Pack is the pack's ID.
	Pack pack.Digest
	// Identity is the identity the caller's engine has; a pack whose
	// identity differs in any field is refused with a receipt naming the
	// differing fields.
	Identity pack.Identity
	// Blocks is how many blocks to restore from the start (0: all).
	Blocks int
	// Tokens, when non-nil, must equal the pack's first len(Tokens)
	// tokens; Blocks defaults to len(Tokens)/BlockTokens.
	Tokens []int32
	// Salt, when non-nil, is the caller's tenant salt; a pack of another
	// tenant is refused (unauthorized).
	Salt []byte

	tenant *pack.Digest
	keys   []pack.Digest
}

// RestorePack restores a prefix of the pack req names, verified as Restore
// does, and returns the number of tokens handed to put. A pack not in the
// store wraps ErrNotFound; a quarantined one wraps ErrQuarantined.
func (s *Store) RestorePack(ctx context.Context, req RestoreRequest, put func(block int, kv []byte) error) (int, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	rec, err := s.packRecord(req.Pack)
	if err != nil {
		return 0, err
	}
	if rec.quarantined() {
		return 0, fmt.Errorf("pack %s: %w", req.Pack.Short(), ErrQuarantined)
	}
	if req.Salt != nil {
		t := pack.TenantTag(req.Salt)
		req.tenant = &t
	}
	if req.Blocks == 0 && req.Tokens != nil {
		if len(req.Tokens)%s.block != 0 {
			return 0, fmt.Errorf("%w: %d tokens is not a whole number of %d-token blocks", pack.ErrInvalid, len(req.Tokens), s.block)
		}
		req.Blocks = len(req.Tokens) / s.block
	}
	ids := []pack.Digest{req.Pack}
	s.mu.Lock()
	// Lease the pack's chunks through the index chain when it is there.
	s.leases[req.Pack]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for _, x := range ids {
			if s.leases[x]--; s.leases[x] <= 0 {
				delete(s.leases, x)
			}
		}
		s.mu.Unlock()
	}()
	return s.restoreLeased(ctx, req, SourceLocal, put, &ids)
}

// restore runs a restore whose pack and chunks the caller has leased.
func (s *Store) restore(ctx context.Context, req RestoreRequest, source string, put func(int, []byte) error) (int, error) {
	return s.restoreLeased(ctx, req, source, put, nil)
}

// restoreLeased verifies and streams (rules R1, R2, R3). With more non-nil
// it leases the chunks it reads, appending them to *more for the caller to
// release.
func (s *Store) restoreLeased(ctx context.Context, req RestoreRequest, source string,
	put func(int, []byte) error, more *[]pack.Digest) (int, error) {
	m, _, err := s.readManifest(req.Pack)
	if err != nil {
		return 0, s.fail(req.Pack, source, err, nil)
	}
	// Identity and tenant: refusals, but the pack itself is sound.
	if err := req.Identity.Check(m.Identity); err != nil {
		return 0, s.refuse(req.Pack, source, err)
	}
	if req.tenant != nil && *req.tenant != m.Tenant {
		return 0, s.refuse(req.Pack, source, fmt.Errorf("%w: the pack belongs to tenant %s, the request to %s", errTenant, m.Tenant.Short(), req.tenant.Short()))
	}
	blocks := req.Blocks
	if blocks == 0 {
		blocks = len(m.Chunks)
	}
	if blocks < 0 || blocks > len(m.Chunks) {
		return 0, fmt.Errorf("%w: pack %s has %d blocks, asked for %d", pack.ErrInvalid, req.Pack.Short(), len(m.Chunks), blocks)
	}
	if req.Tokens != nil {
		if len(req.Tokens) > len(m.Tokens) || !slices.Equal(req.Tokens, m.Tokens[:len(req.Tokens)]) {
			if req.keys != nil {
				// The index led here, so the ledger's chain disagrees
				// with the manifest: corruption.
				return 0, s.fail(req.Pack, source, fmt.Errorf("%w: the ledger's block chain does not match the manifest's tokens", pack.ErrCorrupt), nil)
			}
			return 0, fmt.Errorf("%w: pack %s does not start with the given tokens", pack.ErrInvalid, req.Pack.Short())
		}
	}
	if req.keys != nil {
		mk := pack.BlockKeys(m.Identity.Key(), m.Tenant, m.Tokens[:blocks*m.BlockTokens], m.BlockTokens)
		if !slices.Equal(mk, req.keys[:blocks]) {
			return 0, s.fail(req.Pack, source, fmt.Errorf("%w: the manifest's block keys differ from the request's", pack.ErrCorrupt), nil)
		}
	}
	if more != nil {
		for _, c := range m.Chunks[:blocks] {
			s.mu.Lock()
			s.leases[c.ID]++
			s.mu.Unlock()
			*more = append(*more, c.ID)
		}
	}
	var buf []byte
	pf := s.prefetch(m.Chunks[:blocks])
	defer pf.end()
	for i := 0; i < blocks; i++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		pf.at(i)
		ref := m.Chunks[i]
		data, err := s.readChunk(ref, buf)
		if err != nil {
			fault := &ChunkFault{Block: i, Chunk: ref.ID, Err: err}
			return 0, s.fail(req.Pack, source, fault, &ref.ID)
		}
		buf = data[:cap(data)]
		if err := put(i, data); err != nil {
			return 0, fmt.Errorf("restore: block %d: %w", i, err)
		}
	}
	s.touch(req.Pack)
	return blocks * m.BlockTokens, nil
}

// fail handles a pack that failed verification: quarantine (rule Q1) and a
// receipt, then the *RefusalError. I/O errors that say nothing about the
// pack's bytes are returned as they are, and a missing file of a pack
// whose record is gone (removed meanwhile) is ErrNotFound. chunk names the
// chunk at fault, whose file quarantine moves aside unless the fault is
// that the file is missing.
func (s *Store) fail(id pack.Digest, source string, err error, chunk *pack.Digest) error {
	if !errors.Is(err, pack.ErrCorrupt) && !errors.Is(err, errMissing) && !errors.Is(err, errSize) {
		return fmt.Errorf("pack %s: %w", id.Short(), err)
	}
	if errors.Is(err, errMissing) {
		// A Remove (or gc) between the read of the manifest and the
		// leases of its chunks deletes files of a pack that is gone,
		// not damaged: no receipt, no quarantine.
		if _, rerr := s.packRecord(id); errors.Is(rerr, ErrNotFound) {
			return fmt.Errorf("pack %s: %w", id.Short(), ErrNotFound)
		}
		// No file failed, so none is moved (rule Q1): one under the
		// chunk's name now was put there after the failed open (by a
		// publish that may name it), and is not this fault's.
		chunk = nil
	}
	if s.checkWritable() == nil {
		if qerr := s.quarantine(id, chunk); qerr != nil {
			err = errors.Join(err, fmt.Errorf("quarantine failed: %w", qerr))
		}
	}
	return s.refuse(id, source, err)
}

// quarantine marks pack id quarantined and takes it out of the index
// (rule Q1): its record is flagged in one ledger transaction, and the index
// (rebuilt at open from the chains of packs not quarantined) drops its
// chain; the chain stays in the ledger so its chunk references can be
// released when the pack is removed. With chunk non-nil the chunk's file
// is then moved to quarantine/.
func (s *Store) quarantine(id pack.Digest, chunk *pack.Digest) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.checkWritable(); err != nil {
		return err
	}
	var chain []chainEntry
	err := s.db.Update(func(tx *bolt.Tx) error {
		pb := tx.Bucket(bucketPacks)
		v := pb.Get(id[:])
		if v == nil {
			return nil
		}
		rec, err := decodePackRecord(v)
		if err != nil {
			return err
		}
		if rec.quarantined() {
			return nil
		}
		rec.flags |= flagQuarantined
		if err := pb.Put(id[:], rec.encode()); err != nil {
			return err
		}
		if cv := tx.Bucket(bucketBlocks).Get(id[:]); cv != nil {
			chain, _ = decodeChain(cv)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	if chain != nil {
		s.ix.remove(id, chain)
	}
	s.mu.Unlock()
	if chunk != nil {
		return s.moveToQuarantine(s.chunkPath(*chunk), chunk.String()+".chunk")
	}
	return nil
}

// packRecord reads pack id's ledger record.
func (s *Store) packRecord(id pack.Digest) (*packRecord, error) {
	var rec *packRecord
	err := guard(s.ledgerPath(), func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			v := tx.Bucket(bucketPacks).Get(id[:])
			if v == nil {
				return fmt.Errorf("pack %s: %w", id.Short(), ErrNotFound)
			}
			var err error
			rec, err = decodePackRecord(v)
			if err != nil {
				return &LedgerError{Bucket: "packs", Key: id.String(), Err: err}
			}
			return nil
		})
	})
	return rec, err
}
