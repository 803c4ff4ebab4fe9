package gguf

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// raw builds GGUF bytes field by field, so tests can write files no
// Builder would.
type raw struct{ b []byte }

func (r *raw) u32(v uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, v); return r }
func (r *raw) u64(v uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, v); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.b = append(r.b, s...); return r }
func (r *raw) bytes(p ...byte) *raw {
	r.b = append(r.b, p...)
	return r
}

// header starts a v3 file with the given counts.
func header(tensors, kvs uint64) *raw {
	r := &raw{}
	r.b = append(r.b, "GGUF"...)
	return r.u32(3).u64(tensors).u64(kvs)
}

// kvU32 appends a uint32 entry.
func (r *raw) kvU32(key string, v uint32) *raw { return r.str(key).u32(uint32(TypeUint32)).u32(v) }

// tensor appends a tensor info.
func (r *raw) tensor(name string, typ ggml.Type, off uint64, shape ...uint64) *raw {
	r.str(name).u32(uint32(len(shape)))
	for _, d := range shape {
		r.u64(d)
	}
	return r.u32(uint32(typ)).u64(off)
}

// padTo pads with zeros to a multiple of a, then appends n data bytes.
func (r *raw) data(a, n int) *raw {
	for len(r.b)%a != 0 {
		r.b = append(r.b, 0)
	}
	r.b = append(r.b, make([]byte, n)...)
	return r
}

type malformedCase struct {
	name  string
	file  []byte
	field string // substring the FormatError's Field must contain
	want  error
}

