package sample

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestTokenSet(t *testing.T) {
	s := NewTokenSet(130)
	if len(s) != 3 {
		t.Fatalf("NewTokenSet(130) has %d words, want 3", len(s))
	}
	for _, id := range []int32{0, 63, 64, 129} {
		s.Add(id)
	}
	s.Add(-1)
	s.Add(192) // beyond the range: ignored
	for _, c := range []struct {
		id   int32
		want bool
	}{{0, true}, {1, false}, {63, true}, {64, true}, {129, true}, {128, false}, {-1, false}, {192, false}, {1 << 30, false}} {
		if got := s.Has(c.id); got != c.want {
			t.Errorf("Has(%d) = %v, want %v", c.id, got, c.want)
		}
	}
	if got := s.Len(); got != 4 {
		t.Errorf("Len = %d, want 4", got)
	}
	s.Clear()
	if got := s.Len(); got != 0 {
		t.Errorf("Len after Clear = %d, want 0", got)
	}
}

func TestSampleAllowed(t *testing.T) {
	logits := randomLogits(3, 300)
	allowed := NewTokenSet(len(logits))
	for id := int32(0); id < 300; id += 7 {
		allowed.Add(id)
	}
	// The best allowed token by hand.
	best := int32(-1)
	for id, l := range logits {
		if allowed.Has(int32(id)) && (best < 0 || l > logits[best]) {
			best = int32(id)
		}
	}
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"greedy fast path", Params{}},
		{"greedy with bias", Params{LogitBias: map[int32]float64{1: 0.5}}},
		{"greedy with penalties", Params{RepeatPenalty: 1.3, PenaltyLastN: 8}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, c.p, len(logits))
			s.Accept(2)
			got, err := s.SampleAllowed(logits, allowed)
			if err != nil {
				t.Fatal(err)
			}
			if got != best {
				t.Errorf("got token %d, want %d (the best allowed)", got, best)
			}
		})
	}
	t.Run("seeded draws stay inside the set and repeat", func(t *testing.T) {
		run := func() []int32 {
			s := mustNew(t, Params{Temperature: 1.5, Seed: 9}, len(logits))
			out := make([]int32, 300)
			for i := range out {
				tok, err := s.SampleAllowed(logits, allowed)
				if err != nil {
					t.Fatal(err)
				}
				if !allowed.Has(tok) {
					t.Fatalf("draw %d: token %d is not allowed", i, tok)
				}
				out[i] = tok
			}
			return out
		}
		a, b := run(), run()
		if !slices.Equal(a, b) {
			t.Errorf("same seed and set gave different draws")
		}
	})
	t.Run("nil set equals Sample", func(t *testing.T) {
		p := Params{Temperature: 0.9, TopK: 40, TopP: 0.9, Seed: 5}
		a, b := mustNew(t, p, len(logits)), mustNew(t, p, len(logits))
		for i := range 100 {
			x, err1 := a.Sample(logits)
			y, err2 := b.SampleAllowed(logits, nil)
			if err1 != nil || err2 != nil || x != y {
				t.Fatalf("draw %d: Sample gave %d (%v), SampleAllowed(nil) %d (%v)", i, x, err1, y, err2)
			}
		}
	})
	t.Run("logits untouched", func(t *testing.T) {
		before := slices.Clone(logits)
		s := mustNew(t, Params{Temperature: 1, Seed: 1}, len(logits))
		if _, err := s.SampleAllowed(logits, allowed); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(before, logits) {
			t.Errorf("SampleAllowed modified the logits")
		}
	})
	t.Run("empty set", func(t *testing.T) {
		for _, p := range []Params{{}, {Temperature: 1}} {
			s := mustNew(t, p, len(logits))
			if _, err := s.SampleAllowed(logits, NewTokenSet(len(logits))); !errors.Is(err, ErrNoCandidates) {
				t.Errorf("temperature %v: got %v, want ErrNoCandidates", p.Temperature, err)
			}
		}
	})
}

func TestArgmax(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	only := func(ids ...int32) TokenSet {
		s := NewTokenSet(4)
		for _, id := range ids {
			s.Add(id)
		}
		return s
	}
	for _, c := range []struct {
		name    string
		logits  []float32
		allowed TokenSet
		want    int32
	}{
		{"highest", []float32{0.1, 3, -2, 2.9}, nil, 1},
		{"tie goes to lowest id", []float32{1, 5, 5, 5}, nil, 1},
		{"NaN skipped", []float32{nan, 1, 2, nan}, nil, 2},
		{"+Inf wins", []float32{1, inf, 2, 3}, nil, 1},
		{"all -Inf", []float32{-inf, -inf, -inf, -inf}, nil, -1},
		{"all NaN", []float32{nan, nan, nan, nan}, nil, -1},
		{"allowed only", []float32{0.1, 3, -2, 2.9}, only(0, 2), 0},
		{"nothing allowed", []float32{0.1, 3, -2, 2.9}, only(), -1},
		{"allowed is -Inf", []float32{0.1, 3, -inf, 2.9}, only(2), -1},
		{"NaN and -Inf before a finite", []float32{nan, -inf, -5, nan}, nil, 2},
		{"NaN and -Inf before a finite, all allowed", []float32{nan, -inf, -5, nan}, only(0, 1, 2, 3), 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Argmax(c.logits, c.allowed); got != c.want {
				t.Errorf("Argmax = %d, want %d", got, c.want)
			}
		})
	}
}

// TestArgmaxPaths: with no set (the register loop) and with every id
// allowed (the filtered loop) Argmax picks the same id, over logits drawn
// from a few values (ties), NaN and both infinities.
func TestArgmaxPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	vals := []float32{float32(math.NaN()), float32(math.Inf(-1)), float32(math.Inf(1)), -1, 0, 0.5, 2}
	for n := 1; n <= 40; n++ {
		all := NewTokenSet(n)
		for id := range n {
			all.Add(int32(id))
		}
		for range 50 {
			l := make([]float32, n)
			for i := range l {
				l[i] = vals[rng.IntN(len(vals))]
			}
			if a, b := Argmax(l, nil), Argmax(l, all); a != b {
				t.Fatalf("logits %v: Argmax with no set %d, with every id allowed %d", l, a, b)
			}
		}
	}
}
