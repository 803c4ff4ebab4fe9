//go:build unix

package vfs

import (
	"errors"
	"os"
	"syscall"
)

// openFlags never follow a final symbolic link and never block: a FIFO
// opened for reading without O_NONBLOCK waits for a writer.
const openFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// isLink reports whether err is open's refusal of a symbolic link under
// O_NOFOLLOW.
func isLink(err error) bool { return errors.Is(err, syscall.ELOOP) }
