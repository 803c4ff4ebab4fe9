package sched

import (
	"context"
	"errors"
	"strings"
)

// ChainDrafter drafts with several lanes in order: each request takes the
// first lane's proposal that is not empty, and a lane is asked only for
// the requests the lanes before it left without one. With a LookupDrafter
// first and a ModelDrafter second ("lookup+model"), text that repeats its
// context is drafted for nothing and the rest by the draft model, which
// then computes only where it is needed. Like every lane it decides speed
// only: the scheduler verifies whatever it proposes.
type ChainDrafter struct {
	lanes []Drafter
	// stable[i][slot] is the fewest leading tokens of the slot's History
	// left unchanged since lane i last drafted for the slot (absent: it
	// was asked at the last call, or never), so that each lane's
	// DraftRequest.Stable is true of the calls it saw.
	stable []map[int]int
	// hidden[i] says whether lane i wants hidden states (HiddenDrafter).
	hidden []bool
	sub    []DraftRequest
	idx    []int
}

// NewChainDrafter returns a drafter that asks lanes in the order given; it
// owns them (Close closes every one).
func NewChainDrafter(lanes ...Drafter) *ChainDrafter {
	c := &ChainDrafter{lanes: lanes, stable: make([]map[int]int, len(lanes)), hidden: make([]bool, len(lanes))}
	for i := range c.stable {
		c.stable[i] = make(map[int]int)
		c.hidden[i] = WantsHidden(lanes[i])
	}
	return c
}

// WantsHidden reports whether any lane wants hidden states
// (HiddenDrafter); Draft then passes DraftRequest.Hidden to the lanes
// that want them, and nil to the others.
func (c *ChainDrafter) WantsHidden() bool {
	for _, h := range c.hidden {
		if h {
			return true
		}
	}
	return false
}

// Lanes returns the lanes in the order they are asked, for their
// settings (ModelDrafter.Chunk, Window); the chain still owns them.
func (c *ChainDrafter) Lanes() []Drafter { return c.lanes }

// Name joins the lanes' names with "+" ("lookup+model").
func (c *ChainDrafter) Name() string {
	names := make([]string, len(c.lanes))
	for i, l := range c.lanes {
		names[i] = l.Name()
	}
	return strings.Join(names, "+")
}

// Draft asks each lane in turn for the requests still without a proposal.
func (c *ChainDrafter) Draft(ctx context.Context, reqs []DraftRequest) error {
	for i := range reqs {
		reqs[i].Tokens = reqs[i].Tokens[:0]
	}
	var errs []error
	for li, lane := range c.lanes {
		c.sub, c.idx = c.sub[:0], c.idx[:0]
		for i := range reqs {
			r := reqs[i]
			st, seen := c.stable[li][r.Slot]
			if len(r.Tokens) > 0 {
				// Drafted by an earlier lane: this lane does not see the
				// call, so what it may take as unchanged shrinks.
				if !seen || r.Stable < st {
					c.stable[li][r.Slot] = r.Stable
				}
				continue
			}
			if seen {
				r.Stable = min(r.Stable, st)
				delete(c.stable[li], r.Slot)
			}
			if !c.hidden[li] {
				r.Hidden = nil
			}
			c.sub = append(c.sub, r)
			c.idx = append(c.idx, i)
		}
		if len(c.sub) == 0 {
			continue
		}
		if err := lane.Draft(ctx, c.sub); err != nil {
			// The lane's state for these slots is unknown now: it
			// starts them afresh, and the later lanes may still draft.
			for _, r := range c.sub {
				lane.Forget(r.Slot)
			}
			errs = append(errs, err)
			continue
		}
		for j, r := range c.sub {
			reqs[c.idx[j]].Tokens = r.Tokens
		}
	}
	return errors.Join(errs...)
}

// Forget drops the slot's state in every lane.
func (c *ChainDrafter) Forget(slot int) {
	for i, l := range c.lanes {
		delete(c.stable[i], slot)
		l.Forget(slot)
	}
}

// Close closes every lane.
func (c *ChainDrafter) Close() error {
	var errs []error
	for _, l := range c.lanes {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}
