package cu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

func TestLayoutArgs(t *testing.T) {
	st16 := Struct{Bytes: make([]byte, 16), Align: 16}
	tests := []struct {
		name  string
		args  []any
		slots []slot
		size  int
	}{
		{"none", nil, []slot{}, 0},
		{"one pointer", []any{DevicePtr(1)}, []slot{{8, 8, 8}}, 16},
		{"pointer, count", []any{DevicePtr(1), uint32(2)}, []slot{{16, 8, 8}, {24, 4, 4}}, 28},
		{"u32 then u64 pads to 8", []any{uint32(1), uint64(2)}, []slot{{16, 4, 4}, {24, 8, 8}}, 32},
		{"every width", []any{uint8(1), int16(2), int32(3), float32(4), int64(5), float64(6), int8(7), uint16(8)},
			[]slot{{64, 1, 1}, {66, 2, 2}, {68, 4, 4}, {72, 4, 4}, {80, 8, 8}, {88, 8, 8}, {96, 1, 1}, {98, 2, 2}}, 100},
		{"struct aligned to 16", []any{uint8(1), st16}, []slot{{16, 1, 1}, {32, 16, 16}}, 48},
		{"odd count: values start after the array", []any{uint8(1), uint8(2), uint8(3)}, []slot{{24, 1, 1}, {25, 1, 1}, {26, 1, 1}}, 27},
		{"struct of 6 bytes aligned to 2", []any{int8(1), Struct{Bytes: make([]byte, 6), Align: 2}, uint8(3)},
			[]slot{{24, 1, 1}, {26, 6, 2}, {32, 1, 1}}, 33},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slots, size, err := layoutArgs(tt.args, nil)
			if err != nil {
				t.Fatalf("layoutArgs: %v", err)
			}
			if size != tt.size {
				t.Errorf("size = %d, want %d", size, tt.size)
			}
			if len(slots) != 0 || len(tt.slots) != 0 {
				if !reflect.DeepEqual(slots, tt.slots) {
					t.Errorf("slots = %v, want %v", slots, tt.slots)
				}
			}
		})
	}
}

// alignedBuf returns n bytes whose first byte is 16-aligned.
func alignedBuf(n int) []byte {
	b := make([]byte, n+maxArgAlign)
	skip := int((maxArgAlign - uintptr(unsafe.Pointer(&b[0]))%maxArgAlign) % maxArgAlign)
	return b[skip : skip+n : skip+n]
}

// TestPackArgs checks that each pointer-array entry holds the address of
// its value's bytes, and that the bytes are the value in the host's (and
// the device's) little-endian encoding.
func TestPackArgs(t *testing.T) {
	st := Struct{Bytes: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Align: 8}
	args := []any{DevicePtr(0x7f00_0000_1000), uint32(1000003), int32(-5), float32(1.5), uint64(1 << 40), st, uint16(65535), uint8(200), float64(-2.25), int8(-1), int16(-300), int64(-1 << 50)}
	le := binary.LittleEndian
	want := [][]byte{
		le.AppendUint64(nil, 0x7f00_0000_1000),
		le.AppendUint32(nil, 1000003),
		le.AppendUint32(nil, uint32(0xfffffffb)),
		le.AppendUint32(nil, math.Float32bits(1.5)),
		le.AppendUint64(nil, 1<<40),
		st.Bytes,
		{0xff, 0xff},
		{200},
		le.AppendUint64(nil, math.Float64bits(-2.25)),
		{0xff},
		le.AppendUint16(nil, uint16(0xfed4)),
		le.AppendUint64(nil, uint64(0xfffc000000000000)),
	}
	buf := alignedBuf(512)
	for i := range buf {
		buf[i] = 0xee // padding keeps this value
	}
	slots, err := packArgs(buf, args, nil)
	if err != nil {
		t.Fatalf("packArgs: %v", err)
	}
	base := uintptr(unsafe.Pointer(&buf[0]))
	for i, s := range slots {
		p := uintptr(binary.NativeEndian.Uint64(buf[i*ptrSize:]))
		if p != base+uintptr(s.Off) {
			t.Errorf("pointer %d = base+%d, want base+%d", i, p-base, s.Off)
		}
		if s.Off%s.Align != 0 || p%uintptr(s.Align) != 0 {
			t.Errorf("argument %d at offset %d (address %#x) is not %d-aligned", i, s.Off, p, s.Align)
		}
		if s.Off < len(args)*ptrSize {
			t.Errorf("argument %d at offset %d overlaps the pointer array (%d bytes)", i, s.Off, len(args)*ptrSize)
		}
		if got := buf[s.Off : s.Off+s.Size]; !bytes.Equal(got, want[i]) {
			t.Errorf("argument %d (%T) bytes = %x, want %x", i, args[i], got, want[i])
		}
	}
	// Every byte outside the pointer array and the values is padding,
	// left as it was.
	used := make([]bool, len(buf))
	for i := 0; i < len(args)*ptrSize; i++ {
		used[i] = true
	}
	for _, s := range slots {
		for i := s.Off; i < s.Off+s.Size; i++ {
			used[i] = true
		}
	}
	for i, u := range used {
		if !u && buf[i] != 0xee {
			t.Errorf("padding byte %d = %#x, want it untouched (0xee)", i, buf[i])
		}
	}
}

