package b3

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/blake3"
)

// lengths covers every class of the tree: empty, inside one block, block
// and chunk edges, the 16-chunk buffer's edges, batch edges (256 chunks)
// and sizes whose chunk count has many set bits.
var lengths = []int{0, 1, 63, 64, 65, 127, 128, 1023, 1024, 1025, 2047, 2048, 2049, 3072, 4095, 4096, 5121,
	15 * 1024, 16*1024 - 1, 16 * 1024, 16*1024 + 1, 17 * 1024, 31*1024 + 5, 32 * 1024, 33 * 1024,
	255 * 1024, 256 * 1024, 256*1024 + 1, 257 * 1024, 511*1024 + 1000, 768 * 1024, 768*1024 + 1,
	1023*1024 + 1, 1 << 20, (1 << 20) + 16*1024 + 1}

func input(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// modes runs f with each way this package can hash on this machine: the
// tree with the AVX-512 kernel where there is one, the tree with the
// portable kernel, and zeebo/blake3 alone.
func modes(t *testing.T, f func(t *testing.T)) {
	type mode struct {
		name       string
		tree, wide bool
	}
	ms := []mode{{"tree-go", true, false}, {"zeebo", false, false}}
	if cpuWide {
		ms = append(ms, mode{"tree-avx512", true, true})
	}
	for _, m := range ms {
		t.Run(m.name, func(t *testing.T) {
			defer setModes(m.tree, m.wide)()
			f(t)
		})
	}
}

func TestSum256MatchesZeebo(t *testing.T) {
	modes(t, func(t *testing.T) {
		for _, n := range lengths {
			b := input(n)
			want := blake3.Sum256(b)
			if got := Sum256(b); got != want {
				t.Fatalf("Sum256 of %d bytes = %x, want %x", n, got, want)
			}
		}
	})
}

// TestWriteSplits writes the same bytes in pieces of many sizes, the
// pieces of network reads and file reads, and checks the digest after
// every piece (Digest must not disturb the Hasher).
func TestWriteSplits(t *testing.T) {
	modes(t, func(t *testing.T) {
		b := input(300*1024 + 777)
		for _, piece := range []int{1, 7, 64, 1000, 1024, 1452, 4096, 16 * 1024, 16*1024 + 1, 65536, 128 * 1024, 1 << 20} {
			h := New()
			ref := blake3.New()
			for off := 0; off < len(b); off += piece {
				end := min(off+piece, len(b))
				h.Write(b[off:end])
				ref.Write(b[off:end])
				if piece < 1024 && off%(37*piece) != 0 {
					continue // checking every tiny piece is quadratic
				}
				if got, want := h.Sum(nil), ref.Sum(nil); !bytes.Equal(got, want) {
					t.Fatalf("pieces of %d: digest after %d bytes = %x, want %x", piece, end, got, want)
				}
			}
			if got, want := h.Sum(nil), ref.Sum(nil); !bytes.Equal(got, want) {
				t.Fatalf("pieces of %d: digest = %x, want %x", piece, got, want)
			}
			h.Reset()
			h.Write(b[:5000])
			if got, want := h.Sum(nil), blake3.Sum256(b[:5000]); !bytes.Equal(got, want[:]) {
				t.Fatalf("after Reset: %x, want %x", got, want)
			}
		}
	})
}

// TestRandomWrites checks random lengths written in random pieces.
func TestRandomWrites(t *testing.T) {
	modes(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for trial := 0; trial < 60; trial++ {
			n := r.IntN(600 * 1024)
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			h := New()
			for off := 0; off < n; {
				k := min(n-off, 1+r.IntN(70*1024))
				h.Write(b[off : off+k])
				off += k
			}
			want := blake3.Sum256(b)
			if got := h.Digest(); got != want {
				t.Fatalf("trial %d (%d bytes): %x, want %x", trial, n, got, want)
			}
		}
	})
}

func FuzzHasher(f *testing.F) {
	f.Add(0, 1, uint8(0))
	f.Add(16*1024+1, 1024, uint8(7))
	f.Add(40000, 777, uint8(200))
	f.Fuzz(func(t *testing.T, n, piece int, seed uint8) {
		if n < 0 || n > 1<<20 || piece <= 0 {
			return
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*int(seed+1)) ^ seed
		}
		h := New()
		for off := 0; off < n; off += piece {
			h.Write(b[off:min(off+piece, n)])
		}
		if got, want := h.Digest(), blake3.Sum256(b); got != want {
			t.Fatalf("%d bytes in pieces of %d: %x, want %x", n, piece, got, want)
		}
	})
}

func BenchmarkSum256(b *testing.B) {
	for _, n := range []int{4 << 10, 16 << 10, 24 << 10, 32 << 10, 64 << 10, 768 << 10} {
		buf := input(n)
		for _, impl := range []string{"b3", "zeebo"} {
			b.Run(fmt.Sprintf("bytes=%d/impl=%s", n, impl), func(b *testing.B) {
				b.SetBytes(int64(n))
				for b.Loop() {
					if impl == "b3" {
						Sum256(buf)
					} else {
						blake3.Sum256(buf)
					}
				}
			})
		}
	}
}

// BenchmarkWrite hashes a 768 KiB chunk written in pieces, as the
// replication sink (network reads) and the tier restore (128 KiB reads)
// do.
func BenchmarkWrite(b *testing.B) {
	buf := input(768 << 10)
	for _, piece := range []int{1452, 4096, 16 << 10, 128 << 10} {
		for _, impl := range []string{"b3", "zeebo"} {
			b.Run(fmt.Sprintf("piece=%d/impl=%s", piece, impl), func(b *testing.B) {
				b.SetBytes(int64(len(buf)))
				for b.Loop() {
					var h interface {
						Write([]byte) (int, error)
						Sum([]byte) []byte
					} = New()
					if impl == "zeebo" {
						h = blake3.New()
					}
					for off := 0; off < len(buf); off += piece {
						h.Write(buf[off:min(off+piece, len(buf))])
					}
					h.Sum(nil)
				}
			})
		}
	}
}
