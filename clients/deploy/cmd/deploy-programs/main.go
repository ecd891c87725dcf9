// Command deploy-programs makes a cluster run the programs built into
// programs/target/deploy: each <name>.so whose keypair
// programs/keys/<name>-keypair.json exists is deployed, upgraded or left as is
// (deploy.Client.Ensure), with the wallet paying and holding upgrade authority.
//
//	deploy-programs [-rpc URL] [-w wallet.json] [-dir DIR] [-keys DIR] [name...]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/psyche-go/psyche/clients/deploy"
	"github.com/psyche-go/psyche/clients/wallet"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "deploy-programs:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("deploy-programs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rpcURL := fs.String("rpc", envOr("RPC", "http://127.0.0.1:8899"), "JSON-RPC endpoint ($RPC)")
	walletPath := fs.String("w", "", "payer and upgrade authority keypair (default: $WALLET_FILE, then ~/.config/solana/id.json)")
	dir := fs.String("dir", filepath.Join("programs", "target", "deploy"), "directory of built programs")
	keys := fs.String("keys", filepath.Join("programs", "keys"), "directory of program keypairs (<name>-keypair.json)")
	verbose := fs.Bool("v", false, "log each transaction batch")
	if err := fs.Parse(args); err != nil {
		return err
	}
	path, err := wallet.Resolve(*walletPath)
	if err != nil {
		return err
	}
	payer, err := wallet.Load(path)
	if err != nil {
		return err
	}
	names := fs.Args()
	if len(names) == 0 {
		matches, err := filepath.Glob(filepath.Join(*dir, "*.so"))
		if err != nil {
			return err
		}
		for _, m := range matches {
			names = append(names, strings.TrimSuffix(filepath.Base(m), ".so"))
		}
		if len(names) == 0 {
			return fmt.Errorf("no programs in %s (build them with scripts/build-programs.sh)", *dir)
		}
	}
	sort.Strings(names)

	d := deploy.New(*rpcURL, payer)
	if *verbose {
		d.Log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "program\tid\tbytes\taction\tseconds")
	var errs []error
	for _, name := range names {
		start := time.Now()
		elf, err := os.ReadFile(filepath.Join(*dir, name+".so"))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		program, err := wallet.Load(filepath.Join(*keys, name+"-keypair.json"))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: program keypair: %w", name, err))
			continue
		}
		action, err := d.Ensure(ctx, program, payer, elf, deploy.DeployOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.1f\n", name, program.PublicKey(), len(elf), action, time.Since(start).Seconds())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
