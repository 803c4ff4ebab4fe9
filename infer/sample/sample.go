package sample

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Params configures a Sampler. The zero value is greedy decoding with no
// penalties. Defaults mirrors llama.cpp's defaults.
type Params struct {
	// Temperature divides the logits before the draw; ≤ 0 means greedy.
	Temperature float64
	// TopK keeps the K most likely tokens; 0 keeps all.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// sums to at least TopP; 0 or 1 keeps all.
	TopP float64
	// MinP drops tokens less likely than MinP times the most likely one;
	// 0 keeps all.
	MinP float64
	// RepeatPenalty divides positive logits and multiplies non-positive
	// ones of recently seen tokens; 0 or 1 disables it.
	RepeatPenalty float64
	// PresencePenalty is subtracted once from the logit of every recently
	// seen token.
	PresencePenalty float64
	// FrequencyPenalty is subtracted once per recent occurrence.
	FrequencyPenalty float64
	// PenaltyLastN is how many of the most recently accepted tokens the
	// penalties look at; 0 disables the penalties, -1 means all.
	PenaltyLastN int
	// LogitBias is added to the logits of the given tokens before anything
	// else. math.Inf(-1) bans a token.
	LogitBias map[int32]float64
	// Seed keys the random generator used by non-greedy sampling.
	Seed uint64
}

// Defaults returns llama.cpp's default sampling parameters (temperature
// 0.8, top-k 40, top-p 0.95, min-p 0.05, penalties off over the last 64
// tokens) with the given seed.
func Defaults(seed uint64) Params {
	return Params{
		Temperature:   0.8,
		TopK:          40,
		TopP:          0.95,
		MinP:          0.05,
		RepeatPenalty: 1,
		PenaltyLastN:  64,
		Seed:          seed,
	}
}

// Validate checks p for a vocabulary of vocab tokens and returns a
// *ParamError naming the first parameter out of range.
func (p *Params) Validate(vocab int) error {
	finite := func(name string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return &ParamError{Param: name, Reason: fmt.Sprintf("is %v, want a finite number", v)}
		}
		return nil
	}
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"temperature", p.Temperature}, {"top_p", p.TopP}, {"min_p", p.MinP},
		{"repeat_penalty", p.RepeatPenalty}, {"presence_penalty", p.PresencePenalty},
		{"frequency_penalty", p.FrequencyPenalty},
	} {
		if err := finite(c.name, c.v); err != nil {
			return err
		}
	}
	switch {
	case p.Temperature < 0:
		return &ParamError{Param: "temperature", Reason: fmt.Sprintf("is %v, want ≥ 0", p.Temperature)}
	case p.TopK < 0:
		return &ParamError{Param: "top_k", Reason: fmt.Sprintf("is %d, want ≥ 0", p.TopK)}
	case p.TopP < 0 || p.TopP > 1:
		return &ParamError{Param: "top_p", Reason: fmt.Sprintf("is %v, want 0..1", p.TopP)}
	case p.MinP < 0 || p.MinP > 1:
		return &ParamError{Param: "min_p", Reason: fmt.Sprintf("is %v, want 0..1", p.MinP)}
	case p.RepeatPenalty < 0:
		return &ParamError{Param: "repeat_penalty", Reason: fmt.Sprintf("is %v, want ≥ 0 (1 or 0 disables it)", p.RepeatPenalty)}
	case p.PenaltyLastN < -1:
		return &ParamError{Param: "penalty_last_n", Reason: fmt.Sprintf("is %d, want ≥ -1", p.PenaltyLastN)}
	}
	for id, b := range p.LogitBias {
		name := fmt.Sprintf("logit_bias[%d]", id)
		if id < 0 || int(id) >= vocab {
			return &ParamError{Param: name, Reason: fmt.Sprintf("names a token outside the vocabulary of %d", vocab)}
		}
		if math.IsNaN(b) || math.IsInf(b, 1) {
			return &ParamError{Param: name, Reason: fmt.Sprintf("is %v, want a finite number or -Inf", b)}
		}
	}
	return nil
}

