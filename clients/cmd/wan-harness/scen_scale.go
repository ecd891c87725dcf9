package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

func init() {
	register("scale", "how many training clients one machine sustains: runs of increasing size (up to the program's 256 members)", cmdScale)
}

// machineUsage is what the machine spent during a run.
type machineUsage struct {
	mu          sync.Mutex
	samples     int
	busy        float64 // mean fraction of all CPUs busy
	peakPSS     float64 // bytes, all clients together (proportional set size)
	minAvail    float64 // bytes of MemAvailable, lowest seen
	clientCPU   float64 // mean cores used by the clients together
	prevIdle    uint64
	prevTotal   uint64
	prevClients map[int]uint64
	prevAt      time.Time
}

func readCPU() (idle, total uint64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		total += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return idle, total
}

// procStat returns a process's CPU ticks and its proportional set size: its
// private memory plus its share of pages mapped by several processes (the
// clients' binary text is mapped by all of them; RSS would count it in each).
func procStat(pid int) (uint64, float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 22 {
		return 0, 0
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return ut + st, pss(pid)
}

// pss reads Pss from /proc/PID/smaps_rollup, in bytes (0 if unreadable).
func pss(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "Pss:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	return 0
}

func memAvailable() float64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "MemAvailable:") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	return 0
}

