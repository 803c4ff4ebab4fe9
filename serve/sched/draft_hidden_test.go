package sched

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/infer/sample"
)

// hiddenProbe is a test HiddenDrafter. For every request it checks that
// Hidden is the state an independent Forward of History[:len-1] on a
// fresh sequence returns for its last token (bit for bit), and proposes,
// from the known outputs of plain decoding, a few true tokens followed by
// wrong ones (so verification accepts some and rejects the rest, at every
// row), or nothing now and then (a plain step between drafts).
type hiddenProbe struct {
	model *engine.Model
	want  bool       // WantsHidden's answer
	seqs  [][]int32  // prompt and plain output of each request (choice)
	mu    sync.Mutex // the counts are read after the scheduler's loop
	// checked counts the requests whose Hidden was compared, empty the
	// requests proposed nothing; bad lists every mismatch and every nil
	// Hidden.
	checked, empty int
	bad            []string
	// arrays records, per slot, the backing arrays its Hidden slices lay
	// in (each named by the address of its end, which every slice of it
	// shares: the first element's address plus the slice's capacity).
	arrays map[int]map[uintptr]bool
}

func (p *hiddenProbe) Name() string      { return "probe" }
func (p *hiddenProbe) WantsHidden() bool { return p.want }
func (p *hiddenProbe) Forget(int)        {}
func (p *hiddenProbe) Close() error      { return nil }

func (p *hiddenProbe) Draft(ctx context.Context, reqs []DraftRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	V := p.model.Config().Vocab
	for i := range reqs {
		r := &reqs[i]
		if p.want {
			p.check(ctx, r)
		} else if r.Hidden != nil {
			p.bad = append(p.bad, fmt.Sprintf("slot %d at %d tokens: Hidden of %d floats for a drafter that does not want it",
				r.Slot, len(r.History), len(r.Hidden)))
		}
		h := r.History
		r.Tokens = r.Tokens[:0]
		if len(h)%7 == 3 {
			p.empty++
			continue // a plain step
		}
		var truth []int32
		for _, s := range p.seqs {
			if len(h) <= len(s) && slices.Equal(s[:len(h)], h) {
				truth = s[len(h):]
				break
			}
		}
		good := (len(h) + r.Slot) % (r.Max + 1) // true tokens, then wrong ones
		for j := range r.Max {
			switch {
			case j < good && j < len(truth):
				r.Tokens = append(r.Tokens, truth[j])
			case j < len(truth):
				r.Tokens = append(r.Tokens, (truth[j]+7)%int32(V))
			default:
				r.Tokens = append(r.Tokens, int32(13+j)) // past the plain output's end
			}
		}
	}
	return nil
}

// check compares r.Hidden with a fresh Forward's state.
func (p *hiddenProbe) check(ctx context.Context, r *DraftRequest) {
	fed := r.History[:len(r.History)-1]
	where := fmt.Sprintf("slot %d after %d tokens", r.Slot, len(fed))
	if r.Hidden == nil {
		p.bad = append(p.bad, where+": Hidden is nil")
		return
	}
	if p.arrays == nil {
		p.arrays = make(map[int]map[uintptr]bool)
	}
	if p.arrays[r.Slot] == nil {
		p.arrays[r.Slot] = make(map[uintptr]bool)
	}
	p.arrays[r.Slot][uintptr(unsafe.Pointer(unsafe.SliceData(r.Hidden)))+uintptr(cap(r.Hidden))*4] = true
	seq, err := p.model.NewSequence(len(fed))
	if err != nil {
		p.bad = append(p.bad, fmt.Sprintf("%s: NewSequence: %v", where, err))
		return
	}
	defer seq.Close()
	st := []engine.Step{{Seq: seq, Tokens: fed, Output: engine.OutputLast, Hidden: engine.OutputLast}}
	if err := p.model.Forward(ctx, st); err != nil {
		p.bad = append(p.bad, fmt.Sprintf("%s: Forward: %v", where, err))
		return
	}
	p.checked++
	if i := sameFloats(r.Hidden, st[0].HiddenStates); i >= 0 {
		p.bad = append(p.bad, fmt.Sprintf("%s: Hidden differs from a fresh Forward at float %d (got %d floats, want %d)",
			where, i, len(r.Hidden), len(st[0].HiddenStates)))
	}
}

