package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// packQ8_0 writes quantized activations in ggml's block_q8_0 layout.
func packQ8_0(q []int8, d []float32) []byte {
	out := make([]byte, 0, len(d)*34)
	for b := range d {
		out = binary.LittleEndian.AppendUint16(out, ggml.F32ToF16(d[b]))
		for _, v := range q[b*32 : b*32+32] {
			out = append(out, byte(v))
		}
	}
	return out
}

// packQ8_K writes quantized activations in ggml's block_q8_K layout.
func packQ8_K(q []int8, d []float32, bs []int32) []byte {
	out := make([]byte, 0, len(d)*292)
	for b := range d {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(d[b]))
		for _, v := range q[b*256 : b*256+256] {
			out = append(out, byte(v))
		}
		for _, s := range bs[b*16 : b*16+16] {
			out = binary.LittleEndian.AppendUint16(out, uint16(int16(s)))
		}
	}
	return out
}

// quantInputs are rows that exercise the quantizers' edge cases.
func quantInputs(rng *rand.Rand, n int) map[string][]float32 {
	in := map[string][]float32{}
	in["normal"] = randomActs(rng, n)
	z := make([]float32, n)
	in["zeros"] = z
	ties := make([]float32, n)
	for i := range ties {
		ties[i] = float32(i%255-127) / 2 // halves: rounding ties
	}
	in["ties"] = ties
	tiny := make([]float32, n)
	for i := range tiny {
		tiny[i] = float32(rng.NormFloat64()) * 1e-30
	}
	in["tiny"] = tiny
	big := make([]float32, n)
	for i := range big {
		big[i] = float32(rng.NormFloat64()) * 1e4
	}
	big[7] = -3e4 // the largest magnitude is negative
	in["big"] = big
	return in
}

// TestQuantizersMatchGGML checks that the activation quantizers give the
// bytes of ggml's reference quantizers (ggml.Quantize), block for block.
func TestQuantizersMatchGGML(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 1024
	for name, x := range quantInputs(rng, n) {
		t.Run("Q8_0/"+name, func(t *testing.T) {
			q, d, s := make([]int8, n), make([]float32, n/32), make([]int32, n/32)
			s1 := make([]float32, n/32)
			quantQ8_0(x, q, d, s, s1)
			want := make([]byte, n/32*34)
			if err := ggml.Quantize(ggml.TypeQ8_0, x, want); err != nil {
				t.Fatal(err)
			}
			if got := packQ8_0(q, d); !bytes.Equal(got, want) {
				t.Fatalf("got blocks %x…, want %x…", got[:40], want[:40])
			}
			for b := range d {
				sum := int32(0)
				for _, v := range q[b*32 : b*32+32] {
					sum += int32(v)
				}
				if s[b] != sum {
					t.Fatalf("block %d: got sum %d, want %d", b, s[b], sum)
				}
			}
		})
		t.Run("Q8_K/"+name, func(t *testing.T) {
			q, d, bs := make([]int8, n), make([]float32, n/256), make([]int32, n/16)
			quantQ8_K(x, q, d, bs)
			want := make([]byte, n/256*292)
			if err := ggml.Quantize(ggml.TypeQ8_K, x, want); err != nil {
				t.Fatal(err)
			}
			if got := packQ8_K(q, d, bs); !bytes.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("byte %d (block %d): got %#x, want %#x", i, i/292, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestQuantQ8_1 checks Q8_1's extra field against its definition,
// s = f16(Σq·d) with d the unrounded scale, on a hand-made block.
func TestQuantQ8_1(t *testing.T) {
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(i) - 10 // amax 21: d = 21/127
	}
	q, d, sums, s := make([]int8, 32), make([]float32, 1), make([]int32, 1), make([]float32, 1)
	quantQ8_0(x, q, d, sums, s)
	dd := float32(21) / 127
	if q[31] != 127 || q[0] != int8(math.Round(float64(-10*(1/dd)))) {
		t.Fatalf("got q[0]=%d q[31]=%d, want %d and 127", q[0], q[31], int8(math.Round(float64(-10*(1/dd)))))
	}
	sum := int32(0)
	for _, v := range q {
		sum += int32(v)
	}
	want := ggml.F16ToF32(ggml.F32ToF16(float32(sum) * dd))
	if s[0] != want || sums[0] != sum {
		t.Fatalf("got s=%g sum=%d, want s=%g sum=%d", s[0], sums[0], want, sum)
	}
}

func TestExp32(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 200000; i++ {
		x := float32(-103 + 191.7*float64(i)/200000)
		got := float64(Exp32(x))
		want := math.Exp(float64(x))
		if want < 1.2e-38 { // subnormal float32: absolute error of half a step
			if math.Abs(got-want) > 0.51*math.SmallestNonzeroFloat32 {
				t.Fatalf("Exp32(%g) = %g, want %g", x, got, want)
			}
			continue
		}
		ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1))) - float32(want))
		if e := math.Abs(got-want) / ulp; e > worst {
			worst = e
		}
	}
	if worst > 0.51 {
		t.Fatalf("Exp32: worst error %.3f ulp, want ≤ 0.51", worst)
	}
	for _, tc := range []struct{ x, want float32 }{
		{0, 1}, {float32(math.Inf(-1)), 0}, {float32(math.Inf(1)), float32(math.Inf(1))}, {89, float32(math.Inf(1))}, {-200, 0},
	} {
		if got := Exp32(tc.x); got != tc.want {
			t.Errorf("Exp32(%g) = %g, want %g", tc.x, got, tc.want)
		}
	}
	if got := Exp32(float32(math.NaN())); got == got {
		t.Errorf("Exp32(NaN) = %g, want NaN", got)
	}
}

func TestVectorHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 15, 16, 17, 64, 100, 896} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			a, b := randomActs(rng, n), randomActs(rng, n)
			var exact, abs float64
			for i := range a {
				exact += float64(a[i]) * float64(b[i])
				abs += math.Abs(float64(a[i]) * float64(b[i]))
			}
			if got := Dot(a, b); math.Abs(float64(got)-exact) > 1e-6*abs {
				t.Errorf("Dot: got %g, want %g", got, exact)
			}
			h := make([]uint16, n)
			F32ToF16(h, a)
			back := make([]float32, n)
			F16ToF32(back, h)
			for i := range a {
				if h[i] != ggml.F32ToF16(a[i]) || back[i] != ggml.F16ToF32(h[i]) {
					t.Fatalf("f16 conversion of %g: got %#x/%g", a[i], h[i], back[i])
				}
			}
			if got, want := DotF16(h, b), Dot(back, b); got != want {
				t.Errorf("DotF16: got %g, want Dot of the widened values %g", got, want)
			}
			y := append([]float32(nil), b...)
			AXPY(y, 0.5, a)
			y2 := append([]float32(nil), b...)
			AXPYF16(y2, 0.5, h)
			for i := range y {
				if want := b[i] + 0.5*a[i]; y[i] != want {
					t.Fatalf("AXPY[%d]: got %g, want %g", i, y[i], want)
				}
				if want := b[i] + 0.5*back[i]; y2[i] != want {
					t.Fatalf("AXPYF16[%d]: got %g, want %g", i, y2[i], want)
				}
			}
			// RMSNorm against float64.
			w := randomActs(rng, n)
			dst := make([]float32, n)
			RMSNorm(dst, a, w, 1e-6)
			var ss float64
			for _, v := range a {
				ss += float64(v) * float64(v)
			}
			sc := 1 / math.Sqrt(ss/float64(n)+1e-6)
			for i := range a {
				want := float64(a[i]) * sc * float64(w[i])
				if math.Abs(float64(dst[i])-want) > 1e-6*math.Abs(want)+1e-7 {
					t.Fatalf("RMSNorm[%d]: got %g, want %g", i, dst[i], want)
				}
			}
			// Softmax sums to one and follows exp ratios.
			s := append([]float32(nil), a...)
			Softmax(s)
			var sum float64
			for i := range s {
				sum += float64(s[i])
				want := math.Exp(float64(a[i]-a[0])) * float64(s[0])
				if math.Abs(float64(s[i])-want) > 1e-5*want+1e-12 {
					t.Fatalf("Softmax[%d]: got %g, want %g", i, s[i], want)
				}
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Errorf("Softmax sums to %g, want 1", sum)
			}
			// SiLUMul.
			g := make([]float32, n)
			SiLUMul(g, a, b)
			for i := range g {
				want := float64(a[i]) / (1 + math.Exp(-float64(a[i]))) * float64(b[i])
				if math.Abs(float64(g[i])-want) > 1e-6*math.Abs(want)+1e-30 {
					t.Fatalf("SiLUMul[%d]: got %g, want %g", i, g[i], want)
				}
			}
			sumv := make([]float32, n)
			Add(sumv, a, b)
			Scale(sumv, 2)
			for i := range sumv {
				if want := (a[i] + b[i]) * 2; sumv[i] != want {
					t.Fatalf("Add/Scale[%d]: got %g, want %g", i, sumv[i], want)
				}
			}
		})
	}
}

