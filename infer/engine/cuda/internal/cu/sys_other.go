//go:build !(linux && (amd64 || arm64))

package cu

import (
	"errors"
	"fmt"
	"runtime"
)

// The driver is loaded on linux/amd64 and linux/arm64 only; elsewhere the
// package builds, Open fails with ErrNoDriver, and nothing below is
// reached.

var errPlatform = fmt.Errorf("the CUDA driver is loaded on linux/amd64 and linux/arm64 only, not %s/%s", runtime.GOOS, runtime.GOARCH)

func sysDlopen(string) (uintptr, error) { return 0, errPlatform }

func sysDlsym(uintptr, string) uintptr { return 0 }

func sysDlclose(uintptr) {}

func sysLoadedPath(uintptr) string { return "" }

// codeNotSupported is CUDA_ERROR_NOT_SUPPORTED.
const codeNotSupported = 801

func call(uintptr, ...uintptr) uint32 { return codeNotSupported }

func sysArena(int) ([]byte, error) { return nil, errPlatform }

func sysFreeArena([]byte) error { return errors.ErrUnsupported }

func sysGettid() int { return -1 }
