//go:build unix

package adminapi

import (
	"errors"
	"os"
	"syscall"
)

// openFlags open a file without following a final symbolic link and
// without blocking on a FIFO.
const openFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
