package sched

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/sample"
)

func TestExpectedTokens(t *testing.T) {
	for _, c := range []struct {
		alpha float64
		k     int
		want  float64
	}{
		{0.5, 0, 1},
		{0.5, 1, 1.5},
		{0.5, 2, 1.75},
		{0, 4, 1},
		{1, 4, 5},
		{0.8, 3, 1 + 0.8 + 0.64 + 0.512},
	} {
		if got := expectedTokens(c.alpha, c.k); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("expectedTokens(%v, %d) = %v, want %v", c.alpha, c.k, got, c.want)
		}
	}
}

// linearCosts returns fixed costs: a step of n rows costs 1 + per·(n-1)
// and a draft token draft.
func linearCosts(per, draft float64) *laneCosts {
	c := newLaneCosts()
	c.fixed = func(n int) float64 { return 1 + per*float64(n-1) }
	c.fixedDraft = draft
	return c
}

func TestBestDraftLen(t *testing.T) {
	for _, c := range []struct {
		name  string
		alpha float64
		max   int
		base  int
		costs *laneCosts
		want  int
	}{
		// Free rows and drafts: the longest draft, whatever α.
		{"free", 0.3, 8, 0, linearCosts(0, 0), 8},
		// A row costs a whole step: drafting can never pay.
		{"rows cost a step", 0.99, 8, 0, linearCosts(1, 0), 0},
		// Drafts as dear as the target: no length pays.
		{"draft as dear as the target", 0.9, 8, 0, linearCosts(0.2, 1), 0},
		// Nothing is ever accepted: no draft.
		{"never accepted", 0, 8, 0, linearCosts(0.1, 0.01), 0},
		// The measured large target and embedded draft at 85%: a row
		// ≈ 0.2 step, a draft token ≈ 0.3 step. E(k)/cost peaks at k = 2
		// (2.57/2.0 = 1.29; k = 1: 1.85/1.5 = 1.23; k = 3: 3.19/2.5 = 1.28).
		{"large target", 0.85, 8, 0, linearCosts(0.2, 0.3), 2},
		// The same at α = 0.5: 1.5/1.5 = 1.0 does not pay.
		{"large target, poor acceptance", 0.5, 8, 0, linearCosts(0.2, 0.3), 0},
		// Capped by max.
		{"capped", 0.95, 3, 0, linearCosts(0.05, 0.01), 3},
		// Other slots' rows in the step: the marginal cost is measured
		// from there. Rows cost 1 each up to 4, nothing after: with
		// base 3 the slot's drafts are free.
		// A GPU's steps: a row past the first costs 3% of a step
		// (measured up to 2 rows), a block drafter's call 0.3 of a step.
		// The rows not yet measured are extrapolated at the measured 3%:
		// k = 5: 2.38/1.45 = 1.64 (k = 7: 2.46/1.51 = 1.63; k = 3:
		// 2.18/1.39 = 1.57). At the prior's 15% a step of 8 rows would
		// look 1.93 steps long and k = 3 the best (2.18/1.63 = 1.34;
		// k = 7: 2.46/2.23 = 1.10).
		{"gpu rows, measured to 2", 0.6, 7, 0, measuredCosts(0.3, 1.0, 1.03), 5},
		{"base rows", 0.6, 4, 3, func() *laneCosts {
			c := newLaneCosts()
			c.fixed = func(n int) float64 { return float64(min(n, 4)) }
			return c
		}(), 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := bestDraftLen(c.alpha, c.max, c.base, c.costs); got != c.want {
				t.Errorf("bestDraftLen(%v, %d, %d) = %d, want %d", c.alpha, c.max, c.base, got, c.want)
			}
		})
	}
}

// measuredCosts returns costs measured as a scheduler measures them: the
// seconds of steps of 1, 2, … rows (steps[i] for i+1 rows) and a fixed
// cost per draft call.
func measuredCosts(draft float64, steps ...float64) *laneCosts {
	c := newLaneCosts()
	c.perCall = true
	c.draft = draft
	for i, v := range steps {
		c.step[i+1] = v
	}
	return c
}

