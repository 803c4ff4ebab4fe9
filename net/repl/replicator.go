package repl

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/muserhq/muser/pack"
)

// Replicator defaults.
const (
	// DefaultQueue is how many packs a Replicator holds waiting.
	DefaultQueue = 1024
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait before a
	// failed push is retried.
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

// ReplicatorOptions configure a Replicator; zero fields take the defaults.
type ReplicatorOptions struct {
	// Queue is the queue length (DefaultQueue).
	Queue int
	// MinBackoff and MaxBackoff bound the retry wait.
	MinBackoff, MaxBackoff time.Duration
	// OnResult, if not nil, is called after every push attempt.
	OnResult func(Result, error)
}

// Replicator pushes packs to one peer as they are published: muser serve
// --replicate-to NODE calls Enqueue after each publish and runs Run in a
// goroutine. Packs are pushed one at a time in the order enqueued. A push
// that fails because the peer is unreachable or the connection broke is
// retried with exponential backoff (the chunks already received are kept
// by the peer, so a retry moves only what is missing); a push the peer
// refuses (a refusal with a receipt) is not retried. The queue lives in
// memory: packs enqueued while it is full, or before a restart, are not
// pushed (muser pack push --all catches up).
type Replicator struct {
	node *Node
	peer string
	opts ReplicatorOptions

	queue chan pack.Digest

	mu      sync.Mutex
	pending map[pack.Digest]bool
	stats   ReplicatorStats
}

// ReplicatorStats counts what a Replicator did.
type ReplicatorStats struct {
	Pushed, Refused, Retries, Dropped int
}

// NewReplicator returns a Replicator pushing to peer through n.
func NewReplicator(n *Node, peer string, opts ReplicatorOptions) *Replicator {
	if opts.Queue <= 0 {
		opts.Queue = DefaultQueue
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	return &Replicator{node: n, peer: peer, opts: opts, queue: make(chan pack.Digest, opts.Queue), pending: map[pack.Digest]bool{}}
}

// Enqueue asks for pack id to be pushed. It never blocks: it returns false
// (and counts the pack as dropped) when the queue is full. A pack already
// waiting is not queued twice.
func (r *Replicator) Enqueue(id pack.Digest) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[id] {
		return true
	}
	select {
	case r.queue <- id:
		r.pending[id] = true
		return true
	default:
		r.stats.Dropped++
		r.node.log.Warn("replication queue full; pack not pushed", "peer", r.peer, "pack", id)
		return false
	}
}

// Stats returns the counts so far.
func (r *Replicator) Stats() ReplicatorStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Pending returns the number of packs enqueued and not yet pushed or
// given up on (the one being pushed included).
func (r *Replicator) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

// flushPoll is how often Flush looks at the queue.
const flushPoll = 20 * time.Millisecond

// Flush waits until every enqueued pack has been pushed or given up on
// (Pending is 0), while Run runs, or until ctx ends; it returns the number
// of packs still pending then (0 when flushed). muser serve calls it at
// shutdown, bounded by its grace period, before cancelling Run.
func (r *Replicator) Flush(ctx context.Context) int {
	t := time.NewTicker(flushPoll)
	defer t.Stop()
	for {
		n := r.Pending()
		if n == 0 {
			return 0
		}
		select {
		case <-ctx.Done():
			return n
		case <-t.C:
		}
	}
}

// Run pushes queued packs until ctx ends; it returns ctx's error.
func (r *Replicator) Run(ctx context.Context) error {
	for {
		var id pack.Digest
		select {
		case <-ctx.Done():
			return ctx.Err()
		case id = <-r.queue:
		}
		backoff := r.opts.MinBackoff
		for {
			res, err := r.node.Push(ctx, r.peer, id)
			if r.opts.OnResult != nil {
				r.opts.OnResult(res, err)
			}
			if err == nil {
				r.node.log.Info("replicated pack", "peer", r.peer, "pack", id, "moved", res.Moved, "of", res.Chunks)
				r.count(func(s *ReplicatorStats) { s.Pushed++ })
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, pack.ErrRefused) || errors.Is(err, ErrClosed) {
				r.node.log.Warn("replication refused; not retried", "peer", r.peer, "pack", id, "err", err)
				r.count(func(s *ReplicatorStats) { s.Refused++ })
				break
			}
			r.node.log.Warn("replication failed; retrying", "peer", r.peer, "pack", id, "in", backoff, "err", err)
			r.count(func(s *ReplicatorStats) { s.Retries++ })
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			backoff = min(2*backoff, r.opts.MaxBackoff)
		}
		r.mu.Lock()
		delete(r.pending, id)
		r.mu.Unlock()
	}
}

func (r *Replicator) count(f func(*ReplicatorStats)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}
