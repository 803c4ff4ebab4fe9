package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/minio/minio-go/v7"
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
	// UseRecorded is true when the install's use marker (uses/ID,
	// docs/tier.md "Eviction") was written; writing it is best effort
	// and never fails the install.
	UseRecorded bool
}

// Install copies pack id from the tier into st, through the store's own
// checks for received packs (docs/tier.md, "Reading"): the manifest
// object's layout and seal under the tier's key, then store.Admit (the
// manifest decodes, the identity is expect, the block size is the
// store's, the Merkle root), each missing chunk against its BLAKE3 ID as
// it streams from its GET into its file (store.StageChunkFrom: hashed and
// written in one pass, then fsynced and named by its ID only once it
// verified), and store.PublishPack, which makes the pack
// visible atomically once every chunk is present. Nothing unverified
// reaches the store's visible packs. A refusal returns a
// *store.RefusalError whose receipt names the tier as source; a tier
// that cannot be reached returns an *OpError wrapping ErrUnavailable, and
// a manifest gone from the bucket (gc evicted it) one wrapping
// ErrNotFound; neither writes a receipt. Once the pack is published it
// records the use for least-recently-used eviction (Touch).
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
	// A pipeline: 8 transfers at a time stream chunks from their GETs
	// into the store, which hashes and writes each in one pass
	// (store.StageChunkFrom); committers fsync and rename them
	// (StagedChunk.Commit, rule W1) while the transfers go on with the
	// next chunks, so that a slow disk's fsyncs and the network overlap.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	staged := make(chan *store.StagedChunk, parallel)
	var (
		cwg       sync.WaitGroup
		mu        sync.Mutex
		commitErr error
	)
	for range commitParallel {
		cwg.Go(func() {
			for c := range staged {
				if ctx.Err() != nil {
					c.Abort()
					continue
				}
				if err := c.Commit(); err != nil {
					mu.Lock()
					if commitErr == nil {
						commitErr = err
					}
					mu.Unlock()
					cancel()
				}
			}
		})
	}
	err = each(ctx, len(missing), func(ctx context.Context, i int, _ *[]byte) error {
		ch := missing[i]
		c, err := t.fetchChunk(ctx, st, id, ch, size[ch], block[ch])
		if err != nil || c == nil {
			return err
		}
		mu.Lock()
		res.ChunksFetched++
		res.BytesFetched += int64(size[ch])
		mu.Unlock()
		select {
		case staged <- c:
			return nil
		case <-ctx.Done():
			c.Abort()
			return ctx.Err()
		}
	})
	close(staged)
	cwg.Wait()
	if commitErr != nil {
		return res, commitErr
	}
	if err != nil {
		return res, err
	}
	res.Pack, res.New, err = st.PublishPack(ctx, m, store.PublishOptions{Source: src})
	if err != nil {
		return res, err
	}
	res.UseRecorded = t.Touch(ctx, id) == nil
	return res, nil
}

// fetchChunk streams chunk c of pack pid from its object into a staged
// chunk of the store, which verifies it against its ID as it writes it.
// The object's size, when the response gives it, is checked against the
// manifest's before a byte is read. It returns nil when the
// store already held the chunk (another install wrote it meanwhile).
func (t *Tier) fetchChunk(ctx context.Context, st *store.Store, pid, c pack.Digest, size uint32, block int) (*store.StagedChunk, error) {
	key := t.chunkKey(c)
	refuse := func(reason pack.Reason, err error) error {
		return st.Refuse(pid, t.Source(), reason, &store.ChunkFault{Block: block, Chunk: c, Err: err})
	}
	body, info, _, err := minio.Core{Client: t.cl}.GetObject(ctx, t.cfg.Location.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		err = t.opError("get", key, err)
		if isNotFound(err) {
			// Missing in the bucket: refuse the pack, naming the chunk.
			return nil, refuse(pack.ReasonMissingChunk, err)
		}
		return nil, err
	}
	defer body.Close()
	// A size of -1 is a body without a length (chunked): the store
	// reads the manifest's size and the hash decides.
	switch {
	case info.Size > int64(size):
		return nil, refuse(pack.ReasonOversize, &ObjectError{Key: key,
			Err: &pack.LimitError{Object: "tier object " + key, Field: "size", Got: uint64(info.Size), Max: uint64(size)}})
	case info.Size >= 0 && info.Size < int64(size):
		return nil, refuse(pack.ReasonTruncated, &ObjectError{Key: key,
			Err: fmt.Errorf("%w: %d bytes, the manifest says %d", io.ErrUnexpectedEOF, info.Size, size)})
	}
	sc, err := st.StageChunkFrom(ctx, pid, c, int64(size), body, t.Source())
	if err != nil {
		var re *store.ReadError
		if errors.As(err, &re) {
			// The body failed or ended before its length: the
			// connection, not the object.
			return nil, t.opError("get", key, re.Err)
		}
		return nil, err
	}
	return sc, nil
}
