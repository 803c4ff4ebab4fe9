package draftlane

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/engine/cuda/cudatest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/serve/sched"
)

// storiesPath is stories260K, another model family (hidden size 64,
// 512 tokens).
const storiesPath = "../../../shared/models/stories260K.gguf"

var (
	defOnce sync.Once
	defM    *engine.Model
	defTok  *tokenizer.Tokenizer
	defErr  error
)

// target returns the embedded default model on the CPU and its tokenizer,
// shared by the package's tests.
func target(t testing.TB) (*engine.Model, *tokenizer.Tokenizer) {
	t.Helper()
	defOnce.Do(func() {
		f, err := defaultmodel.File()
		if err != nil {
			defErr = err
			return
		}
		if defM, defErr = engine.Load(f, engine.Options{Device: cpu.New(cpu.Options{Threads: 2})}); defErr != nil {
			return
		}
		defTok, defErr = tokenizer.FromGGUF(defM.File().Meta)
	})
	if defErr != nil {
		t.Fatal(defErr)
	}
	return defM, defTok
}

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
	m, _ := target(t)
	d := NewBlockDrafter(openBlock(t, defaultBlock(t, 1)))
	defer d.Close()
	if d.Name() != "block" || !d.WantsHidden() {
		t.Fatalf("name %q, wants hidden %v; want \"block\", true", d.Name(), d.WantsHidden())
	}
	hidden := make([]float32, m.Config().Hidden)
	for i := range hidden {
		hidden[i] = float32(i%7) - 3
	}
	reqs := []sched.DraftRequest{
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

// noHiddenDevice binds backends that hide engine.HiddenBackend, as a
// device that returns no hidden states does.
type noHiddenDevice struct{ engine.Device }

func (d noHiddenDevice) Bind(w *engine.Weights, kv kvcache.DType) (engine.Backend, error) {
	be, err := d.Device.Bind(w, kv)
	return struct{ engine.Backend }{be}, err
}

// TestOpen builds each combination of lanes and refuses, naming the lane,
// what cannot serve the model.
func TestOpen(t *testing.T) {
	if _, err := os.Stat(storiesPath); err != nil {
		t.Skipf("shared test material %s not available: %v", storiesPath, err)
	}
	m, tok := target(t)
	block := defaultBlock(t, 1)
	sf, err := gguf.Open(storiesPath)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	storiesBlock := blockFile(t, sf, blockdrafttest.Options{Seed: 2})
	// Made for a model of stories260K's tokenizer and the default model's
	// hidden size: the vocabulary differs.
	vocabBlock := blockFile(t, sf, blockdrafttest.Options{Seed: 3, TargetHidden: m.Config().Hidden})
	noHidden, err := engine.Load(m.File(), engine.Options{Device: noHiddenDevice{cpu.New(cpu.Options{Threads: 1})}})
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
		{name: "missing model file", lanes: Lanes{Model: storiesPath + ".missing"}, err: errNotLane},
		{name: "block", lanes: Lanes{Block: block}, want: "block"},
		{name: "lookup+block", lanes: Lanes{Lookup: true, Block: block}, want: "lookup+block"},
		{name: "model and block", lanes: Lanes{Model: storiesPath, Block: block}, lane: "block", err: ErrLaneConflict},
		{name: "model of another tokenizer", lanes: Lanes{Model: storiesPath}, lane: "model", err: sched.ErrTokenizerMismatch},
		{name: "block of another hidden size", lanes: Lanes{Block: storiesBlock}, lane: "block", err: blockdraft.ErrTargetMismatch},
		{name: "block of another vocabulary", lanes: Lanes{Lookup: true, Block: vocabBlock}, lane: "block", err: blockdraft.ErrTargetMismatch},
		{name: "block without hidden states", lanes: Lanes{Block: block}, target: noHidden, lane: "block", err: sched.ErrDraftNeedsHidden},
		{name: "missing block file", lanes: Lanes{Block: block + ".missing"}, err: errNotLane},
	} {
		t.Run(c.name, func(t *testing.T) {
			tm := c.target
			if tm == nil {
				tm = m
			}
			l := c.lanes
			l.Engine, l.Threads = eng, 1
			d, err := Open(l, tm, tok)
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

// errNotLane marks the cases of TestOpen whose error is not a *LaneError
// (a file that cannot be opened).
var errNotLane = errors.New("not a lane error")

// output is what a request produced, as compared across lanes.
type output struct {
	tokens  []int32
	text    string
	logprob []float32
	finish  sched.Finish
}

// generate runs each request on its own scheduler of slots slots with
// drafter d (nil: plain decoding) and returns the outputs in order.
func generate(t *testing.T, m *engine.Model, tok *tokenizer.Tokenizer, d sched.Drafter, dmax, slots int, reqs []*sched.Request) []output {
	t.Helper()
	ctx := context.Background()
	s, err := sched.New(sched.Config{Model: m, Tokenizer: tok, Slots: slots, Ctx: 512, Drafter: d, DraftMax: dmax, DraftIgnoreCost: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	tasks := make([]*sched.Task, len(reqs))
	for i, r := range reqs {
		rc := *r
		if tasks[i], err = s.Submit(ctx, &rc); err != nil {
			t.Fatal(err)
		}
	}
	outs := make([]output, len(reqs))
	for i, task := range tasks {
		var o output
		for {
			evs, done, err := task.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				o.text += ev.Text
				if ev.Logprob != nil {
					o.logprob = append(o.logprob, float32(ev.Logprob.Logprob))
				}
			}
			if done {
				break
			}
		}
		if err := task.Err(); err != nil {
			t.Fatal(err)
		}
		res := task.Result()
		o.tokens, o.finish = res.Generated, res.Finish
		outs[i] = o
	}
	return outs
}

// exactRequests returns the requests of the exactness tests: three
// prompts, each greedy and seeded.
func exactRequests(t *testing.T, tok *tokenizer.Tokenizer) []*sched.Request {
	t.Helper()
	prompts := []string{
		"Once upon a time, there was a little dog named Max. Max liked to",
		"<|im_start|>user\nTell me a story about a cat.<|im_end|>\n<|im_start|>assistant\n",
		"The sun was shining. The sun was shining. The sun",
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var reqs []*sched.Request
	for i, p := range prompts {
		ids, err := tok.Encode(p, tokenizer.EncodeOptions{AddSpecial: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, temp := range []float64{0, 0.9} {
			params := sample.Params{Seed: rng.Uint64()}
			if temp > 0 {
				params = sample.Defaults(rng.Uint64())
				params.Temperature = temp
			}
			reqs = append(reqs, &sched.Request{ID: fmt.Sprint(i), Prompt: ids, MaxTokens: 40 + 7*i, Sampling: params, Logprobs: 0, NoCache: true})
		}
	}
	return reqs
}

// sameOutputs fails unless every request's tokens, text,
// log-probabilities and finish reason are plain decoding's.
func sameOutputs(t *testing.T, got, want []output) {
	t.Helper()
	for i := range want {
		g, w := got[i], want[i]
		if fmt.Sprint(g.tokens) != fmt.Sprint(w.tokens) || g.text != w.text || fmt.Sprint(g.logprob) != fmt.Sprint(w.logprob) || g.finish != w.finish {
			t.Errorf("request %d: got %v %q %v finish %v, want plain decoding's %v %q %v finish %v",
				i, g.tokens, g.text, g.logprob, g.finish, w.tokens, w.text, w.logprob, w.finish)
		}
	}
}

// TestBlockLaneIsExact: with the block lane, alone or after prompt lookup,
// at several draft lengths, one slot or three, greedy and seeded, every
// request's tokens, text, log-probabilities and finish reason are plain
// decoding's.
func TestBlockLaneIsExact(t *testing.T) {
	m, tok := target(t)
	bm := openBlock(t, defaultBlock(t, 1))
	reqs := exactRequests(t, tok)
	want := generate(t, m, tok, nil, 0, 1, reqs)
	for _, lane := range []struct {
		name string
		make func() sched.Drafter
	}{
		{"block", func() sched.Drafter { return NewBlockDrafter(bm) }},
		{"lookup+block", func() sched.Drafter { return sched.NewChainDrafter(&sched.LookupDrafter{}, NewBlockDrafter(bm)) }},
	} {
		for _, dmax := range []int{1, 3, 8} {
			for _, slots := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/max%d/slots%d", lane.name, dmax, slots), func(t *testing.T) {
					d := lane.make()
					defer d.Close()
					sameOutputs(t, generate(t, m, tok, d, dmax, slots, reqs), want)
				})
			}
		}
	}
}

// TestGPUBlockLaneIsExact: the target on the CUDA backend, the block lane
// (on the GPU too, from the GPU's hidden states) gives plain decoding's
// output on the CPU. It skips without a GPU (MUSER_REQUIRE_CUDA=1 fails
// instead).
func TestGPUBlockLaneIsExact(t *testing.T) {
	dev := cudatest.Device(t)
	m, tok := target(t)
	g, err := engine.Load(m.File(), engine.Options{Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	bm := openBlock(t, defaultBlock(t, 1))
	reqs := exactRequests(t, tok)
	want := generate(t, m, tok, nil, 0, 1, reqs)
	for _, slots := range []int{1, 3} {
		t.Run(fmt.Sprintf("slots%d", slots), func(t *testing.T) {
			d, err := BindBlockDrafter(bm, dev)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.Device() == "cpu" {
				t.Fatalf("the block drafter of a CUDA target computes on %q, want the GPU", d.Device())
			}
			got := generate(t, g, tok, d, 8, slots, reqs)
			sameOutputs(t, got, want)
		})
	}
}

// binderDevice is a CPU device that also runs block drafters
// (blockdraft.Binder) through countingRunners: the path a GPU device's
// drafter takes, with the CPU's arithmetic.
type binderDevice struct {
	engine.Device
	runners []*countingRunner
	fail    error // BindBlockDrafter's error, when set
}

func (d *binderDevice) Name() string { return "binder" }

func (d *binderDevice) BindBlockDrafter(m *blockdraft.Model) (blockdraft.Runner, error) {
	if d.fail != nil {
		return nil, d.fail
	}
	r := &countingRunner{Model: m}
	d.runners = append(d.runners, r)
	return r, nil
}

// countingRunner computes with its Model, counts its Draft calls, and
// leaves the Model open on Close, as a device's Runner does.
type countingRunner struct {
	*blockdraft.Model
	drafts int
	closed bool
}

func (r *countingRunner) Draft(ctx context.Context, reqs []blockdraft.Request) error {
	r.drafts++
	return r.Model.Draft(ctx, reqs)
}

func (r *countingRunner) Close() error { r.closed = true; return nil }

// TestBlockDrafterOnDevice: a block drafter whose target runs on a device
// that runs drafters computes there (unless asked to stay on the CPU),
// drafts what the CPU drafts, and Close frees the device's copy before
// closing the model it opened; a device that cannot take the drafter is
// an error naming the file and the device.
func TestBlockDrafterOnDevice(t *testing.T) {
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	dev := &binderDevice{Device: cpu.New(cpu.Options{Threads: 2})}
	m, err := engine.Load(f, engine.Options{Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, tok := target(t)
	path := defaultBlock(t, 1)
	hidden := make([]float32, m.Config().Hidden)
	for i := range hidden {
		hidden[i] = float32(i%5) - 2
	}
	draft := func(d *BlockDrafter) []int32 {
		t.Helper()
		reqs := []sched.DraftRequest{{History: []int32{1, 7}, Hidden: hidden, Max: 7}}
		if err := d.Draft(context.Background(), reqs); err != nil {
			t.Fatal(err)
		}
		return reqs[0].Tokens
	}
	onCPU, err := OpenBlockDrafter(path, 1, true, m, tok)
	if err != nil {
		t.Fatal(err)
	}
	want := draft(onCPU)
	if onCPU.Device() != "cpu" || len(dev.runners) != 0 {
		t.Fatalf("with onCPU: device %q, %d runners bound; want cpu, none", onCPU.Device(), len(dev.runners))
	}
	onCPU.Close()

	d, err := OpenBlockDrafter(path, 1, false, m, tok)
	if err != nil {
		t.Fatal(err)
	}
	got := draft(d)
	if d.Device() != "binder" || len(dev.runners) != 1 || dev.runners[0].drafts != 1 {
		t.Fatalf("device %q, %d runners; want the drafter on \"binder\", drafting there", d.Device(), len(dev.runners))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(want) != 7 {
		t.Fatalf("drafted %v on the device, %v on the CPU; want the same 7 tokens", got, want)
	}
	model := d.Model()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if !dev.runners[0].closed {
		t.Fatal("Close left the device's Runner open")
	}
	if err := model.Draft(context.Background(), []blockdraft.Request{{Hidden: hidden, Max: 1}}); !errors.Is(err, blockdraft.ErrClosed) {
		t.Fatalf("the drafter's own model after Close: %v, want ErrClosed", err)
	}

	dev.fail = errors.New("no room")
	if _, err := OpenBlockDrafter(path, 1, false, m, tok); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "binder") {
		t.Fatalf("a device that cannot take the drafter: %v, want an error naming %s and the device", err, path)
	}
}
