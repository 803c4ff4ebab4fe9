package gguf

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// fuzzSeeds returns small valid files for the corpora.
func fuzzSeeds(f *testing.F) [][]byte { return validSeeds(f) }

func validSeeds(f testing.TB) [][]byte {
	var out [][]byte
	add := func(b *Builder) {
		data, err := b.Bytes()
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, data)
	}
	add(NewBuilder())
	b := NewBuilder()
	b.SetString("general.architecture", "llama")
	b.SetUint32("llama.block_count", 1)
	b.SetArray("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "a"})
	b.SetArray("tokenizer.ggml.scores", []float32{0, 0, -1})
	b.SetArray("tokenizer.ggml.token_type", []int32{2, 3, 1})
	b.SetBool("tokenizer.ggml.add_bos_token", true)
	b.AddFloat32("tok", ggml.TypeQ8_0, []int64{32, 3}, make([]float32, 96))
	b.AddFloat32("norm", ggml.TypeF32, []int64{4}, []float32{1, 2, 3, 4})
	add(b)
	b = NewBuilder()
	b.SetUint32(KeyAlignment, 8)
	b.Set("i64", int64(-1))
	b.SetArray("u16s", []uint16{1, 2})
	b.AddTensor("k", ggml.TypeQ4_K, []int64{256}, make([]byte, 144))
	b.AddTensor("e", ggml.TypeF16, []int64{0, 3}, nil)
	add(b)
	return out
}

// FuzzParse feeds arbitrary bytes to Parse. It must never panic; it either
// succeeds with a self-consistent File or fails with a *FormatError that
// matches ErrMalformed.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrMalformed) || fe.Field == "" {
				t.Fatalf("error %v is not a FormatError naming a field", err)
			}
			return
		}
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			if d := file.Data(ti); int64(len(d)) != ti.Size {
				t.Fatalf("tensor %q: Data has %d bytes, Size %d", ti.Name, len(d), ti.Size)
			}
			if ti.Offset%int64(file.Alignment) != file.DataOffset%int64(file.Alignment) {
				t.Fatalf("tensor %q misaligned", ti.Name)
			}
		}
		for _, kv := range file.Meta.All() {
			_ = kv.Value.Summary(3)
		}
		_ = QuantName(file)
		_ = WeightsDigest(file)
	})
}

// FuzzRoundTrip parses arbitrary bytes and, when they parse, re-encodes
// the File with a Builder: the result must parse to the same metadata and
// tensors, and re-encoding that must give the same bytes again.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		b, err := NewBuilderFrom(file)
		if err != nil {
			t.Fatalf("a parsed file does not rebuild: %v", err)
		}
		out, err := b.Bytes()
		if err != nil {
			t.Fatalf("a parsed file does not encode: %v", err)
		}
		g, err := Parse(out)
		if err != nil {
			t.Fatalf("the re-encoded file does not parse: %v", err)
		}
		if g.Meta.Len() != file.Meta.Len() || len(g.Tensors) != len(file.Tensors) {
			t.Fatalf("round trip changed counts")
		}
		for i, kv := range file.Meta.All() {
			kv2 := g.Meta.All()[i]
			if kv.Key != kv2.Key || !sameValue(kv.Value, kv2.Value) {
				t.Fatalf("entry %d: %q=%v became %q=%v", i, kv.Key, kv.Value, kv2.Key, kv2.Value)
			}
		}
		for i := range file.Tensors {
			a, c := &file.Tensors[i], &g.Tensors[i]
			if a.Name != c.Name || a.Type != c.Type || !equalShape(a.Shape, c.Shape) || !bytes.Equal(file.Data(a), g.Data(c)) {
				t.Fatalf("tensor %d changed in the round trip", i)
			}
		}
		if WeightsDigest(file) != WeightsDigest(g) {
			t.Fatal("weights digest changed in the round trip")
		}
		b2, err := NewBuilderFrom(g)
		if err != nil {
			t.Fatal(err)
		}
		again, err := b2.Bytes()
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("second encoding differs from the first (%v)", err)
		}
	})
}

// sameValue compares two values bit for bit (NaN payloads included).
func sameValue(a, b Value) bool {
	if a.typ != b.typ || a.elem != b.elem || a.n != b.n || a.str != b.str || len(a.ends) != len(b.ends) {
		return false
	}
	for i := range a.ends {
		if a.ends[i] != b.ends[i] {
			return false
		}
	}
	return a.bits == b.bits
}

var update = flag.Bool("update", false, "rewrite the committed fuzz seed corpora under testdata/fuzz")

// TestWriteFuzzSeeds writes the seed corpora (small valid files and the
// malformed files of TestMalformed) under testdata/fuzz when run with
// -update, and otherwise checks that they are present.
func TestWriteFuzzSeeds(t *testing.T) {
	var seeds [][]byte
	for _, tc := range malformedCases() {
		seeds = append(seeds, tc.file)
	}
	for _, target := range []string{"FuzzParse", "FuzzRoundTrip"} {
		dir := filepath.Join("testdata", "fuzz", target)
		if !*update {
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) == 0 {
				t.Errorf("no committed seeds in %s (run go test -run TestWriteFuzzSeeds -update): %v", dir, err)
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		all := append(validSeeds(t), seeds...)
		for i, s := range all {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%03d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
