//go:build linux

package progress

import (
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal asks the terminal driver: a character device such as
// /dev/null is not a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
