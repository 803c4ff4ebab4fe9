package gguf

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

func TestBuilderRoundTrip(t *testing.T) {
	b := NewBuilder()
	b.SetString("general.architecture", "llama")
	b.SetUint32("llama.block_count", 5)
	b.SetInt32("neg", -7)
	b.SetUint64("big", 1<<40)
	b.SetFloat32("eps", 1e-5)
	b.SetBool("flag", true)
	b.Set("u8", uint8(200))
	b.Set("i16", int16(-300))
	b.Set("f64", 2.5)
	b.SetArray("tokens", []string{"<unk>", "", "héllo", "\x00bytes"})
	b.SetArray("scores", []float32{0, -1.5, float32(math.Inf(-1))})
	b.SetArray("types", []int32{1, 2, 3})
	b.SetArray("bools", []bool{true, false})
	b.SetArray("u64s", []uint64{1, 1 << 63})
	w := make([]float32, 64*4)
	for i := range w {
		w[i] = float32(i%17) - 8
	}
	if err := b.AddFloat32("w.q8", ggml.TypeQ8_0, []int64{64, 4}, w); err != nil {
		t.Fatal(err)
	}
	if err := b.AddFloat32("w.f32", ggml.TypeF32, []int64{64, 4}, w); err != nil {
		t.Fatal(err)
	}
	if err := b.AddTensor("raw", ggml.TypeI8, []int64{3}, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || f.Alignment != 32 {
		t.Errorf("version %d alignment %d", f.Version, f.Alignment)
	}
	wantKeys := []string{"general.architecture", "llama.block_count", "neg", "big", "eps", "flag", "u8", "i16", "f64", "tokens", "scores", "types", "bools", "u64s"}
	if got := f.Meta.Keys(); !equalStrings(got, wantKeys) {
		t.Errorf("keys %q, want %q", got, wantKeys)
	}
	check := func(name string, got, want any, err error) {
		t.Helper()
		if err != nil || !equalAny(got, want) {
			t.Errorf("%s = %v, %v; want %v", name, got, err, want)
		}
	}
	s, err := f.Meta.String("general.architecture")
	check("architecture", s, "llama", err)
	u, err := f.Meta.Uint32("llama.block_count")
	check("block_count", u, uint32(5), err)
	i, err := f.Meta.Int32("neg")
	check("neg", i, int32(-7), err)
	u64, err := f.Meta.Uint64("big")
	check("big", u64, uint64(1<<40), err)
	fl, err := f.Meta.Float32("eps")
	check("eps", fl, float32(1e-5), err)
	bo, err := f.Meta.Bool("flag")
	check("flag", bo, true, err)
	u, err = f.Meta.Uint32("u8")
	check("u8", u, uint32(200), err)
	i, err = f.Meta.Int32("i16")
	check("i16", i, int32(-300), err)
	fl, err = f.Meta.Float32("f64")
	check("f64", fl, float32(2.5), err)
	ss, err := f.Meta.Strings("tokens")
	check("tokens", ss, []string{"<unk>", "", "héllo", "\x00bytes"}, err)
	fs, err := f.Meta.Float32s("scores")
	check("scores", fs, []float32{0, -1.5, float32(math.Inf(-1))}, err)
	is, err := f.Meta.Int32s("types")
	check("types", is, []int32{1, 2, 3}, err)
	if v, ok := f.Meta.Get("u64s"); !ok || v.Len() != 2 || v.Index(1).Interface() != uint64(1<<63) {
		t.Errorf("u64s = %v", v)
	}

	if len(f.Tensors) != 3 {
		t.Fatalf("%d tensors", len(f.Tensors))
	}
	for _, ti := range f.Tensors {
		if ti.Offset%32 != 0 {
			t.Errorf("tensor %s offset %d not aligned", ti.Name, ti.Offset)
		}
	}
	q8, _ := f.Tensor("w.q8")
	got := make([]float32, q8.Elements())
	if err := ggml.Dequantize(q8.Type, f.Data(q8), got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if math.Abs(float64(got[i]-w[i])) > 8.0/127 {
			t.Fatalf("w.q8[%d] = %v, want about %v", i, got[i], w[i])
		}
	}
	f32, _ := f.Tensor("w.f32")
	if err := ggml.Dequantize(f32.Type, f.Data(f32), got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != w[i] {
			t.Fatalf("w.f32[%d] = %v, want %v", i, got[i], w[i])
		}
	}
	r, _ := f.Tensor("raw")
	if !bytes.Equal(f.Data(r), []byte{1, 2, 3}) {
		t.Errorf("raw data % x", f.Data(r))
	}
	// Re-encoding what was read gives the same bytes.
	b2, err := NewBuilderFrom(f)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b2.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(path)
	if !bytes.Equal(again, orig) {
		t.Errorf("re-encoded file differs from the original (%d vs %d bytes)", len(again), len(orig))
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalAny(a, b any) bool {
	switch a := a.(type) {
	case []string:
		return equalStrings(a, b.([]string))
	case []float32:
		bb := b.([]float32)
		if len(a) != len(bb) {
			return false
		}
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(bb[i]) {
				return false
			}
		}
		return true
	case []int32:
		bb := b.([]int32)
		if len(a) != len(bb) {
			return false
		}
		for i := range a {
			if a[i] != bb[i] {
				return false
			}
		}
		return true
	}
	return a == b
}

// TestRewriteStories260K re-encodes a real llama.cpp-written file and gets
// the same bytes back: the writer's layout is llama.cpp's.
func TestRewriteStories260K(t *testing.T) {
	path := sharedFile(t, "models/stories260K.gguf")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := NewBuilderFrom(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		n := 0
		for n < len(got) && n < len(want) && got[n] == want[n] {
			n++
		}
		t.Errorf("re-encoded stories260K differs at byte %d (%d vs %d bytes)", n, len(got), len(want))
	}
	g, err := Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if WeightsDigest(g) != WeightsDigest(f) {
		t.Error("weights digest changed in the round trip")
	}
}

func TestBuilderErrors(t *testing.T) {
	tests := []struct {
		name string
		do   func(b *Builder) error
	}{
		{"empty key", func(b *Builder) error { return b.SetUint32("", 1) }},
		{"alignment not power of two", func(b *Builder) error { return b.SetUint32(KeyAlignment, 24) }},
		{"alignment wrong type", func(b *Builder) error { return b.SetUint64(KeyAlignment, 32) }},
		{"unsupported value", func(b *Builder) error { return b.Set("k", struct{}{}) }},
		{"array of non-slice", func(b *Builder) error { return b.SetArray("k", 3) }},
		{"empty tensor name", func(b *Builder) error { return b.AddTensor("", ggml.TypeF32, []int64{1}, make([]byte, 4)) }},
		{"long tensor name", func(b *Builder) error {
			return b.AddTensor(string(make([]byte, 64)), ggml.TypeF32, []int64{1}, make([]byte, 4))
		}},
		{"duplicate tensor", func(b *Builder) error {
			b.AddTensor("t", ggml.TypeF32, []int64{1}, make([]byte, 4))
			return b.AddTensor("t", ggml.TypeF32, []int64{1}, make([]byte, 4))
		}},
		{"unknown type", func(b *Builder) error { return b.AddTensor("t", ggml.Type(4), []int64{32}, make([]byte, 18)) }},
		{"too many dims", func(b *Builder) error { return b.AddTensor("t", ggml.TypeF32, []int64{1, 1, 1, 1, 1}, make([]byte, 4)) }},
		{"negative dim", func(b *Builder) error { return b.AddTensor("t", ggml.TypeF32, []int64{-1}, nil) }},
		{"partial block", func(b *Builder) error { return b.AddTensor("t", ggml.TypeQ8_0, []int64{16}, make([]byte, 34)) }},
		{"wrong data size", func(b *Builder) error { return b.AddTensor("t", ggml.TypeF32, []int64{2}, make([]byte, 4)) }},
		{"wrong value count", func(b *Builder) error { return b.AddFloat32("t", ggml.TypeF32, []int64{2}, []float32{1}) }},
		{"no quantizer", func(b *Builder) error { return b.AddFloat32("t", ggml.TypeQ5_K, []int64{256}, make([]float32, 256)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder()
			err := tc.do(b)
			if !errors.Is(err, ErrBuilder) {
				t.Fatalf("got %v, want ErrBuilder", err)
			}
			// The error sticks: writing fails with the first error.
			if _, werr := b.Bytes(); werr == nil {
				t.Error("Bytes succeeded after a failed call")
			}
			path := filepath.Join(t.TempDir(), "x.gguf")
			if werr := b.WriteFile(path); werr == nil {
				t.Error("WriteFile succeeded after a failed call")
			}
			if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("WriteFile left %s behind: %v", path, serr)
			}
		})
	}
}

// TestBuilderZeroDimension: a zero dimension makes a tensor empty however
// large its other dimensions, in the builder as in the parser (found by
// FuzzRoundTrip).
func TestBuilderZeroDimension(t *testing.T) {
	b := NewBuilder()
	if err := b.AddTensor("z", ggml.TypeF32, []int64{1 << 62, 1 << 62, 0}, nil); err != nil {
		t.Fatal(err)
	}
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if z, _ := f.Tensor("z"); z.Size != 0 || z.Elements() != 0 {
		t.Errorf("size %d, elements %d; want 0, 0", z.Size, z.Elements())
	}
	if err := NewBuilder().AddTensor("big", ggml.TypeF32, []int64{1 << 62, 1 << 62}, nil); !errors.Is(err, ErrBuilder) {
		t.Errorf("overflowing shape: got %v, want ErrBuilder", err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(path, []byte("old contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := NewBuilder()
	b.SetString("general.name", "new")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after WriteFile, want 1 (no temporary files)", len(entries))
	}
	// A write into a missing directory fails without creating anything.
	if err := b.WriteFile(filepath.Join(dir, "missing", "m.gguf")); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

func TestCustomAlignment(t *testing.T) {
	b := NewBuilder()
	b.SetUint32(KeyAlignment, 64)
	b.AddTensor("a", ggml.TypeF32, []int64{3}, make([]byte, 12))
	b.AddTensor("b", ggml.TypeF32, []int64{3}, make([]byte, 12))
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 64 {
		t.Errorf("alignment %d", f.Alignment)
	}
	for _, ti := range f.Tensors {
		if ti.Offset%64 != 0 {
			t.Errorf("tensor %s at %d, not 64-aligned", ti.Name, ti.Offset)
		}
	}
	if f.Tensors[1].Offset-f.Tensors[0].Offset != 64 {
		t.Errorf("tensors at %d and %d, want 64 apart", f.Tensors[0].Offset, f.Tensors[1].Offset)
	}
}

// TestOpenDoesNotCopyTensorData opens a file with a 64 MiB tensor and
// checks that heap use grows by far less than that, and that Data points
// into the mapping.
func TestOpenDoesNotCopyTensorData(t *testing.T) {
	const n = 16 << 20 // float32 elements: 64 MiB
	b := NewBuilder()
	b.SetString("general.name", "big")
	big := make([]byte, 4*n)
	for i := 0; i < len(big); i += 4096 {
		big[i] = byte(i >> 12)
	}
	if err := b.AddTensor("big", ggml.TypeF32, []int64{4096, n / 4096}, big); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "big.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	big, b = nil, nil
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ti, _ := f.Tensor("big")
	data := f.Data(ti)
	sum := 0
	for i := 0; i < len(data); i += 4096 {
		sum += int(data[i])
	}
	runtime.ReadMemStats(&after)
	grew := int64(after.TotalAlloc - before.TotalAlloc)
	if grew > 1<<20 {
		t.Errorf("Open and reading the tensor allocated %d bytes; the tensor is %d bytes", grew, ti.Size)
	}
	if int64(len(data)) != ti.Size || cap(data) != len(data) {
		t.Errorf("Data: len %d cap %d, want %d", len(data), cap(data), ti.Size)
	}
	if sum == 0 {
		t.Error("tensor data reads as zeros")
	}
	t.Logf("heap allocated while opening a %d MiB file: %d bytes", ti.Size>>20, grew)
}

func TestDataAfterClose(t *testing.T) {
	b := NewBuilder()
	b.AddTensor("t", ggml.TypeF32, []int64{1}, make([]byte, 4))
	path := filepath.Join(t.TempDir(), "t.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := f.Tensor("t")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if d := f.Data(ti); d != nil {
		t.Errorf("Data after Close returned %d bytes", len(d))
	}
	// Metadata outlives the mapping.
	if f.Meta.Len() != 0 || f.Path() != path {
		t.Errorf("meta %d path %q", f.Meta.Len(), f.Path())
	}
}

// TestWriteNewFile: WriteNewFile writes a path that does not exist, and
// refuses one that does (a file, or a symbolic link even to nothing),
// leaving it as it was, with a *fs.PathError for the path matching
// fs.ErrExist; no temporary file is left either way.
func TestWriteNewFile(t *testing.T) {
	b := NewBuilder()
	b.SetString("general.name", "new")
	for _, tc := range []struct {
		name   string
		before func(path string) error // makes what is at path first
		exists bool
	}{
		{"absent", func(string) error { return nil }, false},
		{"a file", func(p string) error { return os.WriteFile(p, []byte("old contents"), 0o644) }, true},
		{"a dangling link", func(p string) error { return os.Symlink("nowhere.gguf", p) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "m.gguf")
			if err := tc.before(path); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Readlink(path)
			old, _ := os.ReadFile(path)
			err := b.WriteNewFile(path)
			var perr *fs.PathError
			switch {
			case !tc.exists && err != nil:
				t.Fatalf("WriteNewFile: %v", err)
			case !tc.exists:
				f, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			case !errors.Is(err, fs.ErrExist) || !errors.As(err, &perr) || perr.Path != path:
				t.Errorf("WriteNewFile over %s: got %v; want a *fs.PathError for %s matching fs.ErrExist", tc.name, err, path)
			default:
				after, _ := os.Readlink(path)
				now, _ := os.ReadFile(path)
				if after != before || !bytes.Equal(now, old) {
					t.Errorf("WriteNewFile changed the existing %s: link %q to %q, contents %q to %q", tc.name, before, after, old, now)
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("directory holds %d entries after WriteNewFile, want 1 (no temporary files)", len(entries))
			}
		})
	}
}
