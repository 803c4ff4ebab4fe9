package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/muserhq/muser/infer/ggml"
)

// TestBF16TileRange checks the AVX-512 exponent scan against the portable
// one on values of every kind (zeros of both signs, subnormals, ordinary
// values, infinities, NaN) at lengths around its 32-value step.
func TestBF16TileRange(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	specials := []uint16{0, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC1, 0x0080, 0x7F7F}
	for _, n := range []int{0, 1, 31, 32, 33, 64, 95, 96, 1000} {
		for trial := 0; trial < 50; trial++ {
			b := make([]byte, 2*n)
			for i := 0; i < n; i++ {
				v := uint16(rng.Uint32())
				switch rng.IntN(4) {
				case 0:
					v = specials[rng.IntN(len(specials))]
				case 1:
					v = v&0x807F | uint16(100+rng.IntN(40))<<7 // an ordinary magnitude
				case 2:
					v &= 0x8000 // a zero
				}
				binary.LittleEndian.PutUint16(b[2*i:], v)
			}
			if got, want := bf16TileRange(b), bf16RowsRange(b); got != want {
				t.Fatalf("%d values, trial %d: got %#x, want %#x", n, trial, uint32(got), uint32(want))
			}
		}
	}
}

// TestMatMulBF16Exact checks BF16 batches on the exact kernels (the
// VDPBF16PS ones where the CPU has them and the rows are whole 32-column
// groups, the fused-multiply-add ones otherwise or with bf16Dot off) bit
// for bit against the portable kernels: ordinary weights and activations
// (where the exact kernels must run: bf16ExactTokens accepts every tile),
// tokens whose activations are tiny mixed with ordinary ones (their token
// groups fall back to the multiply-then-add kernels), and tiny weights,
// where each exact kernel called directly does give other bits (so the
// check that keeps it out is what the result rests on).
func TestMatMulBF16Exact(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("no AVX-512")
	}
	defer SetISA(SetISA(ISAGeneric))
	defer func(on bool) { bf16Dot = on }(bf16Dot)
	pools := map[int]*Pool{1: NewPool(1), 2: NewPool(2)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	const rows = 70
	bf16 := func(v float32) uint16 { return ggml.F32ToBF16(v) }
	weights := func(rng *rand.Rand, cols int, scale float32) []byte {
		d := make([]byte, rows*cols*2)
		for i := 0; i < rows*cols; i++ {
			binary.LittleEndian.PutUint16(d[2*i:], bf16(float32(rng.NormFloat64())*scale))
		}
		return d
	}
	dots := []bool{false}
	if hasBF16Dot {
		dots = append(dots, true)
	} else if cpu.X86.HasAVX512BF16 {
		t.Error("the CPU has AVX512_BF16 but bf16DotProbe refused its VDPBF16PS")
	}
	for _, dot := range dots {
		for _, cols := range []int{912, 896} {
			for _, c := range []struct {
				name        string
				wScale      float32
				tinyTokens  []int // tokens whose activations are scaled by 2^tinyExp
				tinyExp     int
				n           int
				wantAllFast bool
			}{
				{"ordinary/n=4", 0.05, nil, 0, 4, true},
				{"ordinary/n=13", 0.05, nil, 0, 13, true},
				{"ordinary/n=64", 0.05, nil, 0, 64, true},
				{"tiny tokens", 0.05, []int{1, 9}, -122, 16, false},
				// Products near 2^-140: float32 subnormals with bits below 2^-149.
				{"tiny weights", 1e-21, []int{0, 1, 2, 3, 4, 5, 6, 7}, -70, 8, false},
			} {
				t.Run(fmt.Sprintf("dot=%v/cols=%d/%s", dot, cols, c.name), func(t *testing.T) {
					bf16Dot = dot
					rng := rand.New(rand.NewPCG(21, uint64(c.n)))
					m, err := NewMatrix(ggml.TypeBF16, rows, cols, weights(rng, cols, c.wScale))
					if err != nil {
						t.Fatal(err)
					}
					x := randomActs(rng, c.n*cols)
					for _, tok := range c.tinyTokens {
						for i := tok * cols; i < (tok+1)*cols; i++ {
							x[i] = float32(math.Ldexp(float64(x[i]), c.tinyExp))
						}
					}
					SetISA(ISAGeneric)
					want := make([]float32, c.n*rows)
					pools[1].MatMul(want, m, x, c.n)
					SetISA(ISAAVX512)
					a := new(acts)
					a.reset(actBF16, c.n, cols)
					for tok := 0; tok < c.n; tok++ {
						a.quantRow(x, tok)
					}
					if packed, wantPacked := len(a.bp) > 0, dot && cols%32 == 0; packed != wantPacked {
						t.Fatalf("activations packed for VDPBF16PS: %v, want %v", packed, wantPacked)
					}
					exact := bf16ExactTokens(m, a, 0, rows)
					if exact == nil {
						t.Fatal("bf16ExactTokens: nil for a BF16 batch")
					}
					if allFast := exact(0, c.n); allFast != c.wantAllFast {
						t.Errorf("all tokens exact: got %v, want %v", allFast, c.wantAllFast)
					}
					if c.name == "tiny weights" {
						// The exact kernel on its own rounds differently here.
						k, xp, xs := bf16fDot4x4RAVX512, &a.f[0], cols*4
						if len(a.bp) > 0 {
							k, xp, xs = bf16dDot4x4RAVX512, (*float32)(unsafe.Pointer(&a.bp[0])), cols*2
						}
						var acc [16]float32
						differs := false
						for g := 0; g+4 <= rows && !differs; g += 4 {
							k(&m.Data[g*m.RowBytes], m.RowBytes, xp, xs, cols/16, &acc[0])
							for r := 0; r < 4; r++ {
								for tok := 0; tok < 4; tok++ {
									if math.Float32bits(acc[r*4+tok]) != math.Float32bits(want[tok*rows+g+r]) {
										differs = true
									}
								}
							}
						}
						if !differs {
							t.Fatal("the exact kernel gave the canonical bits on tiny weights: the case does not test the check")
						}
					}
					for th, p := range pools {
						for _, on := range []bool{true, false} {
							bf16FMA = on
							got := make([]float32, c.n*rows)
							p.MatMul(got, m, x, c.n)
							bitsEqual(t, fmt.Sprintf("%d threads, exact kernels %v", th, on), got, want)
						}
						bf16FMA = true
					}
				})
			}
		}
	}
}