func (u *machineUsage) sample(pids []int) {
	idle, total := readCPU()
	now := time.Now()
	var ticks uint64
	var mem float64
	cur := map[int]uint64{}
	for _, p := range pids {
		t, m := procStat(p)
		cur[p] = t
		mem += m
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.prevTotal > 0 && total > u.prevTotal {
		busy := 1 - float64(idle-u.prevIdle)/float64(total-u.prevTotal)
		for p, t := range cur {
			if prev, ok := u.prevClients[p]; ok && t >= prev {
				ticks += t - prev
			}
		}
		cores := float64(ticks) / 100 / now.Sub(u.prevAt).Seconds() // USER_HZ = 100
		u.busy = (u.busy*float64(u.samples) + busy) / float64(u.samples+1)
		u.clientCPU = (u.clientCPU*float64(u.samples) + cores) / float64(u.samples+1)
		u.samples++
	}
	u.prevIdle, u.prevTotal, u.prevClients, u.prevAt = idle, total, cur, now
	u.peakPSS = max(u.peakPSS, mem)
	if a := memAvailable(); u.minAvail == 0 || a < u.minAvail {
		u.minAvail = a
	}
}

func cmdScale(ctx context.Context, args []string) error {
	fs := newFlags("scale", "[-counts 8,16,32,64] [-shape 100/50ms/0.5] [-steps 6] [-dummy]")
	counts := fs.String("counts", "8,16,32,64", "run sizes (clients) to try, in order; stops after the first that fails")
	shape := fs.String("shape", "100/50ms/0.5", "every client's link (loopback: one namespace, 127.0.0.1)")
	steps := fs.Int("steps", 6, "total_steps of each run")
	config := fs.String("config", "tiny", "run config")
	timeout := fs.Duration("timeout", 20*time.Minute, "give up on a run after this long")
	keepGoing := fs.Bool("keep-going", false, "try every count even after one fails")
	dummy := fs.Bool("dummy", false, "clients train with --dummy-training (no forward or backward passes; payloads of the real size)")
	trainTime := fs.Int("max-round-train-time", 0, "the run's max_round_train_time in seconds (0: the config's)")
	nice := fs.Int("client-nice", 19, "nice level of the clients: the validator and the data server, which a real run has on other machines, go first")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *nice < -20 || *nice > 19 {
		return fmt.Errorf("-client-nice %d: want -20..19", *nice)
	}
	if *trainTime < 0 || *trainTime > 3600 {
		return fmt.Errorf("-max-round-train-time %d: want 0..3600 seconds", *trainTime)
	}
	nw := netShaped
	s := Unshaped
	if *shape == netLoopback {
		nw = netLoopback
	} else {
		var err error
		if s, err = parseShape(*shape); err != nil {
			return err
		}
	}
	dir := workDir("scale")
	type row struct {
		r     trainingResult
		u     *machineUsage
		setup float64
	}
	var rows []row
	for _, cs := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(cs))
		if err != nil || n < 1 || n > 256 {
			return fmt.Errorf("-counts: %q is not 1..256", cs)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		name := fmt.Sprintf("s-%d", n)
		opt := clusterOptions{Net: nw, Config: *config, Name: name, Dir: filepath.Join(dir, name), Linger: 30, ClientNice: *nice,
			Overrides: map[string]string{
				"config.total_steps":             strconv.Itoa(*steps),
				"config.init_min_clients":        strconv.Itoa(n),
				"config.global_batch_size_start": strconv.Itoa(max(8, n)),
				"config.global_batch_size_end":   strconv.Itoa(max(8, n)),
			}}
		if *trainTime > 0 {
			// An epoch keeps room for the cold start's rounds and more.
			opt.Overrides["config.max_round_train_time"] = strconv.Itoa(*trainTime)
			opt.Overrides["config.epoch_time"] = strconv.Itoa(40 + 8**trainTime)
		}
		if *dummy {
			opt.ExtraArgs = []string{"--dummy-training"}
		}
		u := &machineUsage{}
		t0 := time.Now()
		var setup float64
		r := runTrainingWith(ctx, opt, n, s, *timeout, os.Stderr, func(c *Cluster, cls []*Client) func() {
			setup = time.Since(t0).Seconds()
			stop := make(chan struct{})
			go func() {
				for {
					var pids []int
					for _, cl := range cls {
						if cl.P != nil {
							pids = append(pids, cl.P.Pid())
						}
					}
					u.sample(pids)
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Second):
					}
				}
			}()
			return func() { close(stop) }
		})
		rows = append(rows, row{r, u, setup})
		if r.Err != nil {
			fmt.Fprintf(os.Stderr, "wan-harness: %s: %v\n", name, r.Err)
		}
		fmt.Printf("scale: %d clients: round %s, finished %d/%d, err %v\n", n, fmtSec(r.RoundMedian), r.Finished, r.Clients, r.Err)
		if (r.Err != nil || r.Incomplete > 0) && !*keepGoing {
			break
		}
	}
	training := "training"
	if *dummy {
		training = "--dummy-training"
	}
	fmt.Printf("\nscale: %s config, %s, %s, %d steps per run, %d CPU cores (files: %s)\n", *config, training, map[bool]string{true: "loopback", false: s.String()}[nw == netLoopback], *steps, runtime.NumCPU(), dir)
	tb := newTable("clients", "setup (validator, programs, wallets, namespaces)", "round median", "round p95", "compute/step", "(client, step) applied without a payload", "finished",
		"CPU busy (machine)", "CPU of the clients", "memory per client (PSS)", "memory of all clients (PSS)", "lowest MemAvailable", "result")
	for _, x := range rows {
		res := "ok"
		if x.r.Err != nil {
			res = "FAILED: " + firstLine(x.r.Err.Error())
		}
		tb.Row(x.r.Clients, fmtSec(x.setup), fmtSec(x.r.RoundMedian), fmtSec(x.r.RoundP95), fmtSec(x.r.TrainMean), x.r.Incomplete,
			fmt.Sprintf("%d/%d", x.r.Finished, x.r.Clients), fmt.Sprintf("%.0f%%", x.u.busy*100), fmt.Sprintf("%.2f cores", x.u.clientCPU),
			fmtBytes(x.u.peakPSS/float64(max(1, x.r.Clients))), fmtBytes(x.u.peakPSS), fmtBytes(x.u.minAvail), res)
	}
	tb.Print(os.Stdout)
	return nil
}
