package kernels

import (
	"sync"
	"syscall"

	"github.com/muserhq/muser/infer/ggml"
	"golang.org/x/sys/cpu"
)

// AMX: Q8_0 batches of 16 tokens or more multiply on the CPU's int8 tile
// unit (tdpbssd). A tile product is Σ w·a over a block's 32 values for 16
// tokens × 16 rows, an exact int32 like the VNNI kernels' sums, and the
// float steps that follow are the canonical ones (doc.go), so the results
// are the other variants' bits.

//go:noescape
func q8_0AMX16(b *byte, dw *float32, nb int, q *int8, qStride int, daT *float32, ntg int, y *float32, yStride int, cfg *byte, scratch *byte)

// amxTile is the tile kernel matmulQ8_0AMX calls (q8_0AMX16; a test
// swaps in a Go model of it to check the layouts on CPUs without AMX).
var amxTile = q8_0AMX16

//go:noescape
func q8_0PackAMX(w *byte, idx *[16]int32, nb int, b *byte, dw *float32)

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

// amxConfig is the tile configuration (palette 1) of q8_0AMX16: tmm0 and
// tmm1 16 rows × 64 bytes (int32 results), tmm4 and tmm5 16 rows × 32
// bytes (one block of 16 tokens), tmm6 and tmm7 8 rows × 64 bytes (one
// block of 16 weight rows, four bytes of each row per tile row).
var amxConfig = func() (c [64]byte) {
	c[0] = 1
	colsb := func(t, n int) { c[16+2*t] = byte(n); c[16+2*t+1] = byte(n >> 8) }
	for _, t := range []int{0, 1} {
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

// prepAMX lays out a's activation scales for q8_0AMX16: for each whole
// group g of 16 tokens and block b, daA[(g·nb + b)·16 + t] is token
// 16g+t's scale of block b.
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
}

// amxBuf is one worker's packed weights and tile scratch.
type amxBuf struct {
	b       []byte
	dw      []float32
	scratch [2048]byte
}

var amxPool = sync.Pool{New: func() any { return new(amxBuf) }}

// matmulQ8_0AMX runs rows [r0,r1) of a Q8_0 batch prepared by prepAMX:
// each whole 16-row group is packed once and multiplied by every whole
// group of 16 tokens on the tile unit; the tokens after the last whole
// group, and the rows after the last whole row group, take the one-token
// raw-block kernel (and it the portable code for a last partial 8 rows).
func matmulQ8_0AMX(y []float32, m *Matrix, a *acts, r0, r1 int) {
	rb, rows, nb := m.RowBytes, m.Rows, a.nb
	buf := amxPool.Get().(*amxBuf)
	defer amxPool.Put(buf)
	buf.b = grow(buf.b, nb*512)
	buf.dw = grow(buf.dw, nb*16)
	var idx [16]int32
	for i := range idx {
		idx[i] = int32(i * rb)
	}
	ntg := a.n / amxTokens
	one := legacyRaw[ggml.TypeQ8_0]
	g0 := r0
	for ; g0+16 <= r1; g0 += 16 {
		q8_0PackAMX(&m.Data[g0*rb], &idx, nb, &buf.b[0], &buf.dw[0])
		amxTile(&buf.b[0], &buf.dw[0], nb, &a.q[0], a.cols, &a.daA[0], ntg, &y[g0], rows*4, &amxConfig[0], &buf.scratch[0])
		matmulRawTokens(y, m, a, g0, g0+16, ntg*amxTokens, one)
	}
	if g0 < r1 {
		matmulRawTokens(y, m, a, g0, r1, 0, one)
	}
}