func malformedCases() []malformedCase {
	return []malformedCase{
		{"empty file", nil, "magic", ErrTruncated},
		{"bad magic", []byte("GGUX\x03\x00\x00\x00"), "magic", ErrMagic},
		{"version 1", (&raw{b: []byte("GGUF")}).u32(1).u64(0).u64(0).b, "version", ErrVersion},
		{"version 4", (&raw{b: []byte("GGUF")}).u32(4).u64(0).u64(0).b, "version", ErrVersion},
		{"big-endian", (&raw{b: []byte("GGUF")}).u32(0x03000000).u64(0).u64(0).b, "version", ErrVersion},
		{"truncated header", []byte("GGUF\x03\x00\x00\x00\x00\x00"), "tensor_count", ErrTruncated},
		{"absurd tensor count", header(1<<40, 0).b, "tensor_count", ErrLimit},
		{"absurd kv count", header(0, 1<<40).b, "kv_count", ErrLimit},
		{"kv count past end", header(0, 1000).b, "kv_count", ErrLimit},
		{"tensor count past end", header(1000, 0).b, "tensor_count", ErrLimit},
		{"huge key length", header(0, 1).u64(1 << 62).u32(0).u32(0).b, "kv[0].key", ErrLimit},
		{"key past end", header(0, 1).u64(100).u32(0).u32(0).b, "kv[0].key", ErrTruncated},
		{"empty key", header(0, 1).str("").u32(uint32(TypeUint32)).u32(0).b, "kv[0].key", ErrInvalid},
		{"duplicate key", header(0, 2).kvU32("a.b", 1).kvU32("a.b", 2).b, `kv[1] "a.b"`, ErrDuplicate},
		{"unknown value type", header(0, 1).str("k").u32(13).u64(0).b, `kv[0] "k" type`, ErrUnknownType},
		{"truncated value", header(0, 1).str("k").u32(uint32(TypeUint64)).u32(0).b, `kv[0] "k"`, ErrTruncated},
		{"huge string value", header(0, 1).str("k").u32(uint32(TypeString)).u64(1 << 40).u64(0).b, `kv[0] "k"`, ErrLimit},
		{"string value past end", header(0, 1).str("k").u32(uint32(TypeString)).u64(1 << 20).u64(0).b, `kv[0] "k"`, ErrTruncated},
		{"bool not 0 or 1", header(0, 1).str("k").u32(uint32(TypeBool)).bytes(2).b, `kv[0] "k"`, ErrInvalid},
		{"nested array", header(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeArray)).u64(1).b, `kv[0] "k" element type`, ErrUnknownType},
		{"unknown array element type", header(0, 1).str("k").u32(uint32(TypeArray)).u32(99).u64(1).b, `kv[0] "k" element type`, ErrUnknownType},
		{"absurd array count", header(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeUint8)).u64(1 << 50).b, `kv[0] "k" count`, ErrLimit},
		{"array count past end", header(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeUint32)).u64(1000).u64(0).b, `kv[0] "k" count`, ErrLimit},
		{"string array count past end", header(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(100).str("x").b, `kv[0] "k" count`, ErrLimit},
		{"string array element past end", header(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(2).str("x").u64(1 << 20).b, `kv[0] "k"[1]`, ErrTruncated},
		{"bool array not 0 or 1", header(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeBool)).u64(3).bytes(0, 1, 7).b, `kv[0] "k"[2]`, ErrInvalid},
		{"alignment not a power of two", header(0, 1).kvU32("general.alignment", 48).b, "general.alignment", ErrAlignment},
		{"alignment zero", header(0, 1).kvU32("general.alignment", 0).b, "general.alignment", ErrAlignment},
		{"alignment wrong type", header(0, 1).str("general.alignment").u32(uint32(TypeUint64)).u64(32).b, "general.alignment", ErrAlignment},
		{"empty tensor name", header(1, 0).tensor("", ggml.TypeF32, 0, 4).data(32, 16).b, "tensor[0].name", ErrInvalid},
		{"tensor name too long", header(1, 0).tensor(strings.Repeat("n", 64), ggml.TypeF32, 0, 4).data(32, 16).b, "tensor[0].name", ErrLimit},
		{"duplicate tensor name", header(2, 0).tensor("w", ggml.TypeF32, 0, 4).tensor("w", ggml.TypeF32, 32, 4).data(32, 64).b, `tensor[1] "w".name`, ErrDuplicate},
		{"too many dims", header(1, 0).tensor("w", ggml.TypeF32, 0, 1, 1, 1, 1, 1).data(32, 4).b, `tensor[0] "w".n_dims`, ErrLimit},
		{"negative dim", header(1, 0).tensor("w", ggml.TypeF32, 0, 1<<63).data(32, 4).b, `tensor[0] "w".shape[0]`, ErrRange},
		{"element count overflow", header(1, 0).tensor("w", ggml.TypeF32, 0, 1<<32, 1<<32).data(32, 4).b, `tensor[0] "w".shape`, ErrRange},
		{"byte size overflow", header(1, 0).tensor("w", ggml.TypeF64, 0, 1<<61).data(32, 4).b, `tensor[0] "w".type`, ErrRange},
		{"unknown tensor type", header(1, 0).tensor("w", ggml.Type(99), 0, 4).data(32, 16).b, `tensor[0] "w".type`, ErrUnknownType},
		{"retired tensor type", header(1, 0).tensor("w", ggml.Type(4), 0, 32).data(32, 32).b, `tensor[0] "w".type`, ErrUnknownType},
		{"row not whole blocks", header(1, 0).tensor("w", ggml.TypeQ4_0, 0, 30).data(32, 18).b, `tensor[0] "w".type`, ErrInvalid},
		{"truncated tensor info", header(1, 0).str("a.long.tensor.name").u32(2).u64(4).b, `tensor[0] "a.long.tensor.name".shape[1]`, ErrTruncated},
		{"offset past end", header(1, 0).tensor("w", ggml.TypeF32, 64, 4).data(32, 16).b, `tensor[0] "w".offset`, ErrRange},
		{"data past end", header(1, 0).tensor("w", ggml.TypeF32, 0, 64).data(32, 100).b, `tensor[0] "w".offset`, ErrRange},
		{"offset overflow", header(1, 0).tensor("w", ggml.TypeF32, 1<<64-32, 4).data(32, 16).b, `tensor[0] "w".offset`, ErrRange},
		{"misaligned offset", header(2, 0).tensor("a", ggml.TypeF32, 0, 4).tensor("b", ggml.TypeF32, 16, 4).data(32, 64).b, `tensor[1] "b".offset`, ErrAlignment},
		{"overlapping tensors", header(2, 0).tensor("a", ggml.TypeF32, 0, 16).tensor("b", ggml.TypeF32, 32, 16).data(32, 128).b, `tensor[1] "b".offset`, ErrRange},
		{"overlap hidden behind empty tensor", header(3, 0).tensor("a", ggml.TypeF32, 0, 32).tensor("z", ggml.TypeF32, 64, 0).tensor("b", ggml.TypeF32, 96, 8).data(32, 160).b, `tensor[2] "b".offset`, ErrRange},
	}
}

