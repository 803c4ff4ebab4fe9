package ggml

import (
	"math/rand"
	"testing"
)

// benchRow is the row length used by the benchmarks: 4096 elements, a
// typical hidden size.
const benchRow = 4096

func benchInput() []float32 {
	r := rand.New(rand.NewSource(1))
	x := make([]float32, benchRow)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// BenchmarkDequantize decodes one 4096-element row per iteration. The F32
// case (a little-endian load per element) is the peer the others are
// compared with in docs/benchmarks.md.
func BenchmarkDequantize(b *testing.B) {
	x := benchInput()
	for _, typ := range []Type{TypeF32, TypeF16, TypeBF16, TypeQ8_0, TypeQ4_0, TypeQ4_1, TypeQ5_0, TypeQ5_1, TypeQ2_K, TypeQ3_K, TypeQ4_K, TypeQ5_K, TypeQ6_K, TypeQ8_K, TypeNVFP4} {
		size, _ := typ.RowSize(benchRow)
		src := make([]byte, size)
		if typ.CanQuantize() {
			if err := Quantize(typ, x, src); err != nil {
				b.Fatal(err)
			}
		} else {
			rand.New(rand.NewSource(2)).Read(src)
		}
		dst := make([]float32, benchRow)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(benchRow * 4)
			for i := 0; i < b.N; i++ {
				if err := Dequantize(typ, src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantize encodes one 4096-element row per iteration; F32 is the
// peer.
func BenchmarkQuantize(b *testing.B) {
	x := benchInput()
	for _, typ := range []Type{TypeF32, TypeF16, TypeBF16, TypeQ8_0, TypeQ8_K, TypeQ4_0, TypeQ4_1, TypeQ5_0, TypeQ5_1, TypeQ4_K, TypeNVFP4} {
		size, _ := typ.RowSize(benchRow)
		dst := make([]byte, size)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(benchRow * 4)
			for i := 0; i < b.N; i++ {
				if err := Quantize(typ, x, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
