package kvcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"testing"
)

// fill writes a distinct, position-identifying value into every element of
// positions [0, n): layer, K/V, position and element index are recoverable.
func fill(t *testing.T, c *Cache, n int) {
	t.Helper()
	if err := c.Reserve(n); err != nil {
		t.Fatal(err)
	}
	row := c.Shape().RowElems()
	for l := range c.Shape().Layers {
		for i := range n * row {
			kv := uint16(l*10000 + i)
			vv := uint16(l*10000 + i + 5000)
			if c.DType() == DTypeF16 {
				c.K16(l)[i], c.V16(l)[i] = kv, vv
			} else {
				c.K32(l)[i], c.V32(l)[i] = float32(kv)+0.25, float32(vv)+0.5
			}
		}
	}
}

// refPayload builds the lkv1 payload element by element from the spec
// (docs/kvpack.md): per layer, K rows of the block's tokens, then V rows,
// little-endian.
func refPayload(c *Cache, first, n int) []byte {
	var b []byte
	row := c.Shape().RowElems()
	for l := range c.Shape().Layers {
		for _, isV := range []bool{false, true} {
			for p := first; p < first+n; p++ {
				for e := range row {
					i := p*row + e
					switch {
					case c.DType() == DTypeF16 && !isV:
						b = binary.LittleEndian.AppendUint16(b, c.K16(l)[i])
					case c.DType() == DTypeF16:
						b = binary.LittleEndian.AppendUint16(b, c.V16(l)[i])
					case !isV:
						b = binary.LittleEndian.AppendUint32(b, math.Float32bits(c.K32(l)[i]))
					default:
						b = binary.LittleEndian.AppendUint32(b, math.Float32bits(c.V32(l)[i]))
					}
				}
			}
		}
	}
	return b
}

func TestExportImport(t *testing.T) {
	for _, dt := range []DType{DTypeF16, DTypeF32} {
		for _, sh := range []Shape{{1, 1, 1}, {5, 4, 8}, {3, 2, 64}} {
			t.Run(fmt.Sprintf("%v/%dx%dx%d", dt, sh.Layers, sh.KVHeads, sh.HeadDim), func(t *testing.T) {
				src, err := New(sh, dt, 300)
				if err != nil {
					t.Fatal(err)
				}
				fill(t, src, 300)
				dst, _ := New(sh, dt, 300)
				for _, blk := range []struct{ first, n int }{{0, 64}, {64, 64}, {128, 7}, {256, 44}} {
					got, err := src.ExportBlock(nil, blk.first, blk.n)
					if err != nil {
						t.Fatal(err)
					}
					want := refPayload(src, blk.first, blk.n)
					if !bytes.Equal(got, want) {
						t.Fatalf("ExportBlock(%d,%d): payload differs from the lkv1 reference", blk.first, blk.n)
					}
					if len(got) != src.BlockBytes(blk.n) {
						t.Errorf("len = %d, want BlockBytes %d", len(got), src.BlockBytes(blk.n))
					}
					if err := dst.ImportBlock(got, blk.first, blk.n); err != nil {
						t.Fatal(err)
					}
					back, _ := dst.ExportBlock(nil, blk.first, blk.n)
					if !bytes.Equal(back, got) {
						t.Errorf("import then export of [%d,%d) changed the bytes", blk.first, blk.first+blk.n)
					}
				}
			})
		}
	}
}

func TestBlockBytes(t *testing.T) {
	// Qwen2.5-0.5B: 24 layers × 2 kv heads × 64 dims, f16: 768 KiB per 64-token block.
	c, _ := New(Shape{24, 2, 64}, DTypeF16, 32768)
	if got, want := c.BlockBytes(64), 768<<10; got != want {
		t.Errorf("BlockBytes(64) = %d, want %d", got, want)
	}
	if c.Bytes() != 0 {
		t.Errorf("a new cache allocated %d bytes, want 0 (lazy)", c.Bytes())
	}
}