// TestBF16DotProbe checks that the probe's tile tells VDPBF16PS's order
// of operations from its neighbours: computed in Go with the even product
// added first, or with the pair's two products summed exactly before one
// rounding into the accumulator, its results differ from the canonical
// ones that the probe expects; and that the kernel passes it on a CPU
// with AVX512_BF16.
func TestBF16DotProbe(t *testing.T) {
	w, x, want := bf16DotProbeTile()
	emulate := func(step func(acc, pOdd, pEven float32) float32) (got [16]float32) {
		const n = bf16ProbeCols
		for r := 0; r < 4; r++ {
			for tok := 0; tok < 4; tok++ {
				var acc [lanes]float32
				for m := 0; m < n; m += 32 {
					for l := 0; l < 16; l++ {
						wv := func(c int) float32 {
							return ggml.BF16ToF32(binary.LittleEndian.Uint16(w[2*(r*n+c):]))
						}
						xo := ggml.BF16ToF32(x[tok*n+m+2*l+1])
						xe := ggml.BF16ToF32(x[tok*n+m+2*l])
						acc[l] = step(acc[l], float32(wv(m+l)*xo), float32(wv(m+l+16)*xe))
					}
				}
				got[r*4+tok] = reduceLanes(&acc)
			}
		}
		return got
	}
	for _, c := range []struct {
		name string
		step func(acc, pOdd, pEven float32) float32
		same bool
	}{
		{"SDM order", func(acc, o, e float32) float32 { return (acc + o) + e }, true},
		{"even first", func(acc, o, e float32) float32 { return (acc + e) + o }, false},
		{"pair summed first", func(acc, o, e float32) float32 { return float32(float64(acc) + (float64(o) + float64(e))) }, false},
	} {
		if got := emulate(c.step); (got == want) != c.same {
			t.Errorf("%s: results equal to the canonical ones: %v, want %v", c.name, got == want, c.same)
		}
	}
	if cpu.X86.HasAVX512BF16 && cpu.X86.HasAVX512BW && !bf16DotProbe() {
		t.Error("the CPU has AVX512_BF16 but its VDPBF16PS fails the probe")
	}
}

