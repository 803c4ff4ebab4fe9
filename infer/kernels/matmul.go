package kernels

import (
	"fmt"
	"math"
	"sync"

	"github.com/muserhq/muser/infer/ggml"
)

// floatTileRows is tileRows for AVX-512 batches of float weights: each
// activation loaded from L2 serves twice the rows. Measured within noise
// of 16 rows (BenchmarkFloatPrefill's BF16-16rows; docs/benchmarks.md,
// "F16 and BF16 prefill"); the whole-model figures were taken with it.
var floatTileRows = 32

// tileRows is the number of output rows one work item computes (a
// multiple of 8, the SIMD kernels' row group). Threads split output rows,
// never the reduction dimension, so a result does not depend on which
// thread computes it. Batches that read the weights in place take at
// least decodeTileRows, so that each thread streams longer contiguous runs
// of weights (workRows).
const (
	tileRows       = 16
	decodeTileRows = 64
)

// streamTokens is the largest batch whose MatMul streams the weights from
// memory once (decode of one stream or a few): it takes a few large work
// items per thread (tilesPerThread), not tiles of decodeTileRows, because
// each work item starts cold: the raw-block kernels prefetch two row groups
// ahead within it, and the next item usually runs on the other thread.
// Measured: 2-thread decode of Llama-3.2-1B's ffn_up and output matrices
// read Q4_K at 1.39–1.63× and Q6_K at 1.29–1.49× the rate of 64-row
// tiles (docs/benchmarks.md, "Decode work items").
const (
	streamTokens   = 8
	tilesPerThread = 4
)

// workRows returns the output rows of one work item of a MatMul of n
// tokens of type t into rows rows on threads threads.
func workRows(t ggml.Type, n, rows, threads int) int {
	if n > rawMaxTokens(t) {
		if isa >= ISAAVX512 && (t == ggml.TypeBF16 || t == ggml.TypeF16 || t == ggml.TypeF32) {
			return floatTileRows
		}
		return tileRows
	}
	if n > streamTokens {
		return decodeTileRows
	}
	return max(decodeTileRows, rows/(threads*tilesPerThread)/16*16)
}

// multiToken enables the multi-token raw-block kernels (SetMultiToken).
var multiToken = true

// SetMultiToken turns the multi-token raw-block kernels on or off and
// returns the previous setting. On (the default), batches of 2 tokens or
// more of a type that has them (with AVX-512: Q8_0 at every size; Q5_0,
// Q4_K and Q6_K up to 128 tokens; with AVX2: Q4_K, Q6_K, Q5_0 and Q8_0
// at every size, and F16, BF16 and F32 batches 3 tokens at a time) read
// each weight block once for up to 8 tokens; off, they take the
// one-token raw-block kernel per token (with AVX-512 up to 4 tokens, and
// unpacked panels above), as before those kernels existed. Both give
// identical bits (doc.go), so this is a knob for benchmarks that compare
// the two in one run; it is not safe to call while kernels run.
func SetMultiToken(on bool) bool {
	old := multiToken
	multiToken = on
	return old
}

// MaxRawBatch returns the largest number of tokens for which MatMul, on
// this CPU and kernel variant, multiplies weights of type t where they lie;
// a larger batch first unpacks each 8-row group of weights into a panel, a
// cost per call that a few tokens do not repay (so a caller decoding many
// streams may prefer calls of at most this many tokens): with AVX-512,
// 128 for Q5_0, Q4_K and Q6_K, 4 for the other raw-block types (4 for all
// of them with SetMultiToken(false)). It returns
// math.MaxInt where the batch size never adds that cost: types whose
// kernels read the weights in place at every batch size (Q8_0 and NVFP4
// with AVX-512, the float types, every type without AVX-512) and types
// that always take panels (Q2_K, Q3_K with AVX-512).
func MaxRawBatch(t ggml.Type) int {
	k := kernelFor(t)
	if k == nil || isa < ISAAVX512 || k.block == 1 {
		return math.MaxInt
	}
	if n := rawMaxTokens(t); n < math.MaxInt && archRaw(t) {
		return n
	}
	return math.MaxInt
}

// actsPool recycles activation buffers between MatMul calls.
var actsPool = sync.Pool{New: func() any { return new(acts) }}

// MatMul sets y[t*m.Rows+r] = Σ_c m[r][c]·x[t*m.Cols+c] for t < n: x is n
// rows of m.Cols floats, y is n rows of m.Rows floats. The activations are
// quantized per token row as the weight type needs (as llama.cpp does):
// Q8_0 for Q4_0, Q5_0, Q8_0 and NVFP4; Q8_1 for Q4_1 and Q5_1; Q8_K for
// the K-quants; f16 for F16, bf16 for BF16; F32 weights take x as it is.
//
// MatMul is batch-invariant: each y element is bit-identical for any n, any
// position of the token in the batch, any thread count and any
// instruction-set variant (doc.go, "Canonical order").
//
// MatMul checks m on every call and panics (with a *MatrixError) if it is
// inconsistent, or if x or y is shorter than n rows: those are programming
// errors, not data errors (NewMatrix is where data is checked).
func (p *Pool) MatMul(y []float32, m *Matrix, x []float32, n int) {
	if n <= 0 {
		return
	}
	rb, err := m.check() // a few comparisons: the assembly must never read past Data
	if err != nil {
		panic(err)
	}
	if m.RowBytes != rb {
		mm := *m
		mm.RowBytes = rb
		m = &mm
	}
	if len(x) < n*m.Cols || len(y) < n*m.Rows {
		panic(fmt.Sprintf("kernels: MatMul of %d tokens: x has %d floats (want %d), y has %d (want %d)",
			n, len(x), n*m.Cols, len(y), n*m.Rows))
	}
	k := kernelFor(m.Type)
	a := actsPool.Get().(*acts)
	defer actsPool.Put(a)
	a.reset(k.act, n, m.Cols)
	if n >= 4 {
		p.Parallel(n, func(t int) { a.quantRow(x, t) })
	} else {
		for t := 0; t < n; t++ {
			a.quantRow(x, t)
		}
	}
	archPrepare(a, m.Type)
	impl := pickImpl(m.Type)
	tr := workRows(m.Type, n, m.Rows, p.threads)
	tiles := (m.Rows + tr - 1) / tr
	p.Parallel(tiles, func(i int) {
		r0 := i * tr
		impl(y, m, a, r0, min(r0+tr, m.Rows))
	})
}
