package kernels

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/muserhq/muser/infer/ggml"
)

// amxShapes are the matrices of the AMX tests: whole and partial 16-row
// groups, even and odd block counts, and every way the tile kernel's
// two-pair pipeline can end (1 to 7 blocks: no pair, one pair, two or
// three pairs, with and without a last single block).
var amxShapes = []struct{ rows, cols int }{{16, 768}, {40, 800}, {48, 96}, {135, 768}, {32, 4864},
	{16, 32}, {32, 64}, {16, 128}, {32, 160}, {16, 192}, {48, 224}}

// amxBatches are the batch sizes: one group, groups with a rest, many.
var amxBatches = []int{16, 17, 31, 32, 33, 48, 80, 100, 160}

// TestAMXPack checks the weight packing of the AMX kernels against its
// definition: block k's tile row j holds bytes 4j..4j+3 of each row's
// quants, then the 16 scales widened.
func TestAMXPack(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("the packing kernel needs AVX-512 (this CPU: " + BestISA().String() + ")")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 16, 800
	nb := cols / 32
	data := randomWeights(rng, ggml.TypeQ8_0, rows, cols)
	rb := nb * 34
	var idx [16]int32
	for i := range idx {
		idx[i] = int32(i * rb)
	}
	b := make([]byte, nb*512)
	dw := make([]float32, nb*16)
	q8_0PackAMX(&data[0], &idx, nb, &b[0], &dw[0])
	for k := 0; k < nb; k++ {
		for r := 0; r < 16; r++ {
			blk := data[r*rb+k*34:]
			if got, want := dw[k*16+r], f16at(blk, 0); got != want {
				t.Fatalf("block %d row %d: scale %g, want %g", k, r, got, want)
			}
			for j := 0; j < 8; j++ {
				got := binary.LittleEndian.Uint32(b[k*512+j*64+r*4:])
				want := binary.LittleEndian.Uint32(blk[2+4*j:])
				if got != want {
					t.Fatalf("block %d row %d tile row %d: %08x, want %08x", k, r, j, got, want)
				}
			}
		}
	}
}

// amxModel is a Go model of q8_0AMX16 (same arguments, same canonical
// float steps), so that the AMX driver and layouts are checked on CPUs
// without AMX.
func amxModel(bp *byte, dwp *float32, nb int, qp *int8, qStride, qBlock, qGroup int, daTp *float32, ntg int, yp *float32, yStride int, _ *byte, _ *byte) {
	b := unsafe.Slice(bp, nb*512)
	dw := unsafe.Slice(dwp, nb*16)
	q := unsafe.Slice(qp, (ntg-1)*qGroup+15*qStride+(nb-1)*qBlock+32)
	daT := unsafe.Slice(daTp, ntg*nb*16)
	y := unsafe.Slice(yp, ((ntg*16-1)*yStride)/4+16)
	for g := 0; g < ntg; g++ {
		var acc [16][16]float32
		for k := 0; k < nb; k++ {
			for t := 0; t < 16; t++ {
				qt := q[g*qGroup+t*qStride+k*qBlock:]
				da := daT[(g*nb+k)*16+t]
				for r := 0; r < 16; r++ {
					var isum int32
					for c := 0; c < 32; c++ {
						isum += int32(qt[c]) * int32(int8(b[k*512+(c/4)*64+r*4+c%4]))
					}
					p := float32(dw[k*16+r] * da)
					p = float32(p * float32(isum))
					acc[t][r] = acc[t][r] + p
				}
			}
		}
		for t := 0; t < 16; t++ {
			copy(y[(g*16+t)*yStride/4:], acc[t][:])
		}
	}
}

// amxQuadModel is a Go model of q8_0AMX32, like amxModel.
func amxQuadModel(b0p, b1p *byte, dwp *float32, dwOff, nb int, qp *int8, qPair int, daPp *float32, npair int, yp *float32, yStride int, _, _ *byte, _ *float32) {
	bs := [2][]byte{unsafe.Slice(b0p, nb*512), unsafe.Slice(b1p, nb*512)}
	dw := unsafe.Slice(dwp, dwOff/4+nb*16)
	q := unsafe.Slice(qp, npair*qPair)
	daP := unsafe.Slice(daPp, npair*nb*32)
	y := unsafe.Slice(yp, ((npair*32-1)*yStride)/4+32)
	for p := 0; p < npair; p++ {
		var acc [32][32]float32
		for k := 0; k < nb; k++ {
			for t := 0; t < 32; t++ {
				qt := q[p*qPair+k*1024+(t%16)*64+(t/16)*32:]
				da := daP[(p*nb+k)*32+t]
				for r := 0; r < 32; r++ {
					b := bs[r/16]
					var isum int32
					for c := 0; c < 32; c++ {
						isum += int32(qt[c]) * int32(int8(b[k*512+(c/4)*64+(r%16)*4+c%4]))
					}
					p := float32(dw[(r/16)*dwOff/4+k*16+r%16] * da)
					p = float32(p * float32(isum))
					acc[t][r] = acc[t][r] + p
				}
			}
		}
		for t := 0; t < 32; t++ {
			copy(y[(p*32+t)*yStride/4:], acc[t][:])
		}
	}
}