func TestMalformed(t *testing.T) {
	for _, tc := range malformedCases() {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.file)
			if err == nil {
				t.Fatalf("Parse succeeded with %d tensors, want an error", len(f.Tensors))
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("got %T %v, want *FormatError", err, err)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not match ErrMalformed", err)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("got %v, want it to wrap %v", err, tc.want)
			}
			if !strings.Contains(fe.Field, tc.field) {
				t.Errorf("field %q, want it to contain %q (error: %v)", fe.Field, tc.field, err)
			}
			if fe.Offset < 0 || fe.Offset > int64(len(tc.file)) {
				t.Errorf("offset %d outside the %d-byte file", fe.Offset, len(tc.file))
			}
		})
	}
}

// TestValidEdgeCases checks files that look odd but are well formed.
func TestValidEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		file []byte
	}{
		{"no tensors, no metadata", header(0, 0).b},
		{"version 2", (&raw{b: []byte("GGUF")}).u32(2).u64(0).u64(0).b},
		{"zero-element tensor at end of file", header(1, 0).tensor("e", ggml.TypeF32, 0, 0, 7).data(32, 0).b},
		{"scalar tensor", header(1, 0).tensor("s", ggml.TypeF32, 0).data(32, 4).b},
		{"alignment 1", header(2, 1).kvU32("general.alignment", 1).tensor("a", ggml.TypeF32, 0, 1).tensor("b", ggml.TypeF32, 4, 1).data(1, 8).b},
		{"unknown-to-decode but known type", header(1, 0).tensor("iq", ggml.TypeIQ2_XXS, 0, 256).data(32, 66).b},
		{"tensors out of offset order", header(2, 0).tensor("b", ggml.TypeF32, 32, 8).tensor("a", ggml.TypeF32, 0, 8).data(32, 64).b},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				if int64(len(f.Data(ti))) != ti.Size {
					t.Errorf("tensor %q: Data has %d bytes, Size %d", ti.Name, len(f.Data(ti)), ti.Size)
				}
			}
		})
	}
}

// TestTruncatedEverywhere cuts a valid file at every byte: each prefix must
// give a FormatError (never a panic), and the field must name the section
// the cut falls in.
func TestTruncatedEverywhere(t *testing.T) {
	b := NewBuilder()
	b.SetString("general.architecture", "llama")
	b.SetArray("tokenizer.ggml.tokens", []string{"<unk>", "a", "bc"})
	b.SetArray("tokenizer.ggml.scores", []float32{0, -1, -2})
	b.SetUint32("llama.block_count", 1)
	b.AddFloat32("w", ggml.TypeQ8_0, []int64{32, 2}, make([]float32, 64))
	b.AddFloat32("v", ggml.TypeF32, []int64{3}, []float32{1, 2, 3})
	full, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(full)
	if err != nil {
		t.Fatal(err)
	}
	infoStart := len(full) // find where tensor infos start: after the last KV
	for i := range full {
		if string(full[i:min(i+9, len(full))]) == "\x01\x00\x00\x00\x00\x00\x00\x00w" {
			infoStart = i
			break
		}
	}
	dataEnd := int64(0)
	for i := range f.Tensors {
		dataEnd = max(dataEnd, f.Tensors[i].Offset+f.Tensors[i].Size)
	}
	for n := 0; n < len(full); n++ {
		_, err := Parse(full[:n])
		if int64(n) >= dataEnd {
			// Only the last tensor's padding is missing: still valid.
			if err != nil {
				t.Errorf("prefix of %d bytes (data ends at %d): %v", n, dataEnd, err)
			}
			continue
		}
		var fe *FormatError
		if !errors.As(err, &fe) || !errors.Is(err, ErrMalformed) {
			t.Fatalf("prefix of %d bytes: got %v, want a FormatError", n, err)
		}
		var want string
		switch {
		case n < 4:
			want = "magic"
		case n < 8:
			want = "version"
		case n < 16:
			want = "tensor_count"
		case n < 24:
			want = "kv_count"
		case n < infoStart:
			want = "kv["
		case n < int(f.DataOffset):
			want = "tensor["
		default:
			want = ".offset"
		}
		// A cut that leaves less than the announced entries could possibly
		// need is reported at the count itself.
		early := (fe.Field == "kv_count" || fe.Field == "tensor_count") && errors.Is(err, ErrLimit)
		if !strings.Contains(fe.Field, want) && !early {
			t.Errorf("prefix of %d bytes: field %q, want %q (%v)", n, fe.Field, want, err)
		}
	}
}
