// Package vfs is the file-system layer under muser's store: the handful of
// operations the store's durability rules need (create a temporary file,
// write, fsync, rename, fsync a directory, remove, read), behind an
// interface so that tests can inject faults (package errorfs).
//
// # Durability
//
// SyncDir exists because a rename is durable only once its directory is
// fsynced; the store's write ordering (docs/kvpack.md, "Read and write
// ordering") relies on it.
//
// # Direct I/O
//
// DirectCreator (the default file system on Linux; errorfs passes it
// through) creates temporary files open with O_DIRECT, whose writes go
// from the caller's memory to the device with no copy into the page
// cache; DirectFile.Align says the alignment of address, length and
// offset such a write needs, and EndDirect turns the flag off for an
// unaligned tail. A file system that refuses O_DIRECT is ErrNoDirect,
// and the caller writes through the page cache instead.
//
// # Special files
//
// Open never blocks and never follows a final symbolic link: it opens
// with O_NOFOLLOW|O_NONBLOCK and checks with fstat that the file is
// regular, so a named pipe, a directory, a device or a link in place of
// a store file is an error wrapping ErrNotRegular, at once; Stat is lstat.
// (Without those flags a FIFO blocks the opening reader, and with it a
// verify, a restore and the shutdown of a server, until a writer comes.)
package vfs
