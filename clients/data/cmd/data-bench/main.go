// Command data-bench prints throughput figures for the data pipeline:
// tokenizer encoding speed on one core, and the sustained rate at which the
// HTTP provider delivers verified sequences from a data server on loopback
// (with the local provider for comparison).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/psyche-go/psyche/clients/data/corpus"
	"github.com/psyche-go/psyche/clients/data/prepare"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/data/server"
	"github.com/psyche-go/psyche/clients/data/shard"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "data-bench: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	input := flag.String("input", "", "corpus directory (default: the State of the Union corpus)")
	tok := flag.String("tokenizer", tokenizer.GPT2Name, "tokenizer of the served dataset")
	seqLen := flag.Uint("seq-len", 1024, "sequence length of the served dataset")
	batch := flag.Int("batch", 64, "sequences per request to the provider")
	chunkBytes := flag.Int64("chunk-bytes", prepare.DefaultChunkBytes, "target chunk size of the served dataset")
	duration := flag.Duration("duration", 5*time.Second, "how long each provider is measured")
	concurrency := flag.Int("concurrency", 4, "HTTP requests in flight per provider call")
	flag.Parse()
	ctx := context.Background()

	if *input == "" {
		dir, err := corpus.SOTUDir()
		if err != nil {
			return err
		}
		*input = dir
	}
	all, _ := corpus.NewSplit("all", corpus.DefaultLastTrainYear)
	var docs []string
	var size int
	err := corpus.Walk(ctx, *input, all, func(d corpus.Document) error {
		docs = append(docs, d.Text)
		size += len(d.Text)
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("corpus: %d documents, %.1f MB (%s)\n", len(docs), float64(size)/1e6, *input)
	fmt.Printf("cpu: %d cores, GOMAXPROCS %d; tokenizers run on one goroutine\n", runtime.NumCPU(), runtime.GOMAXPROCS(0))
	for _, name := range tokenizer.Names() {
		t, _ := tokenizer.New(name)
		for _, pass := range []string{"first pass", "second pass"} {
			start := time.Now()
			tokens := 0
			for _, d := range docs {
				ids, err := t.Encode(d)
				if err != nil {
					return err
				}
				tokens += len(ids)
			}
			el := time.Since(start)
			fmt.Printf("tokenizer %-4s encode (%s): %7.1f MB/s, %6.2f M tokens/s, %d tokens\n",
				name, pass, float64(size)/el.Seconds()/1e6, float64(tokens)/el.Seconds()/1e6, tokens)
		}
	}

	tmp, err := os.MkdirTemp("", "data-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dsDir := filepath.Join(tmp, "ds")
	start := time.Now()
	res, err := prepare.Run(ctx, prepare.Options{Input: *input, Split: all, Tokenizer: *tok, SeqLen: uint32(*seqLen), ChunkBytes: *chunkBytes, Out: dsDir})
	if err != nil {
		return err
	}
	m := res.Manifest
	fmt.Printf("prepare (%s, seq_len %d, %d workers): %.2f s, %d sequences, %d per chunk, %d shards\n",
		*tok, *seqLen, runtime.GOMAXPROCS(0), time.Since(start).Seconds(), m.NumSequences, m.SeqsPerChunk, len(m.Shards))

	srv, err := server.New(ctx, dsDir, false, nil)
	if err != nil {
		return err
	}
	var wire atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go server.Serve(sctx, ln, countingHandler{srv, &wire})
	url := "http://" + ln.Addr().String() + "/"

	local, err := provider.OpenLocal(dsDir, m.Root)
	if err != nil {
		return err
	}
	defer local.Close()
	for _, contiguous := range []bool{true, false} {
		if err := measure("local", local, *batch, contiguous, *duration, nil); err != nil {
			return err
		}
	}
	// No cache directory: every chunk crosses the loopback connection and is
	// verified, each time it is asked for.
	remote, err := provider.OpenHTTP(ctx, url, provider.HTTPOptions{Root: m.Root, Concurrency: *concurrency, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	for _, contiguous := range []bool{true, false} {
		if err := measure("http", remote, *batch, contiguous, *duration, &wire); err != nil {
			return err
		}
	}
	return nil
}

// measure requests batches for the given time and prints the rate of
// verified sequence bytes delivered (and of bytes on the wire, if counted).
// A contiguous batch is a run of consecutive indices, as the batch assignment
// hands out; otherwise indices are drawn at random, the worst case, where
// each sequence costs a whole chunk of transfer and hashing.
func measure(name string, p provider.Provider, batch int, contiguous bool, d time.Duration, wire *atomic.Int64) error {
	in := p.Info()
	r := rand.New(rand.NewPCG(1, 2))
	seqBytes := float64(shard.SequenceBytes(in.VocabSize, in.SeqLen, in.LossMask))
	var seqs, calls int
	if wire != nil {
		wire.Store(0)
	}
	start := time.Now()
	for time.Since(start) < d {
		idx := make([]uint64, batch)
		first := r.Uint64N(in.NumSequences - uint64(batch) + 1)
		for i := range idx {
			if contiguous {
				idx[i] = first + uint64(i)
			} else {
				idx[i] = r.Uint64N(in.NumSequences)
			}
		}
		out, err := p.Sequences(context.Background(), idx)
		if err != nil {
			return err
		}
		seqs += len(out)
		calls++
	}
	el := time.Since(start).Seconds()
	pattern := "random"
	if contiguous {
		pattern = "contiguous"
	}
	fmt.Printf("provider %-5s %-10s: %7.1f MB/s of verified sequences (%.0f sequences/s, %.2f ms per batch of %d)",
		name, pattern, float64(seqs)*seqBytes/el/1e6, float64(seqs)/el, 1000*el/float64(calls), batch)
	if wire != nil {
		fmt.Printf(", %.1f MB/s on the wire", float64(wire.Load())/el/1e6)
	}
	fmt.Println()
	return nil
}

// countingHandler counts response body bytes.
type countingHandler struct {
	next http.Handler
	n    *atomic.Int64
}

func (h countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.next.ServeHTTP(countingWriter{w, h.n}, r)
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n.Add(int64(n))
	return n, err
}
