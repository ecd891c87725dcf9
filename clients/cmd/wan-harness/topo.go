package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The topology: a hub namespace routes between the access links of the
// clients (each a TUN pair with its own shape) and an unshaped veth to the
// infra namespace, where the validator and the data server run.
//
//	client ns  wan0 (TUN, 10.99.x.y/32, tbf = upload)
//	    | pump: delay RTT/4, loss Loss/2 each way
//	hub ns     cNNN (TUN, tbf = download) -- routes -- infra (veth 10.99.0.1/24)
//	                                                       |
//	infra ns                                          eth0 (veth 10.99.0.2/24)
const (
	hubAddr   = "10.99.0.1"
	infraAddr = "10.99.0.2"
	stateDir  = "/run/wan-harness"
)

// nsPattern matches the namespaces this harness creates: pw<4 hex>-<role>.
var nsPattern = regexp.MustCompile(`^pw[0-9a-f]{4}-[a-z0-9-]+$`)

// Topo is one harness instance's namespaces, links and processes.
type Topo struct {
	Prefix string // pwXXXX
	Hub    string
	Infra  string // "" without one
	Dir    string // working directory of the processes started

	mu      sync.Mutex
	nss     []string
	links   []*Link
	byNS    map[string]*Link
	procs   []*Proc
	closed  bool
	nextSeq uint64
}

// clientAddr is the address of client i (1-based): 10.99.1.1 ... 10.99.1.250,
// 10.99.2.1 ...
func clientAddr(i int) string {
	return fmt.Sprintf("10.99.%d.%d", 1+(i-1)/250, (i-1)%250+1)
}

// newTopo creates the hub (and, with infra, the infra namespace behind its
// veth) and records this instance so that `cleanup` can find its leftovers.
func newTopo(infra bool) (*Topo, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the harness needs root (network namespaces, TUN devices, tc)")
	}
	cleanupStale(os.Stderr)
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	t := &Topo{Prefix: "pw" + hex.EncodeToString(b[:]), byNS: map[string]*Link{}}
	trackTopo(t)
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(t.stateFile(), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	t.Hub = t.Prefix + "-hub"
	if err := t.addNS(t.Hub); err != nil {
		t.Close()
		return nil, err
	}
	for _, kv := range [][2]string{{"net.ipv4.ip_forward", "1"}, {"net.ipv4.conf.all.rp_filter", "0"}, {"net.ipv4.conf.default.rp_filter", "0"}} {
		if err := sysctlIn(t.Hub, kv[0], kv[1]); err != nil {
			t.Close()
			return nil, err
		}
	}
	if infra {
		t.Infra = t.Prefix + "-infra"
		if err := t.addNS(t.Infra); err != nil {
			t.Close()
			return nil, err
		}
		steps := [][]string{
			{"-n", t.Hub, "link", "add", "infra", "type", "veth", "peer", "name", "eth0", "netns", t.Infra},
			{"-n", t.Hub, "addr", "add", hubAddr + "/24", "dev", "infra"},
			{"-n", t.Hub, "link", "set", "dev", "infra", "up"},
			{"-n", t.Infra, "addr", "add", infraAddr + "/24", "dev", "eth0"},
			{"-n", t.Infra, "link", "set", "dev", "eth0", "up"},
			{"-n", t.Infra, "route", "add", "default", "via", hubAddr},
		}
		for _, s := range steps {
			if err := sh("ip", s...); err != nil {
				t.Close()
				return nil, err
			}
		}
	}
	return t, nil
}

func (t *Topo) stateFile() string { return filepath.Join(stateDir, t.Prefix+".pid") }

// addNS creates a namespace with loopback up and IPv6 off (the links carry
// IPv4 only; no router solicitations on them).
func (t *Topo) addNS(ns string) error {
	if err := sh("ip", "netns", "add", ns); err != nil {
		return err
	}
	t.mu.Lock()
	t.nss = append(t.nss, ns)
	t.mu.Unlock()
	if err := ipn(ns, "link", "set", "dev", "lo", "up"); err != nil {
		return err
	}
	for _, k := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
		if err := sysctlIn(ns, k, "1"); err != nil {
			return err
		}
	}
	if tcpCC != "" {
		if err := sysctlIn(ns, "net.ipv4.tcp_congestion_control", tcpCC); err != nil {
			return fmt.Errorf("TCP congestion control %q: %w", tcpCC, err)
		}
	}
	return nil
}

