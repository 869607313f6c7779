//go:build !linux

package sockio

import (
	"net"
	"syscall"
)

// New returns c: raw socket I/O is implemented on Linux only.
func New(c net.Conn) net.Conn { return c }

// Read reads from fd into p with the standard syscall.
func Read(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	if err != nil {
		if errno, ok := err.(syscall.Errno); ok {
			return 0, errno
		}
		return 0, syscall.EIO
	}
	return n, 0
}
