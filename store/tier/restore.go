package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// streamAhead is how many chunks a streamed restore fetches ahead of the
// block its consumer is at: it bounds the chunks held in memory for the
// consumer alone. It is at least parallel, so the chunk the consumer
// waits for is always being fetched.
const streamAhead = 4 * parallel

// RestoreRequest asks Tier.Restore for a verified prefix of one pack.
type RestoreRequest struct {
	// Pack is the pack's ID in the tier.
	Pack pack.Digest
	// Identity is the served engine's; a pack differing in any field is
	// refused.
	Identity pack.Identity
	// Salt is the request's tenant salt; a pack of another tenant is
	// refused (unauthorized).
	Salt []byte
	// Tokens is the prompt: the restore hands over the pack's leading
	// whole blocks whose tokens are the prompt's.
	Tokens []int32
}

// Fetched is what a streamed restore verified: the pack's admitted
// manifest, for the local install that follows (Install).
type Fetched struct {
	t       *Tier
	st      *store.Store
	m       *pack.Manifest
	id      pack.Digest
	missing []pack.Digest
	used    atomic.Bool
	bytes   atomic.Int64 // chunk bytes the restore read from the tier
}

// BytesFetched returns the chunk bytes the restore read from the tier.
func (f *Fetched) BytesFetched() int64 { return f.bytes.Load() }

// Install copies the pack into the store and publishes it, as
// Tier.Install does after its checks: the chunks the store lacks are
// streamed again from their GETs into the store's ChunkSink, which
// hashes each before a byte is written, and the pack becomes visible
// only once every chunk is durable (store.PublishPack). The restore kept
// no chunk in memory for it: a GET again costs less than the memory
// (docs/benchmarks.md, "Fleet tier"). A second call returns
// ErrFetchedUsed.
func (f *Fetched) Install(ctx context.Context) (InstallResult, error) {
	if f.used.Swap(true) {
		return InstallResult{Pack: f.id}, fmt.Errorf("install of pack %s: %w", f.id.Short(), ErrFetchedUsed)
	}
	return f.t.install(ctx, f.st, f.m, f.id, f.missing)
}

// Restore hands put the verified blocks of pack req.Pack that match
// req.Tokens, block 0 first, straight from the tier: the restore of a
// read-through, whose critical path is the GETs and the hashes, not the
// local disk. Before any chunk is used, the manifest object passes every
// check of Install (seal, identity, block size, Merkle root) and the
// pack's tenant must be the salt's; each chunk is then fetched (8 GETs at
// a time, in block order, at most streamAhead chunks ahead of put),
// BLAKE3-hashed as it is read and compared with the manifest's chunk ID
// before put sees it. Chunks the store already holds are read from it,
// verified, instead.
//
// It returns the tokens handed to put and a *Fetched for the local
// install, which the caller runs (Fetched.Install) or drops; nothing is
// written to the store before that. Errors are Install's: a refusal with
// a receipt (a tenant other than the salt's wraps ErrTenant), or the
// tier unavailable; an error of put is returned wrapped. After any error
// the caller must discard what put received: no partial restore is ever
// valid.
func (t *Tier) Restore(ctx context.Context, st *store.Store, req RestoreRequest, put func(block int, kv []byte) error) (int, *Fetched, error) {
	m, missing, err := t.admit(ctx, st, req.Pack, req.Identity)
	if err != nil {
		return 0, nil, err
	}
	if tenant := pack.TenantTag(req.Salt); tenant != m.Tenant {
		return 0, nil, st.Refuse(req.Pack, t.Source(), pack.ReasonUnauthorized,
			fmt.Errorf("%w: the pack belongs to tenant %s, the request to %s", ErrTenant, m.Tenant.Short(), tenant.Short()))
	}
	f := &Fetched{t: t, st: st, m: m, id: req.Pack, missing: missing}
	blocks := matchedBlocks(m, req.Tokens)
	if blocks == 0 {
		return 0, f, nil
	}
	if err := newStream(t, st, f, blocks).run(ctx, put); err != nil {
		return 0, nil, err
	}
	return blocks * m.BlockTokens, f, nil
}

// matchedBlocks is how many leading whole blocks of m have tokens' tokens.
func matchedBlocks(m *pack.Manifest, tokens []int32) int {
	n := 0
	for n < len(m.Chunks) && (n+1)*m.BlockTokens <= min(len(tokens), len(m.Tokens)) {
		lo, hi := n*m.BlockTokens, (n+1)*m.BlockTokens
		for i := lo; i < hi; i++ {
			if tokens[i] != m.Tokens[i] {
				return n
			}
		}
		n++
	}
	return n
}

// stream is one streamed restore: the distinct chunks of the restored
// blocks, each in a slot that its fetch fills and the consumer drains.
type stream struct {
	t      *Tier
	st     *store.Store
	f      *Fetched
	blocks int
	slots  []*streamSlot
	slotOf []int // block → slot
	lack   map[pack.Digest]bool
}

// streamSlot is one distinct chunk of a streamed restore.
type streamSlot struct {
	ref   pack.ChunkRef
	block int           // its first block
	last  int           // its last block
	data  []byte        // the verified bytes, once ready is closed
	ready chan struct{} // closed when data is set
	taken chan struct{} // closed when its first block went to put
}

func newStream(t *Tier, st *store.Store, f *Fetched, blocks int) *stream {
	s := &stream{t: t, st: st, f: f, blocks: blocks, slotOf: make([]int, blocks), lack: map[pack.Digest]bool{}}
	for _, id := range f.missing {
		s.lack[id] = true
	}
	seen := map[pack.Digest]int{}
	for i, ref := range f.m.Chunks[:blocks] {
		j, ok := seen[ref.ID]
		if !ok {
			j = len(s.slots)
			seen[ref.ID] = j
			s.slots = append(s.slots, &streamSlot{ref: ref, block: i, ready: make(chan struct{}), taken: make(chan struct{})})
		}
		s.slots[j].last = i
		s.slotOf[i] = j
	}
	return s
}

