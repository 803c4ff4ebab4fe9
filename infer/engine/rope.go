package engine

import "math"

// Rope is a model's rotary position embedding schedule. Its angles are
// part of the numerics every backend shares: they are computed here, on
// the host, in one way (Angles), and a backend only applies them (doc.go,
// "RoPE").
type Rope struct {
	// Type says which elements rotate together.
	Type RopeType
	// Dim is the number of dimensions rotated per head (Dim/2 pairs).
	Dim int
	// step is base^(-2/Dim) rounded to float32, the ratio of successive
	// frequencies.
	step  float32
	scale float32
	freqs []float32
}

func newRope(c *Config) Rope {
	r := Rope{Type: c.Rope, Dim: c.RopeDim, scale: c.RopeScale, freqs: c.RopeFreqs}
	if c.RopeDim > 0 {
		r.step = float32(math.Pow(float64(c.RopeBase), -2/float64(c.RopeDim)))
	}
	return r
}

// Angles fills cs (Dim floats) with cos θ_i, sin θ_i of the Dim/2 rotated
// pairs at position pos, as ggml computes them: θ_i = scale · pos ·
// base^(-2i/Dim) / freqs[i], where the power is formed by repeated
// float32 multiplication by base^(-2/Dim), and cos and sin are computed in
// float64 and rounded to float32. Go's math.Sincos may use fused
// multiply-adds on some targets, so the tables a GPU applies are computed
// here and uploaded rather than recomputed on the device.
func (r *Rope) Angles(cs []float32, pos int) {
	theta := float32(pos)
	for i := 0; i < r.Dim/2; i++ {
		t := theta
		if r.freqs != nil {
			t /= r.freqs[i]
		}
		t *= r.scale
		s, co := math.Sincos(float64(t))
		cs[2*i], cs[2*i+1] = float32(co), float32(s)
		theta *= r.step
	}
}
