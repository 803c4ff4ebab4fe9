package sched

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// scriptLane is a test Drafter: it proposes script[slot] (when present)
// and records every request it is asked.
type scriptLane struct {
	name   string
	script map[int][]int32
	err    error
	asked  []DraftRequest // copies, Tokens left out
	forgot []int
	closed bool
}

func (l *scriptLane) Name() string { return l.name }

func (l *scriptLane) Draft(_ context.Context, reqs []DraftRequest) error {
	for i := range reqs {
		r := &reqs[i]
		c := *r
		c.History, c.Tokens = slices.Clone(r.History), nil
		l.asked = append(l.asked, c)
		if l.err == nil {
			r.Tokens = append(r.Tokens[:0], l.script[r.Slot]...)
		}
	}
	return l.err
}

func (l *scriptLane) Forget(slot int) { l.forgot = append(l.forgot, slot) }
func (l *scriptLane) Close() error    { l.closed = true; return nil }

// TestChainDrafter: each request takes the first lane's non-empty
// proposal; a later lane sees only the rest, with a Stable that holds for
// the calls it saw; errors, Forget and Close reach the lanes.
func TestChainDrafter(t *testing.T) {
	first := &scriptLane{name: "a", script: map[int][]int32{0: {7, 8}}}
	second := &scriptLane{name: "b", script: map[int][]int32{0: {1}, 1: {2, 3}}}
	c := NewChainDrafter(first, second)
	if got := c.Name(); got != "a+b" {
		t.Errorf("Name %q, want a+b", got)
	}
	if l := c.Lanes(); len(l) != 2 || l[0] != first || l[1] != second {
		t.Errorf("Lanes %v, want the two lanes in order", l)
	}
	call := func(stable0, stable1 int) []DraftRequest {
		t.Helper()
		buf := make([]int32, 0, 8)
		reqs := []DraftRequest{
			{Slot: 0, History: []int32{1, 2, 3}, Stable: stable0, Max: 4, Tokens: buf},
			{Slot: 1, History: []int32{4, 5}, Stable: stable1, Max: 4},
		}
		if err := c.Draft(context.Background(), reqs); err != nil {
			t.Fatal(err)
		}
		return reqs
	}
	// Call 1: slot 0 is lookup's, slot 1 goes on to the second lane.
	reqs := call(3, 2)
	if !slices.Equal(reqs[0].Tokens, []int32{7, 8}) || !slices.Equal(reqs[1].Tokens, []int32{2, 3}) {
		t.Fatalf("proposals %v %v, want [7 8] [2 3]", reqs[0].Tokens, reqs[1].Tokens)
	}
	if len(second.asked) != 1 || second.asked[0].Slot != 1 || second.asked[0].Stable != 2 {
		t.Fatalf("second lane asked %+v, want slot 1 alone with Stable 2", second.asked)
	}
	// Calls 2 and 3: the first lane stops proposing for slot 0 at call 3;
	// the second lane then sees slot 0 with the least Stable of calls 1–3
	// (it never saw slot 0, so its own view starts at call 1's).
	reqs = call(1, 2)
	if !slices.Equal(reqs[0].Tokens, []int32{7, 8}) {
		t.Fatalf("call 2: slot 0 got %v, want the first lane's [7 8]", reqs[0].Tokens)
	}
	delete(first.script, 0)
	second.asked = nil
	reqs = call(2, 2)
	if !slices.Equal(reqs[0].Tokens, []int32{1}) {
		t.Errorf("call 3: slot 0 got %v, want the second lane's [1]", reqs[0].Tokens)
	}
	var s0 *DraftRequest
	for i := range second.asked {
		if second.asked[i].Slot == 0 {
			s0 = &second.asked[i]
		}
	}
	if s0 == nil || s0.Stable != 1 {
		t.Errorf("second lane's request for slot 0: %+v, want Stable 1 (the least since it last drafted for the slot)", s0)
	}
	// A failing lane: its slots are forgotten, the error is returned, and
	// the first lane's proposals stand.
	first.script[0] = []int32{9}
	second.err = errors.New("boom")
	reqs = []DraftRequest{{Slot: 0, History: []int32{1}, Max: 2}, {Slot: 1, History: []int32{1}, Max: 2}}
	if err := c.Draft(context.Background(), reqs); err == nil || err.Error() != "boom" {
		t.Errorf("error %v, want boom", err)
	}
	if !slices.Equal(reqs[0].Tokens, []int32{9}) || len(reqs[1].Tokens) != 0 {
		t.Errorf("after an error: proposals %v %v, want [9] and none", reqs[0].Tokens, reqs[1].Tokens)
	}
	if !slices.Contains(second.forgot, 1) {
		t.Errorf("the failing lane forgot %v, want slot 1", second.forgot)
	}
	c.Forget(5)
	if !slices.Contains(first.forgot, 5) || !slices.Contains(second.forgot, 5) {
		t.Errorf("Forget(5) reached %v and %v, want both lanes", first.forgot, second.forgot)
	}
	if err := c.Close(); err != nil || !first.closed || !second.closed {
		t.Errorf("Close: %v, closed %v %v; want both lanes closed", err, first.closed, second.closed)
	}
}
