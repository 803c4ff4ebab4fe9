package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// matmulTypes are the weight types MatMul supports.
var matmulTypes = []ggml.Type{
	ggml.TypeF32, ggml.TypeF16, ggml.TypeBF16,
	ggml.TypeQ8_0, ggml.TypeQ4_0, ggml.TypeQ4_1, ggml.TypeQ5_0, ggml.TypeQ5_1,
	ggml.TypeQ2_K, ggml.TypeQ3_K, ggml.TypeQ4_K, ggml.TypeQ5_K, ggml.TypeQ6_K,
	ggml.TypeNVFP4,
}

// f16Fields lists the byte offsets of the f16 scale fields in one block.
var f16Fields = map[ggml.Type][]int{
	ggml.TypeQ8_0: {0}, ggml.TypeQ4_0: {0}, ggml.TypeQ4_1: {0, 2}, ggml.TypeQ5_0: {0},
	ggml.TypeQ5_1: {0, 2}, ggml.TypeQ2_K: {80, 82}, ggml.TypeQ3_K: {108}, ggml.TypeQ4_K: {0, 2},
	ggml.TypeQ5_K: {0, 2}, ggml.TypeQ6_K: {208},
}

// randomWeights returns rows×cols weights of type t: random quantized
// bytes with finite scales of a realistic size (about 1/64 per unit), or
// random floats of unit size for the float types.
func randomWeights(rng *rand.Rand, t ggml.Type, rows, cols int) []byte {
	rb, err := t.RowSize(cols)
	if err != nil {
		panic(err)
	}
	data := make([]byte, rows*rb)
	switch t {
	case ggml.TypeF32:
		for i := 0; i < len(data); i += 4 {
			binary.LittleEndian.PutUint32(data[i:], math.Float32bits(float32(rng.NormFloat64())))
		}
		return data
	case ggml.TypeF16:
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], ggml.F32ToF16(float32(rng.NormFloat64())))
		}
		return data
	case ggml.TypeBF16:
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], ggml.F32ToBF16(float32(rng.NormFloat64())))
		}
		return data
	}
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	ts := t.TypeSize()
	for b := 0; b < len(data); b += ts {
		for _, off := range f16Fields[t] {
			v := float32(rng.Float64()*2-1) / 64
			binary.LittleEndian.PutUint16(data[b+off:], ggml.F32ToF16(v))
		}
		if t == ggml.TypeNVFP4 {
			// UE4M3 scales in [2^−6, 2^−2) (weights up to about 1.4),
			// and now and then any byte at all: subnormal, zero, 0x7F
			// (NaN, read as 0), up to 0xFF (read as 480).
			for s := 0; s < 4; s++ {
				if rng.IntN(16) != 0 {
					data[b+s] = byte(0x08 + rng.IntN(0x20))
				}
			}
		}
	}
	return data
}

func randomActs(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if rng.IntN(50) == 0 {
			x[i] *= 8 // an outlier now and then, as real activations have
		}
	}
	return x
}

// blockCols returns a column count of about want that t accepts: a whole
// number of blocks, or for the float types want+7, so that the columns past
// the last whole 16 are exercised.
func blockCols(t ggml.Type, want int) int {
	bs := t.BlockSize()
	if bs == 1 {
		return want + 7
	}
	return max(bs, want/bs*bs)
}

// dequantActs returns token t's activations as the kernel sees them.
func dequantActs(a *acts, t int) []float32 {
	c := a.cols
	out := make([]float32, c)
	switch a.kind {
	case actF32, actF16, actBF16:
		copy(out, a.f[t*c:(t+1)*c])
	default:
		bsz := c / a.nb
		for i := range out {
			out[i] = float32(a.q[t*c+i]) * a.d[t*a.nb+i/bsz]
		}
	}
	return out
}

