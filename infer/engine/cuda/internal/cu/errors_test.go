package cu

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"driver error", &Error{Op: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Message: "out of memory"},
			"cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"},
		{"driver error without description", &Error{Op: "cuInit", Code: 34, Name: "CUDA_ERROR_STUB_LIBRARY"},
			"cuInit: CUDA_ERROR_STUB_LIBRARY (34)"},
		{"argument", &ArgError{Index: 3, Type: "int", Reason: "width is not fixed"},
			"bad kernel argument 3 (int): width is not fixed"},
		{"whole argument list", &ArgError{Index: -1, Reason: "kernel k takes 2 parameters, got 3 arguments"},
			"bad kernel argument: kernel k takes 2 parameters, got 3 arguments"},
		{"symbols", &SymbolError{Path: "/x/libcuda.so.1", Missing: []string{"cuInit", "cuCtxCreate_v2|cuCtxCreate_v4"}},
			"driver function missing: cuInit, cuCtxCreate_v2|cuCtxCreate_v4"},
		{"module with log", &ModuleError{Err: &Error{Op: "cuModuleLoadDataEx", Code: 218, Name: "CUDA_ERROR_INVALID_PTX"}, Log: "ptxas fatal: line 3"},
			"bad module image: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218)\nptxas fatal: line 3"},
		{"module without log", &ModuleError{Err: &Error{Op: "cuModuleLoadDataEx", Code: 200, Name: "CUDA_ERROR_INVALID_IMAGE"}},
			"bad module image: cuModuleLoadDataEx: CUDA_ERROR_INVALID_IMAGE (200)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorIs(t *testing.T) {
	tests := []struct {
		code              int
		noDevice, noDrive bool
	}{
		{codeNoDevice, true, false},
		{codeStubLibrary, false, true},
		{codeDriverMismatch, false, true},
		{codeCompatNoSupport, false, true},
		{codeOutOfMemory, false, false},
		{codeInvalidValue, false, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.code), func(t *testing.T) {
			err := fmt.Errorf("wrapped: %w", &Error{Op: "cuInit", Code: tt.code})
			if got := errors.Is(err, ErrNoDevice); got != tt.noDevice {
				t.Errorf("errors.Is(code %d, ErrNoDevice) = %v, want %v", tt.code, got, tt.noDevice)
			}
			if got := errors.Is(err, ErrNoDriver); got != tt.noDrive {
				t.Errorf("errors.Is(code %d, ErrNoDriver) = %v, want %v", tt.code, got, tt.noDrive)
			}
			if errors.Is(err, ErrClosed) {
				t.Errorf("errors.Is(code %d, ErrClosed) = true", tt.code)
			}
		})
	}
}

func TestWrappedSentinels(t *testing.T) {
	driverErr := &Error{Op: "cuModuleLoadDataEx", Code: codeInvalidPTX}
	tests := []struct {
		name   string
		err    error
		target error
	}{
		{"arg", &ArgError{Index: 0}, ErrArg},
		{"symbol", &SymbolError{}, ErrMissingSymbol},
		{"module sentinel", &ModuleError{Err: driverErr}, ErrModule},
		{"module driver error", &ModuleError{Err: driverErr}, driverErr},
		{"panic with an error", &PanicError{Value: io.EOF}, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.target) {
				t.Errorf("errors.Is(%v, %v) = false, want true", tt.err, tt.target)
			}
		})
	}
	var ce *Error
	if !errors.As(&ModuleError{Err: driverErr}, &ce) || ce != driverErr {
		t.Errorf("errors.As(*ModuleError, **Error) did not find the driver error")
	}
	if (&PanicError{Value: "text"}).Unwrap() != nil {
		t.Errorf("PanicError with a string value unwraps to non-nil")
	}
	pe := &PanicError{Value: "boom", Stack: []byte("goroutine 7 [running]:")}
	if msg := pe.Error(); !strings.Contains(msg, "boom") || !strings.Contains(msg, "goroutine 7") {
		t.Errorf("PanicError.Error() = %q, want the value and the stack", msg)
	}
}
