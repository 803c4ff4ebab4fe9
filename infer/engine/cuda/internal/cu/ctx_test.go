package cu

import (
	"errors"
	"strings"
	"testing"
	"unsafe"
)

// TestCtxOutsideDo calls every Ctx method on a Ctx that no Do is running:
// each must refuse with ErrOutsideDo before touching the driver (the Ctx
// here has none, so a call that reached it would crash).
func TestCtxOutsideDo(t *testing.T) {
	c := &Ctx{}
	var s Stream
	var e Event
	calls := map[string]func() error{
		"NewStream":           func() error { _, err := c.NewStream(); return err },
		"DestroyStream":       func() error { return c.DestroyStream(s) },
		"Sync":                func() error { return c.Sync(s) },
		"SyncAll":             func() error { return c.SyncAll() },
		"MemInfo":             func() error { _, _, err := c.MemInfo(); return err },
		"Alloc":               func() error { _, err := c.Alloc(8); return err },
		"Free":                func() error { return c.Free(1) },
		"CopyHtoD":            func() error { return c.CopyHtoD(1, []byte{1}) },
		"CopyDtoH":            func() error { return c.CopyDtoH(make([]byte, 1), 1) },
		"CopyDtoD":            func() error { return c.CopyDtoD(1, 2, 1) },
		"CopyHtoDAsync":       func() error { return c.CopyHtoDAsync(1, []byte{1}, s) },
		"CopyDtoHAsync":       func() error { return c.CopyDtoHAsync(make([]byte, 1), 1, s) },
		"CopyDtoDAsync":       func() error { return c.CopyDtoDAsync(1, 2, 1, s) },
		"MemsetD8":            func() error { return c.MemsetD8(1, 0, 1) },
		"MemsetD8Async":       func() error { return c.MemsetD8Async(1, 0, 1, s) },
		"MemsetD32Async":      func() error { return c.MemsetD32Async(1, 0, 1, s) },
		"HostAlloc":           func() error { _, err := c.HostAlloc(8); return err },
		"FreeHost":            func() error { return c.FreeHost(&HostBuf{}) },
		"NewEvent":            func() error { _, err := c.NewEvent(); return err },
		"Record":              func() error { return c.Record(e, s) },
		"WaitEvent":           func() error { return c.WaitEvent(e) },
		"Elapsed":             func() error { _, err := c.Elapsed(e, e); return err },
		"DestroyEvent":        func() error { return c.DestroyEvent(e) },
		"LoadModule":          func() error { _, err := c.LoadModule([]byte("x")); return err },
		"UnloadModule":        func() error { return c.UnloadModule(Module{}) },
		"Function":            func() error { _, err := c.Function(Module{}, "k"); return err },
		"SetMaxDynamicShared": func() error { return c.SetMaxDynamicShared(Function{}, 1) },
		"Launch":              func() error { return c.Launch(Function{}, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s) },
	}
	for name, f := range calls {
		t.Run(name, func(t *testing.T) {
			if err := f(); err != ErrOutsideDo {
				t.Errorf("%s outside Do = %v, want ErrOutsideDo", name, err)
			}
		})
	}
}

// liveCtx returns a Ctx that acts as if inside Do, with an arena but no
// driver: only paths that fail before any driver call may be used.
func liveCtx() *Ctx {
	a := alignedBuf(arenaSize)
	return &Ctx{live: true, arena: a, arenaAddr: uintptr(unsafe.Pointer(&a[0]))}
}

// TestLaunchChecksParams checks that a launch whose arguments differ from
// the kernel's reported parameters fails before reaching the driver.
func TestLaunchChecksParams(t *testing.T) {
	f := Function{name: "add_one", params: []Param{{0, 8}, {8, 4}}, known: true}
	one := [3]uint32{1, 1, 1}
	tests := []struct {
		name   string
		args   []any
		index  int
		reason string
	}{
		{"too few", []any{DevicePtr(1)}, -1, "kernel add_one takes 2 parameters, got 1 arguments"},
		{"too many", []any{DevicePtr(1), uint32(2), uint32(3)}, -1, "takes 2 parameters, got 3"},
		{"wide count", []any{DevicePtr(1), uint64(2)}, 1, "8 bytes, kernel add_one's parameter has 4"},
		{"narrow pointer", []any{uint32(1), uint32(2)}, 0, "4 bytes, kernel add_one's parameter has 8"},
		{"unsupported type first", []any{DevicePtr(1), 2}, 1, "width is not fixed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := liveCtx().Launch(f, one, one, 0, Stream{}, tt.args...)
			var ae *ArgError
			if !errors.As(err, &ae) {
				t.Fatalf("Launch = %v, want an *ArgError", err)
			}
			if ae.Index != tt.index || !strings.Contains(ae.Reason, tt.reason) {
				t.Errorf("ArgError{Index: %d, Reason: %q}, want index %d and a reason containing %q", ae.Index, ae.Reason, tt.index, tt.reason)
			}
		})
	}
}

