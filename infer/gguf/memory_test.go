package gguf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
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
	eachMemory(t, path, func(t *testing.T, mem Memory, f *File) {
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

// eachMemory opens path in each memory OpenIn takes and runs f on the
// File in a subtest named after the memory; the File is closed after f.
func eachMemory(t *testing.T, path string, f func(t *testing.T, mem Memory, file *File)) {
	for _, mem := range []Memory{Mapped, Resident} {
		t.Run(mem.String(), func(t *testing.T) {
			file, err := OpenIn(path, mem)
			if err != nil {
				t.Fatal(err)
			}
			defer file.Close()
			f(t, mem, file)
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

// TestReadResidentShortFile: a file that ends before the size OpenIn
// found (truncated between the two) is an error wrapping
// io.ErrUnexpectedEOF that names the file, and holds no memory.
func TestReadResidentShortFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "short.gguf")
	if err := os.WriteFile(path, bytes.Repeat([]byte{7}, 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	data, release, err := readResident(fh, 5000+4096)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), path) || data != nil || release != nil {
		t.Errorf("got %d bytes, release %v, error %v; want none and an error naming %s wrapping io.ErrUnexpectedEOF", len(data), release != nil, err, path)
	}
	data, release, err = readResident(fh, 5000)
	if err != nil || !bytes.Equal(data, bytes.Repeat([]byte{7}, 5000)) {
		t.Fatalf("the whole file: %d bytes, %v", len(data), err)
	}
	if release != nil {
		if err := release(); err != nil {
			t.Errorf("release: %v", err)
		}
	}
}
