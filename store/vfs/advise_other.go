//go:build !linux

package vfs

// WillNeed is a hint that does nothing on this system (see the Linux
// version).
func WillNeed(f File) {}