func TestArgErrors(t *testing.T) {
	x := int32(1)
	tests := []struct {
		name   string
		args   []any
		index  int
		reason string
	}{
		{"int", []any{uint32(1), 7}, 1, "width is not fixed"},
		{"uint", []any{uint(7)}, 0, "width is not fixed"},
		{"uintptr", []any{DevicePtr(1), uint32(2), uintptr(7)}, 2, "width is not fixed"},
		{"Go pointer", []any{&x}, 0, "Go memory cannot be a kernel argument"},
		{"slice", []any{uint8(1), []byte{1}}, 1, "Go memory cannot be a kernel argument"},
		{"string", []any{"text"}, 0, "unsupported type"},
		{"bool", []any{true}, 0, "unsupported type"},
		{"nil", []any{nil}, 0, "unsupported type"},
		{"struct pointer", []any{&Struct{Bytes: []byte{1}, Align: 1}}, 0, "by value"},
		{"empty struct", []any{Struct{Align: 4}}, 0, "no bytes"},
		{"struct alignment 3", []any{Struct{Bytes: make([]byte, 3), Align: 3}}, 0, "alignment 3"},
		{"struct alignment 32", []any{Struct{Bytes: make([]byte, 32), Align: 32}}, 0, "alignment 32"},
		{"struct size not a multiple", []any{Struct{Bytes: make([]byte, 6), Align: 4}}, 0, "not a multiple"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := packArgs(alignedBuf(256), tt.args, nil)
			var ae *ArgError
			if !errors.As(err, &ae) {
				t.Fatalf("packArgs(%v) = %v, want an *ArgError", tt.args, err)
			}
			if !errors.Is(err, ErrArg) {
				t.Errorf("error %v does not match ErrArg", err)
			}
			if ae.Index != tt.index {
				t.Errorf("Index = %d, want %d (%v)", ae.Index, tt.index, err)
			}
			if !strings.Contains(ae.Reason, tt.reason) {
				t.Errorf("Reason = %q, want it to contain %q", ae.Reason, tt.reason)
			}
		})
	}
}

func TestPackArgsArena(t *testing.T) {
	big := Struct{Bytes: make([]byte, 256), Align: 8}
	if _, err := packArgs(alignedBuf(256), []any{big}, nil); !errors.Is(err, ErrArg) || !strings.Contains(err.Error(), "264 bytes") {
		t.Errorf("packArgs of 264 bytes into 256 = %v, want an ErrArg naming 264 bytes", err)
	}
	if _, err := packArgs(alignedBuf(264), []any{big}, nil); err != nil {
		t.Errorf("packArgs of 264 bytes into 264 = %v, want nil", err)
	}
	off := alignedBuf(64 + 8)[8:]
	if _, err := packArgs(off, []any{uint32(1)}, nil); !errors.Is(err, ErrArg) || !strings.Contains(err.Error(), "aligned") {
		t.Errorf("packArgs into an 8-aligned buffer = %v, want an ErrArg about alignment", err)
	}
	slots, err := packArgs(nil, nil, nil)
	if err != nil || len(slots) != 0 {
		t.Errorf("packArgs of no arguments = %v, %v, want no slots and no error", slots, err)
	}
}

