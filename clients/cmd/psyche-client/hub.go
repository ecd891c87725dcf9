package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/trainer"
)

// hubTokenEnv holds a hub's upload token when --token-file is not given; a
// token is never a flag value, which other users could read from ps.
const hubTokenEnv = "PSYCHE_HUB_TOKEN"

var hubTokenFileFlag = &cli.StringFlag{Name: "token-file", Usage: "file holding the hub's bearer token for uploads (default: $" + hubTokenEnv + ")"}

func hubCommands() []*cli.Command {
	return []*cli.Command{{
		Name:        "hub",
		Usage:       "serve, upload to and fetch from a checkpoint hub (content-addressed safetensors over HTTP)",
		Description: "A run with checkpoint kind \"hub\" names a repo (a base URL, or file:///DIR for a directory every client can read)\nand a revision (the file's SHA-256 in hex); the checkpoint is <repo>/<revision>.safetensors, or, in a file:// repo\nthat is a Hugging Face model directory, its model.safetensors.",
		Subcommands: []*cli.Command{hubServeCommand(), hubUploadCommand(), hubFetchCommand()},
	}}
}

func hubServeCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve a directory as a checkpoint hub: GET for anyone, PUT checked against the file's name (Ctrl-C stops)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "directory of checkpoints, created if missing (required); URL path prefixes are subdirectories"},
			&cli.StringFlag{Name: "listen", Usage: "address to listen on (port 0 picks a free one)", Value: "127.0.0.1:9100"},
			&cli.StringFlag{Name: "max-size", Usage: "largest checkpoint accepted", Value: "4GiB"},
			&cli.StringFlag{Name: "token-file", Usage: "file holding the bearer token uploads must carry (default: $" + hubTokenEnv + "; neither: uploads are open)"},
		},
		Action: func(c *cli.Context) error {
			if err := requireFlagsNoArgs(c, "dir"); err != nil {
				return err
			}
			limit, err := hub.ParseSize(c.String("max-size"))
			if err != nil {
				return badInputf("--max-size: %w", err)
			}
			token, err := hubToken(c, hubTokenFileFlag.Name)
			if err != nil {
				return err
			}
			dir := c.String("dir")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return badInputf("--dir: %w", err)
			}
			log := slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
			s, err := hub.NewServer(dir, hub.ServerOptions{MaxSize: limit, Token: token, Log: log})
			if err != nil {
				return badInput(err)
			}
			defer s.Close()
			ln, err := net.Listen("tcp", c.String("listen"))
			if err != nil {
				return badInputf("--listen: %w", err)
			}
			uploads := "uploads need the token"
			if token == "" {
				uploads = "uploads open to anyone"
				if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
					log.Warn("uploads are open to anyone who can reach this address; give --token-file or $" + hubTokenEnv)
				}
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(c.App.Writer, "serving hub %s on http://%s/ (%s, at most %d bytes each)\n", dir, ln.Addr(), uploads, limit)
			return hub.Serve(ctx, ln, s)
		},
	}
}

func hubUploadCommand() *cli.Command {
	return &cli.Command{
		Name:      "upload",
		Usage:     "upload a safetensors checkpoint, or a Hugging Face model directory's weights, to a hub repo and print its revision (its SHA-256)",
		ArgsUsage: "FILE|DIR",
		Description: "A DIR is a Hugging Face model directory (config.json, model.safetensors; GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM):\n" +
			"it is checked as `model import` checks it, its model.safetensors is uploaded, and the run config keys that start a run\n" +
			"from it are printed to stderr. The repo may also be file:///DIR, a directory on a local or shared filesystem.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "repo", Usage: "the hub repo: a base URL such as http://host:9100/runs/demo, or file:///DIR (required)"},
			hubTokenFileFlag,
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return badInputf("hub upload takes one checkpoint file, got %d arguments", c.NArg())
			}
			if err := requireFlags(c, "repo"); err != nil {
				return err
			}
			repo := c.String("repo")
			if _, err := hub.ParseRepo(repo); err != nil {
				return badInputf("--repo: %w", err)
			}
			token, err := hubToken(c, hubTokenFileFlag.Name)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
			src := c.Args().First()
			var hf *trainer.Config
			if st, err := os.Stat(src); err == nil && st.IsDir() {
				tr, err := trainer.ImportHF(src, 1)
				if err != nil {
					return asBadModel(err)
				}
				cfg := tr.Config()
				tr.Close()
				hf, src = &cfg, filepath.Join(src, trainer.HFWeightsFile)
			}
			rev, err := hub.Upload(c.Context, repo, src, hub.UploadOptions{Token: token, Log: log})
			if errors.Is(err, hub.ErrNotCheckpoint) || errors.Is(err, fs.ErrNotExist) {
				return badInput(err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, rev)
			if hf != nil {
				fmt.Fprintf(c.App.ErrWriter, "A run starts from this model with these keys in its config (max_seq_len may be lower):\n%s", hfRunKeys(*hf, repo, rev))
			}
			return nil
		},
	}
}

