package main

import (
	"fmt"
	"io"
	"math/bits"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/trainer"
)

func runConfigCommands() []*cli.Command {
	return []*cli.Command{{
		Name:        "run-config",
		Usage:       "inspect run config files before a run is created",
		Subcommands: []*cli.Command{runConfigDescribeCommand()},
	}}
}

func runConfigDescribeCommand() *cli.Command {
	return &cli.Command{
		Name: "describe",
		Usage: "print a run config's model, its parameter count and the memory one client needs per device, " +
			"for each precision and device, on the GPU and on the host",
		ArgsUsage: "FILE",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "micro-batch-size", Usage: "sequences per forward/backward pass, as train's flag (activations grow with it)", Value: client.DefaultMicroBatch},
			&cli.IntFlag{Name: "members", Usage: "payloads a step applies, one per member (0: the config's init_min_clients)"},
			&cli.IntFlag{Name: "threads", Usage: "the client's threads, which own scratch buffers (0: this machine's processors)"},
		},
		Action: rejectLateFlags(describeRunConfig),
	}
}

func describeRunConfig(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("run-config describe takes FILE, a run config (config/README.md), got %q", c.Args().Slice())
	}
	path := c.Args().First()
	p, err := coordinator.LoadParams(path)
	if err != nil {
		return badInput(err)
	}
	if p.Model == nil || p.Config == nil {
		return badInputf("%s: describe needs the [config] and [model] sections (a complete run config)", path)
	}
	mb, threads := c.Int("micro-batch-size"), c.Int("threads")
	if mb < 1 || mb > 65536 {
		return badInputf("--micro-batch-size must be in [1, 65536], not %d", mb)
	}
	if threads < 0 || threads > 256 {
		return badInputf("--threads must be in [0, 256], not %d", threads)
	}
	members := c.Int("members")
	if members == 0 {
		members = max(int(p.Config.InitMinClients), 1)
	}
	if members < 1 || members > 65535 {
		return badInputf("--members must be in [1, 65535], not %d", members)
	}
	// As train builds it: activations for the whole micro-batch, whatever
	// share of the step the client trains.
	cfg, err := client.TrainerConfig(p.Model, mb)
	if err != nil {
		return badInputf("%s: %v", path, err)
	}
	opt := client.FootprintOptions(p.Model, p.Config.Overlap != 0, members, threads)
	return describeModel(c.App.Writer, path, p, cfg, opt)
}

// describeModel prints the model and, for each numeric contract (the run's
// first), the memory of a GPU client (device, and the host copies it keeps)
// and of a CPU client, by category.
func describeModel(w io.Writer, path string, p coordinator.UpdateParams, cfg trainer.Config, opt trainer.FootprintOptions) error {
	name := path
	if p.Metadata != nil {
		name = fmt.Sprintf("%s (%q)", path, coordinator.FixedString(p.Metadata.Name[:]))
	}
	fmt.Fprintf(w, "%s\nmodel: %s\nparameters: %d\n", name, cfg.Description(), cfg.Params())
	steps := ""
	if opt.Optimizer == "sparseloco" {
		steps = fmt.Sprintf(", %d inner steps a round", p.Model.InnerSteps)
	}
	fmt.Fprintf(w, "step: %d to %d sequences of %d tokens; %s%s; precision %s; grad_shards %d\n", p.Config.GlobalBatchSizeStart, p.Config.GlobalBatchSizeEnd,
		cfg.SeqLen, opt.Optimizer, steps, cfg.Arith, cfg.Shards())
	// The rows: each contract (the run's first), the micro-batch asked for
	// and the least memory's (1), a GPU client's device and host memory and
	// a CPU client's.
	type line struct {
		arith, client, memory string
		mb                    int
		b                     trainer.MemoryBytes
	}
	var lines []line
	var most int64
	arith := []string{cfg.Arith, trainer.ArithFP32}
	if cfg.Arith == trainer.ArithFP32 {
		arith[1] = trainer.ArithMX8
	}
	mbs := []int{cfg.MicroBatch}
	if cfg.MicroBatch > 1 {
		mbs = append(mbs, 1)
	}
	for _, a := range arith {
		for _, mb := range mbs {
			cfg.Arith, cfg.MicroBatch = a, mb
			for _, gpu := range []bool{true, false} {
				opt.GPU = gpu
				f, err := trainer.Footprint(cfg, opt)
				if err != nil {
					return err
				}
				if gpu {
					lines = append(lines, line{a, "GPU", "device", mb, f.OnDevice}, line{a, "GPU", "host", mb, f.OnHost})
					rc := cfg
					rc.Recompute = true
					r, err := trainer.Footprint(rc, opt)
					if err != nil {
						return err
					}
					lines = append(lines, line{a, "GPU+recompute", "device", mb, r.OnDevice})
				} else {
					lines = append(lines, line{a, "CPU", "host", mb, f.OnHost})
				}
				most = max(most, f.OnHost.Peak(), f.OnDevice.Peak())
			}
		}
	}
	unit, scale := "GiB", float64(1<<30)
	if most < 1<<30 {
		unit, scale = "MiB", 1<<20
	}
	fmt.Fprintf(w, "memory of one client on its only or first device, applying %d payload(s) a step, in %s:\n", opt.Payloads, unit)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "precision\tmicro-batch\tclient\tmemory\tweights\tgradients\toptimizer\tactivations\tmx8 operands\tscratch\tper call\ttotal\t")
	for _, l := range lines {
		b := l.b
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s", l.arith, l.mb, l.client, l.memory)
		for _, n := range []int64{b.Weights, b.Gradients, b.Optimizer, b.Activations, b.MX8, b.Scratch, b.Transient, b.Peak()} {
			if n == 0 {
				fmt.Fprint(tw, "\t-")
			} else {
				fmt.Fprintf(tw, "\t%.2f", float64(n)/scale)
			}
		}
		fmt.Fprint(tw, "\t\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "A GPU client also holds the CPU path's buffers on the host. Per call: the most an optimizer step, a generate or an apply adds for its duration.")
	fmt.Fprintln(w, "Recompute: the GPU keeps each layer's input only and runs the layer's forward again in backward (the same bits, a forward pass more a step); "+
		"train turns it on where the model fits only so, or always with --recompute-activations.")
	if s := cfg.Shards(); s > 1 {
		fmt.Fprintf(w, "grad_shards %d: the gradients include %d more gradient-sized buffers, the shard tree's; with --data-parallelism D each device holds "+
			"log2(%d/D) of them, and at least one where it joins another device's (the first, third, ...).\n", s, bits.Len(uint(s))-1, s)
	}
	fmt.Fprintln(w, "--tensor-parallelism M splits a group's compute over M devices, not its memory: each holds the weights, gradients and activations "+
		"(and the shard tree's buffers) above; the optimizer and its scratch only the group's first.")
	return nil
}
