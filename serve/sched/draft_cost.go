package sched

import (
	"math"
	"time"

	"github.com/muserhq/muser/infer/engine"
)

// The draft length's cost model (doc.go, "Speculative decoding"). A step
// that verifies k draft tokens for a slot costs the target a step of k+1
// rows where plain decoding's costs one, plus the drafter's time for k
// tokens (or, for a FixedCostDrafter, for one call whatever k); it yields 1 + α + α² + … + α^k tokens on average, where α is
// the slot's measured per-token acceptance. The scheduler measures both
// costs as it goes (laneCosts) and drafts the k that makes the most
// tokens per second, or nothing when no k beats a plain step.
const (
	// costDecay weighs a cost's earlier measurements against the latest.
	costDecay = 0.75
	// costClamp bounds one measurement, in multiples of the mean.
	costClamp = 3
	// costRowPrior is the cost of each row past the first, as a share
	// of a one-row step, assumed for a step size not yet measured and
	// larger than every measured one. It is optimistic (multi-token
	// kernels make a few rows cost less than half a step each), so that
	// an unmeasured length is tried once and then known.
	costRowPrior = 0.15
	// costGain is the least gain over plain decoding, in expected tokens
	// per second, for which a slot drafts: below it the measurement's
	// noise is larger than the gain.
	costGain = 1.03
	// probeEvery is how often a slot whose lane does not pay drafts
	// anyway (two steps in every probeEvery), and a slot whose lane pays
	// takes a plain step (one in every probeEvery), to measure again the
	// acceptance and the costs, which change with the text and the
	// context's length.
	probeEvery = 16
	// maxCostRows bounds the step sizes measured one by one; larger
	// steps (many slots, or prefill) are not recorded.
	maxCostRows = 256
)

// laneCosts holds the measured costs of the draft lane: the wall time of
// decode steps by their number of rows and the drafter's time per draft
// token. Only the loop goroutine uses it.
type laneCosts struct {
	// step[n] is the decayed mean seconds of a step of n rows, all of
	// them decode rows (a slot's last token and its drafts); 0 when no
	// such step was measured.
	step [maxCostRows + 1]float64
	// draft is the decayed mean seconds a drafter took per draft token
	// (a Draft call's time over the most tokens it was asked for), or
	// with perCall per Draft call; < 0 when not yet measured.
	draft float64
	// perCall is set for a drafter whose call costs the same whatever
	// the number of tokens asked (a FixedCostDrafter): a step's draft
	// costs draft once, not draft per token.
	perCall bool
	// fixed, when set, replaces the measured step costs (tests):
	// fixed(n) is the seconds of a step of n rows, fixedDraft a draft
	// token's.
	fixed      func(n int) float64
	fixedDraft float64
}

func newLaneCosts() *laneCosts { return &laneCosts{draft: -1} }

// ewma folds the measurement v into the mean m (less than 0: none yet).
// A measurement below the mean replaces it; one above moves it by a
// share 1-costDecay, counting at most costClamp times the mean. Delays
// are one-sided (another process's time slice, a page fault, the first
// step after a prefill): the estimate follows the fastest recent steps,
// which is what each step size costs undisturbed, and rises slowly when
// the cost does (a growing context).
func ewma(m, v float64) float64 {
	if m < 0 || v < m {
		return v
	}
	return costDecay*m + (1-costDecay)*min(v, costClamp*m)
}

// noteStep records that a step of n decode rows took d.
func (c *laneCosts) noteStep(n int, d time.Duration) {
	if n < 1 || n > maxCostRows || d <= 0 {
		return
	}
	m := c.step[n]
	if m == 0 {
		m = -1
	}
	c.step[n] = ewma(m, d.Seconds())
}

// noteDraft records that a Draft call asked for at most k tokens per
// slot took d.
func (c *laneCosts) noteDraft(k int, d time.Duration) {
	if k < 1 || d < 0 {
		return
	}
	if c.perCall {
		k = 1
	}
	c.draft = ewma(c.draft, d.Seconds()/float64(k))
}

// known reports whether the model has what it needs: a one-row step's
// cost and a draft token's.
func (c *laneCosts) known() bool {
	return c.fixed != nil || (c.step[1] > 0 && c.draft >= 0)
}

