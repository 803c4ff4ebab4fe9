package gguf

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"

	"github.com/muserhq/muser/infer/ggml"
)

// Limits enforced by the parser before it allocates. doc.go explains them.
const (
	// MaxStringLength is the longest string (key or value) accepted, in
	// bytes.
	MaxStringLength = 1 << 30
	// MaxArrayLength is the most elements one metadata array may hold.
	MaxArrayLength = 1 << 30
	// MaxKVs is the most metadata entries a file may hold.
	MaxKVs = 1 << 20
	// MaxTensors is the most tensors a file may hold.
	MaxTensors = 1 << 20
	// MaxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
	MaxDims = 4
	// MaxTensorName is the longest tensor name accepted, in bytes
	// (ggml's GGML_MAX_NAME less its terminating NUL).
	MaxTensorName = 63
	// MaxKeyLength is the longest metadata key accepted, in bytes.
	MaxKeyLength = 1 << 16
	// DefaultAlignment is the data alignment when general.alignment is
	// absent.
	DefaultAlignment = 32
)

// Magic is the four bytes every GGUF file starts with.
const Magic = "GGUF"

// KeyAlignment is the metadata key that sets the data alignment.
const KeyAlignment = "general.alignment"

// parser reads a GGUF file from a byte slice. Every read is bounds-checked
// against the slice; every failure is a *FormatError naming the field.
type parser struct {
	data     []byte
	off      int
	path     string
	alignOff int // where the general.alignment entry starts
}

func (p *parser) fail(off int, field string, err error) error {
	return &FormatError{Path: p.path, Offset: int64(off), Field: field, Err: err}
}

func (p *parser) failf(off int, field string, sentinel error, format string, a ...any) error {
	return p.fail(off, field, fmt.Errorf("%w: "+format, append([]any{sentinel}, a...)...))
}

func (p *parser) remaining() int { return len(p.data) - p.off }

// need checks that n more bytes are present for field.
func (p *parser) need(n int, field string) error {
	if n > p.remaining() {
		return p.failf(p.off, field, ErrTruncated, "need %d bytes, %d left", n, p.remaining())
	}
	return nil
}

func (p *parser) u32(field string) (uint32, error) {
	if err := p.need(4, field); err != nil {
		return 0, err
	}
	v := le32(p.data[p.off:])
	p.off += 4
	return v, nil
}

func (p *parser) u64(field string) (uint64, error) {
	if err := p.need(8, field); err != nil {
		return 0, err
	}
	v := le64(p.data[p.off:])
	p.off += 8
	return v, nil
}

// strBytes reads a length-prefixed string and returns its bytes (a view of
// the input, not a copy), refusing lengths above max. The field is named
// field, or field[idx] when idx >= 0; the name is built only on failure, so
// reading a large string array allocates nothing per element.
func (p *parser) strBytes(field string, idx int, max int) ([]byte, error) {
	start := p.off
	name := func() string {
		if idx < 0 {
			return field
		}
		return field + "[" + strconv.Itoa(idx) + "]"
	}
	if p.remaining() < 8 {
		return nil, p.failf(start, name()+" length", ErrTruncated, "need 8 bytes, %d left", p.remaining())
	}
	n := le64(p.data[p.off:])
	p.off += 8
	if n > uint64(max) {
		return nil, p.failf(start, name(), ErrLimit, "string length %d exceeds the limit of %d bytes", n, max)
	}
	if n > uint64(p.remaining()) {
		return nil, p.failf(start, name(), ErrTruncated, "string length %d exceeds the %d bytes left in the file", n, p.remaining())
	}
	b := p.data[p.off : p.off+int(n)]
	p.off += int(n)
	return b, nil
}

// Parse parses a GGUF file held in memory. Tensor data is not copied: the
// File's Data slices point into data, which must not change while the File
// is in use. Metadata is copied out of data.
func Parse(data []byte) (*File, error) {
	return parse(data, "")
}

