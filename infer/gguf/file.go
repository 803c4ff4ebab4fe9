package gguf

import (
	"fmt"
	"os"

	"github.com/muserhq/muser/infer/ggml"
)

// File is a parsed GGUF file. Metadata and tensor infos live on the heap;
// tensor data stays where the file's bytes are held: a read-only memory
// mapping (Open), read-only resident memory (OpenIn with Resident) or the
// caller's bytes (Parse). File.Data never copies it.
//
// A File is safe for concurrent use by readers. Close must not run
// concurrently with other methods, and slices returned by Data are invalid
// after Close.
type File struct {
	// Version is the GGUF version, 2 or 3.
	Version uint32
	// Alignment is the data alignment in bytes (general.alignment, default
	// 32).
	Alignment int
	// Meta holds the metadata in file order.
	Meta Metadata
	// Tensors lists the tensor infos in file order.
	Tensors []TensorInfo
	// DataOffset is the absolute offset of the data section.
	DataOffset int64

	byName map[string]int
	data   []byte
	path   string
	mem    Memory
	unmap  func() error
	closed bool
}

// TensorInfo describes one tensor.
type TensorInfo struct {
	// Name is the tensor's name ("blk.0.attn_q.weight").
	Name string
	// Type is the tensor's ggml type.
	Type ggml.Type
	// Shape holds the dimensions in ggml order: Shape[0] (ne0) is the
	// length of a row, the fastest-varying dimension.
	Shape []int64
	// Offset is the absolute offset of the tensor's data in the file.
	Offset int64
	// Size is the size of the tensor's data in bytes.
	Size int64
}

// Elements returns the number of elements (the product of Shape; 1 for a
// scalar with no dimensions).
func (t *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Open maps the GGUF file at path read-only and parses it: OpenIn with
// Mapped.
func Open(path string) (*File, error) { return OpenIn(path, Mapped) }

// OpenIn opens the GGUF file at path, holds its bytes as mem says
// (mapped, or read into resident memory), and parses it. The tensor data
// is never copied after that: Data returns slices of those bytes. Close
// the File to release them.
//
// An error for a file that does not exist wraps os.ErrNotExist; an error
// for a malformed file is a *FormatError matching ErrMalformed; a file
// that ends before the size it had when opened (truncated meanwhile)
// gives an error wrapping io.ErrUnexpectedEOF.
func OpenIn(path string, mem Memory) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: not a regular file", path)
	}
	size := st.Size()
	if size < 0 || size > int64(maxInt) {
		return nil, fmt.Errorf("gguf: %s: file of %d bytes cannot be held in memory", path, size)
	}
	var data []byte
	var release func() error
	switch mem {
	case Mapped:
		data, release, err = mapFile(fh, int(size))
	case Resident:
		data, release, err = readResident(fh, int(size))
	default:
		return nil, fmt.Errorf("gguf: %s: cannot open in memory %v (want Mapped or Resident)", path, mem)
	}
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f, err := parse(data, path)
	if err != nil {
		if release != nil {
			release()
		}
		return nil, err
	}
	f.mem = mem
	f.unmap = release
	return f, nil
}

const maxInt = int(^uint(0) >> 1)

// Close releases the memory that Open or OpenIn holds the file's bytes
// in. It is a no-op for a File from Parse and for a File already closed.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	f.data = nil
	if f.unmap != nil {
		u := f.unmap
		f.unmap = nil
		return u()
	}
	return nil
}

// Memory returns how the file's bytes are held: Mapped or Resident for a
// File from OpenIn (and Open), CallerBytes for one from Parse.
func (f *File) Memory() Memory { return f.mem }

// Path returns the path given to Open, or "" for a File from Parse.
func (f *File) Path() string { return f.path }

// Size returns the size of the file in bytes.
func (f *File) Size() int64 {
	if f.closed {
		return 0
	}
	return int64(len(f.data))
}

// Tensor returns the tensor named name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Data returns the bytes of t's data: a slice of the mapping (or of the
// bytes given to Parse), never a copy, with its capacity limited to its
// length. It returns nil after Close, or if t does not lie within the file.
func (f *File) Data(t *TensorInfo) []byte {
	if f.closed || t == nil || t.Offset < 0 || t.Size < 0 ||
		t.Offset > int64(len(f.data)) || t.Size > int64(len(f.data))-t.Offset {
		return nil
	}
	lo, hi := int(t.Offset), int(t.Offset+t.Size)
	return f.data[lo:hi:hi]
}
