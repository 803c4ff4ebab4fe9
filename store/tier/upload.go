package tier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// parallel is how many chunk objects one upload or restore moves at once.
const parallel = 8

// commitParallel is how many chunks an install makes durable at once:
// the syncers of its store.ChunkSink (write, fsync and rename, beside the
// transfers), enough that the fsyncs of a busy disk do not hold up the
// network.
const commitParallel = 16

// each calls f for 0 ≤ i < n, parallel calls at a time; each goroutine
// passes f the same buffer to reuse. The first error cancels the context
// of the calls under way and is returned once they end. When the
// caller's ctx ends before every call has run, its error is returned:
// nil means that f ran, and succeeded, for every i.
func each(parent context.Context, n int, f func(ctx context.Context, i int, buf *[]byte) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		next  atomic.Int64
		done  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(parallel, n) {
		wg.Go(func() {
			var buf []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i, &buf); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if first == nil && done.Load() < int64(n) {
		return parent.Err()
	}
	return first
}

// UploadResult says what an upload did.
type UploadResult struct {
	// Pack is the uploaded pack.
	Pack pack.Digest
	// ChunksPut and BytesPut count the chunk objects written (absent, or
	// refreshed under rule G1); ChunksHeld counts those already present.
	ChunksPut, ChunksHeld int
	BytesPut              int64
	// Existed is true when the bucket already held the manifest (the
	// conditional put found it): it is never overwritten.
	Existed bool
}

// Upload copies pack id from st into the tier (docs/tier.md, "Writing"):
// every chunk the bucket lacks (or holds with a last-modified time older
// than RefreshAge), read from the store verified, then the sealed
// manifest object with a conditional put, so that a manifest is never
// overwritten and never visible before its chunks. A pack already in the
// tier is not uploaded again; its use is recorded (Touch). An upload that has run
// MaxUploadTime writes no manifest (ErrTooSlow).
func (t *Tier) Upload(ctx context.Context, st *store.Store, id pack.Digest) (UploadResult, error) {
	res := UploadResult{Pack: id}
	start := t.now()
	mkey := t.manifestKey(id)
	if _, err := t.stat(ctx, mkey); err == nil {
		// This node made a pack the tier holds: a use of it (best
		// effort, as in Install).
		res.Existed = true
		_ = t.Touch(ctx, id)
		return res, nil
	} else if !isNotFound(err) {
		return res, err
	}
	r, err := st.OpenPack(id, t.Source())
	if err != nil {
		return res, err
	}
	defer r.Close()
	m := r.Manifest()
	mb, err := m.Marshal()
	if err != nil {
		return res, err
	}
	// One block per distinct chunk, in block order.
	var blocks []int
	seen := map[pack.Digest]bool{}
	for i, c := range m.Chunks {
		if !seen[c.ID] {
			seen[c.ID] = true
			blocks = append(blocks, i)
		}
	}
	var mu sync.Mutex
	err = each(ctx, len(blocks), func(ctx context.Context, i int, buf *[]byte) error {
		put, n, err := t.uploadChunk(ctx, r, blocks[i], m.Chunks[blocks[i]], buf)
		if err != nil {
			return err
		}
		mu.Lock()
		if put {
			res.ChunksPut++
			res.BytesPut += n
		} else {
			res.ChunksHeld++
		}
		mu.Unlock()
		return nil
	})
	if err != nil {
		return res, err
	}
	if el := t.now().Sub(start); el > MaxUploadTime {
		return res, fmt.Errorf("pack %s: %w (%v, at most %v)", id.Short(), ErrTooSlow, el.Round(time.Second), MaxUploadTime)
	}
	seal, err := t.seal(id)
	if err != nil {
		return res, err
	}
	obj, err := EncodeObject(seal, mb)
	if err != nil {
		return res, err
	}
	wrote, err := t.put(ctx, mkey, obj, true)
	if err != nil {
		return res, err
	}
	res.Existed = !wrote
	return res, nil
}

// uploadChunk puts the chunk of block unless the bucket holds it and it
// is younger than RefreshAge (rule G1).
func (t *Tier) uploadChunk(ctx context.Context, r *store.PackReader, block int, ref pack.ChunkRef, buf *[]byte) (bool, int64, error) {
	key := t.chunkKey(ref.ID)
	o, err := t.stat(ctx, key)
	switch {
	case err == nil && o.Size == int64(ref.Size) && t.now().Sub(o.Modified) < RefreshAge:
		return false, 0, nil
	case err != nil && !isNotFound(err):
		return false, 0, err
	}
	data, err := r.ReadBlock(ctx, block, *buf)
	if err != nil {
		return false, 0, err
	}
	*buf = data[:cap(data)]
	if _, err := t.put(ctx, key, data, false); err != nil {
		return false, 0, err
	}
	return true, int64(len(data)), nil
}

// UploaderOptions configure an Uploader.
type UploaderOptions struct {
	// Queue bounds the packs waiting (default 1024); beyond it Enqueue
	// drops the pack.
	Queue int
	// Attempts is how many times a pack is tried (default 5), with
	// Backoff (default 1s) doubling between tries.
	Attempts int
	Backoff  time.Duration
	// Logger receives the uploader's logs; nil discards them.
	Logger *slog.Logger
}

// UploaderStats counts what an Uploader did.
type UploaderStats struct {
	// Uploaded counts packs whose manifest is in the bucket (written now
	// or found there); Bytes the chunk bytes put.
	Uploaded int
	Bytes    int64
	// Retries counts failed attempts that were tried again; Dropped the
	// packs given up on (queue full, attempts spent, still queued at
	// Close); Refused the packs whose local copy failed verification (a
	// receipt records each).
	Retries, Dropped, Refused int
}

// Uploader is the tier's write-behind queue: a bounded queue of packs
// uploaded in the background by one goroutine, each retried with
// exponential backoff. It is safe for concurrent use.
type Uploader struct {
	t    *Tier
	st   *store.Store
	opts UploaderOptions
	log  *slog.Logger

	mu      sync.Mutex
	queue   []pack.Digest
	queued  map[pack.Digest]bool
	closed  bool
	stats   UploaderStats
	wake    chan struct{}
	stop    chan struct{} // closed by Close: finish what is queued, then exit
	done    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	pending atomic.Int64
}

// NewUploader starts an uploader of st's packs into t.
func NewUploader(t *Tier, st *store.Store, opts UploaderOptions) *Uploader {
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u := &Uploader{t: t, st: st, opts: opts, log: log, queued: map[pack.Digest]bool{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	go u.run()
	return u
}

// Enqueue queues pack id for upload. It never blocks: a full queue drops
// the pack (ErrQueueFull, counted and logged).
func (u *Uploader) Enqueue(id pack.Digest) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.closed:
		return ErrClosed
	case u.queued[id]:
		return nil
	case len(u.queue) >= u.opts.Queue:
		u.stats.Dropped++
		u.log.Warn("tier upload queue full; pack dropped", "tier", u.t.String(), "pack", id.Short(), "queue", u.opts.Queue)
		return ErrQueueFull
	}
	u.queue = append(u.queue, id)
	u.queued[id] = true
	u.pending.Store(int64(len(u.queue)))
	select {
	case u.wake <- struct{}{}:
	default:
	}
	return nil
}

// Pending returns how many packs wait, including the one being uploaded.
func (u *Uploader) Pending() int { return int(u.pending.Load()) }

// Stats returns the counts so far.
func (u *Uploader) Stats() UploaderStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stats
}

// Close stops accepting packs and flushes the queue until ctx ends; what
// is still queued then is dropped, counted and logged. It returns
// ctx's error when the flush was cut short.
func (u *Uploader) Close(ctx context.Context) error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		<-u.done
		return nil
	}
	u.closed = true
	u.mu.Unlock()
	close(u.stop)
	select {
	case <-u.done:
		return nil
	case <-ctx.Done():
		u.cancel()
		<-u.done
		return ctx.Err()
	}
}

