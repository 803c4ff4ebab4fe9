//go:build unix

package gguf

import (
	"os"
	"syscall"
)

// mapFile maps size bytes of fh read-only and shared. A zero-length file
// is not mapped.
func mapFile(fh *os.File, size int) ([]byte, func() error, error) {
	if size == 0 {
		return nil, nil, nil
	}
	data, err := syscall.Mmap(int(fh.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: fh.Name(), Err: err}
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
