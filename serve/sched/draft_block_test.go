package sched

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// blockFile writes a random block drafter for target into a temporary
// directory and returns its path.
func blockFile(t testing.TB, target *gguf.File, o blockdrafttest.Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "block.gguf")
	if err := blockdrafttest.WriteFile(path, target, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// defaultBlock returns the path of a random block drafter (Q8_0, blocks
// of 8) for the embedded default model.
func defaultBlock(t testing.TB, seed uint64) string {
	t.Helper()
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	return blockFile(t, f, blockdrafttest.Options{Block: 8, Seed: seed, Type: ggml.TypeQ8_0})
}

// openBlock opens the block drafter at path for the test's life.
func openBlock(t testing.TB, path string) *blockdraft.Model {
	t.Helper()
	m, err := blockdraft.Open(path, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestBlockDrafter: the lane drafts for requests that carry a hidden
// state, at most Max tokens each, and nothing for the others.
func TestBlockDrafter(t *testing.T) {
	e := loadDefault(t)
	d := NewBlockDrafter(openBlock(t, defaultBlock(t, 1)))
	defer d.Close()
	if d.Name() != "block" || !d.WantsHidden() {
		t.Fatalf("name %q, wants hidden %v; want \"block\", true", d.Name(), d.WantsHidden())
	}
	H := e.model.Config().Hidden
	hidden := make([]float32, H)
	for i := range hidden {
		hidden[i] = float32(i%7) - 3
	}
	reqs := []DraftRequest{
		{Slot: 0, History: []int32{1, 5, 9}, Hidden: hidden, Max: 3},
		{Slot: 1, History: []int32{1, 5, 9}, Max: 3}, // no hidden state
		{Slot: 2, History: []int32{1, 5, 9}, Hidden: hidden, Max: 20},
	}
	if err := d.Draft(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
	if len(reqs[0].Tokens) != 3 || len(reqs[1].Tokens) != 0 || len(reqs[2].Tokens) != 7 {
		t.Fatalf("drafted %d, %d, %d tokens; want 3 (Max), 0 (no hidden state), 7 (the block's 8 less the anchor)",
			len(reqs[0].Tokens), len(reqs[1].Tokens), len(reqs[2].Tokens))
	}
	for i, tok := range reqs[0].Tokens {
		if tok != reqs[2].Tokens[i] {
			t.Errorf("token %d: %d alone, %d in a longer draft of the same state; want the same", i, tok, reqs[2].Tokens[i])
		}
	}
}

// TestOpenLanes builds each combination of lanes and refuses, naming the
// lane, what cannot serve the model.
func TestOpenLanes(t *testing.T) {
	e := loadDefault(t)
	block := defaultBlock(t, 1)
	sf, err := gguf.Open(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	storiesBlock := blockFile(t, sf, blockdrafttest.Options{Seed: 2})
	// Made for a model of stories260K's tokenizer and the default model's
	// hidden size: the vocabulary differs.
	vocabBlock := blockFile(t, sf, blockdrafttest.Options{Seed: 3, TargetHidden: e.model.Config().Hidden})
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	noHidden, err := engine.Load(f, engine.Options{Device: noHiddenDevice{cpu.New(cpu.Options{Threads: 1})}})
	if err != nil {
		t.Fatal(err)
	}
	defer noHidden.Close()
	eng := engine.Options{Device: cpu.New(cpu.Options{Threads: 1})}
	for _, c := range []struct {
		name   string
		lanes  Lanes
		target *engine.Model
		want   string // the drafter's name, "" for none
		lane   string // the LaneError's lane
		err    error  // what the error wraps
	}{
		{name: "none"},
		{name: "lookup", lanes: Lanes{Lookup: true}, want: "lookup"},
		{name: "model", lanes: Lanes{Model: modelPath + ".missing"}, err: errNotLane},
		{name: "block", lanes: Lanes{Block: block}, want: "block"},
		{name: "lookup+block", lanes: Lanes{Lookup: true, Block: block}, want: "lookup+block"},
		{name: "model and block", lanes: Lanes{Model: modelPath, Block: block}, lane: "block", err: ErrLaneConflict},
		{name: "model of another tokenizer", lanes: Lanes{Model: modelPath}, lane: "model", err: ErrTokenizerMismatch},
		{name: "block of another hidden size", lanes: Lanes{Block: storiesBlock}, lane: "block", err: blockdraft.ErrTargetMismatch},
		{name: "block of another vocabulary", lanes: Lanes{Lookup: true, Block: vocabBlock}, lane: "block", err: blockdraft.ErrTargetMismatch},
		{name: "block without hidden states", lanes: Lanes{Block: block}, target: noHidden, lane: "block", err: ErrDraftNeedsHidden},
		{name: "missing block file", lanes: Lanes{Block: block + ".missing"}, err: errNotLane},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := c.target
			if target == nil {
				target = e.model
			}
			l := c.lanes
			l.Engine, l.Threads = eng, 1
			d, err := OpenLanes(l, target, e.tok)
			if d != nil {
				defer d.Close()
			}
			var le *LaneError
			switch {
			case c.err == errNotLane:
				if err == nil || errors.As(err, &le) || !strings.Contains(err.Error(), ".missing") {
					t.Fatalf("got %v, want an error naming the missing file that is not a *LaneError", err)
				}
			case c.err != nil:
				if !errors.As(err, &le) || le.Lane != c.lane || !errors.Is(err, c.err) {
					t.Fatalf("got %v, want a *LaneError of lane %q wrapping %v", err, c.lane, c.err)
				}
			case err != nil:
				t.Fatal(err)
			case c.want == "" && d != nil:
				t.Fatalf("got lane %q, want none", d.Name())
			case c.want != "" && (d == nil || d.Name() != c.want):
				t.Fatalf("got %v, want lane %q", d, c.want)
			}
		})
	}
}

// errNotLane marks the cases of TestOpenLanes whose error is not a
// *LaneError (a file that cannot be opened).
var errNotLane = errors.New("not a lane error")
