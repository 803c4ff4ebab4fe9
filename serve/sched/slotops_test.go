package sched

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/infertest"
)

func TestWithSlot(t *testing.T) {
	e := loadEnv(t)
	s := e.newSched(t, nil, func(c *Config) { c.Slots = 2; c.SlotReuse = true })
	salt := []byte("tenant-a")
	prompt := e.encode(t, infertest.Story(0, 30))
	out := run(t, s, &Request{ID: "r", Salt: salt, Prompt: prompt, MaxTokens: 4, Sampling: sampling(1)})
	if out.err != nil {
		t.Fatal(out.err)
	}
	// The request's slot holds its KV under its salt.
	slot := out.res.Slot
	var seen []int32
	var seenSalt []byte
	err := s.WithSlot(context.Background(), slot, func(ctx context.Context, seq *engine.Sequence, old []byte) []byte {
		seen, seenSalt = append([]int32(nil), seq.Tokens()...), old
		if st := s.SlotInfos()[slot].State; st != "maintenance" {
			t.Errorf("state during the op: got %q, want maintenance", st)
		}
		seq.Truncate(0)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < len(prompt) || !bytes.Equal(seenSalt, salt) {
		t.Fatalf("the op saw %d tokens under salt %q; want at least the %d prompt tokens under %q", len(seen), seenSalt, len(prompt), salt)
	}
	if in := s.SlotInfos()[slot]; in.State != "idle" || in.Tokens != 0 {
		t.Fatalf("after the op: state %q, %d tokens; want idle, 0", in.State, in.Tokens)
	}
	// A request still runs in the slot afterwards.
	if o := run(t, s, &Request{ID: "r2", Salt: salt, Prompt: prompt, MaxTokens: 2, Sampling: sampling(1)}); o.err != nil || len(o.res.Generated) == 0 {
		t.Fatalf("after the op: %v, %d tokens", o.err, len(o.res.Generated))
	}

	// A busy slot is refused, a slot out of range too.
	task, err := s.Submit(context.Background(), &Request{ID: "busy", Prompt: prompt, MaxTokens: 400, Sampling: endless(e, 2), NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer task.Cancel()
	if _, _, err := task.Next(context.Background()); err != nil { // first token: the request holds its slot
		t.Fatal(err)
	}
	busy := task.Result().Slot
	for _, in := range s.SlotInfos() {
		if in.RequestID == "busy" {
			busy = in.ID
		}
	}
	ran := false
	err = s.WithSlot(context.Background(), busy, func(context.Context, *engine.Sequence, []byte) []byte { ran = true; return nil })
	if !errors.Is(err, ErrSlotBusy) || ran {
		t.Fatalf("busy slot %d: got %v (ran %v), want ErrSlotBusy and no run", busy, err, ran)
	}
	for _, id := range []int{-1, 2} {
		if err := s.WithSlot(context.Background(), id, nil); !errors.Is(err, ErrBadRequest) {
			t.Errorf("slot %d: got %v, want ErrBadRequest", id, err)
		}
	}
	task.Cancel()
	s.Close(context.Background())
	if err := s.WithSlot(context.Background(), 0, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: got %v, want ErrClosed", err)
	}
}

// TestWithSlotAfterPublish takes the slot right after each request: a
// slot still copying its blocks out for the publisher is waited for, not
// refused, and the op sees the request's tokens.
func TestWithSlotAfterPublish(t *testing.T) {
	e := loadEnv(t)
	st := openStore(t, t.TempDir())
	defer st.Close()
	s := e.newSched(t, st, nil)
	for i := range 10 {
		prompt := e.encode(t, infertest.Story(i, 100))
		out := run(t, s, &Request{ID: "r", Salt: []byte("s"), Prompt: prompt, MaxTokens: 2, Sampling: sampling(uint64(i))})
		if out.err != nil {
			t.Fatal(out.err)
		}
		n := -1
		err := s.WithSlot(context.Background(), 0, func(ctx context.Context, seq *engine.Sequence, old []byte) []byte {
			n = seq.Len()
			return old
		})
		if err != nil || n < len(prompt) {
			t.Fatalf("request %d: WithSlot right after: %v, saw %d tokens, want at least %d", i, err, n, len(prompt))
		}
	}
}