// TestMatMulReference checks MatMul for every type against a float64 dot
// of ggml.Dequantize'd weights with (1) the quantized activations the
// kernel used, to float32-rounding tolerance, and (2) the original
// activations, to a bound derived from the activation quantization step.
func TestMatMulReference(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	for _, typ := range matmulTypes {
		t.Run(typ.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(typ)))
			rows, cols, n := 19, blockCols(typ, 1024), 3
			data := randomWeights(rng, typ, rows, cols)
			m, err := NewMatrix(typ, rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			x := randomActs(rng, n*cols)
			y := make([]float32, n*rows)
			pool.MatMul(y, m, x, n)

			a := new(acts)
			a.reset(kernelFor(typ).act, n, cols)
			w := make([]float32, cols)
			for tok := 0; tok < n; tok++ {
				a.quantRow(x, tok)
				xq := dequantActs(a, tok)
				for r := 0; r < rows; r++ {
					if err := ggml.Dequantize(typ, m.row(r), w); err != nil {
						t.Fatal(err)
					}
					var exact, abs, qbound float64
					for c := range w {
						exact += float64(w[c]) * float64(xq[c])
						abs += math.Abs(float64(w[c]) * float64(xq[c]))
						qbound += math.Abs(float64(w[c])) * math.Abs(float64(x[tok*cols+c]-xq[c]))
					}
					got := float64(y[tok*rows+r])
					// The kernel rounds a few float32 operations per block
					// (scales, products, the running sum): relative error
					// well under 1e-5 of the magnitude of the terms.
					tol := 1e-5*abs + 1e-30
					if d := math.Abs(got - exact); d > tol {
						t.Errorf("token %d row %d: got %g, want %g (quantized activations) ± %g", tok, r, got, exact, tol)
					}
					var orig float64
					for c := range w {
						orig += float64(w[c]) * float64(x[tok*cols+c])
					}
					// Against the true activations the difference is the
					// activation rounding, Σ|w|·|x-x̂|, plus the above.
					if d := math.Abs(got - orig); d > qbound+tol {
						t.Errorf("token %d row %d: got %g, want %g (float activations) ± %g", tok, r, got, orig, qbound+tol)
					}
				}
			}
		})
	}
}

// variants returns the ISA variants this machine can run.
func variants() []ISA {
	var v []ISA
	for i := ISAGeneric; i <= BestISA(); i++ {
		v = append(v, i)
	}
	return v
}

func bitsEqual(t *testing.T, what string, got, want []float32) {
	t.Helper()
	bad := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad < 5 {
				t.Errorf("%s: element %d: got %x (%g), want %x (%g)", what, i, math.Float32bits(got[i]), got[i], math.Float32bits(want[i]), want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d elements differ", what, bad)
	}
}

// TestMatMulInvariance checks the exactness promises bit for bit, for every
// type: every ISA variant equals the portable kernels; 1, 2 and 7 threads
// agree; a token alone (n=1) equals the same token at any position of a
// batch, and equals itself in every batch of 2 to 40 tokens; odd row
// counts and rows that are not a multiple of any tile or row group (57 =
// 3·16 + 8 + 1 runs every kind of kernel group).
func TestMatMulInvariance(t *testing.T) {
	pools := map[int]*Pool{1: NewPool(1), 2: NewPool(2), 7: NewPool(7)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	batch := 64
	if !testing.Short() {
		batch = 512
	}
	defer SetISA(SetISA(ISAGeneric))
	for _, typ := range matmulTypes {
		for _, rows := range []int{1, 7, 33, 57} {
			cols := blockCols(typ, 512)
			if typ.BlockSize() == 1 && rows == 33 {
				cols = 512 // a whole number of 16-lane steps
			}
			t.Run(fmt.Sprintf("%s/rows=%d/cols=%d", typ, rows, cols), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(2, uint64(typ)<<8|uint64(rows)))
				m, err := NewMatrix(typ, rows, cols, randomWeights(rng, typ, rows, cols))
				if err != nil {
					t.Fatal(err)
				}
				x := randomActs(rng, batch*cols)
				SetISA(ISAGeneric)
				want := make([]float32, batch*rows)
				pools[1].MatMul(want, m, x, batch)
				for _, v := range variants() {
					SetISA(v)
					for _, th := range []int{1, 2, 7} {
						got := make([]float32, batch*rows)
						pools[th].MatMul(got, m, x, batch)
						bitsEqual(t, fmt.Sprintf("%s, %d threads, batch %d", v, th, batch), got, want)
					}
					// Tokens alone and in small batches at odd offsets.
					spans := [][2]int{{0, 1}, {batch - 1, batch}, {5, 6}, {3, 10}, {17, 17 + 13}}
					// Every small batch size (decode of several streams: the
					// multi-token raw-block kernels and the switch to panels).
					for k := 2; k <= 40; k++ {
						spans = append(spans, [2]int{9, 9 + k})
					}
					for _, span := range spans {
						k := span[1] - span[0]
						got := make([]float32, k*rows)
						pools[2].MatMul(got, m, x[span[0]*cols:span[1]*cols], k)
						bitsEqual(t, fmt.Sprintf("%s, tokens [%d,%d) of the batch", v, span[0], span[1]), got, want[span[0]*rows:span[1]*rows])
					}
				}
			})
		}
	}
}

