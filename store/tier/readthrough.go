package tier

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// Read-through outcomes, the keys of ReadThrough.Stats' counts and of the
// muser_tier_reads_total metric's outcome label.
const (
	// OutcomeHit: the tier held a longer prefix; it was installed.
	OutcomeHit = "hit"
	// OutcomeMiss: the tier holds no longer prefix than the store (or
	// another request was installing it, and this one waited for it).
	OutcomeMiss = "miss"
	// OutcomeRefused: what the tier held failed a check (a receipt says
	// which); the request is prefilled locally.
	OutcomeRefused = "refused"
	// OutcomeUnavailable: the tier could not be reached or was too slow;
	// the request is prefilled locally.
	OutcomeUnavailable = "unavailable"
)

// Outcomes lists every read-through outcome.
var Outcomes = []string{OutcomeHit, OutcomeMiss, OutcomeRefused, OutcomeUnavailable}

// ReadThroughOptions configure a ReadThrough.
type ReadThroughOptions struct {
	// Timeout bounds one read-through (default 30s); past it the request
	// is prefilled locally.
	Timeout time.Duration
	// Refresh is how often the index is refreshed in the background
	// (default 30s).
	Refresh time.Duration
	// Backoff is how long the tier is skipped after it was found
	// unavailable (default 10s).
	Backoff time.Duration
	// Logger receives the logs; nil discards them.
	Logger *slog.Logger
}

// ReadThrough serves a store's misses from the tier: Restore looks the
// prompt up in the tier's index and, when the tier holds more of it than
// the store, hands the engine the pack's verified blocks from the tier and
// installs the pack in the store in the background; Read installs it
// first (Install: every check of a received pack), for a local restore
// that follows. Nothing it does fails a request: a refusal or an
// unreachable tier is logged, counted and left to a local prefill.
type ReadThrough struct {
	t    *Tier
	st   *store.Store
	ix   *Index
	opts ReadThroughOptions
	log  *slog.Logger

	mu        sync.Mutex
	inflight  map[pack.Digest]chan struct{} // installs under way, closed when done
	counts    map[string]int
	downUntil time.Time
	bytes     int64

	started atomic.Bool
	stop    chan struct{}
	done    chan struct{}

	base     context.Context // the background installs' context; Close cancels it
	cancel   context.CancelFunc
	installs sync.WaitGroup // background installs after streamed restores
}

// NewReadThrough returns a read-through of t into st; each read names
// the identity its packs must have. Start refreshes its index in the
// background.
func NewReadThrough(t *Tier, st *store.Store, opts ReadThroughOptions) *ReadThrough {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 30 * time.Second
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 10 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &ReadThrough{t: t, st: st, ix: NewIndex(t), opts: opts, log: log, counts: map[string]int{}, inflight: map[pack.Digest]chan struct{}{},
		stop: make(chan struct{}), done: make(chan struct{})}
	r.base, r.cancel = context.WithCancel(context.Background())
	return r
}

// Index returns the read-through's index.
func (r *ReadThrough) Index() *Index { return r.ix }

// Refresh refreshes the index once, logging what it found.
func (r *ReadThrough) Refresh(ctx context.Context) error {
	res, err := r.ix.Refresh(ctx)
	if err != nil {
		r.markDown(err)
		return err
	}
	for _, e := range res.BadErrs {
		r.log.Warn("tier manifest ignored: it does not verify", "tier", r.t.String(), "err", e)
	}
	for _, e := range res.UnreadableErrs {
		r.log.Warn("tier manifest unreadable; read again at the next refresh", "tier", r.t.String(), "err", e)
	}
	if res.Added > 0 || res.Removed > 0 {
		r.log.Info("tier index refreshed", "tier", r.t.String(), "added", res.Added, "removed", res.Removed, "packs", r.ix.Len())
	}
	return nil
}

// Start refreshes the index every ReadThroughOptions.Refresh until
// Close. A server calls Refresh once before it serves (a new node warms
// from the tier), then Start.
func (r *ReadThrough) Start() {
	if r.started.Swap(true) {
		return
	}
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stop:
				return
			case <-time.After(r.opts.Refresh):
			}
			ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
			_ = r.Refresh(ctx)
			cancel()
		}
	}()
}

