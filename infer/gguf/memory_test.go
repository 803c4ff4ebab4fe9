package gguf

import (
	"bytes"
	"os"
	"testing"
)

// TestOpenInMemories opens one file in each memory and checks that every
// tensor's bytes and the metadata are the file's, and that the File says
// how it holds them.
func TestOpenInMemories(t *testing.T) {
	path := sharedFile(t, "models/stories260K.gguf")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Memory() != CallerBytes {
		t.Errorf("Parse: Memory() = %v, want %v", ref.Memory(), CallerBytes)
	}
	for _, mem := range []Memory{Mapped, Resident} {
		t.Run(mem.String(), func(t *testing.T) {
			f, err := OpenIn(path, mem)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Memory() != mem {
				t.Errorf("Memory() = %v, want %v", f.Memory(), mem)
			}
			if f.Size() != int64(len(raw)) || len(f.Tensors) != len(ref.Tensors) || f.Meta.Len() != ref.Meta.Len() {
				t.Fatalf("size %d, %d tensors, %d keys; want %d, %d, %d",
					f.Size(), len(f.Tensors), f.Meta.Len(), len(raw), len(ref.Tensors), ref.Meta.Len())
			}
			for i := range f.Tensors {
				got, want := f.Data(&f.Tensors[i]), ref.Data(&ref.Tensors[i])
				if len(got) == 0 || !bytes.Equal(got, want) {
					t.Errorf("tensor %s: %d bytes differ from the file's %d", f.Tensors[i].Name, len(got), len(want))
				}
			}
			if err := f.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if f.Data(&f.Tensors[0]) != nil || f.Size() != 0 {
				t.Error("Data or Size still answer after Close")
			}
		})
	}
}

func TestOpenInRefusesCallerBytes(t *testing.T) {
	path := sharedFile(t, "models/stories260K.gguf")
	for _, mem := range []Memory{CallerBytes, Memory(9)} {
		if f, err := OpenIn(path, mem); err == nil {
			f.Close()
			t.Errorf("OpenIn(%v) succeeded; want an error naming the memory", mem)
		}
	}
}
