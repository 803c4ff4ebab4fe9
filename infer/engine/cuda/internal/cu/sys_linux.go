//go:build linux && (amd64 || arm64)

package cu

import (
	"errors"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"
)

// This file is the package's only contact with the platform: dlopen and
// dlsym through purego (no cgo), calls into C through purego.SyscallN,
// anonymous mappings for the argument arena, and the thread ID.

// sysDlopen loads a shared library. RTLD_NOW resolves every relocation at
// once, so a broken library fails here rather than at its first call;
// RTLD_LOCAL keeps its symbols out of the global scope.
func sysDlopen(path string) (uintptr, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return 0, errors.New(err.Error())
	}
	return h, nil
}

// sysDlsym returns the address of name in the library h, or 0.
func sysDlsym(h uintptr, name string) uintptr {
	p, err := purego.Dlsym(h, name)
	if err != nil {
		return 0
	}
	return p
}

// sysDlclose drops a reference taken by sysDlopen.
func sysDlclose(h uintptr) { _ = purego.Dlclose(h) }

// linkMap is the head of glibc's and musl's struct link_map: l_addr, then
// l_name, the path the loader opened.
type linkMap struct {
	_    uintptr // l_addr
	name *byte
}

// rtldDILinkmap is dlinfo's request for the handle's struct link_map
// (RTLD_DI_LINKMAP in <dlfcn.h>, glibc and musl).
const rtldDILinkmap = 2

// sysLoadedPath returns the file the dynamic loader opened for handle h,
// from dlinfo(h, RTLD_DI_LINKMAP): for a bare soname this is the path the
// loader's search found (LD_LIBRARY_PATH, the ld.so cache, the default
// directories). It returns "" when dlinfo is unavailable or fails.
func sysLoadedPath(h uintptr) string {
	fn := sysDlsym(purego.RTLD_DEFAULT, "dlinfo")
	if fn == 0 {
		return ""
	}
	var lm *linkMap
	if r := call(fn, h, rtldDILinkmap, uintptr(unsafe.Pointer(&lm))); r != 0 || lm == nil {
		return ""
	}
	return cString(lm.name, 4096)
}

// call calls the C function fn with integer and pointer arguments and
// returns the low 32 bits of its result (a CUresult, or a C int).
//
// Pointers are passed as uintptr(unsafe.Pointer(&x)) written in the call
// expression itself: go:uintptrescapes (here and on purego.SyscallN) then
// keeps x alive, and on the heap where it cannot move, until the call
// returns. The driver never keeps such a pointer past the call: every
// out-parameter is written before it returns.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) uint32 {
	r, _, _ := purego.SyscallN(fn, args...)
	return uint32(r)
}

// sysArena maps n bytes of anonymous memory outside the Go heap.
func sysArena(n int) ([]byte, error) {
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
}

// sysFreeArena unmaps memory from sysArena.
func sysFreeArena(b []byte) error { return syscall.Munmap(b) }

// sysGettid returns the calling OS thread's ID.
func sysGettid() int { return syscall.Gettid() }
