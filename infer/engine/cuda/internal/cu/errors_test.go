package cu

import (
	"errors"
	"fmt"
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
		})
	}
}

func TestWrappedSentinels(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		target error
	}{
		{"arg", &ArgError{Index: 0}, ErrArg},
		{"symbol", &SymbolError{}, ErrMissingSymbol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.target) {
				t.Errorf("errors.Is(%v, %v) = false, want true", tt.err, tt.target)
			}
		})
	}
}
