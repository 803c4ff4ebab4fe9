package kernels

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// TestMatMulNVFP4MatchesGGML compares MatMul of NVFP4 weights, on every
// ISA variant, bit for bit with ggml's own ggml_vec_dot_nvfp4_q8_0
// (generic C, no floating-point contraction) on activations quantized by
// quantize_row_q8_0_ref. testdata/ref/dot.NVFP4.* holds 32 rows of 512
// columns of random codes (rows 0-15 with scales of 2^−5 to 2^1 and a few
// subnormal, 0x7F and 0xFE bytes; rows 16-31 with every scale byte 0..255
// twice), 9 tokens of N(0,1) activations with outliers (a group of 8 and
// one more for the 16-row SIMD kernels), and the 288 results. The
// canonical order (doc.go) is ggml's loop order, so the bits agree.
func TestMatMulNVFP4MatchesGGML(t *testing.T) {
	const rows, cols, n = 32, 512, 9
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "ref", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	floats := func(b []byte) []float32 {
		out := make([]float32, len(b)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out
	}
	w, x, want := read("dot.NVFP4.w"), floats(read("dot.NVFP4.x.f32")), floats(read("dot.NVFP4.y.f32"))
	m, err := NewMatrix(ggml.TypeNVFP4, rows, cols, w)
	if err != nil {
		t.Fatal(err)
	}
	if len(x) != n*cols || len(want) != n*rows {
		t.Fatalf("reference sizes: %d activations, %d results", len(x), len(want))
	}
	p := NewPool(2)
	defer p.Close()
	defer SetISA(SetISA(BestISA()))
	for _, v := range variants() {
		SetISA(v)
		got := make([]float32, n*rows)
		p.MatMul(got, m, x, n)
		bitsEqual(t, v.String(), got, want)
	}
}
