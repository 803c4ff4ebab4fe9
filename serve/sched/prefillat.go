package sched

import (
	"context"
	"sync"
)

// prefillNoteKey is the context key under which restore hands
// Config.RemotePrefill the note it reports the producer on.
type prefillNoteKey struct{}

// prefillNote is where NotePrefillAt writes; the hook may call it from
// another goroutine than the one that reads it.
type prefillNote struct {
	mu   sync.Mutex
	node string
}

func (n *prefillNote) get() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.node
}

// NotePrefillAt is called by a Config.RemotePrefill hook, with the
// context it was given, when the producer node named node computed the
// prompt's uncached blocks; the request's Result.PrefillAt then names it.
// A hook that falls back to a local prefill does not call it. Called with
// any other context it does nothing.
func NotePrefillAt(ctx context.Context, node string) {
	if n, ok := ctx.Value(prefillNoteKey{}).(*prefillNote); ok {
		n.mu.Lock()
		n.node = node
		n.mu.Unlock()
	}
}