// report fails t with the probe's findings, and when it compared nothing.
func (p *hiddenProbe) report(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, b := range p.bad {
		if i == 10 {
			t.Errorf("... and %d more", len(p.bad)-10)
			break
		}
		t.Error(b)
	}
	if p.want && p.checked == 0 {
		t.Error("the probe compared no hidden state")
	}
	// The slot's buffer is reused: it grows to the longest verification
	// step's rows, and a request with N > 1 adds the prompt's copy.
	for slot, a := range p.arrays {
		if len(a) > maxHiddenArrays {
			t.Errorf("slot %d: Hidden lay in %d arrays over %d calls, want at most %d (a buffer reused from step to step)",
				slot, len(a), p.checked, maxHiddenArrays)
		}
	}
}

// maxHiddenArrays bounds the backing arrays one slot's Hidden slices may
// lie in: a buffer grown a few times (rows 1 to DraftMax+1, doubling), and
// the prompt's copy.
const maxHiddenArrays = 6

// fullSeqs returns each case's prompt followed by its plain output.
func fullSeqs(cases []specCase, outs []fullOutput) [][]int32 {
	var seqs [][]int32
	for i := range cases {
		seqs = append(seqs, append(slices.Clone(cases[i].prompt), outs[i].res.Generated...))
	}
	return seqs
}

// TestHiddenDrafterGetsHiddenStates runs the probe lane, greedy and seeded,
// with penalties, stop strings and token limits (which end requests in the
// middle of a verification step), alone and batched beside an embeddings
// request, alone and chained after prompt lookup, with the draft length
// adapted by acceptance or by cost (with plain steps between drafts):
// every Hidden it gets is the state after History[len-2], and the output
// is plain decoding's.
func TestHiddenDrafterGetsHiddenStates(t *testing.T) {
	e := loadDefault(t)
	H := e.model.Config().Hidden
	seeds := []uint64{1, 2}
	if raceDetector {
		seeds = seeds[:1] // the concurrency is the same for every seed
	}
	for _, seed := range seeds {
		cases := specCases(t, e, 6, seed)
		plain := e.newSched(t, nil, nil)
		want := make([]fullOutput, len(cases))
		for i := range cases {
			want[i] = runAll(t, plain, cases[i:i+1])[0]
		}
		// Requests the probe has no output for get wrong drafts only.
		seqs := fullSeqs(cases, want)[:len(cases)-1]
		embedPrompt := e.encode(t, infertest.Story(int(seed), 70))
		wantEmbed := directHidden(t, e, embedPrompt)
		for _, lane := range []string{"probe", "lookup+probe"} {
			for _, slots := range []int{1, 3} {
				for _, byCost := range []bool{false, true} {
					name := fmt.Sprintf("seed%d/%s/slots%d/cost%v", seed, lane, slots, byCost)
					t.Run(name, func(t *testing.T) {
						probe := &hiddenProbe{model: e.model, want: true, seqs: seqs}
						var d Drafter = probe
						if lane == "lookup+probe" {
							d = NewChainDrafter(&LookupDrafter{MinN: 1}, probe)
						}
						s := e.newSched(t, nil, func(c *Config) {
							c.Drafter, c.DraftMax, c.Slots = d, 4, slots
							if byCost {
								// Drafts pay; every 16th step of a slot is plain.
								c.testCosts = linearCosts(0.05, 0.01)
							} else {
								c.DraftIgnoreCost = true
							}
						})
						var (
							wg    sync.WaitGroup
							embed output
						)
						if slots > 1 {
							// An embeddings request's prefill steps ask for
							// hidden states of their own.
							wg.Go(func() { embed = run(t, s, &Request{ID: "embed", Prompt: embedPrompt, Hidden: engine.OutputAll}) })
						}
						runLane(t, s, cases, want, slots)
						wg.Wait()
						if slots > 1 {
							if embed.err != nil || sameFloats(embed.res.Hidden, wantEmbed) >= 0 {
								t.Errorf("embeddings beside the probe: err %v, %d floats, first difference at %d; want %d equal floats",
									embed.err, len(embed.res.Hidden), sameFloats(embed.res.Hidden, wantEmbed), len(wantEmbed))
							}
						}
						probe.report(t)
						st := s.DraftStats()
						if st.Accepted == 0 || st.Accepted == st.Drafted {
							t.Errorf("stats %+v: want some drafts accepted and some rejected", st)
						}
						t.Logf("%s: %d states compared (%d floats each), %d empty proposals, %+v",
							name, probe.checked, H, probe.empty, st)
					})
				}
			}
		}
	}
}