// Close stops the background refresh and the background installs,
// waiting at most Timeout for each kind to end.
func (r *ReadThrough) Close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.cancel()
	installed := make(chan struct{})
	go func() {
		r.installs.Wait()
		close(installed)
	}()
	select {
	case <-installed:
	case <-time.After(r.opts.Timeout):
	}
	if !r.started.Load() {
		return
	}
	select {
	case <-r.done:
	case <-time.After(r.opts.Timeout):
	}
}

// Restore has the shape of infer.PrefixStore.Restore: it is the server's
// restore with a tier (serve.Options.Restore). When the tier holds more
// whole blocks of the prompt than the store, it hands put the tier's
// blocks as they arrive, each verified first (Tier.Restore), and then
// installs the pack in the store in the background (Fetched.Install), so
// that later requests restore it locally; a request that needs the pack
// while that install runs waits for it. Otherwise, and when the tier
// fails before put received a block, it restores from the store. A
// failure after put received a block is returned: the caller discards
// those blocks and computes the prompt, as after any failed restore.
// Outcomes are counted as Read counts them.
func (r *ReadThrough) Restore(ctx context.Context, id pack.Identity, salt []byte, tokens []int32,
	put func(block int, kv []byte) error) (int, error) {
	pid, outcome, done := r.claim(ctx, id, salt, tokens)
	if outcome != "" {
		r.count(outcome)
		return r.st.Restore(ctx, id, salt, tokens, put)
	}
	tctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	var (
		handed int
		perr   error
	)
	n, f, err := r.t.Restore(tctx, r.st, RestoreRequest{Pack: pid, Identity: id, Salt: salt, Tokens: tokens}, func(b int, kv []byte) error {
		handed++
		perr = put(b, kv)
		return perr
	})
	if err != nil {
		done()
		if perr != nil {
			// The consumer failed, not the tier.
			r.count(OutcomeMiss)
			return 0, err
		}
		r.count(r.failed(ctx, pid, err))
		if handed > 0 {
			return 0, err
		}
		return r.st.Restore(ctx, id, salt, tokens, put)
	}
	r.count(OutcomeHit)
	r.mu.Lock()
	r.bytes += f.BytesFetched()
	r.mu.Unlock()
	r.log.Info("pack restored from the tier", "tier", r.t.String(), "pack", pid.Short(), "tokens", n, "bytes", f.BytesFetched())
	r.installs.Add(1)
	go r.install(f, done)
	if n == 0 {
		// The pack's tokens differ from the prompt's after all.
		return r.st.Restore(ctx, id, salt, tokens, put)
	}
	return n, nil
}

// install runs the local install that follows a streamed restore, then
// done. A failure is logged: the pack stays in the tier, and a later
// request reads it through again.
func (r *ReadThrough) install(f *Fetched, done func()) {
	defer r.installs.Done()
	defer done()
	ctx, cancel := context.WithTimeout(r.base, r.opts.Timeout)
	defer cancel()
	res, err := f.Install(ctx)
	if err != nil {
		r.log.Warn("tier pack not installed after its restore", "tier", r.t.String(), "pack", res.Pack.Short(), "err", err)
		return
	}
	r.installed(res)
}

// Read installs from the tier the longest prefix of tokens under (id,
// salt) that the tier holds beyond what the store holds, for a caller
// that restores from the local store afterwards; it returns the outcome
// and, for a hit, what Install did. It never fails: a tier that is down
// or refuses is counted and logged, as in Restore.
func (r *ReadThrough) Read(ctx context.Context, id pack.Identity, salt []byte, tokens []int32) (string, InstallResult) {
	pid, outcome, done := r.claim(ctx, id, salt, tokens)
	if outcome != "" {
		return r.count(outcome), InstallResult{}
	}
	defer done()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	res, err := r.t.Install(ctx, r.st, pid, id)
	if err == nil {
		r.installed(res)
		return r.count(OutcomeHit), res
	}
	return r.count(r.failed(parent, pid, err)), res
}

