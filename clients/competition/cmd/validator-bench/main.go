// Command validator-bench times one competition validator round
// (clients/competition/evaluate): fetching N models from a hub server on
// loopback, checking them, and the loss table over P pages, and prints the
// figures: the time of the round and of each stage, the bytes downloaded
// and the threads used. Then it times the same round again over the
// cached files. It asserts nothing.
//
//	go run ./clients/competition/cmd/validator-bench [-models 8] [-config light] [-pages 64] [-spp 8] [-threads 0]
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/competition/evaluate"
	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/data/prepare"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/trainer"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "validator-bench: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	nModels := flag.Int("models", 8, "models in the round")
	config := flag.String("config", "light", "model config (trainer.ConfigNames)")
	nPages := flag.Int("pages", 64, "pages a round evaluates")
	spp := flag.Uint("spp", 8, "sequences a page")
	threads := flag.Int("threads", 0, "trainer threads (0: all processors)")
	precision := flag.String("precision", trainer.ArithFP32, "numeric contract: fp32 or mx8")
	microBatch := flag.Int("micro-batch", 0, "sequences a forward pass holds (0: evaluate.DefaultMicroBatch)")
	flag.Parse()
	cfg, err := trainer.ConfigByName(*config)
	if err != nil {
		return err
	}
	if *nModels < 1 || *nPages < 1 || *spp < 1 {
		return fmt.Errorf("-models, -pages and -spp must be at least 1")
	}
	tok := tokenizer.ByteName
	if cfg.Vocab != 256 {
		tok = tokenizer.GPT2Name
	}
	if *threads <= 0 {
		*threads = runtime.NumCPU()
	}
	ctx := context.Background()
	work, err := os.MkdirTemp("", "validator-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	// The dataset: Markov text, twice what the pages take.
	sequences := uint64(*nPages) * uint64(*spp) * 2
	data, err := dataset(ctx, filepath.Join(work, "corpus"), filepath.Join(work, "data"), tok, uint32(cfg.SeqLen), sequences)
	if err != nil {
		return err
	}
	defer data.Close()
	info := data.Info()

	// The hub, on a loopback port, holding every miner's model.
	store := filepath.Join(work, "hub")
	if err := os.MkdirAll(store, 0o755); err != nil {
		return err
	}
	srv, err := hub.NewServer(store, hub.ServerOptions{})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go hub.Serve(sctx, ln, srv)
	repo := "http://" + ln.Addr().String() + "/competition"

	var subs []evaluate.Submission
	var fileBytes int64
	for i := range *nModels {
		sub, size, err := miner(ctx, cfg, i, filepath.Join(work, "miners"), repo)
		if err != nil {
			return err
		}
		subs = append(subs, sub)
		fileBytes += size
	}
	c := evaluate.Constraints{Architecture: arch(cfg), MaxParams: subs[0].Params, Vocab: info.VocabSize, Tokenizer: info.Tokenizer,
		SeqLen: info.SeqLen, Precision: *precision}
	mb := *microBatch
	if mb <= 0 {
		ec := cfg
		ec.Arith = *precision
		mb = evaluate.DefaultMicroBatch(ec, uint32(*spp))
	}
	fmt.Printf("round: %d models of %s (%d parameters, %.1f MiB a file), %d pages of %d sequences of %d tokens, %s\n",
		*nModels, cfg.Name, subs[0].Params, float64(fileBytes)/float64(*nModels)/(1<<20), *nPages, *spp, cfg.SeqLen, *precision)
	fmt.Printf("threads %d (of %d processors), micro-batch %d, hub on loopback\n", *threads, runtime.NumCPU(), mb)

	dir := filepath.Join(work, "validator")
	seed := sha256.Sum256([]byte("validator-bench"))
	opts := evaluate.Options{Table: evaluate.TableOptions{Threads: *threads, MicroBatch: mb}}
	for _, what := range []string{"cold (fetch from the hub)", "cached (files already fetched)"} {
		start := time.Now()
		r, err := evaluate.Evaluate(ctx, subs, dir, data, seed, *nPages, uint32(*spp), c, opts)
		if err != nil {
			return err
		}
		total := time.Since(start)
		for i, inv := range r.Invalid {
			if inv != nil {
				return fmt.Errorf("model %d: %v", i, inv)
			}
		}
		evals := len(subs) * len(r.Pages)
		tokens := evals * int(*spp) * cfg.SeqLen
		fmt.Printf("\n%s\n", what)
		fmt.Printf("  round            %9.3f s\n", total.Seconds())
		fmt.Printf("  fetch            %9.3f s   %d bytes downloaded (%.1f MiB)\n", r.FetchTime.Seconds(), r.Downloaded, float64(r.Downloaded)/(1<<20))
		fmt.Printf("  check            %9.3f s\n", r.CheckTime.Seconds())
		fmt.Printf("  loss table       %9.3f s   %d model-pages, %.1f ms a page, %.0f tokens/s\n", r.TableTime.Seconds(), evals,
			r.TableTime.Seconds()*1000/float64(evals), float64(tokens)/r.TableTime.Seconds())
		fmt.Printf("  table hash       %x\n", r.TableHash)
	}
	return nil
}

