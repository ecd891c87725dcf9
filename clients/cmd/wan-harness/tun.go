package main

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openTUN creates a TUN device (layer 3, no packet-info header, no
// offloads: the kernel hands over packets of at most the MTU, already
// segmented and checksummed) named name inside namespace ns. The device
// lives as long as the returned file: closing it removes the device.
func openTUN(ns, name string) (*os.File, error) {
	if len(name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("tun name %q is longer than %d bytes", name, unix.IFNAMSIZ-1)
	}
	var f *os.File
	err := inNS(ns, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open /dev/net/tun: %w", err)
		}
		var req struct {
			name  [unix.IFNAMSIZ]byte
			flags uint16
			_     [22]byte
		}
		copy(req.name[:], name)
		req.flags = unix.IFF_TUN | unix.IFF_NO_PI
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req))); errno != 0 {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF %s: %w", name, errno)
		}
		// Non-blocking, so reads and writes go through the runtime's poller
		// instead of holding an OS thread each.
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
			return err
		}
		f = os.NewFile(uintptr(fd), "tun:"+ns+"/"+name)
		return nil
	})
	return f, err
}
