package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// TestNVFP4Tensors checks that NVFP4 tensors (type 40: 64 values in 36
// bytes) are written and read back with their sizes, and that a row
// length that is not a whole number of blocks is refused by the writer and
// by the parser.
func TestNVFP4Tensors(t *testing.T) {
	w := make([]float32, 128*3)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)))
	}
	b := NewBuilder()
	if err := b.AddFloat32("w", ggml.TypeNVFP4, []int64{128, 3}, w); err != nil {
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
	ti, ok := f.Tensor("w")
	if !ok || ti.Type != ggml.TypeNVFP4 || ti.Size != 3*2*36 {
		t.Fatalf("tensor w: %+v, want type NVFP4 and %d bytes", ti, 3*2*36)
	}
	want := make([]byte, 3*2*36)
	if err := ggml.Quantize(ggml.TypeNVFP4, w, want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.Data(ti), want) {
		t.Error("NVFP4 tensor data differs from ggml.Quantize's bytes")
	}
	if got := QuantName(f); got != "NVFP4" {
		t.Errorf("QuantName = %q, want NVFP4", got)
	}

	if err := NewBuilder().AddTensor("w", ggml.TypeNVFP4, []int64{32, 2}, make([]byte, 36)); !errors.Is(err, ErrBuilder) {
		t.Errorf("writer: NVFP4 rows of 32: got %v, want ErrBuilder", err)
	}

	// A Q8_0 tensor of rows of 32 whose type id is patched to 40 must be
	// refused by the parser: 32 is not a multiple of NVFP4's 64.
	b = NewBuilder()
	if err := b.AddTensor("w", ggml.TypeQ8_0, []int64{32, 2}, make([]byte, 68)); err != nil {
		t.Fatal(err)
	}
	data, err = b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	// The tensor info: name (8-byte length + 1 byte), n_dims (4), two dims
	// (16), then the type.
	at := bytes.Index(data, []byte("\x01\x00\x00\x00\x00\x00\x00\x00w")) + 9 + 4 + 16
	if binary.LittleEndian.Uint32(data[at:]) != uint32(ggml.TypeQ8_0) {
		t.Fatalf("type field not found at %d", at)
	}
	binary.LittleEndian.PutUint32(data[at:], uint32(ggml.TypeNVFP4))
	if _, err := Parse(data); !errors.Is(err, ErrMalformed) {
		t.Errorf("parser: NVFP4 rows of 32: got %v, want ErrMalformed", err)
	}
}

// TestAddTensorFunc checks that tensors whose bytes are produced at write
// time give the same file as the same bytes added directly, that fill gets
// a zeroed buffer of the tensor's size each time the file is written, and
// that an error from fill fails the write, names the tensor, and leaves no
// file.
func TestAddTensorFunc(t *testing.T) {
	rows := [][]byte{make([]byte, 4*5), make([]byte, 34*2)}
	for i := range rows[0] {
		rows[0][i] = byte(i)
	}
	for i := range rows[1] {
		rows[1][i] = byte(3 * i)
	}
	direct := NewBuilder()
	direct.SetString("general.architecture", "x")
	direct.AddTensor("a", ggml.TypeF32, []int64{5}, rows[0])
	direct.AddTensor("b", ggml.TypeQ8_0, []int64{32, 2}, rows[1])
	want, err := direct.Bytes()
	if err != nil {
		t.Fatal(err)
	}

	calls := 0
	lazy := NewBuilder()
	lazy.SetString("general.architecture", "x")
	for i, name := range []string{"a", "b"} {
		typ, shape := ggml.TypeF32, []int64{5}
		if i == 1 {
			typ, shape = ggml.TypeQ8_0, []int64{32, 2}
		}
		err := lazy.AddTensorFunc(name, typ, shape, func(dst []byte) error {
			calls++
			if len(dst) != len(rows[i]) {
				t.Errorf("fill %s: buffer of %d bytes, want %d", name, len(dst), len(rows[i]))
			}
			for j, v := range dst {
				if v != 0 {
					t.Errorf("fill %s: buffer byte %d is %#x, want 0", name, j, v)
					break
				}
			}
			copy(dst, rows[i])
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := lazy.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("file with AddTensorFunc differs from the same tensors added with AddTensor")
	}
	path := filepath.Join(t.TempDir(), "lazy.gguf")
	if err := lazy.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if calls != 4 {
		t.Errorf("fill called %d times for two tensors written twice, want 4", calls)
	}

	boom := errors.New("boom")
	bad := NewBuilder()
	bad.AddTensor("ok", ggml.TypeF32, []int64{1}, make([]byte, 4))
	bad.AddTensorFunc("broken", ggml.TypeF32, []int64{1}, func([]byte) error { return boom })
	path = filepath.Join(t.TempDir(), "bad.gguf")
	err = bad.WriteFile(path)
	if !errors.Is(err, boom) || !bytes.Contains([]byte(err.Error()), []byte(`"broken"`)) {
		t.Errorf("WriteFile: got %v, want an error wrapping boom and naming \"broken\"", err)
	}
	if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("failed WriteFile left %s: %v", path, serr)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 0 {
		t.Errorf("failed WriteFile left %d files in its directory", len(entries))
	}
	if err := NewBuilder().AddTensorFunc("t", ggml.TypeF32, []int64{1}, nil); !errors.Is(err, ErrBuilder) {
		t.Errorf("nil fill: got %v, want ErrBuilder", err)
	}
}