// TestHiddenDrafterChoices runs requests with N > 1 under the probe: each
// choice starts again after the prompt, whose state the slot kept.
func TestHiddenDrafterChoices(t *testing.T) {
	e := loadDefault(t)
	prompt := e.encode(t, infertest.Story(2, 40))
	for _, c := range []struct {
		name string
		n    int
		stop []string
		max  int
		seed uint64
	}{
		{"three choices", 3, nil, 14, 70},
		{"two choices with a stop string", 2, []string{"."}, 30, 70},
		// Choices 0, 2 and 3 (seeds 71, 73, 74) stop at their first
		// token, sampled from the prompt's logits: choice 1 starts
		// from the state of the prompt's last chunk (in the others,
		// choices after the first start from the kept state).
		{"four choices, three stopping at once", 4, []string{" she"}, 12, 71},
	} {
		t.Run(c.name, func(t *testing.T) {
			mk := func(seed uint64, n int) *Request {
				return &Request{Prompt: prompt, MaxTokens: c.max, Sampling: sampling(seed), Stop: c.stop, NoCache: true, N: n}
			}
			alone := e.newSched(t, nil, nil)
			var (
				want []output
				seqs [][]int32
			)
			for i := range c.n {
				o := run(t, alone, mk(c.seed+uint64(i), 1))
				if o.err != nil {
					t.Fatal(o.err)
				}
				want = append(want, o)
				seqs = append(seqs, append(slices.Clone(prompt), o.res.Generated...))
			}
			probe := &hiddenProbe{model: e.model, want: true, seqs: seqs}
			sameChoices(t, e, mk(c.seed, c.n), want, false, probe)
			probe.report(t)
			long := 0 // choices that went past their first token
			for _, o := range want {
				if len(o.res.Generated) > 1 {
					long++
				}
			}
			if probe.checked < long {
				t.Errorf("the probe compared %d states, want at least one per choice past its first token (%d)", probe.checked, long)
			}
			t.Logf("%d states compared; %d of %d choices went past their first token", probe.checked, long, c.n)
		})
	}
}

// TestHiddenDrafterAfterRestore runs the probe on requests whose prompt is
// restored from the store, in part or whole (then its last token is
// computed again), or reused from a slot's KV: the first Draft call
// already has the state after the prompt.
func TestHiddenDrafterAfterRestore(t *testing.T) {
	e := loadDefault(t)
	B := openStore(t, t.TempDir()).BlockTokens()
	story := e.encode(t, infertest.Story(3, 200))
	if len(story) < 2*B+10 {
		t.Fatalf("the story is %d tokens, want at least %d", len(story), 2*B+10)
	}
	prompts := [][]int32{story[:2*B+9], story[:2*B]} // part of a block left, whole blocks
	var cases []specCase
	for i, p := range prompts {
		for j, sp := range []sample.Params{{}, sampling(uint64(20 + i))} {
			cases = append(cases, specCase{prompt: p, req: Request{ID: fmt.Sprint(i, j), Prompt: p, MaxTokens: 24, Sampling: sp,
				Logprobs: 1, Salt: []byte("tenant")}})
		}
	}
	runStore := func(d Drafter, reuse bool) []fullOutput {
		st := openStore(t, t.TempDir())
		defer st.Close()
		s := e.newSched(t, st, func(c *Config) { c.Drafter, c.DraftIgnoreCost, c.DraftMax, c.SlotReuse = d, true, 4, reuse })
		var outs []fullOutput
		for i := range cases {
			outs = append(outs, runAll(t, s, cases[i:i+1])[0])
			if err := s.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		return outs
	}
	for _, reuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("slotreuse%v", reuse), func(t *testing.T) {
			// Plain, with a store: the first request of each prompt
			// computes and publishes it, the second restores it (or
			// reuses the slot's KV).
			want := runStore(nil, reuse)
			probe := &hiddenProbe{model: e.model, want: true, seqs: fullSeqs(cases, want)}
			got := runStore(probe, reuse)
			for i := range cases {
				sameOutput(t, fmt.Sprintf("request %d", i), got[i], want[i])
				if i%2 == 1 && got[i].res.CachedTokens == 0 {
					t.Errorf("request %d: nothing restored or reused, want the prompt's blocks", i)
				}
				if reuse && i > 0 && got[i].res.CacheSource != "slot" {
					t.Errorf("request %d: prompt from %q, want the slot's KV", i, got[i].res.CacheSource)
				}
				t.Logf("request %d: %d prompt tokens, %d from %q", i, len(cases[i].prompt), got[i].res.CachedTokens, got[i].res.CacheSource)
			}
			probe.report(t)
		})
	}
}