// claim looks the prompt up in the index. When the tier holds more whole
// blocks of it than the store, and the tier is not in its backoff, and no
// other request is installing that pack, it claims the pack's install:
// it returns the pack and done, which the caller calls once the install
// ended. Otherwise it returns the outcome to count (a request that found
// another installing the pack waits for that install, a miss).
func (r *ReadThrough) claim(ctx context.Context, id pack.Identity, salt []byte, tokens []int32) (pack.Digest, string, func()) {
	pid, ok := r.lookup(id, salt, tokens)
	if !ok {
		return pid, OutcomeMiss, nil
	}
	r.mu.Lock()
	down := r.t.now().Before(r.downUntil)
	wait, busy := r.inflight[pid]
	if !down && !busy {
		r.inflight[pid] = make(chan struct{})
	}
	r.mu.Unlock()
	if down {
		return pid, OutcomeUnavailable, nil
	}
	if busy {
		// Another request is installing the same pack: wait for it, and
		// let the restore find what it installed.
		select {
		case <-wait:
		case <-ctx.Done():
		}
		return pid, OutcomeMiss, nil
	}
	return pid, "", func() {
		r.mu.Lock()
		close(r.inflight[pid])
		delete(r.inflight, pid)
		r.mu.Unlock()
	}
}

// Holds reports whether a restore would read the prompt under (id,
// salt) through the tier: its index holds more whole blocks of it than
// the store, and the tier is not skipped after a failure. It reads
// nothing from the tier.
func (r *ReadThrough) Holds(id pack.Identity, salt []byte, tokens []int32) bool {
	r.mu.Lock()
	down := r.t.now().Before(r.downUntil)
	r.mu.Unlock()
	if down {
		return false
	}
	_, ok := r.lookup(id, salt, tokens)
	return ok
}

// lookup finds the pack of the index that holds the most whole blocks of
// the prompt, and reports whether that is more than the store holds.
func (r *ReadThrough) lookup(id pack.Identity, salt []byte, tokens []int32) (pack.Digest, bool) {
	block := r.st.BlockTokens()
	if len(tokens) < block {
		return pack.Digest{}, false
	}
	keys := pack.BlockKeys(id.Key(), pack.TenantTag(salt), tokens, block)
	pid, depth, ok := r.ix.Lookup(keys)
	if !ok {
		return pid, false
	}
	if m, err := r.st.Match(id, salt, tokens); err == nil && m.Blocks >= depth {
		return pid, false
	}
	return pid, true
}

// installed logs and counts a pack installed from the tier.
func (r *ReadThrough) installed(res InstallResult) {
	r.mu.Lock()
	r.bytes += res.BytesFetched
	r.mu.Unlock()
	r.log.Info("pack installed from the tier", "tier", r.t.String(), "pack", res.Pack.Short(), "tokens", res.Tokens,
		"chunks_fetched", res.ChunksFetched, "bytes", res.BytesFetched, "use_recorded", res.UseRecorded)
}

// failed logs a read-through of pack pid that failed with err and
// returns its outcome; a tier found unavailable is skipped for Backoff.
// parent is the request's context: a request that went away blames
// nothing.
func (r *ReadThrough) failed(parent context.Context, pid pack.Digest, err error) string {
	switch {
	case errors.Is(err, pack.ErrRefused):
		r.log.Warn("tier pack refused; prefilling locally", "tier", r.t.String(), "pack", pid.Short(), "err", err)
		return OutcomeRefused
	case errors.Is(err, ErrNotFound):
		r.log.Info("tier pack gone from the bucket; prefilling locally", "tier", r.t.String(), "pack", pid.Short())
		return OutcomeMiss
	case parent.Err() != nil:
		// The request went away; the tier is not to blame.
		return OutcomeMiss
	}
	r.markDown(err)
	return OutcomeUnavailable
}

// markDown skips the tier for Backoff after it failed.
func (r *ReadThrough) markDown(err error) {
	r.mu.Lock()
	r.downUntil = r.t.now().Add(r.opts.Backoff)
	r.mu.Unlock()
	r.log.Warn("tier unavailable; serving from the local store only", "tier", r.t.String(), "retry_in", r.opts.Backoff, "err", err)
}

func (r *ReadThrough) count(outcome string) string {
	r.mu.Lock()
	r.counts[outcome]++
	r.mu.Unlock()
	return outcome
}

// Stats returns how many read-throughs ended in each outcome, and the
// chunk bytes fetched.
func (r *ReadThrough) Stats() (map[string]int, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.counts))
	for k, v := range r.counts {
		out[k] = v
	}
	return out, r.bytes
}
