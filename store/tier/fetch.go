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
// it streams from its GET (a store.ChunkSink: hashed as it is read,
// written, fsynced and named by its ID in the background only once it
// verified), and store.PublishPack, which makes the pack visible
// atomically once every chunk is present. Nothing unverified reaches the
// store's visible packs. A refusal returns a *store.RefusalError whose
// receipt names the tier as source; a tier that cannot be reached (or a
// GET whose body breaks off) returns an *OpError wrapping
// ErrUnavailable, and a manifest gone from the bucket (gc evicted it) one
// wrapping ErrNotFound; neither writes a receipt. Once the pack is
// published it records the use for least-recently-used eviction (Touch).
func (t *Tier) Install(ctx context.Context, st *store.Store, id pack.Digest, expect pack.Identity) (InstallResult, error) {
	m, missing, err := t.admit(ctx, st, id, expect)
	if err != nil {
		return InstallResult{Pack: id}, err
	}
	return t.install(ctx, st, m, id, missing)
}

// admit reads the manifest object of pack id and admits it into st
// (store.Admit: the seal under the tier's key, the identity expect, the
// block size, the Merkle root), returning the manifest and the chunks st
// lacks. A manifest object that does not decode is refused with a
// receipt; one gone from the bucket wraps ErrNotFound.
func (t *Tier) admit(ctx context.Context, st *store.Store, id pack.Digest, expect pack.Identity) (*pack.Manifest, []pack.Digest, error) {
	seal, mb, _, err := t.Manifest(ctx, id)
	if err != nil {
		var oe *ObjectError
		if errors.As(err, &oe) {
			return nil, nil, st.Refuse(id, t.Source(), "", err)
		}
		return nil, nil, err
	}
	return st.Admit(ctx, store.Offer{Manifest: mb, Seal: seal},
		store.AdmitOptions{Key: t.cfg.Key, Expect: &expect, Source: t.Source(), Stored: true})
}

// install copies the chunks of admitted pack m that st lacks (missing)
// from their GETs into st and publishes the pack.
func (t *Tier) install(ctx context.Context, st *store.Store, m *pack.Manifest, id pack.Digest, missing []pack.Digest) (InstallResult, error) {
	res := InstallResult{Pack: id, Tokens: len(m.Tokens)}
	src := t.Source()
	size := map[pack.Digest]uint32{}
	block := map[pack.Digest]int{}
	for i := len(m.Chunks) - 1; i >= 0; i-- {
		size[m.Chunks[i].ID] = m.Chunks[i].Size
		block[m.Chunks[i].ID] = i
	}
	// A pipeline: 8 transfers at a time stream chunks from their GETs
	// into one sink, which hashes each as it is read; the sink's
	// workers write, fsync and rename the verified chunks (rule W1)
	// while the transfers go on with the next, so that a slow disk's
	// fsyncs and the network overlap.
	sink, err := st.NewChunkSink(id, src, store.ChunkSinkOptions{Syncers: commitParallel})
	if err != nil {
		return res, err
	}
	var mu sync.Mutex
	err = each(ctx, len(missing), func(ctx context.Context, i int, _ *[]byte) error {
		ch := missing[i]
		fetched, err := t.fetchChunk(ctx, st, sink, id, ch, size[ch], block[ch])
		if err != nil || !fetched {
			return err
		}
		mu.Lock()
		res.ChunksFetched++
		res.BytesFetched += int64(size[ch])
		mu.Unlock()
		return nil
	})
	// Close waits for every chunk accepted to be durable; a failed
	// write or fsync is the first fault (the transfers stopped on it).
	if cerr := sink.Close(); cerr != nil {
		return res, cerr
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

// fetchChunk streams chunk c of pack pid from its object into sink, which
// verifies it against its ID as it reads it. The object's size, when the
// response gives it, is checked against the manifest's before a byte is
// read. It reports false, sending no GET, when the store already holds
// the chunk (another install wrote it meanwhile).
func (t *Tier) fetchChunk(ctx context.Context, st *store.Store, sink *store.ChunkSink, pid, c pack.Digest, size uint32, block int) (bool, error) {
	if sink.Held(c, int(size)) {
		return false, nil
	}
	body, err := t.openChunk(ctx, st, pid, c, size, block)
	if err != nil {
		return false, err
	}
	defer body.Close()
	if err := sink.Put(ctx, c, int(size), body); err != nil {
		var se *store.SourceError
		if errors.As(err, &se) {
			// The body failed or ended before its length: the
			// connection, not the object.
			return false, t.opError("get", t.chunkKey(c), se.Err)
		}
		return false, err
	}
	return true, nil
}

// openChunk sends the GET of chunk c of pack pid (block names its first
// block in receipts) and returns the object's body. The object's size,
// when the response gives it, is checked against the manifest's before a
// byte is read; a body without a length (-1, chunked) is left to the
// reader, who reads the manifest's size and lets the hash decide. A
// missing, oversized or short object refuses the pack with a receipt.
func (t *Tier) openChunk(ctx context.Context, st *store.Store, pid, c pack.Digest, size uint32, block int) (io.ReadCloser, error) {
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
	switch {
	case info.Size > int64(size):
		body.Close()
		return nil, refuse(pack.ReasonOversize, &ObjectError{Key: key,
			Err: &pack.LimitError{Object: "tier object " + key, Field: "size", Got: uint64(info.Size), Max: uint64(size)}})
	case info.Size >= 0 && info.Size < int64(size):
		body.Close()
		return nil, refuse(pack.ReasonTruncated, &ObjectError{Key: key,
			Err: fmt.Errorf("%w: %d bytes, the manifest says %d", io.ErrUnexpectedEOF, info.Size, size)})
	}
	return body, nil
}