func arch(cfg trainer.Config) string {
	if cfg.IsLlama() {
		return trainer.ArchLlama
	}
	return trainer.ArchGPT2
}

// dataset prepares at least n sequences of seqLen tokens of Markov text.
func dataset(ctx context.Context, in, out, tok string, seqLen uint32, n uint64) (provider.Provider, error) {
	if err := os.MkdirAll(in, 0o755); err != nil {
		return nil, err
	}
	const docBytes = 64 << 10
	total := int(n)*int(seqLen+1)*2 + docBytes // bytes make at least as many tokens, with room for separators
	for i := 0; i*docBytes < total; i++ {
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("doc%04d.txt", i)), trainer.MarkovText(uint64(i), docBytes), 0o644); err != nil {
			return nil, err
		}
	}
	split, err := corpus.NewSplit("all", corpus.DefaultLastTrainYear)
	if err != nil {
		return nil, err
	}
	if _, err := prepare.Run(ctx, prepare.Options{Input: in, Split: split, Tokenizer: tok, SeqLen: seqLen, Out: out}); err != nil {
		return nil, err
	}
	p, err := provider.OpenLocal(out, "")
	if err != nil {
		return nil, err
	}
	if p.Info().NumSequences < n {
		p.Close()
		return nil, fmt.Errorf("the dataset has %d sequences, fewer than %d", p.Info().NumSequences, n)
	}
	return p, nil
}

// miner makes miner i's model (a fresh one of cfg from seed i), uploads it
// and returns its submission and file size.
func miner(ctx context.Context, cfg trainer.Config, i int, dir, repo string) (evaluate.Submission, int64, error) {
	tr, err := trainer.New(cfg, uint64(i)+1)
	if err != nil {
		return evaluate.Submission{}, 0, err
	}
	defer tr.Close()
	path := filepath.Join(dir, fmt.Sprintf("miner%d.safetensors", i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return evaluate.Submission{}, 0, err
	}
	if err := tr.SaveModel(path, map[string]string{"miner": fmt.Sprint(i)}); err != nil {
		return evaluate.Submission{}, 0, err
	}
	if _, err := hub.Upload(ctx, repo, path, hub.UploadOptions{}); err != nil {
		return evaluate.Submission{}, 0, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return evaluate.Submission{}, 0, err
	}
	key := solana.PublicKeyFromBytes(func() []byte { h := sha256.Sum256([]byte(fmt.Sprint("miner ", i))); return h[:] }())
	return evaluate.Submission{Index: uint16(i), Miner: key, Commitment: evaluate.Commitment(raw, key), Revision: sha256.Sum256(raw),
		Params: uint64(tr.NumParams()), Slot: uint64(i + 1), Repo: repo}, int64(len(raw)), nil
}