// TestRoundBF16Arch checks the AVX-512 rounding of activations to bf16
// (and their range) bit for bit against ggml.F32ToBF16 and the portable
// range, on values of every kind: ties to even, values that round up to
// infinity, subnormals, zeros of both signs, infinities and NaNs with
// payloads, at lengths around the 16-value step.
func TestRoundBF16Arch(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("no AVX-512")
	}
	defer SetISA(SetISA(ISAAVX512))
	rng := rand.New(rand.NewPCG(9, 10))
	specials := []uint32{0, 0x80000000, 0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7F7FFFFF, 0xFF7F8000,
		0x00000001, 0x807FFFFF, 0x00008000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFF1234, 0x7FBF8000}
	for _, n := range []int{0, 1, 15, 16, 17, 48, 100, 896} {
		for trial := 0; trial < 40; trial++ {
			src := make([]float32, n)
			for i := range src {
				switch rng.IntN(3) {
				case 0:
					src[i] = math.Float32frombits(specials[rng.IntN(len(specials))])
				case 1:
					src[i] = math.Float32frombits(rng.Uint32())
				default:
					src[i] = float32(rng.NormFloat64())
				}
			}
			dst := make([]float32, n)
			got, ok := roundBF16Arch(src, dst)
			if !ok {
				t.Fatal("roundBF16Arch did not run on AVX-512")
			}
			want := bf16RangeEmpty
			for i, v := range src {
				b := ggml.F32ToBF16(v)
				want = want.addBits(b)
				if w := uint32(b) << 16; math.Float32bits(dst[i]) != w {
					t.Fatalf("n=%d, value %d (%#08x): got %#08x, want %#08x", n, i, math.Float32bits(v), math.Float32bits(dst[i]), w)
				}
			}
			if got != want {
				t.Fatalf("n=%d, trial %d: range %#x, want %#x", n, trial, uint32(got), uint32(want))
			}
		}
	}
}

// TestMatMulFloatChunks checks batches of more than 4 tokens whose rows
// are taken in column chunks (floatChunkMin16, floatChunk16) bit for bit
// against the portable kernels, for every float type, with and without
// columns past the last whole 16 and a last chunk shorter than the others,
// on 1 and 2 threads, at the default chunk and at a short one, and rows
// shorter than 16 columns.
func TestMatMulFloatChunks(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("no AVX-512")
	}
	defer SetISA(SetISA(ISAGeneric))
	defer func(mn, c int) { floatChunkMin16, floatChunk16 = mn, c }(floatChunkMin16, floatChunk16)
	pools := map[int]*Pool{1: NewPool(1), 2: NewPool(2)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, ch := range [][2]int{{floatChunkMin16, floatChunk16}, {8, 5}} {
		for _, typ := range []ggml.Type{ggml.TypeF16, ggml.TypeF32, ggml.TypeBF16} {
			// 7 and 15: rows shorter than one 16-column step (no kernel step at all).
			// 32·(…)+32: whole 32-column groups, which BF16 batches on
			// VDPBF16PS take (chunks made even), a last chunk shorter.
			for _, cols := range []int{7, 15, 16*ch[0] + 7, 16 * (2*ch[1] + 3), 16*(ch[0]+ch[1]) + 9, 32*(ch[0]/2+ch[1]) + 32} {
				for _, n := range []int{5, 8, 37} {
					t.Run(fmt.Sprintf("chunk=%d/%s/cols=%d/n=%d", ch[1], typ, cols, n), func(t *testing.T) {
						floatChunkMin16, floatChunk16 = ch[0], ch[1]
						const rows = 37
						rng := rand.New(rand.NewPCG(31, uint64(cols)<<8|uint64(n)))
						m, err := NewMatrix(typ, rows, cols, randomWeights(rng, typ, rows, cols))
						if err != nil {
							t.Fatal(err)
						}
						x := randomActs(rng, n*cols)
						SetISA(ISAGeneric)
						want := make([]float32, n*rows)
						pools[1].MatMul(want, m, x, n)
						SetISA(ISAAVX512)
						for th, p := range pools {
							got := make([]float32, n*rows)
							p.MatMul(got, m, x, n)
							bitsEqual(t, fmt.Sprintf("%d threads", th), got, want)
						}
					})
				}
			}
		}
	}
}

// TestCPUIsAMD checks the CPUID vendor test against the kernel's
// vendor_id in /proc/cpuinfo, where there is one.
func TestCPUIsAMD(t *testing.T) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skipf("no /proc/cpuinfo: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "vendor_id" {
			if got, want := cpuIsAMD(), strings.TrimSpace(v) == "AuthenticAMD"; got != want {
				t.Fatalf("cpuIsAMD() = %v, /proc/cpuinfo vendor_id %q", got, strings.TrimSpace(v))
			}
			return
		}
	}
	t.Skip("/proc/cpuinfo has no vendor_id")
}

