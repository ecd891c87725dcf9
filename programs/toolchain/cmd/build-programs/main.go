// Command build-programs builds every program crate of the programs/ Cargo
// workspace into an SBPF v0 .so (programs/target/deploy, test programs in
// programs/target/test-deploy) and prints size and timing figures for each.
//
//	go run ./programs/toolchain/cmd/build-programs [-workspace programs] [-p name]...
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/psyche-go/psyche/programs/toolchain/build"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "build-programs:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		cfg      build.Config
		packages listFlag
		verbose  bool
	)
	flag.StringVar(&cfg.Workspace, "workspace", "programs", "directory of the programs Cargo workspace")
	flag.Var(&packages, "p", "build only this package (repeatable)")
	flag.StringVar(&cfg.Rustc, "rustc", "", "rustc to use (default /usr/bin/rustc, Debian's rustc-web)")
	flag.StringVar(&cfg.Cargo, "cargo", "", "cargo to use (default /usr/bin/cargo)")
	flag.BoolVar(&cfg.KeepUnaligned, "keep-unaligned", false, "do not mark integer loads/stores as aligned (larger, slower code)")
	flag.BoolVar(&verbose, "v", false, "log each step")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	cfg.Packages = packages
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if _, err := os.Stat(filepath.Join(cfg.Workspace, "Cargo.toml")); err != nil {
		return fmt.Errorf("no Cargo workspace at %s (run from the repository root or pass -workspace): %w", cfg.Workspace, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	progs, buildErr := build.Build(ctx, cfg)
	if len(progs) == 0 {
		return buildErr
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "program\tbytes\ttext\trodata\tsyscalls\tsret fixes\tmem syscalls\taligned\tlink ms\t")
	for _, p := range progs {
		name := p.Name
		if p.Test {
			name += " (test)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, p.Size, p.TextSize, p.RodataSize,
			len(p.Syscalls), p.Fixes.Sret, p.Fixes.MemSyscalls, p.Fixes.Aligned, p.LinkTime.Milliseconds())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("built %d programs in %.1f s\n", len(progs), time.Since(start).Seconds())
	return buildErr
}
