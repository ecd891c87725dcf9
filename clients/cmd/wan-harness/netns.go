package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns add` keeps the named namespaces.
const netnsDir = "/run/netns"

// inNS runs f on an OS thread that has entered the named network namespace.
// Sockets and TUN devices created by f belong to that namespace for good;
// their file descriptors work from any thread afterwards. The thread goes
// back to its own namespace afterwards; if it cannot, it is left locked so
// that the runtime discards it when the goroutine ends.
func inNS(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			runtime.UnlockOSThread()
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join(netnsDir, ns))
		if err != nil {
			errc <- fmt.Errorf("namespace %s: %w", ns, err)
			runtime.UnlockOSThread()
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter namespace %s: %w", ns, err)
			runtime.UnlockOSThread()
			return
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread dies with this goroutine.
			errc <- fmt.Errorf("leave namespace %s: %w", ns, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// dialIn opens a connection from inside namespace ns.
func dialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNS(ns, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// listenIn opens a TCP listener inside namespace ns.
func listenIn(ns, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNS(ns, func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// listenPacketIn opens a UDP socket inside namespace ns.
func listenPacketIn(ns, network, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := inNS(ns, func() error {
		var err error
		c, err = net.ListenPacket(network, addr)
		return err
	})
	return c, err
}

// sh runs a command (ip, tc, nft...) and returns an error with its output.
func sh(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// shIn runs a command inside namespace ns (ip netns exec).
func shIn(ns, name string, args ...string) error {
	return sh("ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// shInput runs a command with stdin.
func shInput(input, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(input)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// ipn runs `ip -n ns ...`.
func ipn(ns string, args ...string) error {
	return sh("ip", append([]string{"-n", ns}, args...)...)
}

// sysctlIn sets a sysctl inside a namespace by writing /proc/sys through a
// thread in it (the net.* tree is per namespace).
func sysctlIn(ns, key, value string) error {
	return inNS(ns, func() error {
		return os.WriteFile("/proc/sys/"+strings.ReplaceAll(key, ".", "/"), []byte(value), 0o644)
	})
}

// listNamespaces returns the named network namespaces.
func listNamespaces() []string {
	ents, err := os.ReadDir(netnsDir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// nsPIDs lists the processes whose network namespace is ns.
func nsPIDs(ns string) []int {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(netnsDir, ns), &st); err != nil {
		return nil
	}
	procs, _ := os.ReadDir("/proc")
	var out []int
	for _, p := range procs {
		var pid int
		if _, err := fmt.Sscanf(p.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		var ps unix.Stat_t
		if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &ps); err != nil {
			continue
		}
		if ps.Dev == st.Dev && ps.Ino == st.Ino {
			out = append(out, pid)
		}
	}
	return out
}
