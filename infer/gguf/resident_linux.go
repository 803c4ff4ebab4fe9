//go:build linux

package gguf

import (
	"errors"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size and alignment of a transparent huge page where
// muser runs (x86-64, and arm64 with 4 KiB base pages).
const hugePage = 2 << 20

// readResident reads size bytes of fh into private anonymous memory that
// starts on a huge page, asks the kernel to back it with transparent huge
// pages, and makes it read-only (Resident). A zero-length file gets no
// memory.
func readResident(fh *os.File, size int) ([]byte, func() error, error) {
	if size == 0 {
		return nil, nil, nil
	}
	if size > maxInt-2*hugePage {
		return nil, nil, &os.PathError{Op: "read", Path: fh.Name(), Err: errors.New("file too large to hold in memory")}
	}
	n := (size + hugePage - 1) &^ (hugePage - 1)
	mem, release, err := alignedAnon(n)
	if err != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: fh.Name(), Err: err}
	}
	// Huge pages are a request: where the kernel grants none, base pages
	// hold the same bytes.
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	if _, err := fh.ReadAt(mem[:size], 0); err != nil {
		release()
		if errors.Is(err, io.EOF) {
			// The file is shorter than when it was opened.
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, &os.PathError{Op: "read", Path: fh.Name(), Err: err}
	}
	if err := unix.Mprotect(mem, unix.PROT_READ); err != nil {
		release()
		return nil, nil, &os.PathError{Op: "mprotect", Path: fh.Name(), Err: err}
	}
	return mem[:size:size], release, nil
}

// alignedAnon maps n bytes (a multiple of hugePage) of private anonymous
// memory starting on a huge page: it maps one huge page more and unmaps
// the head and tail around the aligned region. release unmaps it.
func alignedAnon(n int) ([]byte, func() error, error) {
	raw, err := unix.MmapPtr(-1, 0, nil, uintptr(n+hugePage), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, err
	}
	lead := (hugePage - int(uintptr(raw)%hugePage)) % hugePage
	base := unsafe.Add(raw, lead)
	if lead > 0 {
		if err := unix.MunmapPtr(raw, uintptr(lead)); err != nil {
			unix.MunmapPtr(raw, uintptr(n+hugePage))
			return nil, nil, err
		}
	}
	if err := unix.MunmapPtr(unsafe.Add(base, n), uintptr(hugePage-lead)); err != nil {
		unix.MunmapPtr(base, uintptr(n+hugePage-lead))
		return nil, nil, err
	}
	return unsafe.Slice((*byte)(base), n), func() error { return unix.MunmapPtr(base, uintptr(n)) }, nil
}