func parse(data []byte, path string) (*File, error) {
	p := &parser{data: data, path: path}
	f := &File{data: data, path: path}

	// Header.
	if err := p.need(4, "magic"); err != nil {
		return nil, err
	}
	if string(data[:4]) != Magic {
		return nil, p.failf(0, "magic", ErrMagic, "got %q, want %q", data[:4], Magic)
	}
	p.off = 4
	version, err := p.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, p.failf(4, "version", ErrVersion, "GGUF version 1 is no longer supported (want 2 or 3)")
	case version&0xffff == 0:
		return nil, p.failf(4, "version", ErrVersion, "version %#x looks big-endian; only little-endian files are supported", version)
	default:
		return nil, p.failf(4, "version", ErrVersion, "version %d (want 2 or 3)", version)
	}
	f.Version = version

	tcOff := p.off
	nTensors, err := p.u64("tensor_count")
	if err != nil {
		return nil, err
	}
	kvOff := p.off
	nKV, err := p.u64("kv_count")
	if err != nil {
		return nil, err
	}
	// Each tensor info takes at least 8+1+4+4+8 bytes; each KV at least
	// 8+1 (key) + 4 (type) + 1 (smallest value) bytes.
	const minTensorInfo, minKV = 25, 14
	if nTensors > MaxTensors {
		return nil, p.failf(tcOff, "tensor_count", ErrLimit, "%d tensors exceed the limit of %d", nTensors, MaxTensors)
	}
	if nKV > MaxKVs {
		return nil, p.failf(kvOff, "kv_count", ErrLimit, "%d metadata entries exceed the limit of %d", nKV, MaxKVs)
	}
	if nKV*minKV+nTensors*minTensorInfo > uint64(p.remaining()) {
		if nKV*minKV > uint64(p.remaining()) {
			return nil, p.failf(kvOff, "kv_count", ErrLimit, "%d metadata entries cannot fit in the %d bytes left", nKV, p.remaining())
		}
		return nil, p.failf(tcOff, "tensor_count", ErrLimit, "%d tensors cannot fit in the %d bytes left", nTensors, p.remaining())
	}

	// Metadata.
	f.Meta.kvs = make([]KV, 0, nKV)
	f.Meta.index = make(map[string]int, nKV)
	for i := 0; i < int(nKV); i++ {
		if err := p.readKV(&f.Meta, i); err != nil {
			return nil, err
		}
	}

	f.Alignment = DefaultAlignment
	if v, ok := f.Meta.Get(KeyAlignment); ok {
		off := p.alignOff
		if v.Type() != TypeUint32 {
			return nil, p.failf(off, KeyAlignment, ErrAlignment, "type is %s, want uint32", v.TypeName())
		}
		a := uint32(v.bits)
		if a == 0 || a&(a-1) != 0 {
			return nil, p.failf(off, KeyAlignment, ErrAlignment, "%d is not a power of two", a)
		}
		f.Alignment = int(a)
	}

	// Tensor infos.
	f.Tensors = make([]TensorInfo, nTensors)
	f.byName = make(map[string]int, nTensors)
	rel := make([]uint64, nTensors)
	relOff := make([]int, nTensors)
	for i := range f.Tensors {
		if err := p.readTensorInfo(f, i, &rel[i], &relOff[i]); err != nil {
			return nil, err
		}
	}

	// Data section: aligned start when there are tensors.
	dataStart := uint64(p.off)
	if nTensors > 0 {
		a := uint64(f.Alignment)
		dataStart = (dataStart + a - 1) / a * a // p.off < 2^63, a <= 2^31: no overflow
	}
	f.DataOffset = int64(dataStart)
	size := uint64(len(data))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		field := tensorField(i, t.Name) + ".offset"
		if rel[i]%uint64(f.Alignment) != 0 {
			return nil, p.failf(relOff[i], field, ErrAlignment, "offset %d is not a multiple of the alignment %d", rel[i], f.Alignment)
		}
		abs, carry := bits.Add64(dataStart, rel[i], 0)
		end, carry2 := bits.Add64(abs, uint64(t.Size), 0)
		if carry != 0 || carry2 != 0 || end > size {
			return nil, p.failf(relOff[i], field, ErrRange, "data [%d, +%d) at data offset %d lies past the end of the %d-byte file", rel[i], t.Size, dataStart, size)
		}
		t.Offset = int64(abs)
	}
	if err := p.checkOverlap(f, relOff); err != nil {
		return nil, err
	}
	return f, nil
}

func tensorField(i int, name string) string {
	if name == "" {
		return "tensor[" + strconv.Itoa(i) + "]"
	}
	return "tensor[" + strconv.Itoa(i) + "] " + strconv.Quote(name)
}

