//go:build !unix

package gguf

import (
	"io"
	"os"
)

// mapFile reads the file into memory where memory mapping is not
// available.
func mapFile(fh *os.File, size int) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(fh, data); err != nil {
		return nil, nil, err
	}
	return data, nil, nil
}