func TestNewMatrixErrors(t *testing.T) {
	tests := []struct {
		name       string
		typ        ggml.Type
		rows, cols int
		size       int
		want       error
	}{
		{"unsupported type", ggml.TypeIQ2_XXS, 1, 256, 66, ErrUnsupportedType},
		{"activation-only type", ggml.TypeQ8_K, 1, 256, 292, ErrUnsupportedType},
		{"unknown type", ggml.Type(200), 1, 32, 34, ErrUnsupportedType},
		{"zero rows", ggml.TypeQ8_0, 0, 32, 0, ErrShape},
		{"negative cols", ggml.TypeF32, 1, -4, 16, ErrShape},
		{"cols not multiple of block", ggml.TypeQ4_K, 1, 100, 144, ErrShape},
		{"NVFP4 cols not multiple of 64", ggml.TypeNVFP4, 1, 32, 36, ErrShape},
		{"short data", ggml.TypeQ8_0, 2, 32, 67, ErrShape},
		{"long data", ggml.TypeQ8_0, 2, 32, 69, ErrShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewMatrix(tc.typ, tc.rows, tc.cols, make([]byte, tc.size))
			if !errorsIs(err, tc.want) {
				t.Fatalf("got error %v, want %v", err, tc.want)
			}
		})
	}
}

// TestMatMulChecksMatrix checks that MatMul refuses, by panicking with a
// *MatrixError, a hand-built Matrix whose data or RowBytes is inconsistent
// (the assembly must never read past Data), and accepts one with RowBytes 0.
func TestMatMulChecksMatrix(t *testing.T) {
	p := NewPool(1)
	defer p.Close()
	good := make([]byte, 4*34)
	x := make([]float32, 64)
	y := make([]float32, 4)
	for _, tc := range []struct {
		name    string
		m       Matrix
		wantErr bool
	}{
		{"RowBytes 0", Matrix{Type: ggml.TypeQ8_0, Rows: 2, Cols: 64, Data: good}, false},
		{"short data", Matrix{Type: ggml.TypeQ8_0, Rows: 2, Cols: 64, Data: good[:100]}, true},
		{"wrong RowBytes", Matrix{Type: ggml.TypeQ8_0, Rows: 2, Cols: 64, Data: good, RowBytes: 34}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				_, isMatrixErr := r.(*MatrixError)
				if tc.wantErr != isMatrixErr {
					t.Fatalf("got panic %v, want a *MatrixError: %v", r, tc.wantErr)
				}
			}()
			m := tc.m
			p.MatMul(y, &m, x, 1)
			if m.RowBytes != tc.m.RowBytes {
				t.Errorf("MatMul wrote RowBytes %d", m.RowBytes)
			}
		})
	}
}

// TestMaxRawBatch checks which batch sizes read weights in place, per
// variant: with AVX-512, Q8_0 and NVFP4 at every size (multi-token raw
// kernels), Q5_0, Q4_K and Q6_K up to 128 tokens (multi-token raw
// kernels; 4 with them off), the other raw-block types up to 4 tokens,
// and no limit where
// no batch size adds a panel unpack (floats, Q2_K/Q3_K, every type
// without AVX-512).
func TestMaxRawBatch(t *testing.T) {
	defer SetISA(SetISA(BestISA()))
	for _, v := range variants() {
		SetISA(v)
		for _, tc := range []struct {
			typ  ggml.Type
			want int // with AVX-512
		}{
			{ggml.TypeQ8_0, math.MaxInt},
			{ggml.TypeQ4_0, 4},
			{ggml.TypeQ5_0, 128},
			{ggml.TypeQ4_K, 128},
			{ggml.TypeQ6_K, 128},
			{ggml.TypeQ5_K, 4},
			{ggml.TypeQ3_K, math.MaxInt},
			{ggml.TypeF16, math.MaxInt},
			{ggml.TypeNVFP4, math.MaxInt},
		} {
			want := tc.want
			if v < ISAAVX512 {
				want = math.MaxInt
			}
			if got := MaxRawBatch(tc.typ); got != want {
				t.Errorf("%s, %s: MaxRawBatch = %d, want %d", v, tc.typ, got, want)
			}
			func() {
				defer SetMultiToken(SetMultiToken(false))
				if (tc.typ == ggml.TypeQ8_0 || want == 128) && v == ISAAVX512 {
					want = 4
				}
				if got := MaxRawBatch(tc.typ); got != want {
					t.Errorf("%s, %s, multi-token kernels off: MaxRawBatch = %d, want %d", v, tc.typ, got, want)
				}
			}()
		}
	}
}