func TestLaneCosts(t *testing.T) {
	c := newLaneCosts()
	if c.known() {
		t.Fatal("known before any measurement")
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	c.noteStep(1, ms(10))
	if c.known() {
		t.Fatal("known without a draft cost")
	}
	c.noteDraft(4, ms(8))
	if !c.known() {
		t.Fatal("not known after a step and a draft")
	}
	if got, want := c.draftCost(1), 0.002; math.Abs(got-want) > 1e-12 {
		t.Errorf("draft cost %v, want %v (8 ms over 4 tokens)", got, want)
	}
	c.noteStep(5, ms(20))
	for _, x := range []struct {
		n    int
		want float64
	}{
		{1, 0.010},
		{5, 0.020},
		{3, 0.015},                        // interpolated
		{7, 0.020 + 2*costRowPrior*0.010}, // extrapolated at the prior, under the measured slope
	} {
		if got := c.stepCost(x.n); math.Abs(got-x.want) > 1e-12 {
			t.Errorf("stepCost(%d) = %v, want %v", x.n, got, x.want)
		}
	}
	// Beyond the largest measured size a row costs the prior's share of
	// a one-row step or the measured rows' slope, whichever is less (a
	// GPU's extra rows cost little), and never less than nothing.
	for _, x := range []struct {
		name  string
		steps []float64
		n     int
		want  float64
	}{
		{"one size measured", []float64{0.010}, 4, 0.010 + 3*costRowPrior*0.010},
		{"slope under the prior", []float64{0.010, 0.0103}, 8, 0.0103 + 6*0.0003},
		{"slope over the prior", []float64{0.010, 0.014}, 8, 0.014 + 6*costRowPrior*0.010},
		{"faster with two rows", []float64{0.010, 0.009}, 8, 0.009},
	} {
		if got := measuredCosts(0, x.steps...).stepCost(x.n); math.Abs(got-x.want) > 1e-12 {
			t.Errorf("%s: stepCost(%d) = %v, want %v", x.name, x.n, got, x.want)
		}
	}
	// Slower measurements decay into the mean; an outlier counts as
	// costClamp times the mean.
	c.noteStep(1, ms(20))
	if got, want := c.stepCost(1), costDecay*0.010+(1-costDecay)*0.020; math.Abs(got-want) > 1e-12 {
		t.Errorf("after a second measurement: %v, want %v", got, want)
	}
	before := c.stepCost(5)
	c.noteStep(5, time.Second)
	if got, want := c.stepCost(5), costDecay*before+(1-costDecay)*costClamp*before; math.Abs(got-want) > 1e-12 {
		t.Errorf("after an outlier: %v, want %v", got, want)
	}
	// A faster step replaces the mean: delays are one-sided.
	c.noteStep(5, ms(12))
	if got, want := c.stepCost(5), 0.012; math.Abs(got-want) > 1e-12 {
		t.Errorf("after a faster step: %v, want %v", got, want)
	}
	// Out-of-range sizes are not recorded.
	c.noteStep(0, ms(1))
	c.noteStep(maxCostRows+1, ms(1))
	c.noteStep(2, 0)
	if c.step[2] != 0 {
		t.Errorf("a zero duration was recorded: %v", c.step[2])
	}
}

// TestSpeculationCostPolicy runs the lanes with the cost-aware draft
// length: measured costs, costs that make every draft pay, and costs that
// make none pay. The output is plain decoding's every time; with free
// drafts the lane drafts at every step, with dear ones only every
// probeEvery-th step.
func TestSpeculationCostPolicy(t *testing.T) {
	e := loadDefault(t)
	draft := loadDraft(t)
	cases := specCases(t, e, 4, 7)
	plain := e.newSched(t, nil, nil)
	want := make([]fullOutput, len(cases))
	prompts, outs := make([][]int32, len(cases)), make([][]int32, len(cases))
	for i := range cases {
		want[i] = runAll(t, plain, cases[i:i+1])[0]
		prompts[i], outs[i] = cases[i].prompt, want[i].res.Generated
	}
	lanes := []struct {
		name string
		make func() Drafter
	}{
		{"lookup", func() Drafter { return &LookupDrafter{MinN: 1} }},
		{"model-q4k", func() Drafter { return NewModelDrafter(draft) }},
		{"oracle", func() Drafter { return oracleDrafter(prompts, outs) }},
	}
	policies := []struct {
		name  string
		costs func() *laneCosts
	}{
		{"measured", func() *laneCosts { return nil }},
		{"free", func() *laneCosts { return linearCosts(0, 0) }},
		{"dear", func() *laneCosts { return linearCosts(1, 1) }},
	}
	for _, lane := range lanes {
		for _, pol := range policies {
			for _, slots := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/%s/slots%d", lane.name, pol.name, slots), func(t *testing.T) {
					d := lane.make()
					defer d.Close()
					s := e.newSched(t, nil, func(c *Config) { c.Drafter, c.Slots, c.testCosts = d, slots, pol.costs() })
					var got []fullOutput
					if slots == 1 {
						for i := range cases {
							got = append(got, runAll(t, s, cases[i:i+1])[0])
						}
					} else {
						got = runAll(t, s, cases)
					}
					gen := 0
					for i := range cases {
						sameOutput(t, fmt.Sprintf("request %d", i), got[i], want[i])
						gen += len(want[i].res.Generated)
					}
					st := s.DraftStats()
					t.Logf("%+v over %d tokens", st, gen)
					switch pol.name {
					case "free":
						if lane.name == "oracle" && st.TokensPerStep() < 4 {
							t.Errorf("free drafts, oracle lane: %.2f tokens per verification step, want at least 4", st.TokensPerStep())
						}
					case "dear":
						// A decode step of a request drafts only when it
						// probes: at most two steps in probeEvery of it.
						if limit := int64(2*gen/probeEvery + 2*len(cases)); st.Steps > limit {
							t.Errorf("dear drafts: %d verification steps over %d tokens, want at most %d", st.Steps, gen, limit)
						}
					}
				})
			}
		}
	}
}

