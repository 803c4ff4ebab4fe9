//go:build !unix

package vfs

import "os"

// openFlags: without O_NOFOLLOW and O_NONBLOCK here, openRegular's fstat
// still refuses what is not a regular file once it is open.
const openFlags = os.O_RDONLY

func isLink(err error) bool { return false }