// stepCost returns the seconds of a step of n rows: measured, or
// interpolated between the nearest measured sizes, or beyond the largest
// measured one extrapolated per row at costRowPrior of a one-row step or
// at the measured rows' slope from one row to that size, whichever is
// less (so an unmeasured length looks no dearer than the measured ones
// suggest: on a GPU a few more rows cost almost nothing). It needs
// step[1] (known).
func (c *laneCosts) stepCost(n int) float64 {
	if c.fixed != nil {
		return c.fixed(n)
	}
	n = min(n, maxCostRows)
	if c.step[n] > 0 {
		return c.step[n]
	}
	lo := n - 1
	for lo > 1 && c.step[lo] == 0 {
		lo--
	}
	hi := n + 1
	for hi <= maxCostRows && c.step[hi] == 0 {
		hi++
	}
	if hi > maxCostRows {
		row := costRowPrior * c.step[1]
		if lo > 1 {
			row = max(0, min(row, (c.step[lo]-c.step[1])/float64(lo-1)))
		}
		return c.step[lo] + float64(n-lo)*row
	}
	f := float64(n-lo) / float64(hi-lo)
	return c.step[lo] + f*(c.step[hi]-c.step[lo])
}

// draftCost returns the seconds of drafting k tokens for a step: k draft
// tokens', or with perCall one call's whatever k.
func (c *laneCosts) draftCost(k int) float64 {
	d := max(c.draft, 0)
	if c.fixed != nil {
		d = c.fixedDraft
	}
	if c.perCall {
		return d
	}
	return float64(k) * d
}

// expectedTokens returns the tokens a verification step of k drafts
// yields on average at per-token acceptance alpha: 1 + α + … + α^k.
func expectedTokens(alpha float64, k int) float64 {
	if alpha >= 1 {
		return float64(k + 1)
	}
	return (1 - math.Pow(alpha, float64(k+1))) / (1 - alpha)
}

// bestDraftLen returns the draft length in 0..max that makes the most
// tokens per second for a slot with per-token acceptance alpha, whose
// step also carries base rows of other slots: k drafts cost a step of
// base+1+k rows and the drafting of k tokens (draftCost), and yield
// expectedTokens(alpha, k).
// It returns 0 (no draft) unless some k beats a plain step by costGain.
func bestDraftLen(alpha float64, max, base int, c *laneCosts) int {
	plain := 1 / c.stepCost(base+1)
	best, bestRate := 0, plain*costGain
	for k := 1; k <= max; k++ {
		t := c.stepCost(base+1+k) + c.draftCost(k)
		if t <= 0 {
			continue
		}
		if r := expectedTokens(alpha, k) / t; r > bestRate {
			best, bestRate = k, r
		}
	}
	return best
}

// noteStepCost records a step's time in the lane's costs when every row
// of it was a decoding slot's (the last token and any drafts).
func (s *Scheduler) noteStepCost(steps []engine.Step, owners []*slot, d time.Duration) {
	if s.cfg.Drafter == nil {
		return
	}
	n := 0
	for i, st := range steps {
		if owners[i].state != stDecode {
			return
		}
		n += len(st.Tokens)
	}
	s.costs.noteStep(n, d)
}

// A FixedCostDrafter is a Drafter whose Draft call costs about the same
// whatever the number of tokens asked (a block drafter: one forward pass
// drafts the whole block). When FixedCost reports true, the cost model
// charges a step's drafting once, not per draft token, so a longer draft
// costs only its verification rows. The scheduler asks once, in New.
type FixedCostDrafter interface {
	Drafter
	// FixedCost reports whether a Draft call's cost does not grow with
	// DraftRequest.Max.
	FixedCost() bool
}

// fixedCost reports whether d's calls cost the same whatever the draft
// length: a FixedCostDrafter that says so, or a ChainDrafter one of whose
// lanes is (prompt lookup, the usual first lane, costs next to nothing).
func fixedCost(d Drafter) bool {
	if c, ok := d.(*ChainDrafter); ok {
		for _, l := range c.lanes {
			if fixedCost(l) {
				return true
			}
		}
		return false
	}
	f, ok := d.(FixedCostDrafter)
	return ok && f.FixedCost()
}
