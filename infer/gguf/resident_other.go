//go:build !linux

package gguf

import (
	"errors"
	"io"
	"os"
)

// readResident reads the file into heap memory (Resident without huge
// pages or write protection, where muser has no Linux memory calls).
func readResident(fh *os.File, size int) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := fh.ReadAt(data, 0); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, &os.PathError{Op: "read", Path: fh.Name(), Err: err}
	}
	return data, nil, nil
}
