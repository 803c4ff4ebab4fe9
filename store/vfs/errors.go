package vfs

import "errors"

// ErrNotRegular is returned by Open when the path names something other
// than a regular file: a directory, a FIFO, a device, a socket or a
// symbolic link (which Open never follows).
var ErrNotRegular = errors.New("not a regular file")

// ErrNoDirect is returned by CreateTempDirect when the file system, or
// the system, does not offer direct I/O on files in that directory.
var ErrNoDirect = errors.New("direct I/O not supported")
