package kernels

import (
	"sync"
	"syscall"
	"unsafe"

	"github.com/muserhq/muser/infer/ggml"
	"golang.org/x/sys/cpu"
)

// AMX: Q8_0 batches of 16 tokens or more multiply on the CPU's int8 tile
// unit (tdpbssd). A tile product is Σ w·a over a block's 32 values for 16
// tokens × 16 rows, an exact int32 like the VNNI kernels' sums, and the
// float steps that follow are the canonical ones (doc.go), so the results
// are the other variants' bits. Every block's tile products go through
// memory to AVX-512 for their scales, so the kernels keep the tile unit
// busy on the next block while AVX-512 scales the last one, and the
// 32×32 kernel loads each operand tile once for two products.

//go:noescape
func q8_0AMX16(b *byte, dw *float32, nb int, q *int8, qStride, qBlock, qGroup int, daT *float32, ntg int, y *float32, yStride int, cfg *byte, scratch *byte)

//go:noescape
func q8_0AMX32(b0, b1 *byte, dw *float32, dwOff int, nb int, q *int8, qPair int, daP *float32, npair int, y *float32, yStride int, cfg *byte, scratch *byte, acc *float32)

//go:noescape
func q8_0PackAMX(w *byte, idx *[16]int32, nb int, b *byte, dw *float32)

// amxTile and amxQuad are the tile kernels matmulQ8_0AMX calls
// (q8_0AMX16 for one group of 16 tokens × 16 rows, q8_0AMX32 for two of
// each); a test swaps in Go models of them to check the layouts on CPUs
// without AMX.
var (
	amxTile = q8_0AMX16
	amxQuad = q8_0AMX32
)

// Linux's arch_prctl request for permission to use the AMX tile data
// state (without it the first tile instruction faults).
const (
	archReqXcompPerm  = 0x1023
	xfeatureXtiledata = 18
)

// hasAMX reports whether the CPU has AMX int8 tiles and the kernel let
// this process use them (asked once, at start-up; the permission holds
// for every thread of the process).
var hasAMX = cpu.X86.HasAMXTile && cpu.X86.HasAMXInt8 && requestAMX()

func requestAMX() bool {
	_, _, e := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0)
	return e == 0
}

// amxTokens is the token group of the AMX kernels: a batch takes them
// for its whole groups of 16 and the one-token kernel for the rest.
const amxTokens = 16

// amxConfig is the tile configuration (palette 1) of both kernels: tmm0
// to tmm3 16 rows × 64 bytes (int32 results), tmm4 and tmm5 16 rows × 32
// bytes (one block of 16 tokens), tmm6 and tmm7 8 rows × 64 bytes (one
// block of 16 weight rows, four bytes of each row per tile row).
var amxConfig = func() (c [64]byte) {
	c[0] = 1
	colsb := func(t, n int) { c[16+2*t] = byte(n); c[16+2*t+1] = byte(n >> 8) }
	for _, t := range []int{0, 1, 2, 3} {
		colsb(t, 64)
		c[48+t] = 16
	}
	for _, t := range []int{4, 5} {
		colsb(t, 32)
		c[48+t] = 16
	}
	for _, t := range []int{6, 7} {
		colsb(t, 64)
		c[48+t] = 8
	}
	return
}()

// useAMX reports whether a batch of n tokens of type t takes the AMX
// kernels.
func useAMX(t ggml.Type, n int) bool {
	return isa >= ISAAMX && multiToken && t == ggml.TypeQ8_0 && n >= amxTokens
}

// prepAMX lays out a's activations for the AMX kernels. For each whole
// group g of 16 tokens and block b, daA[(g·nb + b)·16 + t] is token
// 16g+t's scale of block b (q8_0AMX16, which reads the values in a.q).
// For each pair p of whole groups, qP holds block b's values at
// (p·nb + b)·1024 in 16 rows of 64 bytes, row t the 32 values of the
// pair's token t and then of its token 16+t, and daP[(p·nb + b)·32 + t]
// the scale of its token t (q8_0AMX32).
func prepAMX(a *acts) {
	nb, ng := a.nb, a.n/amxTokens
	a.daA = grow(a.daA, ng*nb*amxTokens)
	for g := 0; g < ng; g++ {
		for t := 0; t < amxTokens; t++ {
			d := a.d[(g*amxTokens+t)*nb:]
			for b := 0; b < nb; b++ {
				a.daA[(g*nb+b)*amxTokens+t] = d[b]
			}
		}
	}
	np := ng / 2
	a.daP = grow(a.daP, np*nb*32)
	a.qP = grow(a.qP, np*nb*1024+64)
	qP := a.qP[amxAlign(unsafe.Pointer(&a.qP[0])):]
	for p := 0; p < np; p++ {
		for t := 0; t < 32; t++ {
			tok := p*32 + t
			d, q := a.d[tok*nb:], a.q[tok*a.cols:]
			for b := 0; b < nb; b++ {
				a.daP[(p*nb+b)*32+t] = d[b]
				o := (p*nb+b)*1024 + (t%16)*64 + (t/16)*32
				copy(qP[o:o+32], q[b*32:b*32+32])
			}
		}
	}
}