// TestVectorHelpersVariants checks that every ISA variant of the vector
// helpers gives the portable code's bits, for lengths around the 16-lane
// width.
func TestVectorHelpersVariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	defer SetISA(SetISA(ISAGeneric))
	for _, n := range []int{1, 15, 16, 17, 32, 64, 100, 128, 4864} {
		a, b := randomActs(rng, n), randomActs(rng, n)
		h := make([]uint16, n)
		F32ToF16(h, a)
		type result struct {
			dot, dotF16 float32
			axpy, axpyF []float32
		}
		run := func() result {
			r := result{dot: Dot(a, b), dotF16: DotF16(h, b)}
			r.axpy = append([]float32(nil), b...)
			AXPY(r.axpy, 0.37, a)
			r.axpyF = append([]float32(nil), b...)
			AXPYF16(r.axpyF, -1.7, h)
			return r
		}
		SetISA(ISAGeneric)
		want := run()
		for _, v := range variants() {
			SetISA(v)
			got := run()
			what := fmt.Sprintf("%s, n=%d", v, n)
			bitsEqual(t, what+": Dot", []float32{got.dot, got.dotF16}, []float32{want.dot, want.dotF16})
			bitsEqual(t, what+": AXPY", got.axpy, want.axpy)
			bitsEqual(t, what+": AXPYF16", got.axpyF, want.axpyF)
		}
	}
}

// TestQuantizersVariants checks that the SIMD activation quantizers give
// the portable quantizers' bytes, edge cases included: zeros, subnormals,
// values whose scale underflows, infinities and NaNs (which take the Go
// code block by block).
func TestQuantizersVariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 1024
	inputs := quantInputs(rng, n)
	sub := make([]float32, n)
	for i := range sub {
		sub[i] = math.Float32frombits(uint32(rng.IntN(1 << 23))) // subnormals
		if i%2 == 0 {
			sub[i] = -sub[i]
		}
	}
	inputs["subnormal"] = sub
	edge := randomActs(rng, n)
	edge[3] = float32(math.Inf(1))
	edge[300] = float32(math.NaN())
	edge[600] = float32(math.Inf(-1))
	edge[900] = 1e38
	inputs["inf-nan"] = edge
	for name, x := range inputs {
		for _, kind := range []actKind{actQ8_0, actQ8_1, actQ8_K} {
			t.Run(fmt.Sprintf("%s/%d", name, kind), func(t *testing.T) {
				defer SetISA(SetISA(ISAGeneric))
				var want acts
				want.reset(kind, 1, n)
				want.quantRow(x, 0)
				for _, v := range variants() {
					SetISA(v)
					var got acts
					got.reset(kind, 1, n)
					got.quantRow(x, 0)
					for i := range want.q {
						if got.q[i] != want.q[i] {
							t.Fatalf("%s: q[%d] = %d, want %d (x = %g)", v, i, got.q[i], want.q[i], x[i])
						}
					}
					bitsEqual(t, v.String()+" d", got.d, want.d)
					bitsEqual(t, v.String()+" s", got.s, want.s)
					for i := range want.bs {
						if got.bs[i] != want.bs[i] {
							t.Fatalf("%s: bs[%d] = %d, want %d", v, i, got.bs[i], want.bs[i])
						}
					}
					for i := range want.bs16 {
						if got.bs16[i] != want.bs16[i] {
							t.Fatalf("%s: bs16[%d] = %d, want %d", v, i, got.bs16[i], want.bs16[i])
						}
					}
					for i := range want.qu {
						if got.qu[i] != want.qu[i] {
							t.Fatalf("%s: qu[%d] = %d, want %d", v, i, got.qu[i], want.qu[i])
						}
					}
				}
			})
		}
	}
}