// candidate is one token still in the running.
type candidate struct {
	id    int32
	logit float64
}

// before orders candidates by logit, descending, ties by ascending id.
func before(a, b candidate) int {
	switch {
	case a.logit > b.logit:
		return -1
	case a.logit < b.logit:
		return 1
	}
	return int(a.id) - int(b.id)
}

// Sampler picks tokens from logits. It remembers the tokens passed to
// Accept (for the penalties) and owns a seeded random generator, so one
// Sampler serves one sequence. It is not safe for concurrent use.
type Sampler struct {
	p       Params
	vocab   int
	rng     *rand.Rand
	history []int32 // accepted tokens, oldest first (bounded by PenaltyLastN)
	counts  map[int32]int
	cand    []candidate
	probs   []float64
}

// New returns a Sampler for a vocabulary of vocab tokens, or a *ParamError.
func New(p Params, vocab int) (*Sampler, error) {
	if vocab <= 0 {
		return nil, &ParamError{Param: "vocabulary size", Reason: fmt.Sprintf("is %d, want > 0", vocab)}
	}
	if err := p.Validate(vocab); err != nil {
		return nil, err
	}
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:8], p.Seed)
	return &Sampler{
		p:      p,
		vocab:  vocab,
		rng:    rand.New(rand.NewChaCha8(key)),
		counts: make(map[int32]int),
	}, nil
}

// Params returns the sampler's parameters.
func (s *Sampler) Params() Params { return s.p }

// Accept records that tok was added to the sequence (a prompt token or a
// sampled one), for the penalties.
func (s *Sampler) Accept(tok int32) {
	if s.p.PenaltyLastN == 0 {
		return
	}
	s.history = append(s.history, tok)
	s.counts[tok]++
	if n := s.p.PenaltyLastN; n > 0 && len(s.history) > n {
		old := s.history[0]
		if s.counts[old]--; s.counts[old] == 0 {
			delete(s.counts, old)
		}
		s.history = s.history[1:] // append reallocates as the front is dropped

	}
}

// Sample returns the next token for logits (one value per vocabulary
// entry). It does not call Accept: the caller does once the token is
// actually used.
func (s *Sampler) Sample(logits []float32) (int32, error) {
	return s.SampleAllowed(logits, nil)
}

// Argmax returns plain greedy decoding's token: the id of the highest
// logit among allowed (nil: every id), ties to the lowest id, NaN
// skipped; -1 when no allowed logit is above -Inf.
func Argmax(logits []float32, allowed TokenSet) int32 {
	if allowed == nil {
		return argmaxAll(logits)
	}
	best := -1
	for id, l := range logits {
		if allowed != nil && !allowed.Has(int32(id)) {
			continue
		}
		if l == l && (best < 0 || l > logits[best]) {
			best = id
		}
	}
	if best < 0 || math.IsInf(float64(logits[best]), -1) {
		return -1
	}
	return int32(best)
}

// argmaxAll is Argmax over every id: the running maximum stays in a
// register (a NaN is never above it; starting from -Inf, a run of -Inf
// and NaN leaves -1).
func argmaxAll(logits []float32) int32 {
	best, bv := -1, float32(math.Inf(-1))
	for id, l := range logits {
		if l > bv {
			best, bv = id, l
		}
	}
	return int32(best)
}

