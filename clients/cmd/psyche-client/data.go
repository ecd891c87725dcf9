package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/data/prepare"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/data/server"
	"github.com/psyche-go/psyche/clients/data/shard"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
)

func dataCommands() []*cli.Command {
	return []*cli.Command{{
		Name:  "data",
		Usage: "prepare, serve, verify and read tokenized training data",
		Subcommands: []*cli.Command{
			dataPrepareCommand(),
			dataServeCommand(),
			dataVerifyCommand(),
			dataFetchCommand(),
		},
	}}
}

func dataPrepareCommand() *cli.Command {
	return &cli.Command{
		Name:  "prepare",
		Usage: "tokenize a directory of .txt/.jsonl documents (or fine-tuning examples: --examples) into shards with a manifest",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input", Usage: "corpus directory (default: the State of the Union corpus that scripts/setup.sh installs)"},
			&cli.StringFlag{Name: "examples", Usage: "instead of --input, fine-tuning examples: a JSONL file of chat conversations ({\"messages\": [{\"role\": ..., \"content\": ...}, ...]}) or prompt/completion pairs; writes a loss-masked dataset, one example a sequence, trained on the answers only"},
			chatTemplateFlag,
			&cli.StringFlag{Name: "tokenizer", Usage: "byte, gpt2, or the path of a Hugging Face tokenizer.json (byte-level BPE as GPT-2, Llama 3 or Qwen2 split text, or SentencePiece-style BPE as Llama 2 and Mistral: clients/data/README.md; a run names it as json:<its sha256>)", Value: tokenizer.GPT2Name},
			&cli.StringFlag{Name: "out", Usage: "dataset directory to create (required; must not exist or be empty)"},
			&cli.UintFlag{Name: "seq-len", Usage: "tokens a sequence trains on; each stores seq-len+1 for the targets", Value: 1024},
			&cli.StringFlag{Name: "split", Usage: "all, train (files from years up to --last-train-year) or validation (later years)", Value: "all"},
			&cli.IntFlag{Name: "last-train-year", Usage: "last year of the train split", Value: corpus.DefaultLastTrainYear},
			&cli.Int64Flag{Name: "chunk-bytes", Usage: "target size of a hashed chunk", Value: prepare.DefaultChunkBytes},
			&cli.Int64Flag{Name: "shard-bytes", Usage: "target size of a shard file", Value: prepare.DefaultShardBytes},
		},
		Action: func(c *cli.Context) error {
			if err := requireFlagsNoArgs(c, "out"); err != nil {
				return err
			}
			if c.IsSet("examples") {
				return prepareExamples(c)
			}
			if c.IsSet(chatTemplateFlag.Name) {
				return badInputf("--%s needs --examples", chatTemplateFlag.Name)
			}
			input := c.String("input")
			if input == "" {
				dir, err := corpus.SOTUDir()
				if err != nil {
					return badInput(err)
				}
				input = dir
			}
			if st, err := os.Stat(input); err != nil || !st.IsDir() {
				return badInputf("--input %s is not a directory", input)
			}
			if _, err := tokenizer.Open(c.String("tokenizer")); err != nil {
				return badInputf("--tokenizer: %w", err)
			}
			split, err := corpus.NewSplit(c.String("split"), c.Int("last-train-year"))
			if err != nil {
				return badInputf("--split: %w", err)
			}
			seqLen, out, err := prepareLayout(c)
			if err != nil {
				return err
			}
			res, err := prepare.Run(c.Context, prepare.Options{
				Input: input, Split: split, Tokenizer: c.String("tokenizer"), SeqLen: uint32(seqLen),
				ChunkBytes: c.Int64("chunk-bytes"), ShardBytes: c.Int64("shard-bytes"), Out: out,
			})
			if err != nil {
				return asBadInput(err)
			}
			m := res.Manifest
			w := c.App.Writer
			fmt.Fprintf(w, "dataset    %s\n", out)
			fmt.Fprintf(w, "input      %s (split %s): %d documents, %d bytes\n", input, split.Name, res.Documents, res.InputBytes)
			fmt.Fprintf(w, "tokens     %d with separators (%s, vocab %d), %d dropped at the end\n", res.Tokens, m.Tokenizer, m.VocabSize, res.DroppedTokens)
			fmt.Fprintf(w, "sequences  %d of %d+1 tokens in %d shards, %d per chunk\n", m.NumSequences, m.SeqLen, len(m.Shards), m.SeqsPerChunk)
			fmt.Fprintf(w, "root       %s\n", m.Root)
			return nil
		},
	}
}

