package main

// rng is a small deterministic generator (SplitMix64). The corpus must be
// byte-identical for a seed on every Go version and platform, so it does not
// use math/rand, whose derived methods are not promised to stay the same.
type rng struct{ s uint64 }

func newRNG(seed uint64) *rng { return &rng{s: seed} }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a number in [0, n); n must be positive. The modulo bias is
// below 2^-40 for the small n used here, which is harmless for a corpus.
func (r *rng) intn(n int) int {
	return int(r.next() % uint64(n))
}

// rangeIn returns a number in [lo, hi].
func (r *rng) rangeIn(lo, hi int) int { return lo + r.intn(hi-lo+1) }

// float returns a number in [0, 1) with 53 random bits.
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// chance returns true with probability p.
func (r *rng) chance(p float64) bool { return r.float() < p }

// pick returns a random element of xs.
func pick[T any](r *rng, xs []T) T { return xs[r.intn(len(xs))] }

// fork derives an independent generator, so that one part of a document can
// draw numbers without shifting the sequence of another.
func (r *rng) fork() *rng { return newRNG(r.next()) }
