package cu

// Tests that need a GPU. Each opens device 0 through openDevice, which
// skips the test, saying why, on a machine without a driver or a device,
// and fails it instead when MUSER_REQUIRE_CUDA=1. The kernels are the
// hand-written PTX in testdata/kernels.ptx (JIT-compiled by the driver);
// TestGPUCubin also loads testdata/kernels.sm_90.cubin, the same file
// assembled by ptxas.
//
// Functions run by Device.Do run on the device's goroutine, where
// t.Fatal, t.Skip and t.FailNow must not be called (testing allows them
// on the test's goroutine only): they report with t.Error and return an
// error, which do turns into t.Fatal on the test's goroutine.

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

//go:embed testdata/kernels.ptx
var kernelsPTX []byte

//go:embed testdata/kernels.sm_90.cubin
var kernelsSM90 []byte

//go:embed testdata/early.ptx
var earlyPTX []byte

// envRequireCUDA turns the GPU tests' skips into failures.
const envRequireCUDA = "MUSER_REQUIRE_CUDA"

// openDevice opens device 0 and closes it when the test ends (and fails
// the test if Close fails).
func openDevice(t testing.TB) (*Driver, *Device) {
	t.Helper()
	skip := t.Skipf
	if os.Getenv(envRequireCUDA) == "1" {
		skip = t.Fatalf
	}
	drv, err := Open()
	if err != nil {
		skip("no CUDA driver: %v", err)
	}
	n, err := drv.DeviceCount()
	if err != nil || n == 0 {
		skip("no CUDA device: driver %v: DeviceCount = %d, %v", drv, n, err)
	}
	dev, err := drv.OpenDevice(0)
	if err != nil {
		t.Fatalf("OpenDevice(0) with %d devices: %v", n, err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return drv, dev
}

// do runs f on dev and fails the test on its error.
func do(t testing.TB, dev *Device, f func(c *Ctx) error) {
	t.Helper()
	if err := dev.Do(f); err != nil {
		t.Fatal(err)
	}
}

// loadKernels loads a module image of testdata/kernels.ptx and looks up
// its kernels.
func loadKernels(c *Ctx, image []byte) (map[string]Function, error) {
	m, err := c.LoadModule(image)
	if err != nil {
		return nil, err
	}
	fs := map[string]Function{}
	for _, name := range []string{"add_one", "echo", "reverse_shared", "empty"} {
		f, err := c.Function(m, name)
		if err != nil {
			return nil, err
		}
		fs[name] = f
	}
	return fs, nil
}

// kernel loads image and returns its kernel called name.
func kernel(c *Ctx, image []byte, name string) (Function, error) {
	fs, err := loadKernels(c, image)
	return fs[name], err
}

func u32Bytes(v []uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func bytesU32(b []byte) []uint32 {
	v := make([]uint32, len(b)/4)
	for i := range v {
		v[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return v
}

func TestGPUDevice(t *testing.T) {
	drv, dev := openDevice(t)
	info := dev.Info()
	t.Logf("driver %v; device %+v", drv, info)
	if drv.Version() < 12000 {
		t.Errorf("driver CUDA version %d, want 12.0 or later", drv.Version())
	}
	if info.Name == "" || info.SMs <= 0 || info.ComputeMajor <= 0 || info.TotalMem == 0 {
		t.Errorf("Info %+v: want a name, SMs, a compute capability and memory", info)
	}
	if info.MaxSharedPerBlock != 48<<10 {
		t.Errorf("MaxSharedPerBlock = %d, want 48 KiB (every GPU since Kepler)", info.MaxSharedPerBlock)
	}
	if info.MaxSharedPerBlockOptin < info.MaxSharedPerBlock {
		t.Errorf("MaxSharedPerBlockOptin = %d < MaxSharedPerBlock = %d", info.MaxSharedPerBlockOptin, info.MaxSharedPerBlock)
	}
	do(t, dev, func(c *Ctx) error {
		free, total, err := c.MemInfo()
		if err != nil {
			return err
		}
		t.Logf("memory: %d of %d bytes free", free, total)
		if total != info.TotalMem || free == 0 || free > total {
			t.Errorf("MemInfo = %d free of %d, want 0 < free ≤ total = TotalMem %d", free, total, info.TotalMem)
		}
		return nil
	})
}

// TestGPUCopies round-trips bytes through device memory with every copy
// and set, synchronous and asynchronous, at sizes that are not multiples
// of anything.
func TestGPUCopies(t *testing.T) {
	_, dev := openDevice(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 3, 4096, 1<<20 + 7} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		do(t, dev, func(c *Ctx) error {
			a, err := c.Alloc(uint64(n))
			if err != nil {
				return err
			}
			defer c.Free(a)
			b, err := c.Alloc(uint64(n))
			if err != nil {
				return err
			}
			defer c.Free(b)

			// Synchronous: HtoD, DtoD, DtoH.
			if err := c.CopyHtoD(a, src); err != nil {
				return err
			}
			if err := c.CopyDtoD(b, a, uint64(n)); err != nil {
				return err
			}
			got := make([]byte, n)
			if err := c.CopyDtoH(got, b); err != nil {
				return err
			}
			if !bytes.Equal(got, src) {
				t.Errorf("n=%d: synchronous round trip differs at byte %d", n, firstDiff(got, src))
			}
			if err := c.MemsetD8(a, 0xab, uint64(n)); err != nil {
				return err
			}
			if err := c.CopyDtoH(got, a); err != nil {
				return err
			}
			if i := slices.IndexFunc(got, func(x byte) bool { return x != 0xab }); i >= 0 {
				t.Errorf("n=%d: after MemsetD8(0xab) byte %d = %#x", n, i, got[i])
			}

			// Asynchronous on the device's stream, through pinned buffers.
			s := c.Stream()
			in, err := c.HostAlloc(n)
			if err != nil {
				return err
			}
			defer c.FreeHost(in)
			out, err := c.HostAlloc(n)
			if err != nil {
				return err
			}
			defer c.FreeHost(out)
			copy(in.Bytes(), src)
			if err := c.MemsetD8Async(b, 0, uint64(n), s); err != nil {
				return err
			}
			if err := c.CopyHtoDAsync(a, in.Bytes(), s); err != nil {
				return err
			}
			if err := c.CopyDtoDAsync(b, a, uint64(n), s); err != nil {
				return err
			}
			if err := c.CopyDtoHAsync(out.Bytes(), b, s); err != nil {
				return err
			}
			if err := c.Sync(s); err != nil {
				return err
			}
			if !bytes.Equal(out.Bytes(), src) {
				t.Errorf("n=%d: asynchronous round trip differs at byte %d", n, firstDiff(out.Bytes(), src))
			}
			if words := n / 4; words > 0 {
				if err := c.MemsetD32Async(a, math.Float32bits(1.5), uint64(words), s); err != nil {
					return err
				}
				if err := c.CopyDtoHAsync(out.Bytes()[:4*words], a, s); err != nil {
					return err
				}
				if err := c.Sync(s); err != nil {
					return err
				}
				for i, w := range bytesU32(out.Bytes()[:4*words]) {
					if w != math.Float32bits(1.5) {
						t.Errorf("n=%d: after MemsetD32Async(1.5) word %d = %#x", n, i, w)
						break
					}
				}
			}
			if err := c.CopyHtoDAsync(a, src, s); !errors.Is(err, ErrNotPinned) {
				t.Errorf("CopyHtoDAsync from Go memory = %v, want ErrNotPinned", err)
			}
			return nil
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestGPUHostBuf(t *testing.T) {
	_, dev := openDevice(t)
	var kept *HostBuf
	do(t, dev, func(c *Ctx) error {
		h, err := c.HostAlloc(1000)
		if err != nil {
			return err
		}
		if len(h.Bytes()) != 1000 {
			t.Errorf("len(Bytes()) = %d, want 1000", len(h.Bytes()))
		}
		h.Bytes()[999] = 7 // the memory is writable host memory
		if err := c.FreeHost(h); err != nil {
			return err
		}
		if h.Bytes() != nil {
			t.Errorf("Bytes() after FreeHost = %d bytes, want nil", len(h.Bytes()))
		}
		if err := c.FreeHost(h); !errors.Is(err, ErrNotPinned) {
			t.Errorf("second FreeHost = %v, want ErrNotPinned", err)
		}
		kept, err = c.HostAlloc(64)
		return err
	})
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if kept.Bytes() != nil {
		t.Errorf("HostBuf.Bytes() after Close = %d bytes, want nil", len(kept.Bytes()))
	}
}

// TestGPUAddOne launches add_one over an odd count of elements and checks
// every element, and that the elements past the count are untouched.
func TestGPUAddOne(t *testing.T) {
	_, dev := openDevice(t)
	const n, extra = 1000003, 64
	host := make([]uint32, n+extra)
	for i := range host {
		host[i] = uint32(i) * 7
	}
	do(t, dev, func(c *Ctx) error {
		k, err := kernel(c, kernelsPTX, "add_one")
		if err != nil {
			return err
		}
		if params, ok := k.Params(); ok {
			if want := []Param{{0, 8}, {8, 4}}; !slices.Equal(params, want) {
				t.Errorf("add_one parameters %v, want %v", params, want)
			}
		} else {
			t.Logf("the driver does not report kernel parameters (cuFuncGetParamInfo needs CUDA 12.4)")
		}
		p, err := c.Alloc(4 * (n + extra))
		if err != nil {
			return err
		}
		defer c.Free(p)
		if err := c.CopyHtoD(p, u32Bytes(host)); err != nil {
			return err
		}
		const block = 256
		grid := uint32((n + block - 1) / block)
		if err := c.Launch(k, [3]uint32{grid, 1, 1}, [3]uint32{block, 1, 1}, 0, c.Stream(), p, uint32(n)); err != nil {
			return err
		}
		out := make([]byte, 4*(n+extra))
		if err := c.CopyDtoH(out, p); err != nil { // waits for the launch: the stream is blocking
			return err
		}
		for i, v := range bytesU32(out) {
			want := uint32(i) * 7
			if i < n {
				want++
			}
			if v != want {
				t.Errorf("element %d = %d, want %d", i, v, want)
				break
			}
		}
		return nil
	})
}

// TestGPUEcho passes one argument of each type to echo, which writes what
// it received back as 32-bit words.
func TestGPUEcho(t *testing.T) {
	_, dev := openDevice(t)
	st := Struct{Bytes: u32Bytes([]uint32{0x01020304, 0xdeadbeef, 0, 0xffffffff}), Align: 8}
	var (
		n = uint32(12345)
		a = int32(-77)
		s = float32(0.375)
		b = uint64(0x0123_4567_89ab_cdef)
		h = uint16(0xbeef)
		c = uint8(0xa5)
		d = float64(-1234.5678)
	)
	do(t, dev, func(cx *Ctx) error {
		k, err := kernel(cx, kernelsPTX, "echo")
		if err != nil {
			return err
		}
		if params, ok := k.Params(); ok {
			want := []Param{{0, 8}, {8, 4}, {12, 4}, {16, 4}, {24, 8}, {32, 16}, {48, 2}, {50, 1}, {56, 8}}
			if !slices.Equal(params, want) {
				t.Errorf("echo parameters %v, want %v", params, want)
			}
		}
		out, err := cx.Alloc(64)
		if err != nil {
			return err
		}
		defer cx.Free(out)
		if err := cx.MemsetD8(out, 0, 64); err != nil {
			return err
		}
		one := [3]uint32{1, 1, 1}
		if err := cx.Launch(k, one, one, 0, cx.Stream(), out, n, a, s, b, st, h, c, d); err != nil {
			return err
		}
		got := make([]byte, 56)
		if err := cx.CopyDtoH(got, out); err != nil {
			return err
		}
		w := bytesU32(got)
		want := []struct {
			name string
			v    uint32
		}{
			{"n", n}, {"a", uint32(a)}, {"s", math.Float32bits(s)},
			{"b low", uint32(b)}, {"b high", uint32(b >> 32)},
			{"st[0]", 0x01020304}, {"st[1]", 0xdeadbeef}, {"st[2]", 0}, {"st[3]", 0xffffffff},
			{"h", uint32(h)}, {"c", uint32(c)}, {"s*float(n)", math.Float32bits(s * float32(n))},
			{"d low", uint32(math.Float64bits(d))}, {"d high", uint32(math.Float64bits(d) >> 32)},
		}
		for i, x := range want {
			if w[i] != x.v {
				t.Errorf("word %d (%s) = %#x, want %#x", i, x.name, w[i], x.v)
			}
		}
		return nil
	})
}

// TestGPULaunchChecksParams checks, where the driver reports kernel
// parameters, that wrong arguments are refused and nothing runs.
func TestGPULaunchChecksParams(t *testing.T) {
	_, dev := openDevice(t)
	known := false
	do(t, dev, func(c *Ctx) error {
		k, err := kernel(c, kernelsPTX, "add_one")
		if err != nil {
			return err
		}
		if _, known = k.Params(); !known {
			return nil
		}
		p, err := c.Alloc(4)
		if err != nil {
			return err
		}
		defer c.Free(p)
		if err := c.MemsetD8(p, 0, 4); err != nil {
			return err
		}
		one := [3]uint32{1, 1, 1}
		for _, args := range [][]any{{p}, {p, uint64(1)}, {p, uint32(1), uint32(2)}} {
			if err := c.Launch(k, one, one, 0, c.Stream(), args...); !errors.Is(err, ErrArg) {
				t.Errorf("Launch(add_one, %v) = %v, want ErrArg", args, err)
			}
		}
		got := make([]byte, 4)
		if err := c.CopyDtoH(got, p); err != nil {
			return err
		}
		if v := binary.LittleEndian.Uint32(got); v != 0 {
			t.Errorf("element = %d after refused launches, want 0 (nothing ran)", v)
		}
		return nil
	})
	if !known {
		t.Skip("the driver does not report kernel parameters (cuFuncGetParamInfo needs CUDA 12.4)")
	}
}

// TestGPUDynamicShared launches reverse_shared with 4000 bytes of dynamic
// shared memory, then with 64 KiB: refused until SetMaxDynamicShared
// raises the kernel's limit, then correct.
func TestGPUDynamicShared(t *testing.T) {
	_, dev := openDevice(t)
	const big = 64 << 10
	if dev.Info().MaxSharedPerBlockOptin < big {
		t.Skipf("device gives a block at most %d bytes of shared memory", dev.Info().MaxSharedPerBlockOptin)
	}
	do(t, dev, func(c *Ctx) error {
		k, err := kernel(c, kernelsPTX, "reverse_shared")
		if err != nil {
			return err
		}
		out, err := c.Alloc(big)
		if err != nil {
			return err
		}
		defer c.Free(out)
		run := func(words uint32) error {
			return c.Launch(k, [3]uint32{1, 1, 1}, [3]uint32{256, 1, 1}, 4*words, c.Stream(), out, words)
		}
		check := func(words uint32) error {
			got := make([]byte, 4*words)
			if err := c.CopyDtoH(got, out); err != nil {
				return err
			}
			for i, v := range bytesU32(got) {
				if want := 3*(words-1-uint32(i)) + 1; v != want {
					t.Errorf("words=%d: out[%d] = %d, want %d", words, i, v, want)
					break
				}
			}
			return nil
		}
		if err := run(1000); err != nil {
			return err
		}
		if err := check(1000); err != nil {
			return err
		}
		err = run(big / 4)
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != codeInvalidValue {
			t.Errorf("launch with 64 KiB of dynamic shared memory before SetMaxDynamicShared = %v, want CUDA_ERROR_INVALID_VALUE", err)
		}
		if err := c.SetMaxDynamicShared(k, big); err != nil {
			return err
		}
		if err := run(big / 4); err != nil {
			return err
		}
		return check(big / 4)
	})
}

// TestGPUEvents times work between two events.
func TestGPUEvents(t *testing.T) {
	_, dev := openDevice(t)
	do(t, dev, func(c *Ctx) error {
		k, err := kernel(c, kernelsPTX, "add_one")
		if err != nil {
			return err
		}
		const n = 1 << 24
		p, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(p)
		if err := c.MemsetD8Async(p, 0, 4*n, c.Stream()); err != nil {
			return err
		}
		start, err := c.NewEvent()
		if err != nil {
			return err
		}
		defer c.DestroyEvent(start)
		end, err := c.NewEvent()
		if err != nil {
			return err
		}
		defer c.DestroyEvent(end)
		const reps = 20
		if err := c.Record(start, c.Stream()); err != nil {
			return err
		}
		for range reps {
			if err := c.Launch(k, [3]uint32{n / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, c.Stream(), p, uint32(n)); err != nil {
				return err
			}
		}
		if err := c.Record(end, c.Stream()); err != nil {
			return err
		}
		if err := c.WaitEvent(end); err != nil {
			return err
		}
		el, err := c.Elapsed(start, end)
		if err != nil {
			return err
		}
		t.Logf("%d launches over %d elements: %v (%.0f GB/s)", reps, n, el, float64(reps)*8*n/el.Seconds()/1e9)
		if el <= 0 || el > time.Minute {
			t.Errorf("Elapsed = %v, want a positive time under a minute", el)
		}
		got := make([]byte, 4)
		if err := c.CopyDtoH(got, p+4*(n-1)); err != nil {
			return err
		}
		if v := binary.LittleEndian.Uint32(got); v != reps {
			t.Errorf("last element = %d after %d launches, want %d", v, reps, reps)
		}
		return c.SyncAll()
	})
}

// TestGPUErrors checks the driver's errors: PTX that does not compile (with
// the JIT's log), a kernel that is not there, and memory the device cannot
// give.
func TestGPUErrors(t *testing.T) {
	_, dev := openDevice(t)
	do(t, dev, func(c *Ctx) error {
		bad := []byte(".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry bad()\n{\n\tbogus.instruction;\n\tret;\n}\n")
		_, err := c.LoadModule(bad)
		var me *ModuleError
		if !errors.As(err, &me) || !errors.Is(err, ErrModule) {
			t.Errorf("LoadModule(bad PTX) = %v, want a *ModuleError", err)
		} else {
			t.Logf("bad PTX: %v", err)
			if me.Err.Code != codeInvalidPTX {
				t.Errorf("bad PTX: code %d, want CUDA_ERROR_INVALID_PTX (%d)", me.Err.Code, codeInvalidPTX)
			}
			if me.Log == "" {
				t.Errorf("bad PTX: no JIT error log")
			}
		}

		m, err := c.LoadModule(kernelsPTX)
		if err != nil {
			return err
		}
		_, err = c.Function(m, "no_such_kernel")
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != 500 {
			t.Errorf("Function(no_such_kernel) = %v, want CUDA_ERROR_NOT_FOUND (500)", err)
		}
		if err := c.UnloadModule(m); err != nil {
			return err
		}

		_, err = c.Alloc(1 << 44)
		if !errors.As(err, &ce) || ce.Code != codeOutOfMemory || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" || ce.Message == "" {
			t.Errorf("Alloc(16 TiB) = %#v, want CUDA_ERROR_OUT_OF_MEMORY with a description", err)
		}
		return nil
	})
}

// TestGPUCubin loads the kernels as a cubin for sm_90 (the H200) and runs
// add_one from it.
func TestGPUCubin(t *testing.T) {
	_, dev := openDevice(t)
	if info := dev.Info(); info.ComputeMajor != 9 || info.ComputeMinor != 0 {
		t.Skipf("testdata/kernels.sm_90.cubin runs on compute capability 9.0, the device is %d.%d", info.ComputeMajor, info.ComputeMinor)
	}
	do(t, dev, func(c *Ctx) error {
		k, err := kernel(c, kernelsSM90, "add_one")
		if err != nil {
			return err
		}
		p, err := c.Alloc(4 * 300)
		if err != nil {
			return err
		}
		defer c.Free(p)
		if err := c.MemsetD8(p, 0, 4*300); err != nil {
			return err
		}
		if err := c.Launch(k, [3]uint32{2, 1, 1}, [3]uint32{256, 1, 1}, 0, c.Stream(), p, uint32(300)); err != nil {
			return err
		}
		got := make([]byte, 4*300)
		if err := c.CopyDtoH(got, p); err != nil {
			return err
		}
		for i, v := range bytesU32(got) {
			if v != 1 {
				t.Errorf("element %d = %d, want 1", i, v)
				break
			}
		}
		return nil
	})
}

// TestGPUNoCompatLibraries loads and runs PTX, which makes the driver load
// its JIT compiler (libnvidia-ptxjitcompiler.so.1, found through the
// loader's search like any soname), then lists the process's mapped
// NVIDIA libraries: none may come from a compat directory unless
// MUSER_LIBCUDA chose one.
func TestGPUNoCompatLibraries(t *testing.T) {
	_, dev := openDevice(t)
	do(t, dev, func(c *Ctx) error {
		k, err := kernel(c, kernelsPTX, "empty")
		if err != nil {
			return err
		}
		one := [3]uint32{1, 1, 1}
		if err := c.Launch(k, one, one, 0, c.Stream()); err != nil {
			return err
		}
		return c.Sync(c.Stream())
	})
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("cannot list mapped libraries: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[5], "/") || seen[f[5]] {
			continue
		}
		path := f[5]
		seen[path] = true
		base := filepath.Base(path)
		if !strings.HasPrefix(base, "libcuda") && !strings.HasPrefix(base, "libnvidia") {
			continue
		}
		t.Logf("mapped: %s", path)
		if isCompat(path) && os.Getenv(EnvLib) == "" {
			t.Errorf("%s is mapped from a compat directory (is it on LD_LIBRARY_PATH=%q?)", path, os.Getenv("LD_LIBRARY_PATH"))
		}
	}
}

// TestGPUThreading checks the owner rules with a real context: calls from
// many goroutines all run on one thread, a Ctx kept past its Do is
// refused, Do inside Do is refused, and a closed device refuses Do.
func TestGPUThreading(t *testing.T) {
	needTid(t)
	_, dev := openDevice(t)
	var wg sync.WaitGroup
	tids := make(chan int, 8*20)
	for range 8 {
		wg.Go(func() {
			for range 20 {
				err := dev.Do(func(c *Ctx) error {
					tids <- sysGettid()
					p, err := c.Alloc(256)
					if err != nil {
						return err
					}
					return c.Free(p)
				})
				if err != nil {
					t.Errorf("Do: %v", err)
				}
			}
		})
	}
	wg.Wait()
	close(tids)
	for tid := range tids {
		if tid != dev.own.tid {
			t.Errorf("a Do ran on thread %d, the device's is %d", tid, dev.own.tid)
			break
		}
	}
	var kept *Ctx
	var nested error
	do(t, dev, func(c *Ctx) error {
		kept = c
		nested = dev.Do(func(*Ctx) error { return nil })
		return nil
	})
	if nested != ErrNested {
		t.Errorf("Do inside Do = %v, want ErrNested", nested)
	}
	if _, err := kept.Alloc(8); err != ErrOutsideDo {
		t.Errorf("Alloc on a Ctx kept past its Do = %v, want ErrOutsideDo", err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Do(func(*Ctx) error { return nil }); err != ErrClosed {
		t.Errorf("Do after Close = %v, want ErrClosed", err)
	}
}

// BenchmarkGPULaunch measures one launch of an empty kernel, b.N of them
// queued inside one Do, with the stream drained at the end.
func BenchmarkGPULaunch(b *testing.B) {
	benchLaunch(b, "empty")
}

// BenchmarkGPULaunchArgs is BenchmarkGPULaunch with add_one's two
// arguments and no work (n = 0).
func BenchmarkGPULaunchArgs(b *testing.B) {
	benchLaunch(b, "add_one")
}

func benchLaunch(b *testing.B, name string) {
	_, dev := openDevice(b)
	var k Function
	var p DevicePtr
	do(b, dev, func(c *Ctx) error {
		var err error
		if k, err = kernel(c, kernelsPTX, name); err != nil {
			return err
		}
		p, err = c.Alloc(4)
		return err
	})
	var args []any
	if name == "add_one" {
		args = []any{p, uint32(0)}
	}
	one := [3]uint32{1, 1, 1}
	b.ResetTimer()
	do(b, dev, func(c *Ctx) error {
		for range b.N {
			if err := c.Launch(k, one, one, 0, c.Stream(), args...); err != nil {
				return err
			}
		}
		return c.Sync(c.Stream())
	})
	b.StopTimer()
	do(b, dev, func(c *Ctx) error { return c.Free(p) })
}

// TestGPURunGraph runs chains of add_one through RunGraph: eight launches
// on one buffer add 8 to every element (the nodes run in order, not at
// once), a second run with other arguments reuses the graph and sets only
// the nodes that changed, another kernel sequence builds another graph,
// and a full Graphs drops its least recently used one.
func TestGPURunGraph(t *testing.T) {
	drv, dev := openDevice(t)
	if !drv.Graphs() {
		t.Skipf("driver %v has no graph functions", drv)
	}
	const n = 1 << 20
	do(t, dev, func(c *Ctx) error {
		fs, err := loadKernels(c, kernelsPTX)
		if err != nil {
			return err
		}
		k, empty := fs["add_one"], fs["empty"]
		bufs, free, err := zeroedPair(c, n)
		defer free()
		if err != nil {
			return err
		}
		add := func(p DevicePtr, count uint32) KernelLaunch {
			return KernelLaunch{F: k, Grid: [3]uint32{(count + 255) / 256, 1, 1}, Block: [3]uint32{256, 1, 1}, Args: []any{p, count}}
		}
		gs := NewGraphs(2)
		defer c.DestroyGraphs(gs)
		check := func(step string, want [2][]uint32) {
			for i, p := range bufs {
				out := make([]byte, 4*n)
				if err := c.CopyDtoH(out, p); err != nil {
					t.Errorf("%s: %v", step, err)
					return
				}
				got := bytesU32(out)
				for j, w := range want[i] {
					lo, hi := j*n/len(want[i]), (j+1)*n/len(want[i])
					for e := lo; e < hi; e++ {
						if got[e] != w {
							t.Errorf("%s: buffer %d element %d = %d, want %d", step, i, e, got[e], w)
							return
						}
					}
				}
			}
		}
		stats := func(step string, want GraphStats) {
			if got := gs.Stats(); got != want {
				t.Errorf("%s: stats %+v, want %+v", step, got, want)
			}
		}
		eight := make([]KernelLaunch, 8)
		for i := range eight {
			eight[i] = add(bufs[0], n)
		}
		if err := c.RunGraph(gs, eight, c.Stream()); err != nil {
			return err
		}
		check("first run", [2][]uint32{{8}, {0}})
		stats("first run", GraphStats{Runs: 1, Kernels: 8, Built: 1})
		// The same kernels, the second on the other buffer and the last on half.
		next := slices.Clone(eight)
		next[1], next[7] = add(bufs[1], n), add(bufs[0], n/2)
		if err := c.RunGraph(gs, next, c.Stream()); err != nil {
			return err
		}
		check("second run", [2][]uint32{{15, 14}, {1}})
		stats("second run", GraphStats{Runs: 2, Kernels: 16, Built: 1, Updated: 2})
		// Another sequence: a second graph.
		other := []KernelLaunch{{F: empty, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{1, 1, 1}}, add(bufs[1], n)}
		if err := c.RunGraph(gs, other, c.Stream()); err != nil {
			return err
		}
		check("third run", [2][]uint32{{15, 14}, {2}})
		stats("third run", GraphStats{Runs: 3, Kernels: 18, Built: 2, Updated: 2})
		// A third sequence drops the first graph (least recently used).
		if err := c.RunGraph(gs, eight[:1], c.Stream()); err != nil {
			return err
		}
		check("fourth run", [2][]uint32{{16, 15}, {2}})
		stats("fourth run", GraphStats{Runs: 4, Kernels: 19, Built: 3, Evicted: 1, Updated: 2})
		if gs.Len() != 2 {
			t.Errorf("%d graphs held, want 2", gs.Len())
		}
		// The second sequence again: its graph is still held.
		if err := c.RunGraph(gs, other, c.Stream()); err != nil {
			return err
		}
		check("fifth run", [2][]uint32{{16, 15}, {3}})
		stats("fifth run", GraphStats{Runs: 5, Kernels: 21, Built: 3, Evicted: 1, Updated: 2})
		// Two branches (one per buffer) that wait for nothing of each
		// other, joined by an empty kernel: a graph of its own.
		fan := []KernelLaunch{add(bufs[0], n), add(bufs[1], n), add(bufs[0], n), add(bufs[1], n),
			{F: empty, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{1, 1, 1}, After: []int{2, 3}}}
		fan[1].After, fan[2].After, fan[3].After = []int{}, []int{0}, []int{1}
		fs2 := NewGraphs(1)
		defer c.DestroyGraphs(fs2)
		for i := range 2 {
			if err := c.RunGraph(fs2, fan, c.Stream()); err != nil {
				return err
			}
			w := uint32(2 * (i + 1))
			check("branches", [2][]uint32{{16 + w, 15 + w}, {3 + w}})
		}
		if got, want := fs2.Stats(), (GraphStats{Runs: 2, Kernels: 10, Built: 1}); got != want {
			t.Errorf("branches: stats %+v, want %+v", got, want)
		}
		// Arguments the kernel does not take: refused, nothing runs.
		if _, known := k.Params(); known {
			bad := []KernelLaunch{add(bufs[0], n), {F: k, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{1, 1, 1}, Args: []any{bufs[0]}}}
			if err := c.RunGraph(gs, bad, c.Stream()); !errors.Is(err, ErrArg) {
				t.Errorf("RunGraph with a launch short of an argument: %v, want ErrArg", err)
			}
			check("refused run", [2][]uint32{{20, 19}, {7}})
		}
		return c.Sync(c.Stream())
	})
}

// BenchmarkGPURunGraph is BenchmarkGPULaunchArgs as graphs: 512 launches
// of add_one with no work, one graph launch, per iteration (ns/op is per
// 512 kernels).
func BenchmarkGPURunGraph(b *testing.B) {
	drv, dev := openDevice(b)
	if !drv.Graphs() {
		b.Skipf("driver %v has no graph functions", drv)
	}
	do(b, dev, func(c *Ctx) error {
		k, err := kernel(c, kernelsPTX, "add_one")
		if err != nil {
			return err
		}
		p, err := c.Alloc(4)
		if err != nil {
			return err
		}
		defer c.Free(p)
		ls := make([]KernelLaunch, 512)
		for i := range ls {
			ls[i] = KernelLaunch{F: k, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{1, 1, 1}, Args: []any{p, uint32(0)}}
		}
		gs := NewGraphs(1)
		defer c.DestroyGraphs(gs)
		b.ResetTimer()
		for range b.N {
			if err := c.RunGraph(gs, ls, c.Stream()); err != nil {
				return err
			}
		}
		return c.Sync(c.Stream())
	})
}

// TestGPURunGraphEarly runs graphs of add_one_early launches joined by
// early-launch edges (KernelLaunch.Early), each reading and writing what
// the one before wrote: a kernel started early must still see every
// write of those it waits for, so 24 launches over 4 Mi elements add 24
// to each, run after run; with two branches joined by a launch that
// waits for both, the same. The same graph with Early off gives the same.
func TestGPURunGraphEarly(t *testing.T) {
	drv, dev := openDevice(t)
	if !drv.EarlyLaunch() {
		t.Skipf("driver %v has no early-launch edges in graphs (cuGraphAddDependencies_v2, CUDA 12.3)", drv)
	}
	const n = 4 << 20
	do(t, dev, func(c *Ctx) error {
		if info := dev.Info(); info.ComputeMajor < 9 {
			t.Logf("compute capability %d.%d: griddepcontrol needs 9.0; skipped", info.ComputeMajor, info.ComputeMinor)
			return nil
		}
		k, err := moduleKernel(c, earlyPTX, "add_one_early")
		if err != nil {
			return err
		}
		bufs, free, err := zeroedPair(c, n)
		defer free()
		if err != nil {
			return err
		}
		add := func(p DevicePtr, early bool) KernelLaunch {
			return KernelLaunch{F: k, Grid: [3]uint32{n / 256, 1, 1}, Block: [3]uint32{256, 1, 1}, Args: []any{p, uint32(n)}, Early: early}
		}
		want := [2]uint32{}
		check := func(step string) error {
			for i, p := range bufs {
				out := make([]byte, 4*n)
				if err := c.CopyDtoH(out, p); err != nil {
					return err
				}
				for e, v := range bytesU32(out) {
					if v != want[i] {
						t.Errorf("%s: buffer %d element %d = %d, want %d", step, i, e, v, want[i])
						return nil
					}
				}
			}
			return nil
		}
		gs := NewGraphs(4)
		defer c.DestroyGraphs(gs)
		for _, early := range []bool{true, false} {
			chain := make([]KernelLaunch, 24)
			for i := range chain {
				chain[i] = add(bufs[0], early)
			}
			// Two branches of 6, one per buffer, and a last launch on
			// buffer 0 that waits for both.
			fan := make([]KernelLaunch, 13)
			for i := range 12 {
				fan[i] = add(bufs[i%2], early)
				fan[i].After = []int{}
				if i >= 2 {
					fan[i].After = []int{i - 2}
				}
			}
			fan[12] = add(bufs[0], early)
			fan[12].After = []int{10, 11}
			for run := range 3 {
				if err := c.RunGraph(gs, chain, c.Stream()); err != nil {
					return err
				}
				want[0] += 24
				if err := c.RunGraph(gs, fan, c.Stream()); err != nil {
					return err
				}
				want[0] += 7
				want[1] += 6
				if err := check(fmt.Sprintf("early=%v run %d", early, run)); err != nil {
					return err
				}
			}
		}
		if got := gs.Stats().Built; got != 4 {
			t.Errorf("%d graphs built, want 4 (a chain and a fan, with and without early edges)", got)
		}
		return c.Sync(c.Stream())
	})
}

// moduleKernel loads image and returns its kernel called name.
func moduleKernel(c *Ctx, image []byte, name string) (Function, error) {
	m, err := c.LoadModule(image)
	if err != nil {
		return Function{}, err
	}
	return c.Function(m, name)
}

// zeroedPair allocates two device buffers of n zero uint32s; free
// releases what was allocated, also after an error.
func zeroedPair(c *Ctx, n uint64) (bufs [2]DevicePtr, free func(), err error) {
	free = func() {
		for _, p := range bufs {
			if p != 0 {
				c.Free(p)
			}
		}
	}
	for i := range bufs {
		if bufs[i], err = c.Alloc(4 * n); err != nil {
			return bufs, free, err
		}
		if err = c.MemsetD8(bufs[i], 0, 4*n); err != nil {
			return bufs, free, err
		}
	}
	return bufs, free, nil
}
