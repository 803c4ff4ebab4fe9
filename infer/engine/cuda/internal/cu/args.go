package cu

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// DevicePtr is an address in device memory (CUdeviceptr).
type DevicePtr uint64

// Struct is a kernel argument passed by value as raw bytes: a C struct
// laid out by the caller, with the alignment the kernel declares for the
// parameter (PTX ".param .align 8 .b8 p[16]" is Struct{Bytes: 16 bytes,
// Align: 8}).
type Struct struct {
	Bytes []byte
	Align int // 1, 2, 4, 8 or 16
}

// slot is where one argument's value lies in a parameter block.
type slot struct {
	Off, Size, Align int
}

// arenaSize is the size of each Ctx's argument arena: the parameter block
// of one launch (pointer array and values), or the options and error log
// of one module load. CUDA itself caps a launch's parameters at 32,764
// bytes.
const arenaSize = 64 << 10

// ptrSize is the size of one entry of the pointer array (void*).
const ptrSize = 8

// maxArgAlign is the largest alignment a value gets, and the alignment
// the parameter block's base must have.
const maxArgAlign = 16

// argSize returns the size and alignment of argument i, or an *ArgError.
// The types passed, with the C type each stands for:
//
//	uint8, int8          1 byte   unsigned char, signed char
//	uint16, int16        2 bytes  unsigned short, short
//	uint32, int32        4 bytes  unsigned int, int
//	float32              4 bytes  float
//	uint64, int64        8 bytes  unsigned long long, long long
//	float64              8 bytes  double
//	DevicePtr            8 bytes  CUdeviceptr, T* on the device
//	Struct               len(Bytes) bytes, aligned to Align
//
// Each is aligned to its size. int, uint and uintptr are refused (their
// width is Go's choice, not the kernel's), and so is every pointer, slice
// or string (Go memory cannot be a kernel argument).
func argSize(i int, a any) (size, align int, err error) {
	switch v := a.(type) {
	case uint8, int8:
		return 1, 1, nil
	case uint16, int16:
		return 2, 2, nil
	case uint32, int32, float32:
		return 4, 4, nil
	case uint64, int64, float64, DevicePtr:
		return 8, 8, nil
	case Struct:
		switch {
		case len(v.Bytes) == 0:
			return 0, 0, &ArgError{Index: i, Type: "cu.Struct", Reason: "no bytes"}
		case v.Align != 1 && v.Align != 2 && v.Align != 4 && v.Align != 8 && v.Align != 16:
			return 0, 0, &ArgError{Index: i, Type: "cu.Struct", Reason: fmt.Sprintf("alignment %d, want 1, 2, 4, 8 or 16", v.Align)}
		case len(v.Bytes)%v.Align != 0:
			return 0, 0, &ArgError{Index: i, Type: "cu.Struct", Reason: fmt.Sprintf("%d bytes is not a multiple of its alignment %d", len(v.Bytes), v.Align)}
		}
		return len(v.Bytes), v.Align, nil
	case int, uint, uintptr:
		return 0, 0, &ArgError{Index: i, Type: fmt.Sprintf("%T", a), Reason: "width is not fixed; use int32, uint32, int64 or uint64"}
	case *Struct:
		return 0, 0, &ArgError{Index: i, Type: fmt.Sprintf("%T", a), Reason: "pass the Struct by value"}
	default:
		return 0, 0, &ArgError{Index: i, Type: fmt.Sprintf("%T", a), Reason: "unsupported type; pass fixed-width numbers, DevicePtr or Struct (Go memory cannot be a kernel argument)"}
	}
}

// layoutArgs lays out a parameter block for args, appending one slot per
// argument to slots (which it reuses; pass nil to allocate), and returns
// the slots and the block's size. The block is what cuLaunchKernel's
// kernelParams points at:
//
//   - bytes [0, 8·n): the pointer array, entry i holding the address of
//     argument i's value;
//   - then the values in argument order, each at the next offset that is a
//     multiple of its alignment (the block's base is 16-aligned), with
//     padding bytes left as they are.
//
// The driver reads each value through its pointer with the size the
// kernel declares, so a value's offset in the block is free; natural
// alignment keeps every read aligned.
func layoutArgs(args []any, slots []slot) ([]slot, int, error) {
	slots = slots[:0]
	off := len(args) * ptrSize
	for i, a := range args {
		size, align, err := argSize(i, a)
		if err != nil {
			return slots, 0, err
		}
		off = (off + align - 1) &^ (align - 1)
		slots = append(slots, slot{Off: off, Size: size, Align: align})
		off += size
	}
	return slots, off, nil
}

// packArgs writes the parameter block for args, laid out by layoutArgs,
// into buf, whose first byte must be 16-aligned, and returns the slots.
// It fails with an *ArgError when buf is too small.
func packArgs(buf []byte, args []any, slots []slot) ([]slot, error) {
	slots, size, err := layoutArgs(args, slots)
	if err != nil {
		return slots, err
	}
	if size > len(buf) {
		return slots, &ArgError{Index: -1, Reason: fmt.Sprintf("%d arguments need %d bytes, the arena holds %d", len(args), size, len(buf))}
	}
	if size == 0 {
		return slots, nil
	}
	base := uintptr(unsafe.Pointer(&buf[0]))
	if base%maxArgAlign != 0 {
		return slots, &ArgError{Index: -1, Reason: fmt.Sprintf("arena at %#x is not %d-aligned", base, maxArgAlign)}
	}
	ne := binary.NativeEndian
	for i, a := range args {
		s := slots[i]
		ne.PutUint64(buf[i*ptrSize:], uint64(base)+uint64(s.Off))
		putArg(buf[s.Off:s.Off+s.Size], a)
	}
	return slots, nil
}

// putArg writes a's value into v, which has the size argSize gives it.
func putArg(v []byte, a any) {
	ne := binary.NativeEndian
	switch x := a.(type) {
	case uint8:
		v[0] = x
	case int8:
		v[0] = byte(x)
	case uint16:
		ne.PutUint16(v, x)
	case int16:
		ne.PutUint16(v, uint16(x))
	case uint32:
		ne.PutUint32(v, x)
	case int32:
		ne.PutUint32(v, uint32(x))
	case float32:
		ne.PutUint32(v, math.Float32bits(x))
	case uint64:
		ne.PutUint64(v, x)
	case int64:
		ne.PutUint64(v, uint64(x))
	case float64:
		ne.PutUint64(v, math.Float64bits(x))
	case DevicePtr:
		ne.PutUint64(v, uint64(x))
	case Struct:
		copy(v, x.Bytes)
	}
}