// hfRunKeys are the run config keys of a model of cfg that starts from
// revision rev of repo.
func hfRunKeys(cfg trainer.Config, repo, rev string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[model]\narchitecture = %q\nvocab_size = %d\nn_layer = %d\nn_head = %d\nn_embd = %d\nmax_seq_len = %d\n",
		arch(cfg), cfg.Vocab, cfg.Layers, cfg.Heads, cfg.Channels, cfg.SeqLen)
	if cfg.IsLlama() {
		fmt.Fprintf(&b, "n_kv_head = %d\nintermediate_size = %d\nrope_theta = %g\ntie_embeddings = %v\n", cfg.KVHeads, cfg.Hidden, cfg.RopeTheta, !cfg.Untied)
		writeKnobKeys(&b, cfg.Knobs)
	}
	fmt.Fprintf(&b, "[model.checkpoint]\nkind = \"hub\"\nrepo = %q\nrevision = %q\n", repo, rev)
	return b.String()
}

// writeKnobKeys writes the run config keys of a Llama's knobs that are not
// their defaults: the run's model must equal the Hugging Face one, knobs
// included, for a client to start from it.
func writeKnobKeys(b *strings.Builder, k trainer.Knobs) {
	if k.RMSNormEps != 0 {
		fmt.Fprintf(b, "rms_norm_eps = %g\n", k.RMSNormEps)
	}
	if k.RopeScaling != "" {
		fmt.Fprintf(b, "rope_scaling = %q\nrope_factor = %g\nrope_low_freq_factor = %g\nrope_high_freq_factor = %g\nrope_original_context = %d\n",
			k.RopeScaling, k.RopeFactor, k.RopeLowFreq, k.RopeHighFreq, k.RopeOrigCtx)
	}
	if k.QKVBias {
		fmt.Fprintln(b, "qkv_bias = true")
	}
}

func hubFetchCommand() *cli.Command {
	return &cli.Command{
		Name:  "fetch",
		Usage: "fetch a checkpoint from a hub into a directory, verified against its revision, and print its path",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "repo", Usage: "the hub repo, a base URL (required)"},
			&cli.StringFlag{Name: "revision", Usage: "the checkpoint's SHA-256 in hex (required)"},
			&cli.StringFlag{Name: "dir", Usage: "directory to keep it in (required; a verified copy already there is used as is)"},
			&cli.StringFlag{Name: "max-size", Usage: "largest checkpoint accepted", Value: "64GiB"},
		},
		Action: func(c *cli.Context) error {
			if err := requireFlagsNoArgs(c, "repo", "revision", "dir"); err != nil {
				return err
			}
			if _, err := hub.FileURL(c.String("repo"), c.String("revision")); err != nil {
				return badInput(err)
			}
			limit, err := hub.ParseSize(c.String("max-size"))
			if err != nil {
				return badInputf("--max-size: %w", err)
			}
			log := slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
			path, err := hub.Fetch(c.Context, c.String("repo"), c.String("revision"), c.String("dir"), hub.FetchOptions{MaxSize: limit, Log: log})
			if err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, path)
			return nil
		},
	}
}

// hubToken reads the token file named by flag, else $PSYCHE_HUB_TOKEN (""
// when neither is set).
func hubToken(c *cli.Context, flag string) (string, error) {
	p := c.String(flag)
	if p == "" {
		return os.Getenv(hubTokenEnv), nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", badInputf("--%s: %w", flag, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", badInputf("--%s %s must hold one token on one line", flag, p)
	}
	return token, nil
}
