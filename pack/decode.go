package pack

import (
	"encoding/binary"
	"io"
)

// decoder reads the fixed-width little-endian fields of docs/kvpack.md from
// a byte slice. Its first failure sticks: later reads return zero values
// and err keeps the first error, which names the object, field and offset.
type decoder struct {
	obj  string
	b    []byte
	off  int
	base int64 // offset of b[0] within the enclosing object, for messages
	err  error
}

func (d *decoder) fail(field, problem string, cause error) {
	if d.err == nil {
		d.err = &FormatError{Object: d.obj, Field: field, Offset: d.base + int64(d.off), Problem: problem, Err: cause}
	}
}

func (d *decoder) limit(field string, got, max uint64) {
	if d.err == nil {
		d.err = &LimitError{Object: d.obj, Field: field, Got: got, Max: max}
	}
}

// take returns the next n bytes, or nil after recording a truncation.
func (d *decoder) take(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b)-d.off < n {
		d.fail(field, "input ends early", io.ErrUnexpectedEOF)
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u16(field string) uint16 {
	if p := d.take(field, 2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32(field string) uint32 {
	if p := d.take(field, 4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64(field string) uint64 {
	if p := d.take(field, 8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) digest(field string) Digest {
	var x Digest
	if p := d.take(field, 32); p != nil {
		copy(x[:], p)
	}
	return x
}

// remaining reports whether at least n more bytes are present, recording a
// truncation if not. Decoders call it before allocating for a count.
func (d *decoder) remaining(field string, n uint64) bool {
	if d.err != nil {
		return false
	}
	if uint64(len(d.b)-d.off) < n {
		d.fail(field, "input ends early", io.ErrUnexpectedEOF)
		return false
	}
	return true
}

// text reads a length-prefixed string (u32 or u16 length as width says),
// bounded by max and checked by checkText.
func (d *decoder) text(field string, width int, max int) string {
	off := d.off
	var n uint64
	if width == 2 {
		n = uint64(d.u16(field + " length"))
	} else {
		n = uint64(d.u32(field + " length"))
	}
	if d.err != nil {
		return ""
	}
	if n > uint64(max) {
		d.limit(field+" length", n, uint64(max))
		return ""
	}
	p := d.take(field, int(n))
	if p == nil {
		return ""
	}
	s := string(p)
	if err := checkText(s, max); err != nil {
		d.off = off
		d.fail(field, err.Error(), nil)
		return ""
	}
	return s
}

// end records an error if bytes are left over.
func (d *decoder) end() {
	if d.err == nil && d.off != len(d.b) {
		d.fail("end", "unexpected trailing bytes", nil)
	}
}

// identity decodes the canonical identity encoding and validates it.
func (d *decoder) identity() Identity {
	var id Identity
	start := d.off
	id.Format = d.u32("format")
	id.Model = d.digest("model")
	id.Arch = d.text("arch", 4, MaxIdentityString)
	id.Tokenizer = d.digest("tokenizer")
	id.Template = d.digest("template")
	id.Quant = d.text("quant", 4, MaxIdentityString)
	id.KV = d.text("kv", 4, MaxIdentityString)
	id.Engine = d.text("engine", 4, MaxIdentityString)
	if d.err != nil {
		return Identity{}
	}
	if err := id.Validate(); err != nil {
		d.off = start
		d.fail("identity", err.Error(), nil)
		return Identity{}
	}
	return id
}
