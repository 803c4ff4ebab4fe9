package main

import (
	"encoding/binary"
	"math"
	"testing"
)

// logProbs encodes rows of log-probabilities as logits.mjs writes them.
func logProbs(rows [][]float32) []byte {
	var b []byte
	for _, r := range rows {
		for _, v := range r {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

func TestRefCompare(t *testing.T) {
	ninf := float32(math.Inf(-1))
	ref := [][]float32{
		{-0.5, -1.5, -3, ninf},
		{-2, -0.7, -0.71, -9},
		{-1, -1.2, -4, -4},
	}
	same := ref
	// Position 1's top two swapped (reference margin 0.01), position 2
	// shifted by a constant, which the metric removes.
	other := [][]float32{
		{-0.5, -1.5, -3, ninf},
		{-2, -0.71, -0.7, -9},
		{-3, -3.2, -6, -6},
	}
	tests := []struct {
		name      string
		a         [][]float32
		agree     int
		errZero   bool
		disagrees int
	}{
		{"identical", same, 3, true, 0},
		{"one near tie flipped", other, 2, false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := refCompare(logProbs(tc.a), logProbs(ref), len(ref))
			if err != nil {
				t.Fatal(err)
			}
			if res.Agree != tc.agree || res.Vocab != 4 || !res.SelfCompare {
				t.Errorf("agree %d vocab %d self %v; want %d, 4, true", res.Agree, res.Vocab, res.SelfCompare, tc.agree)
			}
			if (res.RelErrMax == 0) != tc.errZero || math.IsNaN(res.RelErrMean) || math.IsInf(res.RelErrMax, 0) {
				t.Errorf("relative error mean %g max %g; want zero: %v", res.RelErrMean, res.RelErrMax, tc.errZero)
			}
			if len(res.DisagreeMgn) != tc.disagrees {
				t.Errorf("disagreeing margins %v; want %d", res.DisagreeMgn, tc.disagrees)
			} else if tc.disagrees == 1 && math.Abs(res.DisagreeMgn[0]-0.01) > 1e-6 {
				t.Errorf("disagreeing margin %g; want 0.01", res.DisagreeMgn[0])
			}
		})
	}
	if _, err := refCompare(logProbs(ref), logProbs(ref[:2]), 3); err == nil {
		t.Error("files of different lengths: no error")
	}
}