func (p *parser) readKV(m *Metadata, i int) error {
	keyOff := p.off
	field := "kv[" + strconv.Itoa(i) + "].key"
	kb, err := p.strBytes(field, -1, MaxKeyLength)
	if err != nil {
		return err
	}
	if len(kb) == 0 {
		return p.failf(keyOff, field, ErrInvalid, "empty key")
	}
	key := string(kb)
	if m.Has(key) {
		return p.failf(keyOff, "kv["+strconv.Itoa(i)+"] "+strconv.Quote(key), ErrDuplicate, "key %q appears twice", key)
	}
	field = "kv[" + strconv.Itoa(i) + "] " + strconv.Quote(key)
	typOff := p.off
	typ, err := p.u32(field + " type")
	if err != nil {
		return err
	}
	var v Value
	switch {
	case ValueType(typ) == TypeArray:
		v, err = p.readArray(field)
	case ValueType(typ) <= TypeFloat64:
		v, err = p.readScalar(ValueType(typ), field)
	default:
		return p.failf(typOff, field+" type", ErrUnknownType, "value type %d", typ)
	}
	if err != nil {
		return err
	}
	m.set(key, v)
	if key == KeyAlignment {
		p.alignOff = keyOff
	}
	return nil
}

// readScalar reads one value of a scalar type or string.
func (p *parser) readScalar(t ValueType, field string) (Value, error) {
	if t == TypeString {
		b, err := p.strBytes(field, -1, MaxStringLength)
		if err != nil {
			return Value{}, err
		}
		return Value{typ: TypeString, str: string(b)}, nil
	}
	n := t.size()
	if err := p.need(n, field); err != nil {
		return Value{}, err
	}
	v := scalarFrom(t, p.data[p.off:p.off+n])
	if t == TypeBool && v.bits > 1 {
		return Value{}, p.failf(p.off, field, ErrInvalid, "bool byte is %d, want 0 or 1", v.bits)
	}
	p.off += n
	return v, nil
}

// readArray reads an array value: element type, count, elements. Arrays of
// arrays are refused, as llama.cpp refuses them.
func (p *parser) readArray(field string) (Value, error) {
	etOff := p.off
	et, err := p.u32(field + " element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if elem == TypeArray {
		return Value{}, p.failf(etOff, field+" element type", ErrUnknownType, "arrays of arrays are not supported")
	}
	if elem > TypeFloat64 {
		return Value{}, p.failf(etOff, field+" element type", ErrUnknownType, "value type %d", et)
	}
	cntOff := p.off
	n, err := p.u64(field + " count")
	if err != nil {
		return Value{}, err
	}
	if n > MaxArrayLength {
		return Value{}, p.failf(cntOff, field+" count", ErrLimit, "%d elements exceed the limit of %d", n, MaxArrayLength)
	}
	minSize := uint64(elem.size())
	if elem == TypeString {
		minSize = 8
	}
	if n*minSize > uint64(p.remaining()) { // n <= 2^30, minSize <= 8: no overflow
		return Value{}, p.failf(cntOff, field+" count", ErrLimit, "%d %s elements cannot fit in the %d bytes left", n, elem, p.remaining())
	}
	v := Value{typ: TypeArray, elem: elem, n: int(n)}
	if elem != TypeString {
		size := int(n * minSize)
		b := p.data[p.off : p.off+size]
		if elem == TypeBool {
			for j, c := range b {
				if c > 1 {
					return Value{}, p.failf(p.off+j, field+"["+strconv.Itoa(j)+"]", ErrInvalid, "bool byte is %d, want 0 or 1", c)
				}
			}
		}
		v.str = string(b)
		p.off += size
		return v, nil
	}
	// Strings: one pass to bound and measure, one to copy into a single
	// backing string.
	start := p.off
	total := uint64(0)
	for j := 0; j < int(n); j++ {
		b, err := p.strBytes(field, j, MaxStringLength)
		if err != nil {
			return Value{}, err
		}
		total += uint64(len(b))
	}
	if total > math.MaxUint32 {
		return Value{}, p.failf(start, field, ErrLimit, "string array holds %d bytes, more than 4 GiB", total)
	}
	var buf strings.Builder
	buf.Grow(int(total))
	v.ends = make([]uint32, n)
	q := start
	for j := range v.ends {
		l := int(le64(p.data[q:]))
		buf.Write(p.data[q+8 : q+8+l])
		v.ends[j] = uint32(buf.Len())
		q += 8 + l
	}
	v.str = buf.String()
	return v, nil
}