// noHiddenDevice binds backends that hide engine.HiddenBackend, as a
// device that returns no hidden states does.
type noHiddenDevice struct{ engine.Device }

func (d noHiddenDevice) Bind(w *engine.Weights, kv kvcache.DType) (engine.Backend, error) {
	be, err := d.Device.Bind(w, kv)
	return struct{ engine.Backend }{be}, err
}

// TestDraftHiddenRefused: New refuses a drafter that wants hidden states
// on a model whose device returns none, naming the lane and the device;
// any other drafter runs there, its steps asking for no hidden states
// (the engine would refuse a step that did).
func TestDraftHiddenRefused(t *testing.T) {
	e := loadDefault(t)
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(f, engine.Options{Device: noHiddenDevice{cpu.New(cpu.Options{Threads: 2})}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.HiddenStates() {
		t.Fatal("the wrapped backend returns hidden states; the test needs one that does not")
	}
	probe := func(want bool) *hiddenProbe { return &hiddenProbe{model: e.model, want: want} }
	for _, c := range []struct {
		name  string
		d     Drafter
		model *engine.Model
		lane  string // "": accepted
	}{
		{"probe", probe(true), m, "probe"},
		{"chained after lookup", NewChainDrafter(&LookupDrafter{}, probe(true)), m, "probe"},
		{"chained before lookup", NewChainDrafter(probe(true), &LookupDrafter{}), m, "probe"},
		{"probe not wanting", probe(false), m, ""},
		{"lookup", &LookupDrafter{MinN: 1}, m, ""},
		{"lookup+model", NewChainDrafter(&LookupDrafter{}, NewModelDrafter(e.model)), m, ""},
		{"none", nil, m, ""},
		{"probe on the cpu", probe(true), e.model, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckDraftHidden(c.model, c.d)
			s, nerr := New(Config{Model: c.model, Tokenizer: e.tok, Drafter: c.d, Ctx: 256})
			if nerr == nil {
				s.Close(context.Background())
			}
			if c.lane == "" {
				if err != nil || nerr != nil {
					t.Fatalf("CheckDraftHidden: %v, New: %v; want no error", err, nerr)
				}
				return
			}
			for _, err := range []error{err, nerr} {
				var de *DraftHiddenError
				if !errors.As(err, &de) || !errors.Is(err, ErrDraftNeedsHidden) || !errors.Is(err, engine.ErrNoHiddenStates) {
					t.Fatalf("got %v, want a *DraftHiddenError wrapping ErrDraftNeedsHidden and engine.ErrNoHiddenStates", err)
				}
				if de.Lane != c.lane || de.Device != m.Device().Name() {
					t.Errorf("got lane %q device %q, want %q and %q", de.Lane, de.Device, c.lane, m.Device().Name())
				}
				if msg := err.Error(); !strings.Contains(msg, `draft lane "`+c.lane+`"`) || !strings.Contains(msg, "device "+m.Device().Name()) {
					t.Errorf("message %q does not name the lane and the device", msg)
				}
			}
		})
	}
	// Lanes that want no hidden states run on that model, output unchanged.
	tok := e.tok
	mk := func(d Drafter) *Scheduler {
		s, err := New(Config{Model: m, Tokenizer: tok, Drafter: d, DraftIgnoreCost: true, Ctx: 256, Slots: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return s
	}
	cases := specCases(t, e, 4, 5)
	want := runAll(t, mk(nil), cases)
	for _, d := range []Drafter{&LookupDrafter{MinN: 1}, probe(false), NewModelDrafter(e.model)} {
		t.Run("run/"+d.Name(), func(t *testing.T) {
			s := mk(d)
			got := runAll(t, s, cases)
			for i := range cases {
				sameOutput(t, fmt.Sprintf("request %d", i), got[i], want[i])
				if got[i].err != nil {
					t.Errorf("request %d: %v", i, got[i].err)
				}
			}
			if p, ok := d.(*hiddenProbe); ok {
				p.report(t)
				if st := s.DraftStats(); st.Drafted == 0 {
					t.Errorf("no drafts verified: %+v", st)
				}
			}
		})
	}
}

// wantingLane is a scriptLane that wants hidden states.
type wantingLane struct{ *scriptLane }

func (wantingLane) WantsHidden() bool { return true }

// TestChainDrafterHidden: a chain wants hidden states when a lane does,
// and passes them to the lanes that want them, nil to the others.
func TestChainDrafterHidden(t *testing.T) {
	plain := func(name string, script map[int][]int32) *scriptLane { return &scriptLane{name: name, script: script} }
	if NewChainDrafter(plain("a", nil), plain("b", nil)).WantsHidden() || WantsHidden(NewChainDrafter(&LookupDrafter{})) {
		t.Error("a chain of lanes that want no hidden states reports WantsHidden")
	}
	a := plain("a", map[int][]int32{0: {7}})
	b := wantingLane{plain("b", map[int][]int32{1: {8}})}
	c := NewChainDrafter(a, b)
	if !c.WantsHidden() || !WantsHidden(c) {
		t.Fatal("a chain with a lane that wants hidden states does not report WantsHidden")
	}
	h0, h1 := []float32{1, 2}, []float32{3, 4}
	reqs := []DraftRequest{
		{Slot: 0, History: []int32{1, 2}, Max: 2, Hidden: h0},
		{Slot: 1, History: []int32{3, 4}, Max: 2, Hidden: h1},
	}
	if err := c.Draft(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reqs[0].Tokens, []int32{7}) || !slices.Equal(reqs[1].Tokens, []int32{8}) {
		t.Errorf("got proposals %v %v, want [7] [8]", reqs[0].Tokens, reqs[1].Tokens)
	}
	if len(a.asked) != 2 || a.asked[0].Hidden != nil || a.asked[1].Hidden != nil {
		t.Errorf("lane a (no hidden states) was asked %+v, want both requests with Hidden nil", a.asked)
	}
	if len(b.asked) != 1 || b.asked[0].Slot != 1 || !slices.Equal(b.asked[0].Hidden, h1) || &b.asked[0].Hidden[0] != &h1[0] {
		t.Errorf("lane b (hidden states) was asked %+v, want slot 1 alone with its Hidden passed through", b.asked)
	}
	if got := hiddenLane(c); got != "b" {
		t.Errorf("the lane named for hidden states is %q, want b", got)
	}
}

func TestSlotHiddenAt(t *testing.T) {
	const H = 2
	buf := []float32{10, 11, 20, 21, 30, 31}
	prompt := []float32{5, 6}
	for _, c := range []struct {
		name string
		h    slotHidden
		n    int
		want []float32
	}{
		{"none", slotHidden{}, 4, nil},
		{"last row", slotHidden{buf: buf[:2], rows: 1, end: 7}, 7, []float32{10, 11}},
		{"last row, other length", slotHidden{buf: buf[:2], rows: 1, end: 7}, 6, nil},
		{"verify row 0", slotHidden{buf: buf, rows: 3, end: 12}, 10, []float32{10, 11}},
		{"verify row 2", slotHidden{buf: buf, rows: 3, end: 12}, 12, []float32{30, 31}},
		{"before the verify rows", slotHidden{buf: buf, rows: 3, end: 12}, 9, nil},
		{"past the verify rows", slotHidden{buf: buf, rows: 3, end: 12}, 13, nil},
		{"the prompt", slotHidden{buf: buf, rows: 3, end: 12, prompt: prompt, promptLen: 8}, 8, []float32{5, 6}},
		{"rows before the prompt", slotHidden{buf: buf[:2], rows: 1, end: 8, prompt: []float32{0, 0}, promptLen: 8}, 8, []float32{10, 11}},
		{"reset", func() slotHidden {
			h := slotHidden{buf: buf, rows: 3, end: 12, prompt: prompt, promptLen: 8}
			h.reset()
			return h
		}(), 8, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.h.at(c.n, H)
			if !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) {
				t.Errorf("at(%d) = %v, want %v", c.n, got, c.want)
			}
		})
	}
}