// tcpCC, when set ($WAN_TCP_CC), is the TCP congestion control of every
// namespace (new namespaces inherit the host's default, bbr on some hosts,
// cubic on most).
var tcpCC = os.Getenv("WAN_TCP_CC")

// AddClient creates namespace <prefix>-<name> with an access link of the
// given shape at address addr.
func (t *Topo) AddClient(name, addr string, s Shape) (*Link, error) {
	ns := t.Prefix + "-" + name
	if err := t.addNS(ns); err != nil {
		return nil, err
	}
	return t.AddLink(ns, name, addr, s)
}

// AddLink gives an existing namespace an access link (wan0) to the hub,
// whose end in the hub is named dev.
func (t *Topo) AddLink(ns, dev, addr string, s Shape) (*Link, error) {
	l := &Link{Name: dev, NS: ns, Addr: addr, infraMatch: [3]byte{10, 99, 0}}
	var err error
	if l.client, err = openTUN(ns, "wan0"); err != nil {
		return nil, err
	}
	if l.hub, err = openTUN(t.Hub, dev); err != nil {
		l.client.Close()
		return nil, err
	}
	steps := [][]string{
		{"-n", ns, "addr", "add", addr + "/32", "dev", "wan0"},
		{"-n", ns, "link", "set", "dev", "wan0", "up", "mtu", strconv.Itoa(mtu)},
		{"-n", ns, "route", "add", "default", "dev", "wan0", "src", addr},
		{"-n", t.Hub, "link", "set", "dev", dev, "up", "mtu", strconv.Itoa(mtu)},
		{"-n", t.Hub, "route", "add", addr + "/32", "dev", dev},
	}
	for _, s := range steps {
		if err := sh("ip", s...); err != nil {
			l.client.Close()
			l.hub.Close()
			return nil, err
		}
	}
	if err := l.SetShape(t.Hub, s); err != nil {
		l.client.Close()
		l.hub.Close()
		return nil, err
	}
	t.mu.Lock()
	t.nextSeq++
	seq := t.nextSeq
	t.links = append(t.links, l)
	t.byNS[ns] = l
	t.mu.Unlock()
	l.start(seq)
	return l, nil
}

// Link returns the access link of a namespace.
func (t *Topo) Link(ns string) *Link {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byNS[ns]
}

// AddNATed creates a NAT router namespace (<prefix>-<name>-gw) with an access
// link of shape s at public address pub, masquerading a private LAN
// 10.99.<lan>.0/24 (a veth) behind it, and a host namespace <prefix>-<name>
// on that LAN at 10.99.<lan>.2. It returns the host namespace and the link.
func (t *Topo) AddNATed(name, pub string, lan int, s Shape) (string, *Link, error) {
	gw := t.Prefix + "-" + name + "-gw"
	host := t.Prefix + "-" + name
	for _, ns := range []string{gw, host} {
		if err := t.addNS(ns); err != nil {
			return "", nil, err
		}
	}
	l, err := t.AddLink(gw, name, pub, s)
	if err != nil {
		return "", nil, err
	}
	gwLAN := fmt.Sprintf("10.99.%d.1", lan)
	hostLAN := fmt.Sprintf("10.99.%d.2", lan)
	steps := [][]string{
		{"-n", gw, "link", "add", "lan0", "type", "veth", "peer", "name", "eth0", "netns", host},
		{"-n", gw, "addr", "add", gwLAN + "/24", "dev", "lan0"},
		{"-n", gw, "link", "set", "dev", "lan0", "up"},
		{"-n", host, "addr", "add", hostLAN + "/24", "dev", "eth0"},
		{"-n", host, "link", "set", "dev", "eth0", "up"},
		{"-n", host, "route", "add", "default", "via", gwLAN},
	}
	for _, st := range steps {
		if err := sh("ip", st...); err != nil {
			return "", nil, err
		}
	}
	if err := sysctlIn(gw, "net.ipv4.ip_forward", "1"); err != nil {
		return "", nil, err
	}
	if err := masquerade(gw, "wan0"); err != nil {
		return "", nil, err
	}
	return host, l, nil
}

// masquerade sets up source NAT of everything leaving dev in ns, with nft
// when it is installed and iptables otherwise.
func masquerade(ns, dev string) error {
	if path, err := lookPath("nft"); err == nil {
		rules := fmt.Sprintf("table ip nat {\n chain post {\n  type nat hook postrouting priority 100;\n  oifname %q masquerade\n }\n}\n", dev)
		return shInput(rules, "ip", "netns", "exec", ns, path, "-f", "-")
	}
	if path, err := lookPath("iptables"); err == nil {
		return shIn(ns, path, "-t", "nat", "-A", "POSTROUTING", "-o", dev, "-j", "MASQUERADE")
	}
	return errors.New("NAT needs nft or iptables: apt-get install nftables (or iptables)")
}

