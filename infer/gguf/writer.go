package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/muserhq/muser/infer/ggml"
)

// Builder assembles a GGUF file: metadata in the order it is set, then
// tensors in the order they are added. It writes GGUF version 3 with the
// alignment from general.alignment (a uint32 power of two) or 32, with
// each tensor's data at the next aligned offset after the previous one and
// padded with zeros to the alignment, which is the layout llama.cpp
// requires.
//
// Every method that can fail returns its error and also records the first
// one: once a Builder has failed, WriteTo, Bytes and WriteFile return that
// error, so a sequence of calls may be checked once at the end.
//
// A Builder keeps the byte slices given to AddTensor without copying them;
// they must not change before the file is written. AddTensorFunc defers a
// tensor's bytes to write time, so that a file larger than memory can be
// produced one tensor at a time.
type Builder struct {
	meta    Metadata
	tensors []builderTensor
	byName  map[string]int
	err     error
}

type builderTensor struct {
	name  string
	typ   ggml.Type
	shape []int64
	size  int64
	data  []byte                 // the bytes, or nil when fill makes them
	fill  func(dst []byte) error // AddTensorFunc's producer
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{byName: make(map[string]int)}
}

// NewBuilderFrom returns a Builder holding f's metadata and tensors, in
// f's order. The tensor data is not copied: f must stay open until the
// Builder has written its file.
func NewBuilderFrom(f *File) (*Builder, error) {
	b := NewBuilder()
	for _, kv := range f.Meta.All() {
		b.meta.set(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if err := b.AddTensor(t.Name, t.Type, t.Shape, f.Data(t)); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (b *Builder) fail(err error) error {
	if b.err == nil {
		b.err = err
	}
	return err
}

func builderErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBuilder}, a...)...)
}

// Meta returns the metadata set so far. It must not be modified.
func (b *Builder) Meta() *Metadata { return &b.meta }

// Set sets key to the value of x, which may be any type NewValue accepts
// (a scalar, a string, a slice of either, or a Value). Setting a key again
// replaces its value and keeps its position.
func (b *Builder) Set(key string, x any) error {
	if key == "" || len(key) > MaxKeyLength {
		return b.fail(builderErr("metadata key %q: length %d not in [1, %d]", key, len(key), MaxKeyLength))
	}
	v, err := NewValue(x)
	if err != nil {
		return b.fail(fmt.Errorf("%w: metadata key %q: %w", ErrBuilder, key, err))
	}
	if key == KeyAlignment {
		a, ok := v.AsUint64()
		if v.Type() != TypeUint32 || !ok || a == 0 || a&(a-1) != 0 {
			return b.fail(builderErr("%s must be a uint32 power of two, got %s %s", KeyAlignment, v.TypeName(), v.Summary(4)))
		}
	}
	if b.meta.Len() >= MaxKVs && !b.meta.Has(key) {
		return b.fail(builderErr("more than %d metadata entries", MaxKVs))
	}
	b.meta.set(key, v)
	return nil
}

// SetString sets key to a string.
func (b *Builder) SetString(key, v string) error { return b.Set(key, v) }

// SetUint32 sets key to a uint32.
func (b *Builder) SetUint32(key string, v uint32) error { return b.Set(key, v) }

// SetInt32 sets key to an int32.
func (b *Builder) SetInt32(key string, v int32) error { return b.Set(key, v) }

// SetUint64 sets key to a uint64.
func (b *Builder) SetUint64(key string, v uint64) error { return b.Set(key, v) }

// SetFloat32 sets key to a float32.
func (b *Builder) SetFloat32(key string, v float32) error { return b.Set(key, v) }

// SetBool sets key to a bool.
func (b *Builder) SetBool(key string, v bool) error { return b.Set(key, v) }

// SetArray sets key to an array: v is a slice of string, bool, or any
// integer or float type GGUF has ([]int32, []float32, ...).
func (b *Builder) SetArray(key string, v any) error {
	val, err := NewValue(v)
	if err == nil && !val.IsArray() {
		err = fmt.Errorf("%w: %T is not a slice", ErrWrongType, v)
	}
	if err != nil {
		return b.fail(fmt.Errorf("%w: metadata key %q: %w", ErrBuilder, key, err))
	}
	return b.Set(key, val)
}

// Delete removes key if it is set.
func (b *Builder) Delete(key string) { b.meta.remove(key) }

// AddTensor adds a tensor whose data is already encoded as typ. shape is in
// ggml order (shape[0] is the row length); data must hold exactly the
// tensor's size.
func (b *Builder) AddTensor(name string, typ ggml.Type, shape []int64, data []byte) error {
	size, err := b.checkTensor(name, typ, shape)
	if err != nil {
		return b.fail(err)
	}
	if int64(len(data)) != size {
		return b.fail(builderErr("tensor %q: %s %v needs %d bytes, got %d", name, typ, shape, size, len(data)))
	}
	b.byName[name] = len(b.tensors)
	b.tensors = append(b.tensors, builderTensor{name: name, typ: typ, shape: append([]int64(nil), shape...), size: size, data: data})
	return nil
}