// readTensorInfo reads tensor info i into f.Tensors[i], with its offset
// relative to the data section in *rel (checked later, once the data
// section's start is known) and the offset field's position in *relOff.
func (p *parser) readTensorInfo(f *File, i int, rel *uint64, relOff *int) error {
	nameOff := p.off
	field := tensorField(i, "") + ".name"
	nb, err := p.strBytes(field, -1, MaxStringLength)
	if err != nil {
		return err
	}
	if len(nb) == 0 {
		return p.failf(nameOff, field, ErrInvalid, "empty tensor name")
	}
	if len(nb) > MaxTensorName {
		return p.failf(nameOff, field, ErrLimit, "name of %d bytes exceeds the limit of %d", len(nb), MaxTensorName)
	}
	name := string(nb)
	if j, dup := f.byName[name]; dup {
		return p.failf(nameOff, tensorField(i, name)+".name", ErrDuplicate, "tensor name %q is also tensor %d", name, j)
	}
	t := &f.Tensors[i]
	t.Name = name
	field = tensorField(i, name)

	dimsOff := p.off
	nd, err := p.u32(field + ".n_dims")
	if err != nil {
		return err
	}
	if nd > MaxDims {
		return p.failf(dimsOff, field+".n_dims", ErrLimit, "%d dimensions exceed the limit of %d", nd, MaxDims)
	}
	t.Shape = make([]int64, nd)
	elems := uint64(1)
	overflow, zero := false, false
	for d := range t.Shape {
		dOff := p.off
		n, err := p.u64(field + ".shape[" + strconv.Itoa(d) + "]")
		if err != nil {
			return err
		}
		if n > math.MaxInt64 {
			return p.failf(dOff, field+".shape["+strconv.Itoa(d)+"]", ErrRange, "dimension %d is negative or too large", int64(n))
		}
		t.Shape[d] = int64(n)
		zero = zero || n == 0
		hi, lo := bits.Mul64(elems, n)
		if hi != 0 || lo > math.MaxInt64 {
			overflow = true
		}
		elems = lo
	}
	if zero {
		elems = 0
	} else if overflow {
		return p.failf(dimsOff, field+".shape", ErrRange, "shape %v has more than 2^63-1 elements", t.Shape)
	}

	typOff := p.off
	typ, err := p.u32(field + ".type")
	if err != nil {
		return err
	}
	t.Type = ggml.Type(typ)
	if !t.Type.Known() {
		return p.failf(typOff, field+".type", ErrUnknownType, "ggml type id %d", typ)
	}
	bs, ts := uint64(t.Type.BlockSize()), uint64(t.Type.TypeSize())
	if nd > 0 && uint64(t.Shape[0])%bs != 0 {
		return p.failf(typOff, field+".type", ErrInvalid, "row of %d elements is not a multiple of the %s block size %d", t.Shape[0], t.Type, bs)
	}
	if nd == 0 && bs != 1 {
		return p.failf(typOff, field+".type", ErrInvalid, "a scalar cannot have block type %s", t.Type)
	}
	hi, size := bits.Mul64(elems/bs, ts)
	if hi != 0 || size > math.MaxInt64 {
		return p.failf(typOff, field+".type", ErrRange, "shape %v of %s needs more than 2^63-1 bytes", t.Shape, t.Type)
	}
	t.Size = int64(size)

	*relOff = p.off
	*rel, err = p.u64(field + ".offset")
	if err != nil {
		return err
	}
	f.byName[name] = i
	return nil
}

// checkOverlap refuses tensors whose data ranges overlap.
func (p *parser) checkOverlap(f *File, relOff []int) error {
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		ta, tb := &f.Tensors[order[a]], &f.Tensors[order[b]]
		if ta.Offset != tb.Offset {
			return ta.Offset < tb.Offset
		}
		return ta.Size < tb.Size
	})
	maxEnd, owner := int64(0), -1
	for _, i := range order {
		cur := &f.Tensors[i]
		if cur.Size == 0 {
			continue
		}
		if owner >= 0 && cur.Offset < maxEnd {
			prev := &f.Tensors[owner]
			return p.failf(relOff[i], tensorField(i, cur.Name)+".offset", ErrRange,
				"data [%d, %d) overlaps tensor %q at [%d, %d)", cur.Offset, cur.Offset+cur.Size, prev.Name, prev.Offset, prev.Offset+prev.Size)
		}
		if end := cur.Offset + cur.Size; end > maxEnd {
			maxEnd, owner = end, i
		}
	}
	return nil
}