func (u *Uploader) run() {
	defer close(u.done)
	defer u.cancel()
	for {
		u.mu.Lock()
		var id pack.Digest
		have := len(u.queue) > 0
		if have {
			id = u.queue[0]
		}
		u.mu.Unlock()
		if !have {
			select {
			case <-u.wake:
				continue
			case <-u.stop:
				u.mu.Lock()
				empty := len(u.queue) == 0
				u.mu.Unlock()
				if empty {
					return
				}
				continue
			}
		}
		u.uploadOne(id)
		u.mu.Lock()
		u.queue = u.queue[1:]
		delete(u.queued, id)
		u.pending.Store(int64(len(u.queue)))
		if u.ctx.Err() != nil && len(u.queue) > 0 {
			u.stats.Dropped += len(u.queue)
			u.log.Warn("tier uploads still queued at shutdown; dropped", "tier", u.t.String(), "packs", len(u.queue))
			u.queue = nil
			u.queued = map[pack.Digest]bool{}
			u.pending.Store(0)
		}
		u.mu.Unlock()
	}
}

// uploadOne tries one pack up to Attempts times.
func (u *Uploader) uploadOne(id pack.Digest) {
	wait := u.opts.Backoff
	for attempt := 1; ; attempt++ {
		res, err := u.t.Upload(u.ctx, u.st, id)
		u.mu.Lock()
		switch {
		case err == nil:
			u.stats.Uploaded++
			u.stats.Bytes += res.BytesPut
			u.mu.Unlock()
			u.log.Info("pack uploaded to the tier", "tier", u.t.String(), "pack", id.Short(),
				"chunks_put", res.ChunksPut, "chunks_held", res.ChunksHeld, "bytes", res.BytesPut, "existed", res.Existed)
			return
		case errors.Is(err, pack.ErrRefused), errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrQuarantined):
			// The local copy is gone or failed verification (the
			// store wrote the receipt): retrying cannot help.
			u.stats.Refused++
			u.mu.Unlock()
			u.log.Warn("tier upload abandoned: the local pack cannot be read", "tier", u.t.String(), "pack", id.Short(), "err", err)
			return
		case attempt >= u.opts.Attempts || u.ctx.Err() != nil:
			u.stats.Dropped++
			u.mu.Unlock()
			u.log.Warn("tier upload failed; pack dropped", "tier", u.t.String(), "pack", id.Short(), "attempts", attempt, "err", err)
			return
		}
		u.stats.Retries++
		u.mu.Unlock()
		u.log.Warn("tier upload failed; retrying", "tier", u.t.String(), "pack", id.Short(), "attempt", attempt, "in", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-u.ctx.Done():
		}
		wait *= 2
	}
}