// AddTensorFunc adds a tensor whose bytes fill produces when the file is
// written: each WriteTo (and so each Bytes or WriteFile) calls fill once,
// in tensor order, with a zeroed buffer of exactly the tensor's size,
// which fill must not keep. The buffer is reused for the next
// tensor, so memory holds one tensor at a time. An error from fill stops
// the write and is returned, naming the tensor (WriteFile then leaves no
// file behind); it does not poison the Builder.
func (b *Builder) AddTensorFunc(name string, typ ggml.Type, shape []int64, fill func(dst []byte) error) error {
	size, err := b.checkTensor(name, typ, shape)
	if err != nil {
		return b.fail(err)
	}
	if fill == nil {
		return b.fail(builderErr("tensor %q: nil fill function", name))
	}
	b.byName[name] = len(b.tensors)
	b.tensors = append(b.tensors, builderTensor{name: name, typ: typ, shape: append([]int64(nil), shape...), size: size, fill: fill})
	return nil
}

// AddFloat32 adds a tensor given as float32 values in row-major ggml order,
// encoding them as typ with ggml.Quantize (typ must be one it encodes).
func (b *Builder) AddFloat32(name string, typ ggml.Type, shape []int64, values []float32) error {
	size, err := b.checkTensor(name, typ, shape)
	if err != nil {
		return b.fail(err)
	}
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	if int64(len(values)) != n {
		return b.fail(builderErr("tensor %q: shape %v has %d elements, got %d values", name, shape, n, len(values)))
	}
	data := make([]byte, size)
	if err := ggml.Quantize(typ, values, data); err != nil {
		return b.fail(fmt.Errorf("%w: tensor %q: %w", ErrBuilder, name, err))
	}
	return b.AddTensor(name, typ, shape, data)
}

// checkTensor validates a tensor's name, type and shape as the parser
// would, and returns its size in bytes.
func (b *Builder) checkTensor(name string, typ ggml.Type, shape []int64) (int64, error) {
	if name == "" || len(name) > MaxTensorName {
		return 0, builderErr("tensor name %q: length %d not in [1, %d]", name, len(name), MaxTensorName)
	}
	if _, dup := b.byName[name]; dup {
		return 0, builderErr("tensor %q added twice", name)
	}
	if len(b.tensors) >= MaxTensors {
		return 0, builderErr("more than %d tensors", MaxTensors)
	}
	if !typ.Known() {
		return 0, builderErr("tensor %q: unknown ggml type %d", name, uint32(typ))
	}
	if len(shape) > MaxDims {
		return 0, builderErr("tensor %q: %d dimensions, at most %d", name, len(shape), MaxDims)
	}
	// A shape with a zero dimension has no elements, however large the
	// others (the parser agrees); otherwise the product must fit an int64.
	n, zero := uint64(1), false
	for _, d := range shape {
		if d < 0 {
			return 0, builderErr("tensor %q: negative dimension in %v", name, shape)
		}
		zero = zero || d == 0
	}
	for _, d := range shape {
		if zero {
			n = 0
			break
		}
		if n > math.MaxInt64/uint64(d) {
			return 0, builderErr("tensor %q: shape %v overflows", name, shape)
		}
		n *= uint64(d)
	}
	bs := int64(typ.BlockSize())
	if len(shape) == 0 && bs != 1 || len(shape) > 0 && shape[0]%bs != 0 {
		return 0, builderErr("tensor %q: row length of %v is not a multiple of the %s block size %d", name, shape, typ, bs)
	}
	blocks := n / uint64(bs)
	if blocks > math.MaxInt64/uint64(typ.TypeSize()) {
		return 0, builderErr("tensor %q: %s %v overflows the byte size", name, typ, shape)
	}
	return int64(blocks) * int64(typ.TypeSize()), nil
}

// alignment returns the alignment the file will use.
func (b *Builder) alignment() int64 {
	if v, ok := b.meta.Get(KeyAlignment); ok {
		return int64(v.bits)
	}
	return DefaultAlignment
}

func pad(n, a int64) int64 { return (n + a - 1) / a * a }

