package store

import (
	"context"
	"fmt"

	"github.com/muserhq/muser/pack"
)

// PackReader reads the chunks of one pack in any order, each verified,
// for a sender that needs only some of them (a replication push sends the
// chunks the receiver lacks). OpenPack checks the manifest once (rule
// R1); ReadBlock checks each chunk it reads (rule R2), and a fault in
// either quarantines the pack with a receipt (R3), as a restore does. The
// pack and its chunks are leased from OpenPack to Close, so gc deletes
// none of them meanwhile. ReadBlock may be called from several goroutines
// at once.
type PackReader struct {
	s      *Store
	id     pack.Digest
	m      *pack.Manifest
	source string
	held   []pack.Digest
	closed bool
}

// OpenPack opens pack id for verified reads of single blocks; source
// names the reader in receipts (SourceLocal when empty). A pack not in
// the store wraps ErrNotFound; a quarantined one wraps ErrQuarantined; a
// manifest that fails R1 quarantines the pack and returns a
// *RefusalError. The caller must Close the reader.
func (s *Store) OpenPack(id pack.Digest, source string) (*PackReader, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if source == "" {
		source = SourceLocal
	}
	rec, err := s.packRecord(id)
	if err != nil {
		return nil, err
	}
	if rec.quarantined() {
		return nil, fmt.Errorf("pack %s: %w", id.Short(), ErrQuarantined)
	}
	r := &PackReader{s: s, id: id, source: source, held: []pack.Digest{id}}
	s.mu.Lock()
	s.leases[id]++
	s.mu.Unlock()
	m, _, err := s.readManifest(id)
	if err != nil {
		r.Close()
		return nil, s.fail(id, source, err, nil)
	}
	r.m = m
	s.mu.Lock()
	for _, c := range m.Chunks {
		s.leases[c.ID]++
		r.held = append(r.held, c.ID)
	}
	s.mu.Unlock()
	return r, nil
}

// ID returns the pack's ID.
func (r *PackReader) ID() pack.Digest { return r.id }

// Manifest returns the pack's verified manifest. The caller must not
// modify it.
func (r *PackReader) Manifest() *pack.Manifest { return r.m }

// ReadBlock reads the chunk of block into buf (grown as needed) and
// returns it once it hashes to its ID. A fault (missing file, wrong size,
// wrong bytes) quarantines the pack and returns a *RefusalError wrapping
// a *ChunkFault; plain I/O errors are returned as they are.
func (r *PackReader) ReadBlock(ctx context.Context, block int, buf []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if block < 0 || block >= len(r.m.Chunks) {
		return nil, fmt.Errorf("%w: pack %s has %d blocks, block %d asked for", pack.ErrInvalid, r.id.Short(), len(r.m.Chunks), block)
	}
	ref := r.m.Chunks[block]
	data, err := r.s.readChunk(ref, buf)
	if err != nil {
		return nil, r.s.fail(r.id, r.source, &ChunkFault{Block: block, Chunk: ref.ID, Err: err}, &ref.ID)
	}
	return data, nil
}

// Close releases the reader's leases and marks the pack used. It is safe
// to call more than once, but not concurrently with ReadBlock.
func (r *PackReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.s.releaseAll(r.held)
	if r.m != nil {
		r.s.touch(r.id)
	}
	return nil
}