// TestRowsHelpers checks DotF16Rows and AXPYF16Rows against loops of
// DotF16 and AXPYF16 on the portable code, bit for bit, for head sizes
// around the lane width and several strides and row counts.
func TestRowsHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	defer SetISA(SetISA(ISAGeneric))
	for _, dim := range []int{16, 48, 64, 80, 128, 20} {
		for _, rows := range []int{1, 3, 17, 100} {
			stride := dim*2 + 16 // e.g. two heads of a layer's K row, plus padding
			kf := randomActs(rng, rows*stride)
			k := make([]uint16, len(kf))
			F32ToF16(k, kf)
			q := randomActs(rng, dim)
			a := randomActs(rng, rows)
			y0 := randomActs(rng, dim)
			SetISA(ISAGeneric)
			wantD := make([]float32, rows)
			for j := range wantD {
				wantD[j] = DotF16(k[j*stride:j*stride+dim], q)
			}
			wantY := append([]float32(nil), y0...)
			for j := range a {
				AXPYF16(wantY, a[j], k[j*stride:j*stride+dim])
			}
			for _, v := range variants() {
				SetISA(v)
				gotD := make([]float32, rows)
				DotF16Rows(gotD, k, stride, q)
				gotY := append([]float32(nil), y0...)
				AXPYF16Rows(gotY, a, k, stride)
				what := fmt.Sprintf("%s dim=%d rows=%d", v, dim, rows)
				bitsEqual(t, what+" DotF16Rows", gotD, wantD)
				bitsEqual(t, what+" AXPYF16Rows", gotY, wantY)
			}
		}
	}
}

// TestSoftmaxSiLUVariants checks Softmax and SiLUMul bit for bit across
// variants, on lengths around the vector width and on rows with extreme
// values (NaN rows stay in Go by design).
func TestSoftmaxSiLUVariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	defer SetISA(SetISA(ISAGeneric))
	for _, n := range []int{1, 7, 8, 9, 16, 100, 4864, 8192} {
		x := randomActs(rng, n)
		for i := range x {
			x[i] *= 20 // scores with a wide range: exps that underflow
		}
		if n > 50 {
			x[3] = 95 // silu overflow region
			x[5] = -120
		}
		if n == 100 {
			x[40] = float32(math.NaN()) // a NaN score: Go code, same bits
		}
		up := randomActs(rng, n)
		SetISA(ISAGeneric)
		wantS := append([]float32(nil), x...)
		Softmax(wantS)
		wantG := make([]float32, n)
		SiLUMul(wantG, x, up)
		for _, v := range variants() {
			SetISA(v)
			gotS := append([]float32(nil), x...)
			Softmax(gotS)
			gotG := make([]float32, n)
			SiLUMul(gotG, x, up)
			bitsEqual(t, fmt.Sprintf("%s n=%d Softmax", v, n), gotS, wantS)
			bitsEqual(t, fmt.Sprintf("%s n=%d SiLUMul", v, n), gotG, wantG)
		}
	}
}