func TestErrors(t *testing.T) {
	c, _ := New(Shape{2, 1, 4}, DTypeF16, 100)
	if err := c.Reserve(101); !errors.Is(err, ErrFull) {
		t.Errorf("Reserve past max: got %v, want ErrFull", err)
	}
	if err := c.ImportBlock(make([]byte, 10), 0, 4); !errors.Is(err, ErrChunkSize) {
		t.Errorf("short chunk: got %v, want ErrChunkSize", err)
	}
	if c.Cap() != 0 {
		t.Errorf("a refused import reserved %d tokens", c.Cap())
	}
	if err := c.ImportBlock(make([]byte, c.BlockBytes(8)), 96, 8); !errors.Is(err, ErrFull) {
		t.Errorf("import past max: got %v, want ErrFull", err)
	}
	if _, err := c.ExportBlock(nil, 0, 4); !errors.Is(err, ErrBadShape) {
		t.Errorf("export of unreserved rows: got %v, want ErrBadShape", err)
	}
	if _, err := New(Shape{0, 1, 1}, DTypeF16, 1); !errors.Is(err, ErrBadShape) {
		t.Errorf("zero layers: got %v, want ErrBadShape", err)
	}
	if _, err := ParseDType("bf16"); !errors.Is(err, ErrBadShape) {
		t.Errorf("ParseDType(bf16): got %v, want ErrBadShape", err)
	}
}

func TestGrowthKeepsRows(t *testing.T) {
	c, _ := New(Shape{2, 2, 3}, DTypeF32, 5000)
	fill(t, c, 10)
	before, _ := c.ExportBlock(nil, 0, 10)
	if err := c.Reserve(3000); err != nil {
		t.Fatal(err)
	}
	if c.Cap() < 3000 || c.Cap() > 5000 {
		t.Errorf("Cap = %d after Reserve(3000), want 3000..5000", c.Cap())
	}
	after, _ := c.ExportBlock(nil, 0, 10)
	if !bytes.Equal(before, after) {
		t.Errorf("growing the cache changed rows already written")
	}
}

// FuzzImportBlock feeds arbitrary chunk bytes to ImportBlock: it must
// never panic, refuse every size but the right one, and round-trip the
// bytes it accepts.
func FuzzImportBlock(f *testing.F) {
	f.Add([]byte{}, uint8(0), uint8(1), false)
	f.Add(make([]byte, 2*2*4*2), uint8(0), uint8(1), false)
	f.Add(bytes.Repeat([]byte{0xff, 0x7c}, 64), uint8(3), uint8(4), true)
	f.Fuzz(func(t *testing.T, data []byte, first, n uint8, f32 bool) {
		dt := DTypeF16
		if f32 {
			dt = DTypeF32
		}
		c, err := New(Shape{2, 2, 1}, dt, 64)
		if err != nil {
			t.Fatal(err)
		}
		err = c.ImportBlock(data, int(first), int(n))
		ok := n > 0 && int(first)+int(n) <= 64 && len(data) == c.BlockBytes(int(n))
		if (err == nil) != ok {
			t.Fatalf("ImportBlock(%d bytes, %d, %d) = %v, want success %v", len(data), first, n, err, ok)
		}
		if err != nil {
			return
		}
		back, err := c.ExportBlock(nil, int(first), int(n))
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("round trip: %v, bytes equal %v", err, bytes.Equal(back, data))
		}
	})
}

func BenchmarkExportBlock(b *testing.B) {
	c, _ := New(Shape{24, 2, 64}, DTypeF16, 64)
	c.Reserve(64)
	r := rand.New(rand.NewPCG(1, 1))
	for l := range 24 {
		for i := range c.K16(l) {
			c.K16(l)[i] = uint16(r.Uint32())
		}
	}
	buf := make([]byte, 0, c.BlockBytes(64))
	b.SetBytes(int64(c.BlockBytes(64)))
	for b.Loop() {
		buf, _ = c.ExportBlock(buf[:0], 0, 64)
	}
}

// BenchmarkFirstWrite measures what writing a cache's rows costs the
// first time (fresh memory from the OS, each page faulted in) and once
// they have been written (the same cache again), per 4 KiB page: the
// cost muser bench takes out of its timed runs by writing its sequence's
// cache first (docs/benchmarks.md, "Engine"). 2,048 tokens of a
// Qwen2.5-0.5B-shaped f16 cache, 24 MiB.
func BenchmarkFirstWrite(b *testing.B) {
	shape := Shape{Layers: 24, KVHeads: 2, HeadDim: 64}
	const n = 2048
	newCache := func() *Cache {
		c, err := New(shape, DTypeF16, n)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	src := make([]byte, newCache().BlockBytes(n))
	pages := float64(len(src)) / 4096
	write := func(c *Cache) {
		if err := c.ImportBlock(src, 0, n); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			debug.FreeOSMemory() // the last iteration's cache goes back to the OS
			c := newCache()
			b.StartTimer()
			write(c)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/pages, "ns/page")
	})
	b.Run("written", func(b *testing.B) {
		c := newCache()
		write(c)
		for b.Loop() {
			write(c)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/pages, "ns/page")
	})
}
