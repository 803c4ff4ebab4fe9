package sample

import (
	"math"
	"slices"
)

// TokenLogprob is one token and its log-probability.
type TokenLogprob struct {
	ID      int32
	Logprob float64
}

// Logprobs returns the log-probability of token chosen and the top n
// tokens (highest first, ties by ascending id) under the log-softmax of the
// raw logits at temperature 1. NaN logits count as -Inf. n ≤ 0 returns no
// top list.
func Logprobs(logits []float32, chosen int32, n int) (TokenLogprob, []TokenLogprob) {
	maxL := math.Inf(-1)
	for _, l := range logits {
		if v := float64(l); v > maxL {
			maxL = v
		}
	}
	if math.IsInf(maxL, -1) {
		// Nothing is possible: report -Inf everywhere rather than NaN.
		maxL = 0
	}
	sum := 0.0
	for _, l := range logits {
		if v := float64(l); !math.IsNaN(v) {
			sum += expDet(v - maxL)
		}
	}
	lse := maxL + math.Log(sum)
	lp := func(id int32) float64 {
		if id < 0 || int(id) >= len(logits) || math.IsNaN(float64(logits[id])) {
			return math.Inf(-1)
		}
		return float64(logits[id]) - lse
	}
	got := TokenLogprob{ID: chosen, Logprob: lp(chosen)}
	if n <= 0 || len(logits) == 0 {
		return got, nil
	}
	c := make([]candidate, 0, len(logits))
	for id, l := range logits {
		v := float64(l)
		if math.IsNaN(v) {
			v = math.Inf(-1)
		}
		c = append(c, candidate{int32(id), v})
	}
	c = topK(c, n)
	top := make([]TokenLogprob, len(c))
	for i, x := range c {
		top[i] = TokenLogprob{ID: x.id, Logprob: x.logit - lse}
	}
	return got, slices.Clip(top)
}