// run fetches the slots in the background and hands the blocks to put in
// order as their slots fill; the first failure of either side stops both.
func (s *stream) run(ctx context.Context, put func(block int, kv []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ferr error
	fetched := make(chan struct{})
	go func() {
		defer close(fetched)
		ferr = each(ctx, len(s.slots), func(ctx context.Context, j int, _ *[]byte) error { return s.fill(ctx, j) })
	}()
	err := s.deliver(ctx, fetched, &ferr, put)
	cancel()
	<-fetched
	if err == nil {
		err = ferr
	}
	return err
}

// deliver hands each block to put once its slot is ready. It returns the
// fetch's error (*ferr, set when fetched is closed) when the fetch ends
// first with one.
func (s *stream) deliver(ctx context.Context, fetched <-chan struct{}, ferr *error, put func(block int, kv []byte) error) error {
	for i := range s.blocks {
		sl := s.slots[s.slotOf[i]]
		if err := s.await(ctx, sl, fetched, ferr); err != nil {
			return err
		}
		if err := put(i, sl.data); err != nil {
			return fmt.Errorf("tier restore of pack %s: block %d: %w", s.f.id.Short(), i, err)
		}
		if i == sl.block {
			close(sl.taken)
		}
		if i == sl.last {
			putChunkBuf(sl.data)
			sl.data = nil
		}
	}
	return nil
}

// await waits until slot sl is ready, the fetch failed or ctx ended.
func (s *stream) await(ctx context.Context, sl *streamSlot, fetched <-chan struct{}, ferr *error) error {
	select {
	case <-sl.ready:
		return nil
	case <-fetched:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-sl.ready:
		return nil
	default:
	}
	if *ferr != nil {
		return *ferr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("tier restore of pack %s: chunk %s was not fetched", s.f.id.Short(), sl.ref.ID.Short())
}

// fill fetches slot j once the consumer is within streamAhead slots of
// it: from the store when it holds the chunk, else from its GET.
func (s *stream) fill(ctx context.Context, j int) error {
	if j >= streamAhead {
		select {
		case <-s.slots[j-streamAhead].taken:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	sl := s.slots[j]
	if !s.lack[sl.ref.ID] {
		if data, err := s.st.ReadChunk(sl.ref, chunkBuf(int(sl.ref.Size))); err == nil {
			sl.data = data
			close(sl.ready)
			return nil
		}
		// The store's copy did not read or verify: the tier's serves.
	}
	data, err := s.t.getChunk(ctx, s.st, s.f.id, sl.ref, sl.block)
	if err != nil {
		return err
	}
	s.f.bytes.Add(int64(len(data)))
	sl.data = data
	close(sl.ready)
	return nil
}

// getChunk GETs chunk ref of pack pid (block: its first block, for
// receipts) whole and verifies it against its ID, hashing each piece as
// it is read. Bytes that are not the chunk refuse the pack with a
// receipt; a body that fails or ends early is the connection's fault (an
// *OpError wrapping ErrUnavailable, no receipt).
func (t *Tier) getChunk(ctx context.Context, st *store.Store, pid pack.Digest, ref pack.ChunkRef, block int) ([]byte, error) {
	body, err := t.openChunk(ctx, st, pid, ref.ID, ref.Size, block)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	data := chunkBuf(int(ref.Size))[:ref.Size]
	got, err := readHashed(body, data)
	if err != nil {
		putChunkBuf(data)
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, t.opError("get", t.chunkKey(ref.ID), err)
	}
	if got != ref.ID {
		putChunkBuf(data)
		return nil, st.Refuse(pid, t.Source(), pack.ReasonChunkDigest, &store.ChunkFault{Block: block, Chunk: ref.ID,
			Err: &ObjectError{Key: t.chunkKey(ref.ID), Err: &pack.DigestError{Kind: pack.DigestChunk, Object: "tier chunk", Expected: ref.ID, Actual: got}}})
	}
	return data, nil
}

// hashPiece is how many bytes readHashed reads before it hashes them:
// hashed while still in the CPU's cache.
const hashPiece = 128 << 10

// readHashed fills buf from r and returns the BLAKE3 chunk ID of its
// bytes, hashing each piece right after it is read.
func readHashed(r io.Reader, buf []byte) (pack.Digest, error) {
	h := pack.NewChunkHasher()
	for off := 0; off < len(buf); {
		n, err := io.ReadFull(r, buf[off:min(len(buf), off+hashPiece)])
		_, _ = h.Write(buf[off : off+n])
		off += n
		if err != nil {
			return pack.Digest{}, err
		}
	}
	var d pack.Digest
	h.Sum(d[:0])
	return d, nil
}

// chunkBufs recycles the buffers of streamed restores: chunks of one
// model are all the same size, and a recycled buffer is already mapped.
var chunkBufs sync.Pool

// chunkBuf returns a buffer of capacity at least n+1 (store.ReadChunk's
// need), recycled when one fits.
func chunkBuf(n int) []byte {
	if p, ok := chunkBufs.Get().(*[]byte); ok && cap(*p) > n {
		return (*p)[:0]
	}
	return make([]byte, 0, n+1)
}

// putChunkBuf hands a buffer back for reuse.
func putChunkBuf(b []byte) {
	if cap(b) > 0 {
		chunkBufs.Put(&b)
	}
}