// TestLayoutReuse checks that the slot slice passed in is reused, so a
// launch with a Ctx's slots allocates none.
func TestLayoutReuse(t *testing.T) {
	args := []any{DevicePtr(1), uint32(2), float32(3)}
	slots, _, _ := layoutArgs(args, make([]slot, 0, 8))
	buf := alignedBuf(256)
	allocs := testing.AllocsPerRun(100, func() {
		slots, _ = packArgs(buf, args, slots)
	})
	if allocs != 0 {
		t.Errorf("packArgs with reused slots allocates %v times per call, want 0", allocs)
	}
}

// FuzzLayoutArgs builds argument lists from the input (one selector byte,
// then the value's bytes) and checks the layout's invariants: every value
// aligned, after the pointer array, not overlapping the next, pointed at
// by its entry, and holding the argument's bytes. Seeds are in
// testdata/fuzz/FuzzLayoutArgs.
func FuzzLayoutArgs(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		var args []any
		var enc [][]byte
		// take consumes up to n bytes of the input, zero-extended to n.
		take := func(n int) []byte {
			k := min(n, len(in))
			b := padTo(append([]byte(nil), in[:k]...), n)
			in = in[k:]
			return b
		}
		le := binary.LittleEndian
		for len(in) > 0 && len(args) < 64 {
			sel := in[0] % 12
			in = in[1:]
			switch sel {
			case 0:
				b := take(8)
				args, enc = append(args, DevicePtr(le.Uint64(b))), append(enc, b)
			case 1:
				b := take(1)
				args, enc = append(args, b[0]), append(enc, b)
			case 2:
				b := take(2)
				args, enc = append(args, int16(le.Uint16(b))), append(enc, b)
			case 3:
				b := take(4)
				args, enc = append(args, le.Uint32(b)), append(enc, b)
			case 4:
				b := take(4)
				args, enc = append(args, math.Float32frombits(le.Uint32(b))), append(enc, b)
			case 5:
				b := take(8)
				args, enc = append(args, int64(le.Uint64(b))), append(enc, b)
			case 6:
				b := take(8)
				args, enc = append(args, math.Float64frombits(le.Uint64(b))), append(enc, b)
			case 7:
				b := take(1)
				args, enc = append(args, int8(b[0])), append(enc, b)
			case 8:
				b := take(2)
				args, enc = append(args, le.Uint16(b)), append(enc, b)
			case 9:
				b := take(8)
				args, enc = append(args, le.Uint64(b)), append(enc, b)
			case 10:
				b := take(16)
				args, enc = append(args, Struct{Bytes: b, Align: 16}), append(enc, b)
			case 11:
				b := take(4)
				args, enc = append(args, int32(le.Uint32(b))), append(enc, b)
			}
		}
		buf := alignedBuf(arenaSize)
		slots, err := packArgs(buf, args, nil)
		if err != nil {
			t.Fatalf("packArgs: %v", err)
		}
		base := uintptr(unsafe.Pointer(&buf[0]))
		end := len(args) * ptrSize
		for i, s := range slots {
			if s.Off < end {
				t.Fatalf("argument %d at %d overlaps what precedes it (ends at %d)", i, s.Off, end)
			}
			if s.Off%s.Align != 0 {
				t.Fatalf("argument %d at %d is not %d-aligned", i, s.Off, s.Align)
			}
			if p := uintptr(binary.NativeEndian.Uint64(buf[i*ptrSize:])); p != base+uintptr(s.Off) {
				t.Fatalf("pointer %d = base+%d, want base+%d", i, p-base, s.Off)
			}
			if got := buf[s.Off : s.Off+s.Size]; !bytes.Equal(got, enc[i]) {
				t.Fatalf("argument %d (%T) bytes = %x, want %x", i, args[i], got, enc[i])
			}
			end = s.Off + s.Size
		}
	})
}

// padTo returns b zero-extended to n bytes.
func padTo(b []byte, n int) []byte {
	for len(b) < n {
		b = append(b, 0)
	}
	return b[:n]
}
