package kernels

import (
	"encoding/binary"
	"math"
	"testing"
)

// sameBits reports whether two results are the same bits, counting every
// NaN as equal: the kernels promise identical bits for finite inputs, and
// NaN payloads are not part of that promise.
func sameBits(a, b float32) bool {
	if a != a && b != b {
		return true
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

// FuzzMatMulInvariance drives MatMul with arbitrary weight bytes (any f16
// scale, NaN and infinity included) and activations, for every type, and
// checks the exactness invariants: every ISA variant the CPU has equals the
// portable kernels, 1 and 3 threads agree, and each token alone equals that token in
// the batch.
//
// Input layout: byte 0 picks the type, byte 1 the rows (1..40), byte 2 the
// blocks per row (1..4), byte 3 the tokens (1..10: the multi-token kernels
// take groups of up to 8); the rest seeds weights
// and activations (repeated as needed).
func FuzzMatMulInvariance(f *testing.F) {
	f.Add([]byte{3, 9, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{10, 17, 2, 5, 0x55, 0xaa, 0x3c, 0x00, 0x7c, 0xff})
	f.Add([]byte{12, 8, 1, 2, 0xff, 0x7b, 0x01, 0x80, 0x00, 0x3c, 0x12, 0x34})
	f.Add([]byte{1, 33, 3, 6, 0x00, 0x3c, 0x00, 0xbc})
	p1, p3 := NewPool(1), NewPool(3)
	defer p1.Close()
	defer p3.Close()
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 5 {
			return
		}
		typ := matmulTypes[int(in[0])%len(matmulTypes)]
		rows := 1 + int(in[1])%40
		bsz := max(32, typ.BlockSize())
		cols := bsz * (1 + int(in[2])%4)
		n := 1 + int(in[3])%10
		seed := in[4:]
		rb, _ := typ.RowSize(cols)
		data := make([]byte, rows*rb)
		for i := range data {
			data[i] = seed[i%len(seed)] ^ byte(i/len(seed))
		}
		x := make([]float32, n*cols)
		for i := range x {
			j := (4 * i) % len(seed)
			var w [4]byte
			for k := range w {
				w[k] = seed[(j+k)%len(seed)]
			}
			v := math.Float32frombits(binary.LittleEndian.Uint32(w[:]))
			if i%3 != 0 || v != v || math.IsInf(float64(v), 0) || math.Abs(float64(v)) > 1e6 {
				v = float32(int8(w[0])) / 16 // mostly ordinary values
			}
			x[i] = v
		}
		m, err := NewMatrix(typ, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		old := SetISA(ISAGeneric)
		defer SetISA(old)
		want := make([]float32, n*rows)
		p1.MatMul(want, m, x, n)
		for _, v := range variants()[1:] {
			SetISA(v)
			got := make([]float32, n*rows)
			p3.MatMul(got, m, x, n)
			for i := range want {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("%s %dx%d n=%d: element %d: %s/3 threads %x, generic/1 thread %x", typ, rows, cols, n, i, v, math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			}
		}
		SetISA(BestISA()) // tokens alone, on the fastest variant
		one := make([]float32, rows)
		for tok := 0; tok < n; tok++ {
			p1.MatMul(one, m, x[tok*cols:(tok+1)*cols], 1)
			for r := range one {
				if !sameBits(one[r], want[tok*rows+r]) {
					t.Fatalf("%s %dx%d: token %d row %d alone: %x, in a batch of %d: %x", typ, rows, cols, tok, r, math.Float32bits(one[r]), n, math.Float32bits(want[tok*rows+r]))
				}
			}
		}
	})
}
