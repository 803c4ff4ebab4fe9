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

// ErrArg is returned when kernel arguments cannot be marshalled: a type
// this package does not pass, a malformed Struct, or more bytes than the
// buffer holds.
var ErrArg = errors.New("bad kernel argument")

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