func TestCtxRefusals(t *testing.T) {
	c := liveCtx()
	if _, err := c.HostAlloc(0); !errors.Is(err, ErrSize) {
		t.Errorf("HostAlloc(0) = %v, want ErrSize", err)
	}
	if _, err := c.HostAlloc(-1); !errors.Is(err, ErrSize) {
		t.Errorf("HostAlloc(-1) = %v, want ErrSize", err)
	}
	if _, err := c.LoadModule(nil); !errors.Is(err, ErrModule) {
		t.Errorf("LoadModule(nil) = %v, want ErrModule", err)
	}
	if err := c.FreeHost(&HostBuf{b: make([]byte, 8)}); !errors.Is(err, ErrNotPinned) {
		t.Errorf("FreeHost of a buffer the Ctx does not hold = %v, want ErrNotPinned", err)
	}
	if err := c.CopyHtoDAsync(1, make([]byte, 8), Stream{}); !errors.Is(err, ErrNotPinned) {
		t.Errorf("CopyHtoDAsync from Go memory = %v, want ErrNotPinned", err)
	}
	if err := c.CopyDtoHAsync(make([]byte, 8), 1, Stream{}); !errors.Is(err, ErrNotPinned) {
		t.Errorf("CopyDtoHAsync into Go memory = %v, want ErrNotPinned", err)
	}
	// Zero-length copies and sets return before the driver.
	zero := []func() error{
		func() error { return c.CopyHtoD(1, nil) },
		func() error { return c.CopyDtoH(nil, 1) },
		func() error { return c.CopyDtoD(1, 2, 0) },
		func() error { return c.CopyHtoDAsync(1, nil, Stream{}) },
		func() error { return c.CopyDtoHAsync(nil, 1, Stream{}) },
		func() error { return c.CopyDtoDAsync(1, 2, 0, Stream{}) },
		func() error { return c.MemsetD8(1, 0, 0) },
		func() error { return c.MemsetD8Async(1, 0, 0, Stream{}) },
		func() error { return c.MemsetD32Async(1, 0, 0, Stream{}) },
	}
	for i, f := range zero {
		if err := f(); err != nil {
			t.Errorf("zero-length call %d = %v, want nil", i, err)
		}
	}
}

// TestPinned checks which slices count as lying inside a HostBuf. The
// buffers here are Go memory standing in for pinned memory.
func TestPinned(t *testing.T) {
	mem := make([]byte, 4096)
	h := &HostBuf{b: mem[1024:2048], addr: uintptr(unsafe.Pointer(&mem[1024]))}
	c := &Ctx{hosts: []*HostBuf{h}}
	tests := []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"whole buffer", mem[1024:2048], true},
		{"inside", mem[1100:1200], true},
		{"tail", mem[2000:2048], true},
		{"one byte past the end", mem[2000:2049], false},
		{"starts before", mem[1023:1100], false},
		{"after", mem[2048:2100], false},
		{"before", mem[0:100], false},
		{"other memory", make([]byte, 16), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, err := c.pinned(tt.b)
			if got := err == nil; got != tt.ok {
				t.Fatalf("pinned = %v, want ok=%v", err, tt.ok)
			}
			if err == nil && addr != uintptr(unsafe.Pointer(&tt.b[0])) {
				t.Errorf("pinned address %#x, want %#x", addr, uintptr(unsafe.Pointer(&tt.b[0])))
			}
			if err != nil && !errors.Is(err, ErrNotPinned) {
				t.Errorf("pinned error %v does not match ErrNotPinned", err)
			}
		})
	}
}

func BenchmarkPackArgs(b *testing.B) {
	c := liveCtx()
	args := []any{DevicePtr(1 << 40), DevicePtr(2 << 40), uint32(4096), uint32(128), float32(0.125), int32(-1)}
	for b.Loop() {
		var err error
		if c.slots, err = packArgs(c.arena, args, c.slots); err != nil {
			b.Fatal(err)
		}
	}
}
