// Command schedule-bench prints how long a client takes to compute one round's
// schedule (the full witness list and every client's batch) at several run sizes.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/psyche-go/psyche/clients/schedule"
)

func main() {
	iters := flag.Int("iters", 1000, "rounds computed per size")
	flag.Parse()
	if *iters < 1 {
		fmt.Fprintln(os.Stderr, "schedule-bench: -iters must be at least 1")
		os.Exit(2)
	}
	fmt.Printf("%8s %10s %16s %16s %16s\n", "clients", "batch", "witnesses/round", "assign/round", "one client")
	for _, n := range []uint16{8, 64, 256} {
		batch := 4 * n
		seed := schedule.GenesisSeed([]byte("bench"))
		start := time.Now()
		for i := range *iters {
			seed = schedule.RoundSeed(seed, uint64(i), seed, uint32(i))
			_ = schedule.Witnesses(n, 0, seed)
		}
		witness := time.Since(start) / time.Duration(*iters)
		start = time.Now()
		for i := range *iters {
			seed = schedule.RoundSeed(seed, uint64(i), seed, uint32(i))
			_ = schedule.Assignments(n, batch, 1, uint64(i)*uint64(batch), seed)
		}
		assign := time.Since(start) / time.Duration(*iters)
		start = time.Now()
		for i := range *iters {
			seed = schedule.RoundSeed(seed, uint64(i), seed, uint32(i))
			if _, err := schedule.AssignmentFor(uint16(i)%n, n, batch, 1, 0, seed); err != nil {
				fmt.Fprintln(os.Stderr, "schedule-bench:", err)
				os.Exit(1)
			}
		}
		one := time.Since(start) / time.Duration(*iters)
		fmt.Printf("%8d %10d %16s %16s %16s\n", n, batch, witness, assign, one)
	}
}
