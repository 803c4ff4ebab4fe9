package cukernels

// The kernel suite: every kernel against its Go definition, bit for bit,
// run on a device: a GPU (gpu_test.go) or the host emulator of the CUDA
// execution model (emu_test.go), which runs the kernels' own code on the
// CPU at small shapes. A mismatch reports the first index that differs,
// both values in hex and the shape.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/engine/cuda/internal/cu"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/kernels"
)

// device runs sessions of allocations, copies and launches.
type device interface {
	// run runs f, then fails the test if any of its calls failed. The
	// slices that f's down calls return hold their data once run returns.
	run(t testing.TB, f func(s *session))
	// String names the device in messages.
	String() string
}

// sessionOps are what a device does for a session.
type sessionOps interface {
	alloc(n int) (DevPtr, error) // n bytes, filled with 0xFF (a NaN as float32), so that unwritten outputs show
	up(p DevPtr, b []byte) error
	down(p DevPtr, b []byte) error // fills b with the n bytes at p, now or when the session ends
	launch(l Launch) error
}

// session is one run: the device's operations and the first error (later
// calls do nothing). c is set on a GPU (the benchmarks time with events).
type session struct {
	ops sessionOps
	c   *cu.Ctx
	err error
}

func (s *session) alloc(n int) DevPtr {
	if s.err != nil {
		return 0
	}
	p, err := s.ops.alloc(max(n, 1))
	s.err = err
	return p
}

// up copies b to new device memory.
func (s *session) up(b []byte) DevPtr {
	p := s.alloc(len(b))
	if s.err == nil && len(b) > 0 {
		s.err = s.ops.up(p, b)
	}
	return p
}

// down returns the n bytes at p.
func (s *session) down(p DevPtr, n int) []byte {
	b := make([]byte, n)
	if s.err == nil && n > 0 {
		s.err = s.ops.down(p, b)
	}
	return b
}

// launch launches l, a builder's result.
func (s *session) launch(l Launch, err error) {
	if s.err != nil {
		return
	}
	if err != nil {
		s.err = err
		return
	}
	if err := s.ops.launch(l); err != nil {
		s.err = fmt.Errorf("%s grid %v block %v shared %d: %w", l.Kernel, l.Grid, l.Block, l.Shared, err)
	}
}

// ---------------------------------------------------------------------------
// Comparisons and data.

// sameBits reports the first element of got that differs from want in its
// bits (and how many do), naming what and the shape.
func sameBits(t testing.TB, what string, got, want []float32) bool {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return false
	}
	first, n := -1, 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if n > 0 {
		t.Errorf("%s: %d of %d values differ; first at index %d: got %#08x (%g), want %#08x (%g)",
			what, n, len(want), first, math.Float32bits(got[first]), got[first], math.Float32bits(want[first]), want[first])
		return false
	}
	return true
}

// sameOrNaN is sameBits where a NaN matches any NaN: the GPU's float
// operations return one canonical NaN where the CPU's propagate an
// operand's payload. It also fails when every wanted value is a NaN or
// none is, so that a batch meant to hold NaN rows does.
func sameOrNaN(t testing.TB, what string, got, want []float32) bool {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return false
	}
	first, n, nans := -1, 0, 0
	for i := range want {
		gn, wn := got[i] != got[i], want[i] != want[i]
		if wn {
			nans++
		}
		if gn != wn || !wn && math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if nans == 0 || nans == len(want) {
		t.Errorf("%s: %d of %d wanted values are NaN, want some but not all", what, nans, len(want))
		return false
	}
	if n > 0 {
		t.Errorf("%s: %d of %d values differ (NaN matching any NaN); first at index %d: got %#08x (%g), want %#08x (%g)",
			what, n, len(want), first, math.Float32bits(got[first]), got[first], math.Float32bits(want[first]), want[first])
		return false
	}
	return true
}

// sameBytes is sameBits for raw bytes.
func sameBytes(t testing.TB, what string, got, want []byte) bool {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d bytes, want %d", what, len(got), len(want))
		return false
	}
	first, n := -1, 0
	for i := range want {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if n > 0 {
		t.Errorf("%s: %d of %d bytes differ; first at byte %d: got %#02x, want %#02x", what, n, len(want), first, got[first], want[first])
		return false
	}
	return true
}

// isNaN32 reports whether the little-endian float32 at b is a NaN.
func isNaN32(b []byte) bool {
	return binary.LittleEndian.Uint32(b)&0x7fffffff > 0x7f800000
}

func u16Bytes(v []uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

func i32s(v []int) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(x)))
	}
	return b
}

func u64Bytes(v []uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

// parallel runs f(lo, hi) over [0, n) in NumCPU pieces.
func parallel(n int, f func(lo, hi int)) {
	p := runtime.NumCPU()
	var wg sync.WaitGroup
	for k := range p {
		lo, hi := n*k/p, n*(k+1)/p
		wg.Add(1)
		go func() { defer wg.Done(); f(lo, hi) }()
	}
	wg.Wait()
}

// sweepCheck runs ok over [0, n) in parallel and returns the first index
// where it is false, or -1.
// checkF32Bits runs muser_test_f32_bits on the count floats whose bits are
// base+i and compares each conversion with its Go definition.
func checkF32Bits(t *testing.T, d device, base uint32, count int) {
	t.Helper()
	payloadNaN := runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"
	var f16, bf16, ra, ni, r16, ru []byte
	d.run(t, func(s *session) {
		a, b, c, e, f, g := s.alloc(2*count), s.alloc(2*count), s.alloc(count), s.alloc(4*count), s.alloc(4*count), s.alloc(4*count)
		s.launch(SelfTestF32Bits(base, count, a, b, c, e, f, g))
		f16, bf16, ra, ni = s.down(a, 2*count), s.down(b, 2*count), s.down(c, count), s.down(e, 4*count)
		r16, ru = s.down(f, 4*count), s.down(g, 4*count)
	})
	round := func(v float32) uint32 { return math.Float32bits(ggml.F16ToF32(ggml.F32ToF16(v))) }
	bad := sweepCheck(count, func(i int) bool {
		v := math.Float32frombits(base + uint32(i))
		return binary.LittleEndian.Uint16(f16[2*i:]) == ggml.F32ToF16(v) &&
			binary.LittleEndian.Uint16(bf16[2*i:]) == ggml.F32ToBF16(v) &&
			int8(ra[i]) == refRoundAway(v) &&
			(v != v && !payloadNaN || int32(binary.LittleEndian.Uint32(ni[4*i:])) == refNearestInt(v)) &&
			binary.LittleEndian.Uint32(r16[4*i:]) == round(v) &&
			(binary.LittleEndian.Uint32(ru[4*i:]) == round(v) || v != v && isNaN32(ru[4*i:]))
	})
	if bad >= 0 {
		v := math.Float32frombits(base + uint32(bad))
		t.Fatalf("bits %#08x (%g) on %v: f32_to_f16 %#04x want %#04x; f32_to_bf16 %#04x want %#04x; round_away %d want %d; nearest_int %d want %d; round_f16_again %#08x, round_f16_arith %#08x, want %#08x",
			math.Float32bits(v), v, d, binary.LittleEndian.Uint16(f16[2*bad:]), ggml.F32ToF16(v),
			binary.LittleEndian.Uint16(bf16[2*bad:]), ggml.F32ToBF16(v), int8(ra[bad]), refRoundAway(v),
			int32(binary.LittleEndian.Uint32(ni[4*bad:])), refNearestInt(v),
			binary.LittleEndian.Uint32(r16[4*bad:]), binary.LittleEndian.Uint32(ru[4*bad:]), round(v))
	}
}

func sweepCheck(n int, ok func(i int) bool) int {
	var mu sync.Mutex
	first := -1
	parallel(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if !ok(i) {
				mu.Lock()
				if first < 0 || i < first {
					first = i
				}
				mu.Unlock()
				return
			}
		}
	})
	return first
}

// wideFloat returns values over the whole range SiLU and RMSNorm see, edges
// included.
func wideFloat(rng *rand.Rand) float32 {
	switch rng.IntN(16) {
	case 0:
		return float32(rng.IntN(241) - 120) // exp overflow, underflow
	case 1:
		return float32(rng.NormFloat64()) * 0x1p-130 // subnormal
	case 2:
		return float32(math.Copysign(0, -1))
	case 3:
		return float32(rng.NormFloat64()) * 1e4
	}
	return float32(rng.NormFloat64()) * 4
}

func wideFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = wideFloat(rng)
	}
	return v
}

// ---------------------------------------------------------------------------
// Activation quantizers.

type quantShape struct{ n, cols int }

func runQuantize(t *testing.T, d device, shapes []quantShape) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, act := range []Act{ActQ8_0, ActQ8_1, ActQ8_K, ActF16, ActBF16} {
		for _, sh := range shapes {
			if act == ActQ8_K && sh.cols%256 != 0 {
				continue
			}
			name := fmt.Sprintf("%s/%d×%d", act.String(), sh.n, sh.cols)
			t.Run(name, func(t *testing.T) {
				x := randomActs(rng, sh.n, sh.cols)
				checkQuantize(t, d, act, x, sh.n, sh.cols, name)
			})
		}
	}
	// Infinities and NaNs: the quantizers reproduce the CPU's integers and
	// NaN bits as amd64 computes them (common.cuh, nearest_int and
	// cpu_f32mul).
	if runtime.GOARCH != "amd64" {
		return
	}
	for _, act := range []Act{ActQ8_1, ActQ8_K} {
		t.Run(act.String()+"/nan-inf", func(t *testing.T) {
			const n, cols = 6, 512
			x := randomActs(rng, n, cols)
			inf, nan := float32(math.Inf(1)), math.Float32frombits(0x7fc01234)
			x[3], x[40] = nan, -inf                        // row 0: a NaN mid-block, an infinity
			x[cols+31] = nan                               // row 1: a NaN last in its block
			x[2*cols+5] = math.Float32frombits(0xffa00001) // row 2: a signalling NaN
			x[3*cols+300] = inf                            // row 3: +Inf in the second Q8_K block
			checkQuantize(t, d, act, x, n, cols, act.String()+" with NaN and Inf")
		})
	}
}

func checkQuantize(t *testing.T, d device, act Act, x []float32, n, cols int, what string) {
	t.Helper()
	want := refQuantize(act, x, n, cols)
	xs, qs, ds, es := ActSizes(act, n, cols)
	var gx, gq, gd, ge, gsum []byte
	d.run(t, func(s *session) {
		dx := s.up(f32Bytes(x))
		b := ActBufs{X: s.alloc(int(xs)), Q: s.alloc(int(qs)), D: s.alloc(int(ds)), Ext: s.alloc(int(es))}
		l, _, err := QuantizeActs(act, dx, b, n, cols)
		var sums DevPtr
		if err == nil && (act == ActQ8_0 || act == ActQ8_1) {
			sums = s.alloc(4 * n * cols / 32) // the kernel's optional block sums
			l.Args[5] = uint64(sums)
		}
		s.launch(l, err)
		gx, gq, gd, ge = s.down(b.X, int(xs)), s.down(b.Q, int(qs)), s.down(b.D, int(ds)), s.down(b.Ext, int(es))
		if sums != 0 {
			gsum = s.down(sums, 4*n*cols/32)
		}
	})
	shape := fmt.Sprintf("%s, %d rows × %d on %v", what, n, cols, d)
	switch act {
	case ActF16, ActBF16:
		sameBits(t, "rounded activations, "+shape, bytesF32(gx), want.x)
	default:
		sameBytes(t, "q, "+shape, gq, i8Bytes(want.q))
		sameBits(t, "d, "+shape, bytesF32(gd), want.d)
		if act != ActQ8_0 {
			sameBytes(t, "ext (Q8_1 s or Q8_K bsums), "+shape, ge, want.ext)
		}
		if gsum != nil {
			nb := n * cols / 32
			sums := make([]int32, nb)
			for i := range nb {
				for j := range 32 {
					sums[i] += int32(want.q[32*i+j])
				}
			}
			sameBytes(t, "block sums, "+shape, gsum, i32Bytes(sums))
		}
	}
}

// ---------------------------------------------------------------------------
// Matrix products.

type mmCase struct {
	rows, cols int
	ns         []int
	q8Only     bool // run for Q8_0 only (the largest shapes: the CPU reference's time)
}

var allMatMulTypes = []ggml.Type{
	ggml.TypeQ8_0, ggml.TypeF16, ggml.TypeQ4_K, ggml.TypeQ6_K, ggml.TypeQ5_0, ggml.TypeNVFP4, ggml.TypeF32,
	ggml.TypeBF16, ggml.TypeQ4_0, ggml.TypeQ4_1, ggml.TypeQ5_1, ggml.TypeQ5_K, ggml.TypeQ2_K, ggml.TypeQ3_K,
}

// family names the case list a type takes: "legacy", "k", "nvfp4" or "float".
func family(t ggml.Type) string {
	switch {
	case t == ggml.TypeNVFP4:
		return "nvfp4"
	case t.BlockSize() == 256:
		return "k"
	case t.BlockSize() == 1:
		return "float"
	}
	return "legacy"
}

// runMatMul checks the decode and the tiled kernel of each type at every
// shape of its family in cases.
func runMatMul(t *testing.T, d device, types []ggml.Type, cases map[string][]mmCase) {
	rng := rand.New(rand.NewPCG(21, 22))
	pool := kernels.NewPool(runtime.NumCPU())
	defer pool.Close()
	for _, typ := range types {
		for _, c := range cases[family(typ)] {
			if c.q8Only && typ != ggml.TypeQ8_0 {
				continue
			}
			w := randomWeights(rng, typ, c.rows, c.cols)
			for _, n := range c.ns {
				t.Run(fmt.Sprintf("%s/%dx%d/n=%d", typ, c.rows, c.cols, n), func(t *testing.T) {
					checkMatMul(t, d, pool, rng, typ, w, c.rows, c.cols, n)
				})
			}
		}
	}
}

func checkMatMul(t *testing.T, d device, pool *kernels.Pool, rng *rand.Rand, typ ggml.Type, w []byte, rows, cols, n int) {
	x := randomActs(rng, n, cols)
	act, err := ActOf(typ)
	if err != nil {
		t.Fatal(err)
	}
	qa := refQuantize(act, x, n, cols)
	want := refMatMul(t, pool, typ, w, rows, cols, x, qa, n)
	// The decode kernel's epilogue (integer types): y = res + (acc + bias),
	// res being y itself.
	epi := MatMul{Type: typ, N: n}.Epilogue()
	bias, res := randomActs(rng, 1, rows), randomActs(rng, n, rows)
	var dec, til, fused []byte
	d.run(t, func(s *session) {
		dw, dx := s.up(w), s.up(f32Bytes(x))
		xs, qs, ds, es := ActSizes(act, n, cols)
		b := ActBufs{X: dx, Q: s.alloc(int(qs)), D: s.alloc(int(ds)), Ext: s.alloc(int(es))}
		if xs > 0 {
			b.X = s.alloc(int(xs))
		}
		if l, ok, err := QuantizeActs(act, dx, b, n, cols); ok || err != nil {
			s.launch(l, err)
		}
		y1, y2 := s.alloc(4*n*rows), s.alloc(4*n*rows)
		m := MatMul{Type: typ, W: dw, Rows: rows, Cols: cols, Acts: b, N: n}
		m.Y = y1
		s.launch(m.Decode())
		m.Y = y2
		s.launch(m.Tiled())
		dec, til = s.down(y1, 4*n*rows), s.down(y2, 4*n*rows)
		if epi {
			y3 := s.up(f32Bytes(res))
			m.Y, m.Bias, m.Res = y3, s.up(f32Bytes(bias)), y3
			s.launch(m.Decode())
			fused = s.down(y3, 4*n*rows)
		}
	})
	shape := fmt.Sprintf("%s %d rows × %d cols × %d tokens on %v (index = token·rows + row)", typ, rows, cols, n, d)
	sameBits(t, "decode kernel, "+shape, bytesF32(dec), want)
	sameBits(t, "tiled kernel, "+shape, bytesF32(til), want)
	if epi {
		wf := slices.Clone(want)
		for tok := range n {
			row := wf[tok*rows : (tok+1)*rows]
			kernels.Add(row, row, bias)
			kernels.Add(row, res[tok*rows:(tok+1)*rows], row)
		}
		sameBits(t, "decode kernel with bias and residual epilogue, "+shape, bytesF32(fused), wf)
	}
}

