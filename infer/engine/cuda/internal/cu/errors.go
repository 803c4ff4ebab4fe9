package cu

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoDriver is returned when no usable CUDA driver library can be
// loaded: libcuda.so.1 is absent, refused (it lies in a CUDA toolkit's
// compat directory), lacks a function this package needs, or is a stub
// that answers every call with CUDA_ERROR_STUB_LIBRARY. A *LoadError
// matches it, and so does an *Error whose code says the library is a stub
// or does not fit the kernel driver.
var ErrNoDriver = errors.New("no CUDA driver")

// ErrNoDevice is returned when the driver loads but sees no device, or no
// device with the asked-for ordinal. An *Error with code
// CUDA_ERROR_NO_DEVICE matches it.
var ErrNoDevice = errors.New("no CUDA device")

// ErrCompat is returned (inside a *LoadError) when a candidate library
// resolves into a CUDA toolkit's compat/ directory, whose forward
// compatibility driver must not be loaded over the system's own.
var ErrCompat = errors.New("library lies in a CUDA compat directory")

// ErrMissingSymbol is returned (inside a *LoadError) when a loaded library
// lacks a driver function this package calls.
var ErrMissingSymbol = errors.New("driver function missing")

// ErrClosed is returned when a closed Device is used.
var ErrClosed = errors.New("device closed")

// ErrNested is returned when Device.Do or Device.Close is called from
// inside a function that Device.Do is running, which would deadlock.
var ErrNested = errors.New("Do or Close called from inside Do")

// ErrOutsideDo is returned when a Ctx method is called after the Do call
// that handed out the Ctx has returned.
var ErrOutsideDo = errors.New("Ctx used outside Do")

// ErrArg is returned when kernel arguments cannot be marshalled: a type
// this package does not pass, a malformed Struct, more bytes than the
// argument arena holds, or (where the driver reports the kernel's
// parameters) a count or size that differs from the kernel's.
var ErrArg = errors.New("bad kernel argument")

// ErrNotPinned is returned when an asynchronous copy is given host memory
// that does not lie inside a live HostBuf of the same Ctx.
var ErrNotPinned = errors.New("host memory is not a pinned HostBuf")

// ErrSize is returned when a size that must be positive is not.
var ErrSize = errors.New("bad size")

// ErrModule is returned when a module image is empty or the driver
// refuses it; a refusal comes as a *ModuleError.
var ErrModule = errors.New("bad module image")

// ErrNoGraphs is returned by Ctx.RunGraph when the driver lacks the CUDA
// graph functions (Driver.Graphs).
var ErrNoGraphs = errors.New("the CUDA driver has no graph functions")

// ErrGraph is returned by Ctx.RunGraph when a launch waits for one that
// is not before it, or for too many.
var ErrGraph = errors.New("bad graph dependency")

// cuResult codes this package tests for (cuda.h, CUresult).
const (
	codeInvalidValue    = 1
	codeOutOfMemory     = 2
	codeStubLibrary     = 34
	codeNoDevice        = 100
	codeInvalidPTX      = 218
	codeDriverMismatch  = 803 // CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
	codeCompatNoSupport = 804 // CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE
)

// Error is a failed driver call: a CUresult other than CUDA_SUCCESS.
type Error struct {
	Op      string // the driver function, with the kernel's name for launches: "cuLaunchKernel add_one"
	Code    int    // the CUresult
	Name    string // from cuGetErrorName: "CUDA_ERROR_OUT_OF_MEMORY"
	Message string // from cuGetErrorString: "out of memory"
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%s: %s (%d)", e.Op, e.Name, e.Code)
	}
	return fmt.Sprintf("%s: %s (%d): %s", e.Op, e.Name, e.Code, e.Message)
}

// Is reports whether the code means there is no device (ErrNoDevice) or no
// usable driver (ErrNoDriver: a stub library, or a user-mode driver that
// does not fit the kernel module).
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNoDevice:
		return e.Code == codeNoDevice
	case ErrNoDriver:
		return e.Code == codeStubLibrary || e.Code == codeDriverMismatch || e.Code == codeCompatNoSupport
	}
	return false
}

// Attempt is one library Open tried and why it was not used.
type Attempt struct {
	Path string // as tried: an absolute path, or "libcuda.so.1" through the dynamic loader
	Err  error
}

// LoadError is returned by Open when no candidate library could be used.
// It names every path tried with its reason, and matches ErrNoDriver and
// each attempt's error (fs.ErrNotExist, ErrCompat, ErrMissingSymbol, ...).
type LoadError struct {
	Lib   string // "libcuda.so.1"
	Tried []Attempt
}

func (e *LoadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: cannot load %s", ErrNoDriver, e.Lib)
	if len(e.Tried) == 0 {
		b.WriteString(": no candidate paths")
	}
	for i, a := range e.Tried {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %v", a.Path, a.Err)
	}
	return b.String()
}

// Unwrap returns ErrNoDriver followed by each attempt's error.
func (e *LoadError) Unwrap() []error {
	errs := []error{ErrNoDriver}
	for _, a := range e.Tried {
		errs = append(errs, a.Err)
	}
	return errs
}

// SymbolError names the driver functions a library lacks.
type SymbolError struct {
	Path    string
	Missing []string // each entry one function; alternatives joined with "|"
}

func (e *SymbolError) Error() string {
	return fmt.Sprintf("%v: %s", ErrMissingSymbol, strings.Join(e.Missing, ", "))
}

// Unwrap returns ErrMissingSymbol.
func (e *SymbolError) Unwrap() error { return ErrMissingSymbol }

// ArgError names the kernel argument that could not be marshalled.
type ArgError struct {
	Index  int    // 0-based position in the argument list
	Type   string // the Go type, as %T prints it
	Reason string
}

func (e *ArgError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("%v: %s", ErrArg, e.Reason)
	}
	return fmt.Sprintf("%v %d (%s): %s", ErrArg, e.Index, e.Type, e.Reason)
}

// Unwrap returns ErrArg.
func (e *ArgError) Unwrap() error { return ErrArg }

// ModuleError is a module image the driver refused, with the JIT
// compiler's error log when it wrote one (PTX that does not compile).
type ModuleError struct {
	Err *Error // from cuModuleLoadDataEx
	Log string // the JIT error log, trimmed; empty when the driver wrote none
}

func (e *ModuleError) Error() string {
	if e.Log == "" {
		return fmt.Sprintf("%v: %v", ErrModule, e.Err)
	}
	return fmt.Sprintf("%v: %v\n%s", ErrModule, e.Err, e.Log)
}

// Unwrap returns ErrModule and the driver's *Error.
func (e *ModuleError) Unwrap() []error { return []error{ErrModule, e.Err} }

// PanicError carries a panic raised by a function that Device.Do ran on
// the device's thread; Do panics with it in the caller's goroutine.
type PanicError struct {
	Value any    // what the function panicked with
	Stack []byte // the device thread's stack at the panic
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("cu: panic on the device thread: %v\n%s", e.Value, e.Stack)
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