// amxCheck runs matmulQ8_0AMX over every shape and batch (1 and 3
// threads) and compares it with the portable kernels bit for bit.
func amxCheck(t *testing.T) {
	pools := map[int]*Pool{1: NewPool(1), 3: NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, sh := range amxShapes {
		for _, extreme := range []bool{false, true} {
			rng := rand.New(rand.NewPCG(11, uint64(sh.rows*sh.cols)))
			data := randomWeights(rng, ggml.TypeQ8_0, sh.rows, sh.cols)
			maxN := amxBatches[len(amxBatches)-1]
			x := randomActs(rng, maxN*sh.cols)
			if extreme {
				// Quants of −128 against activations of one sign: the
				// largest block sums.
				for b := 0; b < len(data); b += 34 {
					for i := 2; i < 34; i++ {
						data[b+i] = 0x80
					}
				}
				for i := range x {
					x[i] = -1 - float32(i%3)/1000
				}
			}
			m, err := NewMatrix(ggml.TypeQ8_0, sh.rows, sh.cols, data)
			if err != nil {
				t.Fatal(err)
			}
			old := isa // not SetISA: the model test runs ISAAMX where the CPU has none
			isa = ISAGeneric
			want := make([]float32, maxN*sh.rows)
			pools[1].MatMul(want, m, x, maxN)
			isa = old
			for _, n := range amxBatches {
				for th, p := range pools {
					got := make([]float32, n*sh.rows)
					p.MatMul(got, m, x, n)
					bitsEqual(t, fmt.Sprintf("%dx%d extreme=%v n=%d %d threads", sh.rows, sh.cols, extreme, n, th), got, want[:n*sh.rows])
				}
			}
		}
	}
}

// TestMatMulAMXModel checks the AMX path's packing, scale layout, tails
// and strides with amxModel in place of the tile kernel, on any CPU with
// AVX-512.
func TestMatMulAMXModel(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("the AMX path's packing and tails need AVX-512 (this CPU: " + BestISA().String() + ")")
	}
	tile, quad := amxTile, amxQuad
	defer func() { amxTile, amxQuad = tile, quad }()
	var calls, quads atomic.Int64
	amxTile = func(bp *byte, dw *float32, nb int, q *int8, qStride, qBlock, qGroup int, daT *float32, ntg int, y *float32, yStride int, cfg, scratch *byte) {
		calls.Add(1)
		amxModel(bp, dw, nb, q, qStride, qBlock, qGroup, daT, ntg, y, yStride, cfg, scratch)
	}
	amxQuad = func(b0, b1 *byte, dw *float32, dwOff, nb int, q *int8, qPair int, daP *float32, npair int, y *float32, yStride int, cfg, scratch *byte, acc *float32) {
		quads.Add(1)
		amxQuadModel(b0, b1, dw, dwOff, nb, q, qPair, daP, npair, y, yStride, cfg, scratch, acc)
	}
	defer func(old ISA) { isa = old }(isa)
	isa = ISAAMX // the tile kernels are the models: no AMX instruction runs
	amxCheck(t)
	if calls.Load() == 0 || quads.Load() == 0 {
		t.Fatalf("the AMX path called its 16×16 kernel %d times and its 32×32 kernel %d times; the shapes must reach both", calls.Load(), quads.Load())
	}
}

// TestMatMulAMX checks the AMX kernels against the portable code bit for
// bit where the CPU has AMX int8 tiles.
func TestMatMulAMX(t *testing.T) {
	if BestISA() < ISAAMX {
		t.Skip("this CPU has no AMX int8 tiles the process may use (/proc/cpuinfo amx_int8, Linux arch_prctl): the AMX kernels run on such CPUs only")
	}
	defer SetISA(SetISA(ISAAMX))
	amxCheck(t)
}

// BenchmarkMatMulAMX compares the AMX kernels with the AVX-512 ones on
// Q8_0 prefill shapes of Qwen2.5-0.5B (ffn_up 896→4864, ffn_down
// 4864→896), one thread.
func BenchmarkMatMulAMX(b *testing.B) {
	for _, sh := range []struct {
		name       string
		rows, cols int
	}{{"ffn_up", 4864, 896}, {"ffn_down", 896, 4864}} {
		for _, n := range []int{16, 64, 512} {
			for _, v := range []ISA{ISAAVX512, ISAAMX} {
				b.Run(fmt.Sprintf("%s/n=%d/%s", sh.name, n, v), func(b *testing.B) {
					if BestISA() < v {
						b.Skip("CPU lacks " + v.String())
					}
					defer SetISA(SetISA(v))
					m := benchMatrix(b, ggml.TypeQ8_0, sh.rows, sh.cols)
					x := randomActs(rand.New(rand.NewPCG(5, 6)), n*sh.cols)
					y := make([]float32, n*sh.rows)
					p := NewPool(1)
					defer p.Close()
					cpu := startCPU(b)
					for b.Loop() {
						p.MatMul(y, m, x, n)
					}
					cpu.report(2*float64(sh.rows*sh.cols*n)/1e9, "GFLOP")
				})
			}
		}
	}
}