var chatTemplateFlag = &cli.StringFlag{Name: "chat-template", Usage: "the chat template: a tokenizer_config.json or a template file (default: the tokenizer_config.json beside --tokenizer)"}

// chatTemplatePath is --chat-template, or the tokenizer_config.json beside
// a --tokenizer tokenizer.json; "" when there is neither.
func chatTemplatePath(c *cli.Context) string {
	if p := c.String(chatTemplateFlag.Name); p != "" {
		return p
	}
	if tok := c.String("tokenizer"); strings.HasSuffix(tok, ".json") {
		p := filepath.Join(filepath.Dir(tok), "tokenizer_config.json")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// prepareLayout checks the flags both kinds of prepare share: --seq-len,
// the chunk and shard sizes, and an --out that is new or empty.
func prepareLayout(c *cli.Context) (seqLen uint, out string, err error) {
	seqLen = c.Uint("seq-len")
	if seqLen == 0 || seqLen > shard.MaxSeqLen {
		return 0, "", badInputf("--seq-len %d must be between 1 and %d", seqLen, shard.MaxSeqLen)
	}
	if c.Int64("chunk-bytes") <= 0 || c.Int64("shard-bytes") <= 0 {
		return 0, "", badInputf("--chunk-bytes and --shard-bytes must be positive")
	}
	out = c.String("out")
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return 0, "", badInputf("--out %s is not empty", out)
	}
	return seqLen, out, nil
}

// asBadInput marks problems with the input files (*corpus.InputError) as
// bad input; others, such as a full disk, stay ordinary failures.
func asBadInput(err error) error {
	var inErr *corpus.InputError
	if errors.As(err, &inErr) {
		return badInput(err)
	}
	return err
}

// prepareExamples is data prepare --examples: a loss-masked dataset.
func prepareExamples(c *cli.Context) error {
	if c.IsSet("input") || c.IsSet("split") || c.IsSet("last-train-year") {
		return badInputf("--examples replaces --input, --split and --last-train-year")
	}
	seqLen, out, err := prepareLayout(c)
	if err != nil {
		return err
	}
	tmpl := chatTemplatePath(c)
	res, err := prepare.RunChat(c.Context, prepare.ChatOptions{
		Input: c.String("examples"), Tokenizer: c.String("tokenizer"), Template: tmpl, SeqLen: uint32(seqLen),
		ChunkBytes: c.Int64("chunk-bytes"), ShardBytes: c.Int64("shard-bytes"), Out: out,
	})
	if err != nil {
		return asBadInput(err)
	}
	m := res.Manifest
	w := c.App.Writer
	fmt.Fprintf(w, "dataset    %s (fine-tuning: loss-masked)\n", out)
	fmt.Fprintf(w, "input      %s: %d examples, %d cut to %d tokens\n", c.String("examples"), res.Examples, res.Truncated, m.SeqLen+1)
	if m.ChatTemplate != "" {
		fmt.Fprintf(w, "template   %s (sha256 %s)\n", tmpl, m.ChatTemplate)
	}
	fmt.Fprintf(w, "tokens     %d (%s, vocab %d), %d of them trained\n", res.Tokens, m.Tokenizer, m.VocabSize, res.Trained)
	fmt.Fprintf(w, "sequences  %d of %d+1 tokens in %d shards, %d per chunk\n", m.NumSequences, m.SeqLen, len(m.Shards), m.SeqsPerChunk)
	fmt.Fprintf(w, "root       %s\n", m.Root)
	return nil
}

func dataServeCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve a dataset directory over HTTP (range requests) to data providers",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "dataset directory (required)"},
			&cli.IntFlag{Name: "port", Usage: "TCP port (required; 0 picks a free one)"},
			&cli.StringFlag{Name: "host", Usage: "address to listen on", Value: "127.0.0.1"},
			&cli.BoolFlag{Name: "verify", Usage: "hash every byte of the dataset before serving"},
		},
		Action: func(c *cli.Context) error {
			if err := requireFlagsNoArgs(c, "dir", "port"); err != nil {
				return err
			}
			port := c.Int("port")
			if port < 0 || port > 65535 {
				return badInputf("--port %d is not a TCP port", port)
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
			s, err := server.New(ctx, c.String("dir"), c.Bool("verify"), log)
			if err != nil {
				return badInput(err)
			}
			ln, err := net.Listen("tcp", net.JoinHostPort(c.String("host"), strconv.Itoa(port)))
			if err != nil {
				return badInputf("listening on %s port %d: %w", c.String("host"), port, err)
			}
			fmt.Fprintf(c.App.Writer, "serving %s (root %s) on http://%s/\n", c.String("dir"), s.Manifest().Root, ln.Addr())
			return server.Serve(ctx, ln, s)
		},
	}
}

func dataVerifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "verify",
		Usage: "check every byte of a dataset directory against its manifest",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "dataset directory (required)"},
			&cli.StringFlag{Name: "root", Usage: "the root the dataset must have (hex)"},
		},
		Action: func(c *cli.Context) error {
			if err := requireFlagsNoArgs(c, "dir"); err != nil {
				return err
			}
			l, err := provider.OpenLocal(c.String("dir"), c.String("root"))
			if err != nil {
				return badInput(err)
			}
			defer l.Close()
			if err := l.Verify(c.Context); err != nil {
				return badInput(err)
			}
			in := l.Info()
			fmt.Fprintf(c.App.Writer, "ok: %d sequences, root %s\n", in.NumSequences, in.Root)
			return nil
		},
	}
}

func dataFetchCommand() *cli.Command {
	return &cli.Command{
		Name:  "fetch",
		Usage: "print sequences by global index, verified, from a dataset directory, a data server or a mix",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "dataset directory or http(s) URL of a data server"},
			&cli.StringFlag{Name: "mix", Usage: `JSON file listing datasets to mix: [{"location": DIR|URL, "root": HEX, "weight": N}, ...]`},
			&cli.StringFlag{Name: "root", Usage: "the dataset root to pin (hex; required for a server)"},
			&cli.StringFlag{Name: "indices", Usage: "comma-separated global sequence indices (required)"},
			&cli.StringFlag{Name: "cache", Usage: "cache directory for data fetched from a server"},
			&cli.BoolFlag{Name: "text", Usage: "print decoded text instead of token ids"},
			&cli.StringFlag{Name: "tokenizer-file", Usage: "with --text, for data tokenized by a tokenizer.json: that file"},
		},
		Action: func(c *cli.Context) error {
			if err := requireFlagsNoArgs(c, "indices"); err != nil {
				return err
			}
			var indices []uint64
			for _, s := range strings.Split(c.String("indices"), ",") {
				i, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
				if err != nil {
					return badInputf("--indices: %q is not a sequence index", s)
				}
				indices = append(indices, i)
			}
			var sources []provider.Source
			switch {
			case c.IsSet("mix") == c.IsSet("from"):
				return badInputf("data fetch: give either --from or --mix")
			case c.IsSet("mix"):
				raw, err := os.ReadFile(c.String("mix"))
				if err != nil {
					return badInputf("--mix: %w", err)
				}
				if sources, err = provider.ParseSources(raw); err != nil {
					return badInputf("--mix %s: %w", c.String("mix"), err)
				}
			default:
				sources = []provider.Source{{Location: c.String("from"), Root: c.String("root")}}
			}
			if c.IsSet("mix") && c.IsSet("root") {
				return badInputf("data fetch: with --mix, give each dataset's root in the mix file")
			}
			for _, s := range sources {
				if (strings.HasPrefix(s.Location, "http://") || strings.HasPrefix(s.Location, "https://")) && s.Root == "" {
					return badInputf("data source %s: a root is required for a data server: pin the dataset you expect", s.Location)
				}
				if b, err := hex.DecodeString(s.Root); s.Root != "" && (err != nil || len(b) != sha256.Size) {
					return badInputf("data source %s: root %q is not a SHA-256 hex digest", s.Location, s.Root)
				}
			}
			p, err := provider.Open(c.Context, sources, provider.HTTPOptions{
				CacheDir: c.String("cache"),
				Log:      slog.New(slog.NewTextHandler(c.App.ErrWriter, nil)),
			})
			if err != nil {
				return asBadData(err)
			}
			defer p.Close()
			if n := p.Info().NumSequences; slices.Max(indices) >= n {
				return badInputf("--indices: %d is out of range; the dataset has %d sequences", slices.Max(indices), n)
			}
			seqs, err := p.Sequences(c.Context, indices)
			if err != nil {
				return asBadData(err)
			}
			var tok tokenizer.Tokenizer
			if c.Bool("text") {
				if tok, err = dataTokenizer(p.Info().Tokenizer, c.String("tokenizer-file")); err != nil {
					return badInput(err)
				}
			}
			enc := json.NewEncoder(c.App.Writer)
			info := p.Info()
			for i, seq := range seqs {
				out, err := fetchedSequence(info, seq, tok)
				if err != nil {
					return err
				}
				out["index"] = indices[i]
				if err := enc.Encode(out); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// fetchedSequence is what data fetch prints of one sequence: its tokens (or
// with tok their text) and, with a loss mask, the spans of tokens trained
// as targets: [start, end) token positions (or with tok their texts).
func fetchedSequence(info provider.Info, seq []uint32, tok tokenizer.Tokenizer) (map[string]any, error) {
	n := int(info.SeqLen) + 1
	out := map[string]any{}
	var spans [][2]int
	if info.LossMask {
		for j := 1; j < n; j++ {
			if !shard.Trained(seq[n:], j-1) {
				continue
			}
			if k := len(spans) - 1; k >= 0 && spans[k][1] == j {
				spans[k][1] = j + 1
			} else {
				spans = append(spans, [2]int{j, j + 1})
			}
		}
	}
	if tok == nil {
		out["tokens"] = seq[:n]
		if info.LossMask {
			out["trained"] = spans
		}
		return out, nil
	}
	text, err := tok.Decode(seq[:n])
	if err != nil {
		return nil, err
	}
	out["text"] = text
	if info.LossMask {
		trained := []string{}
		for _, s := range spans {
			t, err := tok.Decode(seq[s[0]:s[1]])
			if err != nil {
				return nil, err
			}
			trained = append(trained, t)
		}
		out["trained"] = trained
	}
	return out, nil
}

// requireFlagsNoArgs fails, as bad input, on positional arguments (a data
// command takes none), then on missing required flags.
func requireFlagsNoArgs(c *cli.Context, names ...string) error {
	if c.Args().Present() {
		return badInputf("%s takes no arguments, got %q", commandName(c), c.Args().Slice())
	}
	return requireFlags(c, names...)
}

// asBadData marks data that failed verification, manifests that are not the
// pinned one, and missing local files as bad input; network failures stay
// ordinary failures.
func asBadData(err error) error {
	if errors.As(err, new(*shard.IntegrityError)) || errors.As(err, new(*shard.ManifestError)) || errors.As(err, new(*fs.PathError)) {
		return badInput(err)
	}
	return err
}

// dataTokenizer is the tokenizer that data recorded as name: byte, gpt2, or
// the tokenizer.json file given, which must be the one name records.
func dataTokenizer(name, file string) (tokenizer.Tokenizer, error) {
	if !strings.HasPrefix(name, tokenizer.JSONPrefix) {
		return tokenizer.New(name)
	}
	if file == "" {
		return nil, fmt.Errorf("the data was tokenized by a tokenizer.json (%s): give that file with --tokenizer-file", name)
	}
	tok, err := tokenizer.LoadJSON(file)
	if err != nil {
		return nil, err
	}
	if tok.Name() != name {
		return nil, fmt.Errorf("--tokenizer-file %s is %s, but the data was tokenized by %s", file, tok.Name(), name)
	}
	return tok, nil
}