// TestMatMulBF16DotDecode checks one token of BF16 weights on the
// one-token kernels (VDPBF16PS and multiply-then-add: the leapfrog and
// lockstep ones MatMul takes, by the row's length and forced, and the
// VDPBF16PS one-chain-at-a-time one) bit for bit against the portable kernels:
// ordinary weights, an even and an odd number of 32-column steps a row
// (the kernel must run: bf16DotDecode accepts them), rows past the last
// whole 8-row group, rows that are not whole 32-column
// groups (the kernel must not run), a hand-built Matrix (no cached range:
// it must not run), and tiny weights, where the kernel called directly
// gives other bits (so the range check is what the result rests on).
func TestMatMulBF16DotDecode(t *testing.T) {
	if !hasBF16Dot {
		t.Skip("no VDPBF16PS that passes the probe")
	}
	defer SetISA(SetISA(ISAGeneric))
	defer func(on bool) { bf16Dot = on }(bf16Dot)
	pools := map[int]*Pool{1: NewPool(1), 2: NewPool(2)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	const rows = 70
	for _, c := range []struct {
		name     string
		cols     int
		scale    float32
		handmade bool
		wantDot  bool
	}{
		{"ordinary", 896, 0.05, false, true},
		{"ordinary, long rows", 2048, 0.05, false, true},
		{"ordinary, rows of 3,072 columns", 3072, 0.05, false, true},
		{"an odd number of 32-column groups", 928, 0.05, false, true},
		{"one 32-column group", 32, 0.05, false, true},
		{"rows of 912 columns", 912, 0.05, false, false},
		{"hand-built matrix", 896, 0.05, true, false},
		// Products near 2^-140: subnormal, which VDPBF16PS flushes.
		{"tiny weights", 896, 1e-21, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bf16Dot = true
			rng := rand.New(rand.NewPCG(23, uint64(c.cols)))
			d := make([]byte, rows*c.cols*2)
			for i := 0; i < rows*c.cols; i++ {
				binary.LittleEndian.PutUint16(d[2*i:], ggml.F32ToBF16(float32(rng.NormFloat64())*c.scale))
			}
			m, err := NewMatrix(ggml.TypeBF16, rows, c.cols, d)
			if err != nil {
				t.Fatal(err)
			}
			if c.handmade {
				m = &Matrix{Type: ggml.TypeBF16, Rows: rows, Cols: c.cols, Data: d}
			}
			x := randomActs(rng, c.cols)
			if c.name == "tiny weights" {
				for i := range x {
					x[i] = float32(math.Ldexp(float64(x[i]), -70))
				}
			}
			SetISA(ISAGeneric)
			want := make([]float32, rows)
			pools[1].MatMul(want, m, x, 1)
			SetISA(ISAAVX512)
			a := new(acts)
			a.reset(actBF16, 1, c.cols)
			a.quantRow(x, 0)
			if got := bf16DotDecode(m, a); got != c.wantDot {
				t.Fatalf("bf16DotDecode: %v, want %v", got, c.wantDot)
			}
			if c.name == "tiny weights" {
				var acc [8]float32
				differs := false
				for g := 0; g+8 <= rows && !differs; g += 8 {
					bf16dDot8x1AVX512(&m.Data[g*m.RowBytes], m.RowBytes, &a.bp[0], c.cols/32, &acc[0])
					for r := range acc {
						differs = differs || math.Float32bits(acc[r]) != math.Float32bits(want[g+r])
					}
				}
				if !differs {
					t.Fatal("the kernel gave the canonical bits on tiny weights: the case does not test the check")
				}
			}
			defer func(c int, k bf16dKernel) { floatLockCols, bf16dLong = c, k }(floatLockCols, bf16dLong)
			shipped := floatLockCols
			kernels := []struct {
				name string
				cols int
				long bf16dKernel
			}{
				{"as shipped", shipped, bf16dDot8x1LockAVX512},
				{"leapfrog", math.MaxInt, bf16dDot8x1LockAVX512},
				{"lockstep", 0, bf16dDot8x1LockAVX512},
				{"chain", 0, bf16dDot8x1AVX512},
			}
			for th, p := range pools {
				for _, on := range []bool{true, false} {
					for _, k := range kernels {
						bf16Dot, floatLockCols, bf16dLong = on, k.cols, k.long
						got := make([]float32, rows)
						p.MatMul(got, m, x, 1)
						bitsEqual(t, fmt.Sprintf("%d threads, VDPBF16PS %v, %s kernel", th, on, k.name), got, want)
					}
				}
			}
		})
	}
}
