package gguf

import "fmt"

// Memory says how a File holds the file's bytes, its tensor data among
// them.
type Memory uint8

const (
	// CallerBytes: the bytes given to Parse, which the caller keeps.
	CallerBytes Memory = iota
	// Mapped: the file mapped read-only and shared. Pages are read from
	// the file on first use, are shared with the page cache and with every
	// process that maps the file, and may be dropped by the kernel under
	// memory pressure and read again. Opening costs no reading.
	Mapped
	// Resident: the file read, when it is opened, into private anonymous
	// memory that is then made read-only. On Linux the memory is aligned
	// to 2 MiB and the kernel is asked to back it with transparent huge
	// pages (madvise MADV_HUGEPAGE; granted where the system's setting
	// allows it and whole huge pages are free), so that a pass streaming
	// the weights takes one TLB entry per 2 MiB instead of per 4 KiB (or
	// per large folio, where the page cache happens to hold the file in
	// them). The CPU engine's decode reads every weight once a token
	// (docs/engine.md, "Weights in memory", says how much faster from
	// such memory). The memory is not shared with other processes and
	// not reclaimable without swap; the page cache keeps its own copy of
	// the file as long as the kernel does not need the room.
	Resident
)

// String returns "caller", "mapped" or "resident".
func (m Memory) String() string {
	switch m {
	case CallerBytes:
		return "caller"
	case Mapped:
		return "mapped"
	case Resident:
		return "resident"
	}
	return fmt.Sprintf("Memory(%d)", uint8(m))
}