// SampleAllowed is Sample restricted to the tokens in allowed (a
// Constraint's set): every other token's logit counts as -Inf before the
// first step of the chain, so greedy and seeded sampling stay functions of
// their inputs. A nil allowed allows every token, as Sample does. logits
// is not modified. It returns ErrNoCandidates when no allowed token has a
// finite logit after bias and penalties.
func (s *Sampler) SampleAllowed(logits []float32, allowed TokenSet) (int32, error) {
	if len(logits) != s.vocab {
		return 0, &ParamError{Param: "logits", Reason: fmt.Sprintf("has %d values, want the vocabulary size %d", len(logits), s.vocab)}
	}
	penalties := len(s.counts) > 0 && (s.p.RepeatPenalty != 1 && s.p.RepeatPenalty != 0 || s.p.PresencePenalty != 0 || s.p.FrequencyPenalty != 0)
	if s.p.Temperature <= 0 && len(s.p.LogitBias) == 0 && !penalties {
		if best := Argmax(logits, allowed); best >= 0 {
			return best, nil
		}
		return 0, ErrNoCandidates
	}
	// c[id] is token id until banned tokens are dropped below.
	c := s.cand[:0]
	for id, l := range logits {
		v := float64(l)
		if math.IsNaN(v) || allowed != nil && !allowed.Has(int32(id)) {
			v = math.Inf(-1)
		}
		c = append(c, candidate{int32(id), v})
	}
	// 1. Logit bias.
	for id, b := range s.p.LogitBias {
		c[id].logit += b
	}
	// 2. Penalties.
	if penalties {
		for id, n := range s.counts {
			if id < 0 || int(id) >= len(c) {
				continue
			}
			x := &c[id]
			if rp := s.p.RepeatPenalty; rp != 0 && rp != 1 {
				if x.logit <= 0 {
					x.logit *= rp
				} else {
					x.logit /= rp
				}
			}
			x.logit -= float64(float64(n)*s.p.FrequencyPenalty) + s.p.PresencePenalty // rounded: never fused
		}
	}
	// Drop banned tokens.
	c = slices.DeleteFunc(c, func(x candidate) bool { return math.IsInf(x.logit, -1) || math.IsNaN(x.logit) })
	s.cand = c
	if len(c) == 0 {
		return 0, ErrNoCandidates
	}
	// 3. Greedy.
	if s.p.Temperature <= 0 {
		best := c[0]
		for _, x := range c[1:] {
			if before(x, best) < 0 {
				best = x
			}
		}
		return best.id, nil
	}
	// 4. Top-k (and the sort every later step relies on).
	c = topK(c, s.p.TopK)
	// 5. Top-p over the temperature-1 distribution.
	if s.p.TopP > 0 && s.p.TopP < 1 {
		probs := s.softmax(c, 1)
		sum, keep := 0.0, len(c)
		for i, p := range probs {
			sum += p
			if sum >= s.p.TopP {
				keep = i + 1
				break
			}
		}
		c = c[:keep]
	}
	// 6. Min-p: p_i/p_max = e**(l_i - l_max).
	if s.p.MinP > 0 {
		keep := 1
		for keep < len(c) && expDet(c[keep].logit-c[0].logit) >= s.p.MinP {
			keep++
		}
		c = c[:keep]
	}
	// 7, 8. Temperature and the draw.
	probs := s.softmax(c, s.p.Temperature)
	u := s.rng.Float64()
	for i, p := range probs {
		u -= p
		if u < 0 {
			return c[i].id, nil
		}
	}
	return c[len(c)-1].id, nil // rounding left u ≥ 0 after the last one
}

// softmax returns the probabilities of c (sorted, highest first) at
// temperature t, in s.probs.
func (s *Sampler) softmax(c []candidate, t float64) []float64 {
	s.probs = slices.Grow(s.probs[:0], len(c))[:len(c)]
	p := s.probs
	maxL := c[0].logit
	sum := 0.0
	for i, x := range c {
		p[i] = expDet((x.logit - maxL) / t)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// topK sorts c (highest logit first, ties by id) and keeps the first k;
// k ≤ 0 keeps all. For small k it selects with a bounded heap in
// O(n log k) instead of sorting the whole vocabulary.
func topK(c []candidate, k int) []candidate {
	if k <= 0 || k >= len(c) {
		slices.SortFunc(c, before)
		return c
	}
	// Min-heap (by `before`, worst at the root) of the best k so far,
	// kept in c[:k].
	h := c[:k]
	less := func(i, j int) bool { return before(h[i], h[j]) > 0 } // i is worse than j
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= k {
				return
			}
			m := l
			if r := l + 1; r < k && less(r, l) {
				m = r
			}
			if !less(m, i) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, x := range c[k:] {
		if before(x, h[0]) < 0 {
			h[0] = x
			down(0)
		}
	}
	slices.SortFunc(h, before)
	return h
}
