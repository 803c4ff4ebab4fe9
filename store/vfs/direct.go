package vfs

// DirectFile is a temporary file open for direct I/O (O_DIRECT): its
// writes go from the caller's memory to the device without a copy into
// the page cache. A direct write's memory address, length and file
// offset must all be multiples of Align; EndDirect turns direct I/O off
// for the writes that follow (a tail shorter than Align).
type DirectFile interface {
	File
	// Align is the alignment, in bytes, of a direct write's memory
	// address, length and file offset on this file (a power of two).
	Align() int
	// EndDirect turns direct I/O off: later writes go through the page
	// cache and need no alignment. Sync still makes every byte written
	// durable.
	EndDirect() error
}

// DirectCreator is an FS that can create temporary files for direct I/O.
type DirectCreator interface {
	// CreateTempDirect is CreateTemp with the file open for direct I/O.
	// A file system that refuses direct I/O (tmpfs on older kernels, a
	// FUSE mount) returns an error wrapping ErrNoDirect and leaves no
	// file behind.
	CreateTempDirect(dir, pattern string) (DirectFile, error)
}
