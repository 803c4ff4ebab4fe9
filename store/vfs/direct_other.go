//go:build !linux

package vfs

import "io/fs"

// CreateTempDirect implements DirectCreator where direct I/O is not
// offered: it always returns ErrNoDirect.
func (osFS) CreateTempDirect(dir, pattern string) (DirectFile, error) {
	return nil, &fs.PathError{Op: "open", Path: dir, Err: ErrNoDirect}
}
