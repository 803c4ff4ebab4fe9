package cu

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"
)

// Module is a loaded CUDA module (PTX, cubin or fatbin).
type Module struct{ h uintptr }

// Function is a kernel of a loaded module.
type Function struct {
	h      uintptr
	name   string
	params []Param // the kernel's parameters, when the driver reports them
	known  bool    // params is the full list (cuFuncGetParamInfo answered)
}

// Param is one kernel parameter's place in the kernel's parameter buffer,
// as cuFuncGetParamInfo reports it.
type Param struct {
	Offset, Size int
}

// Name returns the kernel's name as given to Ctx.Function.
func (f Function) Name() string { return f.name }

// Params returns the kernel's parameters and true when the driver reports
// them (CUDA 12.4 and later); Launch then checks its arguments against
// them.
func (f Function) Params() ([]Param, bool) { return f.params, f.known }

// JIT options for cuModuleLoadDataEx (CUjit_option in cuda.h).
const (
	jitErrorLogBuffer          = 5
	jitErrorLogBufferSizeBytes = 6
)

// The arena during a module load: the options (CUjit_option, a 4-byte
// enum), their values (void*), and the error log the JIT writes.
const (
	jitOptionsOff = 0
	jitValuesOff  = 16
	jitLogOff     = 64
	jitLogSize    = 16 << 10
)

// LoadModule loads a module image with cuModuleLoadDataEx: PTX text
// (JIT-compiled for the device by the driver), a cubin, or a fatbin. A
// copy with a NUL byte appended is passed when the image does not end in
// one (PTX text must be NUL-terminated). An image the driver refuses
// gives a *ModuleError with the JIT's error log.
func (c *Ctx) LoadModule(image []byte) (Module, error) {
	if err := c.enter(); err != nil {
		return Module{}, err
	}
	if len(image) == 0 {
		return Module{}, fmt.Errorf("%w: empty image", ErrModule)
	}
	img := image
	if img[len(img)-1] != 0 {
		img = make([]byte, len(image)+1)
		copy(img, image)
	}
	a := c.arena
	ne := binary.NativeEndian
	ne.PutUint32(a[jitOptionsOff:], jitErrorLogBuffer)
	ne.PutUint32(a[jitOptionsOff+4:], jitErrorLogBufferSizeBytes)
	ne.PutUint64(a[jitValuesOff:], uint64(c.arenaAddr+jitLogOff))
	ne.PutUint64(a[jitValuesOff+8:], jitLogSize)
	a[jitLogOff] = 0
	var m Module
	r := call(c.drv.fn.moduleLoadDataEx, uintptr(unsafe.Pointer(&m.h)), uintptr(unsafe.Pointer(&img[0])), 2,
		c.arenaAddr+jitOptionsOff, c.arenaAddr+jitValuesOff)
	if r != 0 {
		log := strings.TrimSpace(cString(&a[jitLogOff], jitLogSize))
		return Module{}, &ModuleError{Err: c.drv.newError("cuModuleLoadDataEx", r), Log: log}
	}
	return m, nil
}

// UnloadModule unloads a module; its Functions become invalid.
func (c *Ctx) UnloadModule(m Module) error {
	if err := c.enter(); err != nil {
		return err
	}
	return c.drv.check("cuModuleUnload", call(c.drv.fn.moduleUnload, m.h))
}

// maxParams bounds the parameters Function asks cuFuncGetParamInfo about.
const maxParams = 4096

// Function looks up the kernel called name (its mangled name for C++
// kernels not declared extern "C") and, where the driver reports them,
// its parameters.
func (c *Ctx) Function(m Module, name string) (Function, error) {
	if err := c.enter(); err != nil {
		return Function{}, err
	}
	cname := append([]byte(name), 0)
	f := Function{name: name}
	if err := c.drv.check("cuModuleGetFunction "+name, call(c.drv.fn.moduleGetFunction, uintptr(unsafe.Pointer(&f.h)), m.h, uintptr(unsafe.Pointer(&cname[0])))); err != nil {
		return Function{}, err
	}
	if c.drv.fn.funcGetParamInfo == 0 {
		return f, nil
	}
	for i := 0; i < maxParams; i++ {
		var off, size uint64
		r := call(c.drv.fn.funcGetParamInfo, f.h, uintptr(i), uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&size)))
		if r == codeInvalidValue {
			f.known = true // i is past the last parameter
			break
		}
		if r != 0 {
			f.params = nil
			break
		}
		f.params = append(f.params, Param{Offset: int(off), Size: int(size)})
	}
	return f, nil
}

// funcAttrMaxDynamicShared is CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
const funcAttrMaxDynamicShared = 8

// SetMaxDynamicShared lets f be launched with up to n bytes of dynamic
// shared memory. Without it a launch may ask for 48 KiB at most; with it,
// up to Info.MaxSharedPerBlockOptin less the kernel's static shared
// memory.
func (c *Ctx) SetMaxDynamicShared(f Function, n int) error {
	if err := c.enter(); err != nil {
		return err
	}
	return c.drv.check("cuFuncSetAttribute "+f.name, call(c.drv.fn.funcSetAttribute, f.h, funcAttrMaxDynamicShared, uintptr(n)))
}

// Launch queues kernel f on stream s with grid×block threads, shared
// bytes of dynamic shared memory and args (types as argSize lists them).
// The arguments are copied into the Ctx's arena, outside the Go heap, and
// cuLaunchKernel reads them from there before it returns; the arena is
// reused by the next launch. Where f's parameters are known (Params), an
// argument count or size that differs from the kernel's is an *ArgError
// and nothing is launched.
func (c *Ctx) Launch(f Function, grid, block [3]uint32, shared uint32, s Stream, args ...any) error {
	if err := c.enter(); err != nil {
		return err
	}
	kp, err := c.pack(f, args, c.arena)
	if err != nil {
		return err
	}
	r := call(c.drv.fn.launchKernel, f.h,
		uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
		uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
		uintptr(shared), s.h, kp, 0)
	if r != 0 {
		return c.drv.newError("cuLaunchKernel "+f.name, r)
	}
	return nil
}

// pack writes args' parameter block into buf, a prefix of the arena, and
// returns its address for kernelParams (0 without arguments). Where f's
// parameters are known, an argument count or size that differs from the
// kernel's is an *ArgError.
func (c *Ctx) pack(f Function, args []any, buf []byte) (uintptr, error) {
	slots, err := packArgs(buf, args, c.slots)
	c.slots = slots
	if err != nil {
		return 0, err
	}
	if err := checkParams(f, args, slots); err != nil {
		return 0, err
	}
	if len(args) == 0 {
		return 0, nil
	}
	return c.arenaAddr, nil
}

// checkParams compares the laid-out arguments with f's parameters, where
// the driver reported them.
func checkParams(f Function, args []any, slots []slot) error {
	if !f.known {
		return nil
	}
	if len(args) != len(f.params) {
		return &ArgError{Index: -1, Reason: fmt.Sprintf("kernel %s takes %d parameters, got %d arguments", f.name, len(f.params), len(args))}
	}
	for i, sl := range slots {
		if sl.Size != f.params[i].Size {
			return &ArgError{Index: i, Type: fmt.Sprintf("%T", args[i]), Reason: fmt.Sprintf("%d bytes, kernel %s's parameter has %d", sl.Size, f.name, f.params[i].Size)}
		}
	}
	return nil
}