// Links returns every access link.
func (t *Topo) Links() []*Link {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.links)
}

// Close stops every process (in reverse start order: clients leave the run
// before the servers stop), the pumps, and deletes the namespaces. It is
// safe to call more than once and from a signal path.
func (t *Topo) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	procs := slices.Clone(t.procs)
	links := slices.Clone(t.links)
	nss := slices.Clone(t.nss)
	t.mu.Unlock()
	stopAll(procs)
	for _, l := range links {
		l.close()
	}
	for i := len(nss) - 1; i >= 0; i-- {
		removeNS(nss[i])
	}
	os.Remove(t.stateFile())
}

// stopAll stops processes, latest first, in waves: every process started
// after the last server (clients) gets SIGINT at once, then the rest.
func stopAll(procs []*Proc) {
	var clients, servers []*Proc
	for _, p := range procs {
		if p.Server {
			servers = append(servers, p)
		} else {
			clients = append(clients, p)
		}
	}
	stopGroup(clients, 15*time.Second)
	slices.Reverse(servers)
	for _, p := range servers {
		stopGroup([]*Proc{p}, 10*time.Second)
	}
}

func stopGroup(ps []*Proc, grace time.Duration) {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Stop(grace)
		}()
	}
	wg.Wait()
}

// removeNS kills what still runs in a namespace (only processes this
// harness started run there) and deletes it.
func removeNS(ns string) {
	for range 3 {
		pids := nsPIDs(ns)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = sh("ip", "netns", "del", ns)
}

// cleanupStale removes the namespaces of harness instances whose process is
// gone (killed with SIGKILL, say). With all, it removes every harness
// namespace, running instance or not.
func cleanupStale(w *os.File) int {
	live := map[string]bool{}
	ents, _ := os.ReadDir(stateDir)
	for _, e := range ents {
		prefix, ok := strings.CutSuffix(e.Name(), ".pid")
		if !ok {
			continue
		}
		path := filepath.Join(stateDir, e.Name())
		data, _ := os.ReadFile(path)
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == nil && isHarness(pid, path) {
			live[prefix] = true
			continue
		}
		os.Remove(filepath.Join(stateDir, e.Name()))
	}
	return removeMatching(w, func(prefix string) bool { return !live[prefix] })
}

// isHarness reports whether pid is the process that wrote the state file at
// path: it started no later than the file was written (a recycled pid
// belongs to a younger process).
func isHarness(pid int, path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	started, ok := processStart(pid)
	return ok && !started.After(st.ModTime().Add(2*time.Second))
}

// processStart is when a process started (/proc/PID/stat field 22, in
// clock ticks after boot, plus the boot time from /proc/stat).
func processStart(pid int) (time.Time, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return time.Time{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return time.Time{}, false
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for _, l := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.Unix(boot, 0).Add(time.Duration(ticks) * time.Second / 100), true // USER_HZ
		}
	}
	return time.Time{}, false
}

func removeMatching(w *os.File, match func(prefix string) bool) int {
	n := 0
	for _, ns := range listNamespaces() {
		if !nsPattern.MatchString(ns) {
			continue
		}
		prefix, _, _ := strings.Cut(ns, "-")
		if !match(prefix) {
			continue
		}
		removeNS(ns)
		fmt.Fprintf(w, "wan-harness: removed leftover namespace %s\n", ns)
		n++
	}
	return n
}

// cleanupAll removes every harness namespace and state file.
func cleanupAll(w *os.File) int {
	ents, _ := os.ReadDir(stateDir)
	for _, e := range ents {
		prefix, _ := strings.CutSuffix(e.Name(), ".pid")
		path := filepath.Join(stateDir, e.Name())
		data, _ := os.ReadFile(path)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == nil && isHarness(pid, path) {
			fmt.Fprintf(w, "wan-harness: instance %s (pid %d) is still running; stopping it\n", prefix, pid)
			_ = syscall.Kill(pid, syscall.SIGTERM)
			for range 100 {
				if syscall.Kill(pid, 0) != nil {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		os.Remove(filepath.Join(stateDir, e.Name()))
	}
	return removeMatching(w, func(string) bool { return true })
}
