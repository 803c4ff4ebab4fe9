//go:build linux

package vfs

import "golang.org/x/sys/unix"

// WillNeed asks the kernel to start reading the whole of f into the page
// cache (posix_fadvise POSIX_FADV_WILLNEED) and returns at once; a
// later read finds the pages there. It is a hint: on a File that is not
// an operating-system file, or where the call fails, it does nothing.
func WillNeed(f File) {
	if fd, ok := f.(interface{ Fd() uintptr }); ok {
		_ = unix.Fadvise(int(fd.Fd()), 0, 0, unix.FADV_WILLNEED)
	}
}
