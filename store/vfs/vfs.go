package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// File is an open file: read, written, synced and closed like *os.File.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	// Name returns the path the file was opened or created with.
	Name() string
	// Stat describes the open file.
	Stat() (fs.FileInfo, error)
	// Sync commits the file's contents to stable storage.
	Sync() error
	// Close closes the file.
	Close() error
}

// FS is the set of file operations the store performs.
type FS interface {
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(path string, perm fs.FileMode) error
	// CreateTemp creates a new file in dir with a name made from pattern
	// as os.CreateTemp does, open for writing.
	CreateTemp(dir, pattern string) (File, error)
	// Open opens a regular file for reading. It never blocks and never
	// follows a symbolic link: anything but a regular file (a directory,
	// a FIFO, a device, a link) is an error wrapping ErrNotRegular.
	Open(name string) (File, error)
	// Rename atomically replaces newpath with oldpath.
	Rename(oldpath, newpath string) error
	// Remove deletes a file or empty directory.
	Remove(name string) error
	// Stat describes a file without following a final symbolic link
	// (as os.Lstat): the store's files are never links, and one in place
	// of a chunk must not pass for it.
	Stat(name string) (fs.FileInfo, error)
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// SyncDir fsyncs a directory so that renames and removals in it are
	// durable.
	SyncDir(dir string) error
}

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

func (osFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) CreateTemp(dir, pattern string) (File, error) { return os.CreateTemp(dir, pattern) }
func (osFS) Open(name string) (File, error)               { return openRegular(name) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)        { return os.Lstat(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// openRegular opens name without following a final link and without
// blocking (O_NOFOLLOW|O_NONBLOCK where the system has them), then checks
// with fstat that it is a regular file.
func openRegular(name string) (*os.File, error) {
	f, err := os.OpenFile(name, openFlags, 0)
	if err != nil {
		if isLink(err) {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (a symbolic link)", ErrNotRegular)}
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%s)", ErrNotRegular, describeMode(fi.Mode()))}
	}
	return f, nil
}

// describeMode names a file type for an error message.
func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "type " + m.Type().String()
}