// amxBuf is one worker's packed weights (two row groups), tile scratch
// and accumulators, each 64-byte aligned so that no tile row or vector
// load crosses a cache line.
type amxBuf struct {
	b       []byte
	dw      []float32
	scratch [8192 + 64]byte
	acc     [1024 + 16]float32
}

// amxAlign returns how many bytes past p the next 64-byte boundary is.
func amxAlign(p unsafe.Pointer) uintptr {
	return (64 - uintptr(p)%64) % 64
}

var amxPool = sync.Pool{New: func() any { return new(amxBuf) }}

// matmulQ8_0AMX runs rows [r0,r1) of a Q8_0 batch prepared by prepAMX.
// Each whole 32-row group is packed once (two 16-row groups) and
// multiplied by every pair of whole 16-token groups on the tile unit
// (q8_0AMX32), and by a last unpaired group with q8_0AMX16; a last whole
// 16-row group takes q8_0AMX16 for every token group. The tokens after
// the last whole group, and the rows after the last whole 16-row group,
// take the one-token raw-block kernel (and it the portable code for a
// last partial 8 rows).
func matmulQ8_0AMX(y []float32, m *Matrix, a *acts, r0, r1 int) {
	rb, rows, nb := m.RowBytes, m.Rows, a.nb
	buf := amxPool.Get().(*amxBuf)
	defer amxPool.Put(buf)
	buf.b = grow(buf.b, 2*nb*512+64)
	b0 := buf.b[amxAlign(unsafe.Pointer(&buf.b[0])):]
	b1 := b0[nb*512:]
	buf.dw = grow(buf.dw, 2*nb*16)
	dw0, dw1 := buf.dw, buf.dw[nb*16:]
	scratch := &buf.scratch[amxAlign(unsafe.Pointer(&buf.scratch[0]))]
	acc := &buf.acc[amxAlign(unsafe.Pointer(&buf.acc[0]))/4]
	var idx [16]int32
	for i := range idx {
		idx[i] = int32(i * rb)
	}
	ntg := a.n / amxTokens
	np := ntg / 2
	qP := &a.qP[amxAlign(unsafe.Pointer(&a.qP[0]))]
	// single runs q8_0AMX16 for token groups [g, ntg) of the 16 rows at r
	// packed in b, d.
	single := func(b []byte, d []float32, r, g int) {
		if g < ntg {
			amxTile(&b[0], &d[0], nb, &a.q[g*amxTokens*a.cols], a.cols, 32, amxTokens*a.cols,
				&a.daA[g*nb*amxTokens], ntg-g, &y[g*amxTokens*rows+r], rows*4, &amxConfig[0], scratch)
		}
	}
	one := legacyRaw[ggml.TypeQ8_0]
	g0 := r0
	for ; g0+32 <= r1; g0 += 32 {
		q8_0PackAMX(&m.Data[g0*rb], &idx, nb, &b0[0], &dw0[0])
		q8_0PackAMX(&m.Data[(g0+16)*rb], &idx, nb, &b1[0], &dw1[0])
		if np > 0 {
			amxQuad(&b0[0], &b1[0], &dw0[0], nb*64, nb, qP, nb*1024, &a.daP[0], np,
				&y[g0], rows*4, &amxConfig[0], scratch, acc)
		}
		single(b0, dw0, g0, 2*np)
		single(b1, dw1, g0+16, 2*np)
		matmulRawTokens(y, m, a, g0, g0+32, ntg*amxTokens, one)
	}
	if g0+16 <= r1 {
		q8_0PackAMX(&m.Data[g0*rb], &idx, nb, &b0[0], &dw0[0])
		single(b0, dw0, g0, 0)
		matmulRawTokens(y, m, a, g0, g0+16, ntg*amxTokens, one)
		g0 += 16
	}
	if g0 < r1 {
		matmulRawTokens(y, m, a, g0, r1, 0, one)
	}
}
