package sched

import (
	"context"
	"fmt"
	"time"

	"github.com/muserhq/muser/infer/engine"
)

// SlotOp is an operation on an idle slot's sequence (llama-server's slot
// save, restore and erase): it gets the sequence and the salt of the KV
// it holds (nil when it holds nothing reusable), and returns the salt of
// what the sequence holds afterwards. It runs in its own goroutine, owning
// the sequence until it returns; no request uses the slot meanwhile.
type SlotOp func(ctx context.Context, seq *engine.Sequence, salt []byte) (newSalt []byte)

type slotOp struct {
	ctx  context.Context
	id   int
	op   SlotOp
	done chan error
}

// WithSlot runs op on slot id's sequence. It fails at once with a
// *SlotError wrapping ErrSlotBusy when the slot serves a request (a slot
// whose finished request's blocks are being copied out is waited for),
// wrapping
// ErrBadRequest when there is no such slot, and with ErrClosed once the
// scheduler stopped. The slot shows the state "maintenance" while op
// runs; afterwards it is idle again, holding what op left in it (later
// requests of the same salt may reuse it, Config.SlotReuse).
func (s *Scheduler) WithSlot(ctx context.Context, id int, op SlotOp) error {
	if id < 0 || id >= len(s.slots) {
		return &SlotError{Slot: id, Reason: fmt.Sprintf("no such slot (the server has %d, from 0)", len(s.slots)), Err: ErrBadRequest}
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return ErrClosed
	}
	o := slotOp{ctx: ctx, id: id, op: op, done: make(chan error, 1)}
	select {
	case s.ops <- o:
	case <-s.loopDone:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-o.done // op gets ctx, so it ends soon after ctx does
}

// onSlotOp starts o in the loop goroutine: the slot, if idle, is handed
// to a goroutine that runs the op and frees it.
func (s *Scheduler) onSlotOp(o slotOp) {
	sl := s.slots[o.id]
	if sl.state == stPublishing && sl.pendingOp == nil {
		// The request that just finished is copying its blocks out:
		// run the op as soon as it is done (onFreed).
		sl.pendingOp = &o
		return
	}
	if sl.state != stIdle {
		o.done <- &SlotError{Slot: o.id, Reason: fmt.Sprintf("is %s; try again when it is idle", sl.state), Err: ErrSlotBusy}
		return
	}
	s.setState(sl, stSlotOp)
	sl.opDone = o.done
	go func() {
		// The goroutine owns sl.seq and sl.salt until it sends on freed;
		// onFreed answers WithSlot once the slot is idle again.
		sl.salt = o.op(o.ctx, sl.seq, sl.salt)
		sl.lastUse = time.Now()
		s.freed <- sl.id
	}()
}

// slotOpDone answers the WithSlot call whose operation held sl, if one
// did, and starts the operation that waited for the slot's publish, if
// one does (from onFreed, in the loop goroutine, before any request is
// admitted to the slot).
func (s *Scheduler) slotOpDone(sl *slot) {
	if sl.opDone != nil {
		sl.opDone <- nil
		sl.opDone = nil
	}
	if o := sl.pendingOp; o != nil {
		sl.pendingOp = nil
		s.onSlotOp(*o)
	}
}
