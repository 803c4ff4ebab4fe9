package repl

import (
	"sync/atomic"
	"time"
)

// DefaultStallTimeout is how long a transfer may make no progress before
// the node ends it (Config.StallTimeout).
const DefaultStallTimeout = 2 * time.Minute

// stallWatch ends a transfer that makes no progress for its limit: the
// peer holding streams open without sending, or never reading what it
// asked for, would otherwise pin the transfer's goroutines and buffers
// (and a sender's queue of pushes behind it) for as long as the
// connection's keep-alives hold it open.
type stallWatch struct {
	limit time.Duration // ≤ 0: never stalls
	last  atomic.Int64  // unix nanoseconds of the last progress
}

func newStallWatch(limit time.Duration) *stallWatch {
	w := &stallWatch{limit: limit}
	w.progress()
	return w
}

// progress records that the transfer moved.
func (w *stallWatch) progress() { w.last.Store(time.Now().UnixNano()) }

// run calls stalled once, when no progress was recorded for the limit,
// unless done is closed first. It returns after either.
func (w *stallWatch) run(done <-chan struct{}, stalled func(idle time.Duration)) {
	if w.limit <= 0 {
		<-done
		return
	}
	tick := time.NewTicker(max(w.limit/8, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			if idle := now.Sub(time.Unix(0, w.last.Load())); idle >= w.limit {
				stalled(idle.Truncate(time.Millisecond))
				return
			}
		}
	}
}

// start runs the watch in a goroutine and returns the function that stops
// it and waits for it.
func (w *stallWatch) start(stalled func(idle time.Duration)) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		w.run(done, stalled)
	}()
	return func() {
		close(done)
		<-ended
	}
}
