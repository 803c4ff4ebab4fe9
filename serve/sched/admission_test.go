package sched

import (
	"context"
	"strings"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// gatedStore is a real store whose Match waits for gate to close once
// armed: it holds a finished request's slot in its publishing state
// (copyBlocks asks Match first) for as long as a test needs.
type gatedStore struct {
	*store.Store
	armed chan struct{} // closed: Match waits
	gate  chan struct{} // closed: Match goes on
}

func (g *gatedStore) Match(id pack.Identity, salt []byte, tokens []int32) (store.Match, error) {
	select {
	case <-g.armed:
		<-g.gate
	default:
	}
	return g.Store.Match(id, salt, tokens)
}

// TestPublishingSlotAdmits: a slot copying out the blocks of the request
// it just finished is not busy: a request that arrives meanwhile waits for
// it, even when no request may wait for a busy slot (MaxQueue < 0), and is
// not refused with ErrQueueFull.
func TestPublishingSlotAdmits(t *testing.T) {
	e := loadEnv(t)
	st := openStore(t, t.TempDir())
	defer st.Close()
	g := &gatedStore{Store: st, armed: make(chan struct{}), gate: make(chan struct{})}
	s := e.newSched(t, nil, func(c *Config) {
		c.Store, c.Identity = g, e.identity(t, st.BlockTokens())
		c.MaxQueue = -1
	})
	close(g.armed)
	released := false
	release := func() {
		if !released {
			released = true
			close(g.gate)
		}
	}
	defer release()
	long := e.encode(t, strings.Repeat("Once upon a time there was a little girl named Lily. ", 8))
	if len(long) < st.BlockTokens() {
		t.Fatalf("prompt of %d tokens, want at least a block of %d", len(long), st.BlockTokens())
	}
	first := run(t, s, &Request{ID: "first", Prompt: long, MaxTokens: 2})
	if first.err != nil {
		t.Fatal(first.err)
	}
	// The first request's slot now waits in Match to publish its blocks.
	next, err := s.Submit(context.Background(), &Request{ID: "next", Prompt: e.encode(t, "Lily"), MaxTokens: 2})
	if err != nil {
		t.Fatalf("with the only slot publishing the finished request's blocks: got %v, want the request admitted", err)
	}
	release()
	o := collect(t, next)
	if o.err != nil || len(o.res.Generated) != 2 {
		t.Errorf("next request: %d tokens, err %v; want 2 tokens", len(o.res.Generated), o.err)
	}
}