// ---------------------------------------------------------------------------
// Embeddings.

func runEmbed(t *testing.T, d device, types []ggml.Type) {
	rng := rand.New(rand.NewPCG(31, 32))
	const rows = 100
	tokens := []int{0, rows - 1, 5, 5, 50, rows, -1, 17}
	for _, typ := range types {
		cols := 896
		if typ.BlockSize() == 256 {
			cols = 1024
		}
		t.Run(typ.String(), func(t *testing.T) {
			w := randomWeights(rng, typ, rows, cols)
			rb, _ := typ.RowSize(cols)
			var got []byte
			d.run(t, func(s *session) {
				dw, dt, x := s.up(w), s.up(i32s(tokens)), s.alloc(4*len(tokens)*cols)
				s.launch(Embed(typ, dw, rows, cols, dt, len(tokens), x))
				got = s.down(x, 4*len(tokens)*cols)
			})
			for i, tok := range tokens {
				row := bytesF32(got[4*i*cols : 4*(i+1)*cols])
				what := fmt.Sprintf("%s embedding of token %d (output row %d; matrix %d × %d) on %v", typ, tok, i, rows, cols, d)
				if tok < 0 || tok >= rows {
					sameBytes(t, what+", out of range: left unwritten", got[4*i*cols:4*(i+1)*cols], slices.Repeat([]byte{0xff}, 4*cols))
					continue
				}
				want := make([]float32, cols)
				if err := ggml.Dequantize(typ, w[tok*rb:(tok+1)*rb], want); err != nil {
					t.Fatal(err)
				}
				sameBits(t, what, row, want)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Per-token operations.

// chainDecidesRow returns a row of cols floats (an odd power of two from
// 32) and an eps for which kernels.RMSNorm's scale depends on its order of
// summation: the row is 1 and cols-1 values whose squares (2^-54) are each
// below half an ulp of 1, so the sequential float64 chain keeps 1, and
// float32(1/cols + eps) is a tie that rounds down; any order that first
// adds two or more of the small squares together ends above the tie,
// rounds up, and (cols not a power of four) gives another scale. A kernel
// that took a parallel sum without checking it against the chain gets
// these rows wrong.
func chainDecidesRow(t *testing.T, cols int) ([]float32, float32) {
	t.Helper()
	x := make([]float32, cols)
	x[0] = 1
	for i := 1; i < cols; i++ {
		x[i] = 0x1p-27
	}
	eps := float32(1/float64(cols)) * 0x1p-24
	scale := func(sum float64) float32 {
		return 1 / float32(math.Sqrt(float64(float32(sum/float64(cols)+float64(eps)))))
	}
	var chain, small float64
	for _, v := range x {
		chain += float64(v * v)
	}
	for _, v := range x[1:] {
		small += float64(v * v)
	}
	if a, b := scale(chain), scale(1+small); a == b {
		t.Fatalf("the chain and a sum of the small squares first both give the scale %g: the row does not test the order", a)
	}
	return x, eps
}

// rowOpSizes are the shapes runRowOps takes.
type rowOpSizes struct {
	n       int   // rows
	cols    []int // RMSNorm widths
	heads   [][2]int
	ffn     int // Add, AddBias, SiLUMul width
	ropeDim [][3]int
}

var gpuRowOpSizes = rowOpSizes{
	n:       77,
	cols:    []int{896, 1024, 2048, 2500, 8192},
	heads:   [][2]int{{16, 128}, {8, 128}, {14, 64}, {4, 300}},
	ffn:     4864,
	ropeDim: [][3]int{{14, 64, 64}, {32, 64, 64}, {16, 128, 128}, {8, 128, 64}},
}

func runRowOps(t *testing.T, d device, sz rowOpSizes) {
	rng := rand.New(rand.NewPCG(41, 42))
	const eps = 1e-6
	n := sz.n
	for _, cols := range sz.cols {
		t.Run(fmt.Sprintf("rmsnorm/%d", cols), func(t *testing.T) {
			x, w := wideFloats(rng, n*cols), wideFloats(rng, cols)
			rowidx := []int{n - 1, 0, n / 2, n / 2}
			var got, gathered, inplace []byte
			d.run(t, func(s *session) {
				dx, dw, dr := s.up(f32Bytes(x)), s.up(f32Bytes(w)), s.up(i32s(rowidx))
				y, yg := s.alloc(4*n*cols), s.alloc(4*len(rowidx)*cols)
				s.launch(RMSNorm(dx, 0, y, dw, n, cols, eps))
				s.launch(RMSNorm(dx, dr, yg, dw, len(rowidx), cols, eps))
				got, gathered = s.down(y, 4*n*cols), s.down(yg, 4*len(rowidx)*cols)
				s.launch(RMSNorm(dx, 0, dx, dw, n, cols, eps))
				inplace = s.down(dx, 4*n*cols)
			})
			want := make([]float32, n*cols)
			for i := range n {
				kernels.RMSNorm(want[i*cols:(i+1)*cols], x[i*cols:(i+1)*cols], w, eps)
			}
			shape := fmt.Sprintf("%d rows × %d on %v", n, cols, d)
			sameBits(t, "RMSNorm, "+shape, bytesF32(got), want)
			sameBits(t, "RMSNorm in place, "+shape, bytesF32(inplace), want)
			var wg []float32
			for _, r := range rowidx {
				wg = append(wg, want[r*cols:(r+1)*cols]...)
			}
			sameBits(t, fmt.Sprintf("RMSNorm of gathered rows %v, %s", rowidx, shape), bytesF32(gathered), wg)
		})
	}
	// 32 and 128 columns: the norms' four registers a thread; 2048: 16;
	// 8192: the loops of the widest rows.
	for _, cols := range []int{32, 128, 2048, 8192} {
		t.Run(fmt.Sprintf("rmsnorm/chain_decides/%d", cols), func(t *testing.T) {
			x, eps := chainDecidesRow(t, cols)
			rows := slices.Concat(x, wideFloats(rng, cols), x)
			w := wideFloats(rng, cols)
			// AddRMSNorm of the same rows as a residual plus zero
			// outputs: x + 0 is x, so the chain decides there too, after
			// the kernel has written the sum it then reads back.
			zeros := make([]float32, len(rows))
			var got, added, sums, heads []byte
			d.run(t, func(s *session) {
				dx, dw, y := s.up(f32Bytes(rows)), s.up(f32Bytes(w)), s.alloc(4*len(rows))
				s.launch(RMSNorm(dx, 0, y, dw, 3, cols, eps))
				got = s.down(y, 4*len(rows))
				ax, ao := s.up(f32Bytes(rows)), s.up(f32Bytes(zeros))
				s.launch(AddRMSNorm(ax, ao, 0, dw, ao, 3, cols, eps))
				added, sums = s.down(ao, 4*len(rows)), s.down(ax, 4*len(rows))
				s.launch(RMSNormHeads(dx, 3, 1, cols, cols, dw, eps))
				heads = s.down(dx, 4*len(rows))
			})
			want := make([]float32, len(rows))
			for i := range 3 {
				kernels.RMSNorm(want[i*cols:(i+1)*cols], rows[i*cols:(i+1)*cols], w, eps)
			}
			wsum := slices.Clone(rows)
			kernels.Add(wsum, wsum, zeros) // −0 + 0 is +0
			wadd := make([]float32, len(rows))
			for i := range 3 {
				kernels.RMSNorm(wadd[i*cols:(i+1)*cols], wsum[i*cols:(i+1)*cols], w, eps)
			}
			what := fmt.Sprintf("a row whose sequential sum alone decides the scale, %d columns, on %v", cols, d)
			sameBits(t, "RMSNorm, "+what, bytesF32(got), want)
			sameBits(t, "AddRMSNorm residual, "+what, bytesF32(sums), wsum)
			sameBits(t, "AddRMSNorm, "+what, bytesF32(added), wadd)
			sameBits(t, "per-head RMSNorm, "+what, bytesF32(heads), want)
		})
	}
	for _, bias := range []bool{false, true} {
		cols := sz.cols[0]
		t.Run(fmt.Sprintf("add_rmsnorm/bias=%v", bias), func(t *testing.T) {
			x, o, b, w := wideFloats(rng, n*cols), wideFloats(rng, n*cols), wideFloats(rng, cols), wideFloats(rng, cols)
			var gx, gd []byte
			d.run(t, func(s *session) {
				dx, do, dw := s.up(f32Bytes(x)), s.up(f32Bytes(o)), s.up(f32Bytes(w))
				var db DevPtr
				if bias {
					db = s.up(f32Bytes(b))
				}
				s.launch(AddRMSNorm(dx, do, db, dw, do, n, cols, eps))
				gx, gd = s.down(dx, 4*n*cols), s.down(do, 4*n*cols)
			})
			wx, wd := slices.Clone(x), slices.Clone(o)
			for i := range n {
				xi, oi := wx[i*cols:(i+1)*cols], wd[i*cols:(i+1)*cols]
				if bias {
					kernels.Add(oi, oi, b)
				}
				kernels.Add(xi, xi, oi)
				kernels.RMSNorm(oi, xi, w, eps)
			}
			sameBits(t, fmt.Sprintf("residual x, %d × %d on %v", n, cols, d), bytesF32(gx), wx)
			sameBits(t, fmt.Sprintf("normalized (written over o), %d × %d on %v", n, cols, d), bytesF32(gd), wd)
		})
	}
	// The normalizations that quantize what they write (RMSNormQuant,
	// AddRMSNormQuant): the normalized rows and their Q8_0, Q8_1 or Q8_K
	// form, each bit for bit as RMSNorm followed by QuantizeActs.
	for _, cols := range sz.cols {
		if cols%32 != 0 {
			continue
		}
		acts := []Act{ActQ8_0, ActQ8_1}
		if cols%256 == 0 {
			acts = append(acts, ActQ8_K)
		}
		for _, act := range acts {
			t.Run(fmt.Sprintf("rmsnorm_quant/%s/%d", act.String(), cols), func(t *testing.T) {
				x, o, b, w := wideFloats(rng, n*cols), wideFloats(rng, n*cols), wideFloats(rng, cols), wideFloats(rng, cols)
				rowidx := []int{n - 1, 0, n / 2}
				m := len(rowidx)
				_, qs, ds, es := ActSizes(act, n, cols)
				_, mqs, mds, mes := ActSizes(act, m, cols)
				var gy, gq, gd, ge, ax, ay, aq, ad, ae []byte
				d.run(t, func(s *session) {
					dx, do, db, dw, dr := s.up(f32Bytes(x)), s.up(f32Bytes(o)), s.up(f32Bytes(b)), s.up(f32Bytes(w)), s.up(i32s(rowidx))
					y := s.alloc(4 * m * cols)
					bufs := ActBufs{Q: s.alloc(int(qs)), D: s.alloc(int(ds)), Ext: s.alloc(int(es))}
					s.launch(RMSNormQuant(dx, dr, y, dw, m, cols, eps, act, bufs))
					gy, gq, gd, ge = s.down(y, 4*m*cols), s.down(bufs.Q, int(mqs)), s.down(bufs.D, int(mds)), s.down(bufs.Ext, int(mes))
					abufs := ActBufs{Q: s.alloc(int(qs)), D: s.alloc(int(ds)), Ext: s.alloc(int(es))}
					s.launch(AddRMSNormQuant(dx, do, db, dw, do, n, cols, eps, act, abufs))
					ax, ay = s.down(dx, 4*n*cols), s.down(do, 4*n*cols)
					aq, ad, ae = s.down(abufs.Q, int(qs)), s.down(abufs.D, int(ds)), s.down(abufs.Ext, int(es))
				})
				shape := fmt.Sprintf("%s, %d × %d on %v", act.String(), n, cols, d)
				// RMSNormQuant of the gathered rows.
				want := make([]float32, m*cols)
				for j, r := range rowidx {
					kernels.RMSNorm(want[j*cols:(j+1)*cols], x[r*cols:(r+1)*cols], w, eps)
				}
				wq := refQuantize(act, want, m, cols)
				sameBits(t, "RMSNormQuant rows, "+shape, bytesF32(gy), want)
				sameBytes(t, "RMSNormQuant q, "+shape, gq, i8Bytes(wq.q))
				sameBits(t, "RMSNormQuant d, "+shape, bytesF32(gd), wq.d)
				if act != ActQ8_0 {
					sameBytes(t, "RMSNormQuant s1 or bsums, "+shape, ge, wq.ext)
				}
				// AddRMSNormQuant with a bias, written over o.
				wx, wd := slices.Clone(x), slices.Clone(o)
				for i := range n {
					xi, oi := wx[i*cols:(i+1)*cols], wd[i*cols:(i+1)*cols]
					kernels.Add(oi, oi, b)
					kernels.Add(xi, xi, oi)
					kernels.RMSNorm(oi, xi, w, eps)
				}
				wa := refQuantize(act, wd, n, cols)
				sameBits(t, "AddRMSNormQuant residual x, "+shape, bytesF32(ax), wx)
				sameBits(t, "AddRMSNormQuant rows, "+shape, bytesF32(ay), wd)
				sameBytes(t, "AddRMSNormQuant q, "+shape, aq, i8Bytes(wa.q))
				sameBits(t, "AddRMSNormQuant d, "+shape, bytesF32(ad), wa.d)
				if act != ActQ8_0 {
					sameBytes(t, "AddRMSNormQuant s1 or bsums, "+shape, ae, wa.ext)
				}
			})
		}
	}
	for _, c := range sz.heads {
		heads, dim := c[0], c[1]
		t.Run(fmt.Sprintf("rmsnorm_heads/%dx%d", heads, dim), func(t *testing.T) {
			stride := heads*dim + 8
			x, w := wideFloats(rng, n*stride), wideFloats(rng, dim)
			var got []byte
			d.run(t, func(s *session) {
				dx, dw := s.up(f32Bytes(x)), s.up(f32Bytes(w))
				s.launch(RMSNormHeads(dx, n, heads, dim, stride, dw, eps))
				got = s.down(dx, 4*n*stride)
			})
			want := slices.Clone(x)
			for i := range n {
				for h := range heads {
					v := want[i*stride+h*dim : i*stride+(h+1)*dim]
					kernels.RMSNorm(v, v, w, eps)
				}
			}
			sameBits(t, fmt.Sprintf("per-head RMSNorm, %d rows of %d heads × %d, stride %d, on %v", n, heads, dim, stride, d), bytesF32(got), want)
		})
	}
	t.Run("add, add_bias, silu_mul", func(t *testing.T) {
		cols := sz.ffn
		a, b, bias := wideFloats(rng, n*cols), wideFloats(rng, n*cols), wideFloats(rng, cols)
		var sum, biased, silu []byte
		d.run(t, func(s *session) {
			da, db, dbias, y := s.up(f32Bytes(a)), s.up(f32Bytes(b)), s.up(f32Bytes(bias)), s.alloc(4*n*cols)
			s.launch(Add(da, db, y, n*cols))
			sum = s.down(y, 4*n*cols)
			s.launch(SiLUMul(da, db, y, n*cols))
			silu = s.down(y, 4*n*cols)
			s.launch(AddBias(da, dbias, n, cols))
			biased = s.down(da, 4*n*cols)
		})
		ws, wb, wsl := make([]float32, n*cols), slices.Clone(a), make([]float32, n*cols)
		kernels.Add(ws, a, b)
		kernels.SiLUMul(wsl, a, b)
		for i := range n {
			kernels.Add(wb[i*cols:(i+1)*cols], wb[i*cols:(i+1)*cols], bias)
		}
		shape := fmt.Sprintf("%d × %d on %v", n, cols, d)
		sameBits(t, "Add, "+shape, bytesF32(sum), ws)
		sameBits(t, "SiLUMul, "+shape, bytesF32(silu), wsl)
		sameBits(t, "AddBias, "+shape, bytesF32(biased), wb)
	})
	for _, act := range []Act{ActQ8_0, ActQ8_1, ActQ8_K} {
		cols := sz.ffn &^ 31
		if act == ActQ8_K {
			cols = sz.ffn &^ 255
		}
		t.Run(fmt.Sprintf("silu_mul_quant/%s/%d", act.String(), cols), func(t *testing.T) {
			a, b := wideFloats(rng, n*cols), wideFloats(rng, n*cols)
			_, qs, ds, es := ActSizes(act, n, cols)
			var gy, gq, gd, ge []byte
			d.run(t, func(s *session) {
				da, db := s.up(f32Bytes(a)), s.up(f32Bytes(b))
				bufs := ActBufs{Q: s.alloc(int(qs)), D: s.alloc(int(ds)), Ext: s.alloc(int(es))}
				s.launch(SiLUMulQuant(da, db, da, n, cols, act, bufs)) // dst over gate, as the engine runs it
				gy, gq, gd, ge = s.down(da, 4*n*cols), s.down(bufs.Q, int(qs)), s.down(bufs.D, int(ds)), s.down(bufs.Ext, int(es))
			})
			want := make([]float32, n*cols)
			kernels.SiLUMul(want, a, b)
			wq := refQuantize(act, want, n, cols)
			shape := fmt.Sprintf("%s, %d × %d on %v", act.String(), n, cols, d)
			sameBits(t, "SiLUMulQuant values, "+shape, bytesF32(gy), want)
			sameBytes(t, "SiLUMulQuant q, "+shape, gq, i8Bytes(wq.q))
			sameBits(t, "SiLUMulQuant d, "+shape, bytesF32(gd), wq.d)
			if act != ActQ8_0 {
				sameBytes(t, "SiLUMulQuant s1 or bsums, "+shape, ge, wq.ext)
			}
		})
	}
	for _, c := range sz.ropeDim {
		for _, neox := range []bool{true, false} {
			heads, dim, ropeDim := c[0], c[1], c[2]
			t.Run(fmt.Sprintf("rope/%dx%d/rot%d/neox=%v", heads, dim, ropeDim, neox), func(t *testing.T) {
				stride := heads * dim
				x, cs := wideFloats(rng, n*stride), make([]float32, n*ropeDim)
				for i := range cs {
					cs[i] = float32(math.Sin(rng.Float64() * 7))
				}
				var got []byte
				d.run(t, func(s *session) {
					dx, dc := s.up(f32Bytes(x)), s.up(f32Bytes(cs))
					s.launch(RoPE(dx, n, heads, dim, stride, ropeDim, neox, dc))
					got = s.down(dx, 4*n*stride)
				})
				want := refRotateRows(x, cs, n, heads, dim, stride, ropeDim, neox)
				sameBits(t, fmt.Sprintf("RoPE, %d rows of %d heads × %d, %d rotated, on %v", n, heads, dim, ropeDim, d), bytesF32(got), want)
			})
		}
	}
	for _, f16 := range []bool{true, false} {
		t.Run(fmt.Sprintf("kv_store/f16=%v", f16), func(t *testing.T) {
			const rows, kvrow, capTok = 7, 256, 40
			k, v := wideFloats(rng, rows*kvrow), wideFloats(rng, rows*kvrow)
			k[3] = math.Float32frombits(0xffc01234) // a NaN: ggml writes 0xFE00
			seq := []int{0, 0, 1, 1, 1, 0, 1}
			pos := []int{5, 6, 0, 1, 39, 7, 2}
			es := 4
			if f16 {
				es = 2
			}
			var caches [2][2][]byte
			d.run(t, func(s *session) {
				var kc, vc []uint64
				var bufs [2][2]DevPtr
				for q := range 2 {
					bufs[q][0], bufs[q][1] = s.alloc(es*capTok*kvrow), s.alloc(es*capTok*kvrow)
				}
				for i := range rows {
					kc, vc = append(kc, uint64(bufs[seq[i]][0])), append(vc, uint64(bufs[seq[i]][1]))
				}
				dk, dv, dkc, dvc, dp := s.up(f32Bytes(k)), s.up(f32Bytes(v)), s.up(u64Bytes(kc)), s.up(u64Bytes(vc)), s.up(i32s(pos))
				s.launch(KVStore(f16, dk, dv, rows, kvrow, dkc, dvc, dp))
				for q := range 2 {
					caches[q][0], caches[q][1] = s.down(bufs[q][0], es*capTok*kvrow), s.down(bufs[q][1], es*capTok*kvrow)
				}
			})
			for q := range 2 {
				for kv, src := range [2][]float32{k, v} {
					want := slices.Repeat([]byte{0xff}, es*capTok*kvrow)
					for i := range rows {
						if seq[i] != q {
							continue
						}
						row := src[i*kvrow : (i+1)*kvrow]
						var b []byte
						if f16 {
							h := make([]uint16, kvrow)
							kernels.F32ToF16(h, row)
							b = u16Bytes(h)
						} else {
							b = f32Bytes(row)
						}
						copy(want[es*pos[i]*kvrow:], b)
					}
					sameBytes(t, fmt.Sprintf("sequence %d's %c cache (%d positions × %d, element size %d) on %v", q, "KV"[kv], capTok, kvrow, es, d), caches[q][kv], want)
				}
			}
		})
	}
}

// runRoPEKVStore checks RoPEKVStore against refRotate of q and k and the
// caches KVStore's definition writes (kernels.F32ToF16 or a copy).
func runRoPEKVStore(t *testing.T, d device) {
	rng := rand.New(rand.NewPCG(43, 44))
	const n, capTok = 5, 12
	pos := []int{3, 4, 0, 11, 5}
	seq := []int{0, 0, 1, 1, 0}
	for _, c := range []struct{ heads, kvheads, dim, ropeDim int }{{4, 2, 64, 64}, {6, 2, 72, 32}} {
		for _, f16 := range []bool{true, false} {
			for _, neox := range []bool{true, false} {
				name := fmt.Sprintf("rope_kv_store/%d,%d×%d/rot%d/f16=%v/neox=%v", c.heads, c.kvheads, c.dim, c.ropeDim, f16, neox)
				t.Run(name, func(t *testing.T) {
					qs, kvrow := c.heads*c.dim, c.kvheads*c.dim
					q, k, v := wideFloats(rng, n*qs), wideFloats(rng, n*kvrow), wideFloats(rng, n*kvrow)
					cs := make([]float32, n*c.ropeDim)
					for i := range cs {
						cs[i] = float32(math.Sin(rng.Float64() * 7))
					}
					es := 4
					if f16 {
						es = 2
					}
					var gq, gk []byte
					var caches [2][2][]byte
					d.run(t, func(s *session) {
						var bufs [2][2]DevPtr
						for sq := range 2 {
							bufs[sq][0], bufs[sq][1] = s.alloc(es*capTok*kvrow), s.alloc(es*capTok*kvrow)
						}
						var kc, vc []uint64
						for i := range n {
							kc, vc = append(kc, uint64(bufs[seq[i]][0])), append(vc, uint64(bufs[seq[i]][1]))
						}
						dq, dk, dv, dc := s.up(f32Bytes(q)), s.up(f32Bytes(k)), s.up(f32Bytes(v)), s.up(f32Bytes(cs))
						dkc, dvc, dpos := s.up(u64Bytes(kc)), s.up(u64Bytes(vc)), s.up(i32s(pos))
						s.launch(RoPEKVStore{F16: f16, Q: dq, K: dk, V: dv, N: n, Heads: c.heads, KVHeads: c.kvheads, Dim: c.dim,
							RopeDim: c.ropeDim, NeoX: neox, CS: dc, KC: dkc, VC: dvc, Pos: dpos}.Launch())
						gq, gk = s.down(dq, 4*n*qs), s.down(dk, 4*n*kvrow)
						for sq := range 2 {
							caches[sq][0], caches[sq][1] = s.down(bufs[sq][0], es*capTok*kvrow), s.down(bufs[sq][1], es*capTok*kvrow)
						}
					})
					wq := refRotateRows(q, cs, n, c.heads, c.dim, qs, c.ropeDim, neox)
					wk := refRotateRows(k, cs, n, c.kvheads, c.dim, kvrow, c.ropeDim, neox)
					if f16 { // the queries rounded as the attention takes them
						kernels.RoundF16s(wq)
					}
					sameBits(t, name+": q on "+d.String(), bytesF32(gq), wq)
					sameBits(t, name+": k on "+d.String(), bytesF32(gk), wk)
					for sq := range 2 {
						for kv, src := range [2][]float32{wk, v} {
							want := slices.Repeat([]byte{0xff}, es*capTok*kvrow)
							for i := range n {
								if seq[i] != sq {
									continue
								}
								r := src[i*kvrow : (i+1)*kvrow]
								b := f32Bytes(r)
								if f16 {
									h := make([]uint16, kvrow)
									kernels.F32ToF16(h, r)
									b = u16Bytes(h)
								}
								copy(want[es*pos[i]*kvrow:], b)
							}
							sameBytes(t, fmt.Sprintf("%s: sequence %d's %c cache on %v", name, sq, "KV"[kv], d), caches[sq][kv], want)
						}
					}
				})
			}
		}
	}
}

// ropeAttnCase is a shape of RoPEAttention: heads over kvheads of dim,
// the first ropeDim dimensions rotated.
type ropeAttnCase struct{ heads, kvheads, dim, ropeDim int }

// runRoPEAttention checks RoPEAttention against the CPU's RoPE, KV store
// and attention (refRotate, kernels.F32ToF16, refAttention) bit for bit,
// and its quantized output against refQuantize of the output: the rows
// of batch (each sequence's rows a run: consecutive rows at consecutive
// positions; its positions before the run random in its cache, whose K
// holds infinities at batch.inf's positions), both cache types, both
// pairings, the output quantized and not. Every cache byte past a
// sequence's last row must stay as it was.
func runRoPEAttention(t *testing.T, d device, cases []ropeAttnCase, batch attnBatch) {
	rng := rand.New(rand.NewPCG(61, 62))
	for _, c := range cases {
		for _, f16 := range []bool{true, false} {
			for _, neox := range []bool{true, false} {
				for _, quant := range []bool{false, true} {
					if quant && c.dim%32 != 0 {
						continue // Q8_0 blocks of whole heads only
					}
					name := fmt.Sprintf("rope_attn/%d,%d×%d/rot%d/f16=%v/neox=%v/quant=%v", c.heads, c.kvheads, c.dim, c.ropeDim, f16, neox, quant)
					t.Run(name, func(t *testing.T) {
						checkRoPEAttention(t, d, rng, c, batch, f16, neox, quant, name)
					})
				}
			}
		}
	}
}

// runFirsts returns each row's run's first row (RoPEAttention.First) for
// rows of sequences seq, each sequence's rows consecutive.
func runFirsts(seq []int) []int {
	first := make([]int, len(seq))
	for i := range seq {
		if i > 0 && seq[i] == seq[i-1] {
			first[i] = first[i-1]
		} else {
			first[i] = i
		}
	}
	return first
}

func checkRoPEAttention(t *testing.T, d device, rng *rand.Rand, c ropeAttnCase, batch attnBatch, f16, neox, quant bool, name string) {
	seq, pos := batch.seq, batch.pos
	n, nseq := len(pos), slices.Max(seq)+1
	first := runFirsts(seq)
	Q, kvrow := c.heads*c.dim, c.kvheads*c.dim
	q, k, v := wideQKV(rng, n*Q), wideQKV(rng, n*kvrow), wideQKV(rng, n*kvrow)
	cs := make([]float32, n*c.ropeDim)
	for i := range cs {
		cs[i] = float32(math.Sin(rng.Float64() * 7))
	}
	// A sequence's cache: the positions before its run random, the rest
	// poison; start[s] is the run's first position, end[s] one past its
	// last.
	start, end := make([]int, nseq), make([]int, nseq)
	for i := n - 1; i >= 0; i-- {
		start[seq[i]] = pos[i]
		end[seq[i]] = max(end[seq[i]], pos[i]+1)
	}
	k32, v32 := make([][]float32, nseq), make([][]float32, nseq)
	for sq := range nseq {
		ctok := end[sq] + 2
		k32[sq], v32[sq] = make([]float32, ctok*kvrow), make([]float32, ctok*kvrow)
		for j := range start[sq] * kvrow {
			k32[sq][j], v32[sq][j] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		for _, j := range batch.inf[sq] {
			if j < start[sq] {
				k32[sq][j*kvrow], k32[sq][j*kvrow+1] = float32(math.Inf(1)), float32(math.Inf(-1))
			}
		}
	}
	es := 4
	if f16 {
		es = 2
	}
	cache := func(x []float32, rows int) []byte {
		b := slices.Repeat([]byte{0xff}, es*len(x))
		if f16 {
			h := make([]uint16, rows*kvrow)
			kernels.F32ToF16(h, x[:rows*kvrow])
			copy(b, u16Bytes(h))
		} else {
			copy(b, f32Bytes(x[:rows*kvrow]))
		}
		return b
	}
	// The reference: the rows rotated and stored, then attended to.
	wq := refRotateRows(q, cs, n, c.heads, c.dim, Q, c.ropeDim, neox)
	wk := refRotateRows(k, cs, n, c.kvheads, c.dim, kvrow, c.ropeDim, neox)
	rk32, rv32 := make([][]float32, nseq), make([][]float32, nseq)
	for sq := range nseq {
		rk32[sq], rv32[sq] = slices.Clone(k32[sq]), slices.Clone(v32[sq])
	}
	for i := range n {
		copy(rk32[seq[i]][pos[i]*kvrow:], wk[i*kvrow:(i+1)*kvrow])
		copy(rv32[seq[i]][pos[i]*kvrow:], v[i*kvrow:(i+1)*kvrow])
	}
	wantK, wantV := make([][]byte, nseq), make([][]byte, nseq)
	k16, v16 := make([][]uint16, nseq), make([][]uint16, nseq)
	for sq := range nseq {
		wantK[sq], wantV[sq] = cache(rk32[sq], end[sq]), cache(rv32[sq], end[sq])
		k16[sq], v16[sq] = make([]uint16, len(rk32[sq])), make([]uint16, len(rv32[sq]))
		kernels.F32ToF16(k16[sq], rk32[sq])
		kernels.F32ToF16(v16[sq], rv32[sq])
	}
	want := refAttention(f16, wq, seq, pos, attnCase{heads: c.heads, kvheads: c.kvheads, dim: c.dim}, k16, v16, rk32, rv32)
	act := ActF32
	if quant {
		act = ActQ8_1
		if f16 {
			act = ActQ8_0
		}
	}
	a := RoPEAttention{RoPEKVStore: RoPEKVStore{F16: f16, N: n, Heads: c.heads, KVHeads: c.kvheads, Dim: c.dim,
		RopeDim: c.ropeDim, NeoX: neox}, MaxPos: slices.Max(pos), OutAct: act}
	if !a.Fits() {
		t.Fatalf("%s: the shape does not fit the fused kernel", name)
	}
	var got, gq, gd, ge []byte
	gotK, gotV := make([][]byte, nseq), make([][]byte, nseq)
	d.run(t, func(s *session) {
		bk, bv := make([]DevPtr, nseq), make([]DevPtr, nseq)
		for sq := range nseq {
			bk[sq], bv[sq] = s.up(cache(k32[sq], start[sq])), s.up(cache(v32[sq], start[sq]))
		}
		var kc, vc []uint64
		for i := range n {
			kc, vc = append(kc, uint64(bk[seq[i]])), append(vc, uint64(bv[seq[i]]))
		}
		a.Q, a.K, a.V, a.CS = s.up(f32Bytes(q)), s.up(f32Bytes(k)), s.up(f32Bytes(v)), s.up(f32Bytes(cs))
		a.KC, a.VC, a.Pos, a.First = s.up(u64Bytes(kc)), s.up(u64Bytes(vc)), s.up(i32s(pos)), s.up(i32s(first))
		a.Out = s.alloc(4 * n * Q)
		_, qs, ds, xs := ActSizes(act, n, Q)
		if quant {
			a.OutQ = ActBufs{Q: s.alloc(int(qs)), D: s.alloc(int(ds)), Ext: s.alloc(int(xs))}
		}
		s.launch(a.Launch())
		got = s.down(a.Out, 4*n*Q)
		if quant {
			gq, gd, ge = s.down(a.OutQ.Q, int(qs)), s.down(a.OutQ.D, int(ds)), s.down(a.OutQ.Ext, int(xs))
		}
		for sq := range nseq {
			gotK[sq], gotV[sq] = s.down(bk[sq], es*len(k32[sq])), s.down(bv[sq], es*len(v32[sq]))
		}
	})
	what := fmt.Sprintf("%s: output of rows at positions %v of sequences %v on %v (index = row·heads·dim + head·dim + d)", name, pos, seq, d)
	// An infinite key makes some heads' scores NaN (∞ − ∞), or only
	// infinite: which, depends on the signs of the rotated queries.
	if slices.ContainsFunc(want, func(x float32) bool { return x != x }) {
		sameOrNaN(t, what, bytesF32(got), want)
	} else {
		sameBits(t, what, bytesF32(got), want)
	}
	for sq := range nseq {
		sameBytes(t, fmt.Sprintf("%s: sequence %d's K cache", name, sq), gotK[sq], wantK[sq])
		sameBytes(t, fmt.Sprintf("%s: sequence %d's V cache", name, sq), gotV[sq], wantV[sq])
	}
	if quant {
		sameQuantized(t, act, what, got, n, Q, gq, gd, ge)
	}
}

// wideQKV returns n normal floats with a few of the wide ones
// (wideFloats) among them: queries, keys and values whose products
// overflow or vanish now and then without making every row NaN.
func wideQKV(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	w := wideFloats(rng, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if rng.IntN(64) == 0 {
			x[i] = w[i]
		}
	}
	return x
}

// sameQuantized requires an attention output's activations (gq, gd and,
// for Q8_1, ge: the blocks' quants, scales and sums as downloaded) to be
// QuantizeActs of the output got (n rows of cols float32 bytes).
func sameQuantized(t *testing.T, act Act, what string, got []byte, n, cols int, gq, gd, ge []byte) {
	t.Helper()
	wq := refQuantize(act, bytesF32(got), n, cols)
	sameBytes(t, act.String()+" q of the "+what, gq, i8Bytes(wq.q))
	sameBits(t, act.String()+" d of the "+what, bytesF32(gd), wq.d)
	if act == ActQ8_1 {
		sameBytes(t, "Q8_1 s of the "+what, ge, wq.ext)
	}
}

// refRotateRows returns a copy of x, n rows stride apart of heads heads
// of dim values, with every head rotated by refRotate with its row's
// table (cs, ropeDim values a row).
func refRotateRows(x, cs []float32, n, heads, dim, stride, ropeDim int, neox bool) []float32 {
	y := slices.Clone(x)
	for i := range n {
		row := cs[i*ropeDim : (i+1)*ropeDim]
		for h := range heads {
			refRotate(y[i*stride+h*dim:i*stride+(h+1)*dim], row, ropeDim, neox)
		}
	}
	return y
}

// refRotate is the CPU engine's rotate (infer/engine/cpu/forward.go).
func refRotate(x, cs []float32, ropeDim int, neox bool) {
	half := ropeDim / 2
	for i := range half {
		co, s := cs[2*i], cs[2*i+1]
		a, b := 2*i, 2*i+1
		if neox {
			a, b = i, i+half
		}
		x0, x1 := x[a], x[b]
		x[a] = float32(x0*co) - float32(x1*s)
		x[b] = float32(x0*s) + float32(x1*co)
	}
}

// ---------------------------------------------------------------------------
// Attention.

type attnCase struct {
	name                string
	heads, kvheads, dim int
}

// attnBatch is a batch of attention rows: row i is sequence seq[i] at
// position pos[i]; sequences are numbered 0, 1, …. The K rows of the
// sequences in inf get an infinity at the key positions listed there
// (element 0: +Inf, element 1: −Inf), which makes scores infinite and
// some rows' softmax NaN; their V rows there and at position 0 get f16
// subnormals, −0 and the smallest normal in elements 2..5.
//
// keyBlocks is passed to Attention.KeyBlocks (0: the launch decides); with
// oddLD the scores' scratch rows have an odd length, so the scores kernel
// stores them one float at a time.
type attnBatch struct {
	seq, pos  []int
	inf       map[int][]int
	keyBlocks int
	oddLD     bool
	// parts, if positive, is Attention.Parts: how many of a decode row's
	// parts of 256 positions one thread block of its weighted sum walks.
	parts int
}

// batchOf builds a batch from runs of consecutive positions.
func batchOf(runs ...[3]int) attnBatch {
	var b attnBatch
	for _, r := range runs { // sequence, first position, rows
		for p := r[1]; p < r[1]+r[2]; p++ {
			b.seq, b.pos = append(b.seq, r[0]), append(b.pos, p)
		}
	}
	return b
}

// poisonF32 returns count float32s of the largest finite value: scratch
// that a kernel reads where it should not (a maximum, a 1/sum it did not
// write) changes the results, where a NaN might be ignored by fmaxf.
func poisonF32(count int) []byte {
	return f32Bytes(slices.Repeat([]float32{math.MaxFloat32}, count))
}

func runAttention(t *testing.T, d device, cases []attnCase, batch attnBatch) {
	rng := rand.New(rand.NewPCG(51, 52))
	seq, pos := batch.seq, batch.pos
	n := len(seq)
	nseq := slices.Max(seq) + 1
	maxPos := slices.Max(pos)
	ld := (maxPos + 4) &^ 3
	if batch.oddLD {
		ld = (maxPos + 2) | 1
	}
	variant := "" // names the forced key blocks and the odd row in the subtests
	if batch.keyBlocks > 0 {
		variant += fmt.Sprintf("/key-blocks=%d", batch.keyBlocks)
	}
	if batch.oddLD {
		variant += "/odd-ld"
	}
	for _, c := range cases {
		for _, f16 := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/f16=%v%s", c.name, f16, variant), func(t *testing.T) {
				Q, kvrow := c.heads*c.dim, c.kvheads*c.dim
				q := make([]float32, n*Q)
				for i := range q {
					q[i] = float32(rng.NormFloat64())
				}
				// The odd rows' queries arrive rounded to f16 values, as
				// muser_rope_kv_store leaves them; the even rows' do not.
				// The kernels round both (the rounded ones by the
				// shortcut of round_f16_again).
				for i := 1; i < n; i += 2 {
					kernels.RoundF16s(q[i*Q : (i+1)*Q])
				}
				// Each sequence's cache holds positions 0..its last row's.
				ntok := make([]int, nseq)
				for i := range n {
					ntok[seq[i]] = max(ntok[seq[i]], pos[i]+1)
				}
				k16, v16 := make([][]uint16, nseq), make([][]uint16, nseq)
				k32, v32 := make([][]float32, nseq), make([][]float32, nseq)
				for sq := range nseq {
					k32[sq], v32[sq] = make([]float32, ntok[sq]*kvrow), make([]float32, ntok[sq]*kvrow)
					for i := range k32[sq] {
						k32[sq][i], v32[sq][i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
					}
					for _, j := range batch.inf[sq] {
						k32[sq][j*kvrow] = float32(math.Inf(1))
						k32[sq][j*kvrow+1] = float32(math.Inf(-1))
						for _, p := range []int{0, j} { // f16 subnormals and zeros in V
							v32[sq][p*kvrow+2], v32[sq][p*kvrow+3] = 0x1p-24, -0x1.8p-15
							v32[sq][p*kvrow+4], v32[sq][p*kvrow+5] = float32(math.Copysign(0, -1)), 0x1p-14
						}
					}
					k16[sq], v16[sq] = make([]uint16, len(k32[sq])), make([]uint16, len(v32[sq]))
					kernels.F32ToF16(k16[sq], k32[sq])
					kernels.F32ToF16(v16[sq], v32[sq])
				}
				want := refAttention(f16, q, seq, pos, c, k16, v16, k32, v32)
				// A decode batch's attention also quantizes its output
				// (Attention.OutAct): Q8_0 with an f16 cache, Q8_1
				// (with the sums) with f32.
				act := ActQ8_1
				if f16 {
					act = ActQ8_0
				}
				for _, oneRowTiles := range []bool{false, true} {
					var got, gq, gd, ge []byte
					quantized := false
					skipped := false
					d.run(t, func(s *session) {
						var kc, vc []uint64
						bk, bv := make([]DevPtr, nseq), make([]DevPtr, nseq)
						for sq := range nseq {
							if f16 {
								bk[sq], bv[sq] = s.up(u16Bytes(k16[sq])), s.up(u16Bytes(v16[sq]))
							} else {
								bk[sq], bv[sq] = s.up(f32Bytes(k32[sq])), s.up(f32Bytes(v32[sq]))
							}
						}
						pos32 := make([]int32, n)
						for i := range n {
							kc, vc = append(kc, uint64(bk[seq[i]])), append(vc, uint64(bv[seq[i]]))
							pos32[i] = int32(pos[i])
						}
						tiles := AttnTiles(kc, pos32, c.heads, c.kvheads, c.dim)
						if oneRowTiles && len(tiles) == n+1 {
							skipped = true // the tiles are single rows already
							return
						}
						if oneRowTiles {
							tiles = tiles[:0]
							for i := range n + 1 {
								tiles = append(tiles, int32(i))
							}
						}
						var tl []int
						for _, x := range tiles {
							tl = append(tl, int(x))
						}
						a := Attention{F16: f16, Heads: c.heads, KVHeads: c.kvheads, Dim: c.dim, N: n,
							Q: s.up(f32Bytes(q)), Out: s.alloc(4 * n * Q), KC: s.up(u64Bytes(kc)), VC: s.up(u64Bytes(vc)),
							Pos: s.up(i32s(pos)), Tiles: s.up(i32s(tl)), NTiles: len(tiles) - 1, MaxPos: maxPos,
							S: s.alloc(4 * n * c.heads * ld), LD: ld,
							Inv: s.up(poisonF32(n * c.heads)), KeyBlocks: batch.keyBlocks, Parts: batch.parts}
						a.M = s.up(poisonF32(int(a.MBytes() / 4)))
						_, qs, ds, es := ActSizes(act, n, Q)
						if quantized = a.QuantizesOut(act); quantized {
							a.OutAct, a.OutQ = act, ActBufs{Q: s.alloc(int(qs)), D: s.alloc(int(ds)), Ext: s.alloc(int(es))}
						}
						ls, err := a.Launches()
						for _, l := range ls {
							s.launch(l, err)
						}
						got = s.down(a.Out, 4*n*Q)
						if quantized {
							gq, gd, ge = s.down(a.OutQ.Q, int(qs)), s.down(a.OutQ.D, int(ds)), s.down(a.OutQ.Ext, int(es))
						}
					})
					if skipped {
						continue
					}
					what := fmt.Sprintf("attention output, %d heads over %d of dim %d, f16 cache %v, one-row tiles %v, rows at positions %v, scores row %d, key blocks %d, on %v (index = row·heads·dim + head·dim + d)",
						c.heads, c.kvheads, c.dim, f16, oneRowTiles, pos, ld, batch.keyBlocks, d)
					if len(batch.inf) == 0 {
						sameBits(t, what, bytesF32(got), want)
					} else {
						sameOrNaN(t, what, bytesF32(got), want)
					}
					if quantized {
						// As QuantizeActs of the output written (checked
						// above; its NaNs' payloads are the GPU's).
						sameQuantized(t, act, what, got, n, Q, gq, gd, ge)
					}
				}
			})
		}
	}
}

// runDecodeSoftmax checks the decode softmax alone (SelfTestDecodeSoftmax,
// the maxima per 64 scores computed here) against kernels.Softmax, bit
// for bit: rows of the given lengths with wideFloats scores (exponentials
// that overflow, underflow, and −0), and a row on which the CPU's eight
// float64 chains alone decide float32(1/sum) (softmaxChainDecidesRow),
// with and without the rounding to f16.
func runDecodeSoftmax(t *testing.T, d device, lengths []int) {
	rng := rand.New(rand.NewPCG(51, 52))
	rows := [][]float32{softmaxChainDecidesRow(t, 4096)}
	for _, m := range lengths {
		rows = append(rows, wideFloats(rng, m))
	}
	ld := 0
	for _, r := range rows {
		ld = max(ld, len(r))
	}
	n := len(rows)
	S, pos := make([]float32, n*ld), make([]int, n)
	M := slices.Repeat([]float32{math.MaxFloat32}, int(Attention{Heads: 1, Dim: 1, N: n, NTiles: n, LD: ld}.MBytes()/4))
	for i, r := range rows {
		copy(S[i*ld:], r)
		pos[i] = len(r) - 1
		for b := range ceilDiv(len(r), 64) {
			M[i*AttnMaxBlocks(ld)+b] = slices.Max(r[64*b : min(len(r), 64*b+64)])
		}
	}
	for _, round := range []bool{false, true} {
		t.Run(fmt.Sprintf("round=%v", round), func(t *testing.T) {
			var got []byte
			d.run(t, func(s *session) {
				dS := s.up(f32Bytes(S))
				ls, err := SelfTestDecodeSoftmax(dS, s.up(f32Bytes(M)), s.up(i32s(pos)), ld, n, 1, ld-1, round)
				for _, l := range ls {
					s.launch(l, err)
				}
				got = s.down(dS, 4*len(S))
			})
			want := slices.Clone(S)
			for i, r := range rows {
				w := want[i*ld : i*ld+len(r)]
				kernels.Softmax(w)
				if round {
					kernels.RoundF16s(w)
				}
			}
			g := bytesF32(got)
			for i, r := range rows {
				what := fmt.Sprintf("decode softmax of row %d (%d scores), round %v, on %v", i, len(r), round, d)
				sameBits(t, what, g[i*ld:(i+1)*ld], want[i*ld:(i+1)*ld])
			}
		})
	}
}

// softmaxChainDecidesRow returns m scores (m ≥ 1024, a multiple of 8) on
// which kernels.Softmax's float32(1/sum) depends on its order of
// summation: e_0 = 1, e_8 = v ≈ 2^-25, e_j ≈ 5·10^-17 for the other j ≡
// 0 mod 8 (each below half an ulp of 1, so chain 0 of the CPU's eight
// keeps 1 + v) and 0 elsewhere, with v chosen so that 1/(1 + v) lies
// just above the float32 tie 1 − 2^-25 and 1/(1 + v + the small ones)
// below it. A kernel that took a parallel sum without checking it
// against the chains gets this row wrong.
func softmaxChainDecidesRow(t *testing.T, m int) []float32 {
	t.Helper()
	row := make([]float32, m)
	for j := range row {
		row[j] = -1000 // Exp32: 0
	}
	row[0] = 0
	small := 0.0
	for j := 16; j < m; j += 8 {
		row[j] = -37.5
		if j >= 16+8*8 { // leave out the few a parallel sum may lose as the chain does
			small += float64(kernels.Exp32(-37.5))
		}
	}
	// Search the scores around ln(2^-25), one float32 step at a time.
	up, down := float32(-25*math.Ln2), float32(-25*math.Ln2)
	for range 256 {
		for _, x := range []float32{up, down} {
			row[8] = x
			w := slices.Clone(row)
			kernels.Softmax(w) // w[0] = e_0·float32(1/sum) = float32(1/sum)
			v := float64(kernels.Exp32(x))
			if alt := float32(1 / (1 + (v + small))); alt != w[0] {
				return row
			}
		}
		up, down = math.Nextafter32(up, 0), math.Nextafter32(down, float32(math.Inf(-1)))
	}
	t.Fatal("found no score for e_8 on which the chains and a parallel sum round 1/sum apart")
	return nil
}

// refAttention is the CPU engine's attendTile per row and head, with the kernels
// package's row functions (its tile kernels give the same bits): the
// weighted sum by parts of kernels.AttnPart positions.
func refAttention(f16 bool, q []float32, seq, pos []int, c attnCase, k16, v16 [][]uint16, k32, v32 [][]float32) []float32 {
	Q, kvrow, D := c.heads*c.dim, c.kvheads*c.dim, c.dim
	group := c.heads / c.kvheads
	scale := float32(1 / math.Sqrt(float64(D)))
	out := make([]float32, len(seq)*Q)
	for i := range seq {
		m := pos[i] + 1
		for h := range c.heads {
			off := (h / group) * D
			qh := slices.Clone(q[i*Q+h*D : i*Q+(h+1)*D])
			y := out[i*Q+h*D : i*Q+(h+1)*D]
			s := make([]float32, m)
			if f16 {
				kernels.RoundF16s(qh)
				for j := range m {
					s[j] = kernels.DotF16(k16[seq[i]][j*kvrow+off:j*kvrow+off+D], qh) * scale
				}
				kernels.Softmax(s)
				kernels.RoundF16s(s)
				kernels.AXPYF16Parts(y, make([]float32, D), s, v16[seq[i]][off:], kvrow)
			} else {
				for j := range m {
					s[j] = kernels.Dot(k32[seq[i]][j*kvrow+off:j*kvrow+off+D], qh) * scale
				}
				kernels.Softmax(s)
				kernels.AXPYParts(y, make([]float32, D), s, v32[seq[i]][off:], kvrow)
			}
		}
	}
	return out
}
