package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// InstallResult says what Install did.
type InstallResult struct {
	// Pack is the installed pack; Tokens how many tokens it covers.
	Pack   pack.Digest
	Tokens int
	// ChunksFetched and BytesFetched count the chunk objects read (only
	// those the store lacked).
	ChunksFetched int
	BytesFetched  int64
	// New is false when the store already held the pack.
	New bool
}

// Install copies pack id from the tier into st, through the store's own
// checks for received packs (docs/tier.md, "Reading"): the manifest
// object's layout and seal under the tier's key, then store.Admit (the
// manifest decodes, the identity is expect, the block size is the
// store's, the Merkle root), each missing chunk against its BLAKE3 ID
// (store.PutPackChunk), and store.PublishPack, which makes the pack
// visible atomically once every chunk is present. Nothing unverified
// reaches the store's visible packs. A refusal returns a
// *store.RefusalError whose receipt names the tier as source; a tier
// that cannot be reached returns an *OpError wrapping ErrUnavailable, and
// a manifest gone from the bucket (gc evicted it) one wrapping
// ErrNotFound; neither writes a receipt.
func (t *Tier) Install(ctx context.Context, st *store.Store, id pack.Digest, expect pack.Identity) (InstallResult, error) {
	res := InstallResult{Pack: id}
	src := t.Source()
	seal, mb, _, err := t.Manifest(ctx, id)
	if err != nil {
		var oe *ObjectError
		if errors.As(err, &oe) {
			return res, st.Refuse(id, src, "", err)
		}
		return res, err
	}
	m, missing, err := st.Admit(ctx, store.Offer{Manifest: mb, Seal: seal},
		store.AdmitOptions{Key: t.cfg.Key, Expect: &expect, Source: src, Stored: true})
	if err != nil {
		return res, err
	}
	res.Tokens = len(m.Tokens)
	size := map[pack.Digest]uint32{}
	block := map[pack.Digest]int{}
	for i := len(m.Chunks) - 1; i >= 0; i-- {
		size[m.Chunks[i].ID] = m.Chunks[i].Size
		block[m.Chunks[i].ID] = i
	}
	// The buffers are reused: the store keeps no reference to a chunk it
	// wrote.
	var mu sync.Mutex
	err = each(ctx, len(missing), func(ctx context.Context, i int, buf *[]byte) error {
		c := missing[i]
		n, err := t.fetchChunk(ctx, st, id, c, size[c], block[c], buf)
		if err != nil {
			return err
		}
		mu.Lock()
		res.ChunksFetched++
		res.BytesFetched += n
		mu.Unlock()
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Pack, res.New, err = st.PublishPack(ctx, m, store.PublishOptions{Source: src})
	return res, err
}

// fetchChunk reads chunk c of pack pid and hands it to the store, which
// verifies it against its ID.
func (t *Tier) fetchChunk(ctx context.Context, st *store.Store, pid, c pack.Digest, size uint32, block int, buf *[]byte) (int64, error) {
	key := t.chunkKey(c)
	data, err := t.getInto(ctx, key, int64(size), *buf)
	if data != nil {
		*buf = data
	}
	if err != nil {
		var oe *ObjectError
		switch {
		case isNotFound(err):
			// Missing in the bucket: refuse the pack, naming the chunk.
			return 0, st.Refuse(pid, t.Source(), pack.ReasonMissingChunk, &store.ChunkFault{Block: block, Chunk: c, Err: err})
		case errors.As(err, &oe):
			return 0, st.Refuse(pid, t.Source(), pack.ReasonOversize, &store.ChunkFault{Block: block, Chunk: c, Err: err})
		}
		return 0, err
	}
	if len(data) != int(size) {
		return 0, st.Refuse(pid, t.Source(), pack.ReasonTruncated, &store.ChunkFault{Block: block, Chunk: c,
			Err: &ObjectError{Key: key, Err: fmt.Errorf("%w: %d bytes, the manifest says %d", io.ErrUnexpectedEOF, len(data), size)}})
	}
	if err := st.PutPackChunk(ctx, pid, c, data, t.Source()); err != nil {
		return 0, err
	}
	return int64(len(data)), nil
}