// WriteTo writes the file to w. It returns the number of bytes written.
func (b *Builder) WriteTo(w io.Writer) (int64, error) {
	if b.err != nil {
		return 0, b.err
	}
	cw := &countWriter{w: bufio.NewWriterSize(w, 1<<16)}
	align := b.alignment()
	cw.write([]byte(Magic))
	cw.u32(3)
	cw.u64(uint64(len(b.tensors)))
	cw.u64(uint64(b.meta.Len()))
	for _, kv := range b.meta.All() {
		cw.str(kv.Key)
		cw.value(kv.Value)
	}
	offset := int64(0)
	for _, t := range b.tensors {
		cw.str(t.name)
		cw.u32(uint32(len(t.shape)))
		for _, d := range t.shape {
			cw.u64(uint64(d))
		}
		cw.u32(uint32(t.typ))
		cw.u64(uint64(offset))
		offset = pad(offset+t.size, align)
	}
	if len(b.tensors) > 0 {
		cw.zeros(pad(cw.n, align) - cw.n)
	}
	var scratch []byte
	for _, t := range b.tensors {
		data := t.data
		if t.fill != nil && cw.err == nil {
			if int64(cap(scratch)) < t.size {
				scratch = make([]byte, t.size)
			}
			data = scratch[:t.size]
			clear(data)
			if err := t.fill(data); err != nil {
				cw.err = fmt.Errorf("gguf: tensor %q: %w", t.name, err)
			}
		}
		cw.write(data)
		cw.zeros(pad(t.size, align) - t.size)
	}
	if cw.err == nil {
		cw.err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, cw.err
}

// Bytes returns the encoded file.
func (b *Builder) Bytes() ([]byte, error) {
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFile writes the file to path atomically: it writes a temporary file
// in the same directory, syncs it, checks that it parses back with the
// same tensors, renames it over path and syncs the directory. On failure
// path is left as it was and the temporary file is removed.
func (b *Builder) WriteFile(path string) error {
	return b.writeFile(path, true)
}

// WriteNewFile is WriteFile for a path that must not exist: the finished
// file is moved into place with a hard link, which fails if path exists by
// then (another process may have created it since the caller checked),
// rather than a rename over it. Such a path is left as it was, and the
// error is a *fs.PathError for path matching fs.ErrExist. On a file
// system without hard links it checks that path does not exist, then
// renames.
func (b *Builder) WriteNewFile(path string) error {
	return b.writeFile(path, false)
}

// writeFile is WriteFile, or with replace false WriteNewFile.
func (b *Builder) writeFile(path string, replace bool) (err error) {
	if b.err != nil {
		return b.err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if _, err = b.WriteTo(tmp); err != nil {
		return fmt.Errorf("gguf: writing %s: %w", tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = b.verify(tmp.Name()); err != nil {
		return err
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else {
		err = publishNew(tmp.Name(), path)
	}
	if err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// publishNew moves the file tmp to path unless path exists: a hard link,
// which fails if it does, then the removal of tmp. Where the file system
// has no hard links, it checks that path does not exist and renames.
func publishNew(tmp, path string) error {
	exists := &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
	err := os.Link(tmp, path)
	switch {
	case err == nil:
		os.Remove(tmp) // path holds the file now; tmp is a second name
		return nil
	case errors.Is(err, fs.ErrExist):
		return exists
	}
	if _, serr := os.Lstat(path); serr == nil {
		return exists
	} else if !errors.Is(serr, fs.ErrNotExist) {
		return err
	}
	return os.Rename(tmp, path)
}

// verify parses the file just written and checks its tensor table.
func (b *Builder) verify(path string) error {
	f, err := Open(path)
	if err != nil {
		return fmt.Errorf("gguf: file just written does not parse: %w", err)
	}
	defer f.Close()
	if len(f.Tensors) != len(b.tensors) || f.Meta.Len() != b.meta.Len() {
		return fmt.Errorf("gguf: file just written has %d tensors and %d keys, want %d and %d",
			len(f.Tensors), f.Meta.Len(), len(b.tensors), b.meta.Len())
	}
	for i, t := range b.tensors {
		got := &f.Tensors[i]
		if got.Name != t.name || got.Type != t.typ || got.Size != t.size {
			return fmt.Errorf("gguf: file just written has tensor %d %q %s (%d bytes), want %q %s (%d bytes)",
				i, got.Name, got.Type, got.Size, t.name, t.typ, t.size)
		}
	}
	return nil
}

// countWriter writes little-endian fields, counting bytes and keeping the
// first error.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
	buf [8]byte
}

func (c *countWriter) write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
}

func (c *countWriter) u32(v uint32) {
	binary.LittleEndian.PutUint32(c.buf[:4], v)
	c.write(c.buf[:4])
}

func (c *countWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(c.buf[:], v)
	c.write(c.buf[:])
}

func (c *countWriter) str(s string) {
	c.u64(uint64(len(s)))
	if c.err == nil {
		n, err := io.WriteString(c.w, s)
		c.n += int64(n)
		c.err = err
	}
}

var zeroPad [256]byte

func (c *countWriter) zeros(n int64) {
	for n > 0 {
		k := min(n, int64(len(zeroPad)))
		c.write(zeroPad[:k])
		n -= k
	}
}

// value writes a metadata value: type, then payload.
func (c *countWriter) value(v Value) {
	c.u32(uint32(v.typ))
	switch v.typ {
	case TypeString:
		c.str(v.str)
	case TypeArray:
		c.u32(uint32(v.elem))
		c.u64(uint64(v.n))
		if v.elem == TypeString {
			for i := 0; i < v.n; i++ {
				c.str(v.StringAt(i))
			}
			return
		}
		if c.err == nil {
			n, err := io.WriteString(c.w, v.str)
			c.n += int64(n)
			c.err = err
		}
	default:
		sz := v.typ.size()
		binary.LittleEndian.PutUint64(c.buf[:], v.bits)
		c.write(c.buf[:sz])
	}
}