// TestModelDrafterWindow drives a ModelDrafter with a small window over a
// history that grows, is cut back and grows again (as verification and
// choices do), with and without the Stable hint, and checks every
// proposal against greedy decoding from scratch of the window the drafter
// says it used: what the drafter keeps between calls never changes what
// it proposes, and its sequence never holds more than the window.
func TestModelDrafterWindow(t *testing.T) {
	e := loadDefault(t)
	draft := loadDraft(t)
	V := draft.Config().Vocab
	prompt := e.encode(t, "Once upon a time, there was a little cat. The little cat liked to play in the garden with her friends.")
	greedy := func(view []int32, n int) []int32 {
		seq, err := draft.NewSequence(len(view) + n)
		if err != nil {
			t.Fatal(err)
		}
		defer seq.Close()
		st := []engine.Step{{Seq: seq, Tokens: view, Output: engine.OutputLast}}
		var out []int32
		for len(out) < n {
			if err := draft.Forward(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			tok := sample.Argmax(st[0].Logits[:V], nil)
			out = append(out, tok)
			st[0].Tokens = []int32{tok}
		}
		return out
	}
	for _, w := range []int{16, 24, 0} {
		for _, hint := range []bool{false, true} {
			t.Run(fmt.Sprintf("window%d/hint%v", w, hint), func(t *testing.T) {
				d := NewModelDrafter(draft)
				d.Window = w
				defer d.Close()
				r := rand.New(rand.NewPCG(uint64(w), 3))
				h := slices.Clone(prompt[:10])
				var prev []int32
				for step := range 40 {
					most := 1 + r.IntN(4)
					stable := 0
					if hint {
						stable = commonPrefix(prev, h)
					}
					reqs := []DraftRequest{{Slot: 2, History: h, Stable: stable, Max: most, Ctx: 512}}
					if err := d.Draft(context.Background(), reqs); err != nil {
						t.Fatal(err)
					}
					prev = slices.Clone(h)
					st := d.slots[2]
					view := h
					if st.start > 0 {
						view = append([]int32{h[0]}, h[st.start:]...)
					}
					if ww := d.window(512); st.seq.Len() > ww {
						t.Fatalf("step %d: the draft sequence holds %d tokens, window %d", step, st.seq.Len(), ww)
					}
					got := reqs[0].Tokens
					if want := greedy(view, len(got)); !slices.Equal(got, want) || len(got) == 0 {
						t.Fatalf("step %d (history %d, start %d): proposed %v, want greedy %v (at least one)", step, len(h), st.start, got, want)
					}
					// Accept some drafts and a correction, or cut back.
					switch r.IntN(6) {
					case 0:
						h = h[:max(1, len(h)-1-r.IntN(12))]
					default:
						a := r.IntN(len(got) + 1)
						h = append(h, got[:a]...)
						h = append(h, int32(r.IntN(V)))
					}
				}
			})
		}
	}
}

// TestFixedCostDraft: for a drafter whose call costs the same whatever the
// length (a block drafter), a draft's time is recorded and charged per
// call, so a longer draft costs only its rows; a chain is charged so when
// one of its lanes is.
func TestFixedCostDraft(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	perToken, perCall := newLaneCosts(), newLaneCosts()
	perCall.perCall = true
	for _, c := range []*laneCosts{perToken, perCall} {
		c.noteStep(1, ms(10))
		for n := 2; n <= 8; n++ {
			c.noteStep(n, ms(10+float64(n-1))) // a row past the first costs 1 ms
		}
		c.noteDraft(4, ms(4))
	}
	for _, x := range []struct {
		c    *laneCosts
		k    int
		want float64
	}{
		{perToken, 1, 0.001}, {perToken, 4, 0.004}, {perToken, 7, 0.007},
		{perCall, 1, 0.004}, {perCall, 4, 0.004}, {perCall, 7, 0.004},
	} {
		if got := x.c.draftCost(x.k); math.Abs(got-x.want) > 1e-12 {
			t.Errorf("perCall %v: draftCost(%d) = %v, want %v", x.c.perCall, x.k, got, x.want)
		}
	}
	// At acceptance 0.8 a call of 4 ms for any length pays for drafting
	// the most; at 1 ms a token the cost of a long draft grows with it.
	if a, b := bestDraftLen(0.8, 7, 0, perCall), bestDraftLen(0.8, 7, 0, perToken); a <= b {
		t.Errorf("bestDraftLen per call %d, per token %d: want the per-call drafter to draft more", a, b)
	}
	// At acceptance 0.2 neither pays for its cost.
	if k := bestDraftLen(0.2, 7, 0, perCall); k != 0 {
		t.Errorf("bestDraftLen(0.2) per call = %d, want 0", k)
	}
	for _, c := range []struct {
		d    Drafter
		want bool
	}{
		{&LookupDrafter{}, false},
		{fixedLane{true}, true},
		{fixedLane{false}, false},
		{NewChainDrafter(&LookupDrafter{}, fixedLane{true}), true},
		{NewChainDrafter(&LookupDrafter{}, &LookupDrafter{}), false},
		{nil, false},
	} {
		if got := fixedCost(c.d); got != c.want {
			t.Errorf("fixedCost(%T) = %v, want %v", c.d, got, c.want)
		}
	}
}

// fixedLane is a lookup lane that reports FixedCost as told.
type fixedLane struct{ fixed bool }

func (fixedLane) Name() string                                { return "fixed" }
func (fixedLane) Draft(context.Context, []DraftRequest) error { return nil }
func (fixedLane) Forget(int)                                  {}
func (fixedLane) Close() error                                { return nil }
func (f fixedLane) FixedCost() bool                           { return f.fixed }
