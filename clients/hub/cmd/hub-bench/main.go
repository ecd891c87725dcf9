// Command hub-bench prints throughput figures for the checkpoint hub on
// loopback: upload (hash, then a verified PUT), a cold fetch (GET hashed as it
// streams, synced, renamed), and a cached fetch (hashing the local copy
// only), for a checkpoint of --size bytes.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/psyche-go/psyche/clients/hub"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "hub-bench: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	sizeFlag := flag.String("size", "256MiB", "checkpoint size")
	rounds := flag.Int("rounds", 3, "measurements of each operation (the best is printed)")
	flag.Parse()
	size, err := hub.ParseSize(*sizeFlag)
	if err != nil {
		return err
	}
	if *rounds < 1 {
		return fmt.Errorf("-rounds must be at least 1")
	}
	ctx := context.Background()
	work, err := os.MkdirTemp("", "hub-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	src := filepath.Join(work, "model.safetensors")
	if err := writeCheckpoint(src, size); err != nil {
		return err
	}
	fmt.Printf("checkpoint %d bytes (%.0f MiB), hub on loopback, best of %d\n", size, float64(size)/(1<<20), *rounds)

	var upload, cold, cached time.Duration
	for r := range *rounds {
		u, c, k, err := round(ctx, filepath.Join(work, fmt.Sprint(r)), src, size)
		if err != nil {
			return err
		}
		upload, cold, cached = best(upload, u), best(cold, c), best(cached, k)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"upload (hash + PUT, server verifies and syncs)", upload},
		{"fetch, cold (GET, hash, sync, rename)", cold},
		{"fetch, cached (hash the local copy)", cached},
	} {
		fmt.Printf("%-48s %8.3f s  %7.1f MiB/s\n", f.name, f.d.Seconds(), float64(size)/(1<<20)/f.d.Seconds())
	}
	return nil
}

// round serves a fresh store under work, uploads src to it, fetches it into a
// fresh directory, then fetches it again from there.
func round(ctx context.Context, work, src string, size int64) (upload, cold, cached time.Duration, err error) {
	store, dir := filepath.Join(work, "store"), filepath.Join(work, "fetched")
	if err := os.MkdirAll(store, 0o755); err != nil {
		return 0, 0, 0, err
	}
	defer os.RemoveAll(work)
	s, err := hub.NewServer(store, hub.ServerOptions{MaxSize: size})
	if err != nil {
		return 0, 0, 0, err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, 0, err
	}
	ctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- hub.Serve(ctx, ln, s) }()
	defer func() {
		stop()
		if serr := <-served; err == nil {
			err = serr
		}
	}()
	repo := "http://" + ln.Addr().String() + "/runs/bench"

	t0 := time.Now()
	rev, err := hub.Upload(ctx, repo, src, hub.UploadOptions{})
	if err != nil {
		return 0, 0, 0, err
	}
	upload = time.Since(t0)
	t0 = time.Now()
	if _, err := hub.Fetch(ctx, repo, rev, dir, hub.FetchOptions{MaxSize: size}); err != nil {
		return 0, 0, 0, err
	}
	cold = time.Since(t0)
	t0 = time.Now()
	if _, err := hub.Fetch(ctx, repo, rev, dir, hub.FetchOptions{MaxSize: size}); err != nil {
		return 0, 0, 0, err
	}
	return upload, cold, time.Since(t0), nil
}

func best(cur, d time.Duration) time.Duration {
	if cur == 0 || d < cur {
		return d
	}
	return cur
}

// writeCheckpoint writes a safetensors-framed file of size bytes with
// pseudo-random content (incompressible, like trained weights).
func writeCheckpoint(path string, size int64) error {
	header := []byte(`{"__metadata__":{"bench":"1"}}`)
	if size < int64(8+len(header)) {
		return fmt.Errorf("-size must be at least %d bytes", 8+len(header))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := binary.LittleEndian.AppendUint64(make([]byte, 0, 1<<20), uint64(len(header)))
	buf = append(buf, header...)
	r := rand.New(rand.NewPCG(1, 2))
	for left := size - int64(len(buf)); ; {
		for len(buf)+8 <= cap(buf) && left >= 8 {
			buf = binary.LittleEndian.AppendUint64(buf, r.Uint64())
			left -= 8
		}
		for len(buf) < cap(buf) && left > 0 {
			buf = append(buf, byte(r.Uint32()))
			left--
		}
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
		buf = buf[:0]
		if left == 0 {
			return f.Close()
		}
	}
}
