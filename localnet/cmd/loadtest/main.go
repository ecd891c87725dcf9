// Command loadtest measures the local validator under load: N concurrent
// clients send SOL transfers for a duration while a confirmer polls their
// statuses. It prints sustained throughput and confirmation latency, then
// checks on chain that every transfer landed exactly once (balances and the
// transaction count), exiting 1 if any was lost, failed or duplicated.
//
//	go run ./localnet/cmd/loadtest -clients 16 -duration 10s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/localnet"
)

type config struct {
	rpcURL        string
	clients       int
	duration      time.Duration
	inflight      int
	skipPreflight bool
	poll          time.Duration
}

func main() {
	var cfg config
	flag.StringVar(&cfg.rpcURL, "rpc", "", "JSON-RPC URL of a running validator (default: start a local one)")
	flag.IntVar(&cfg.clients, "clients", 16, "concurrent sending clients")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to send")
	flag.IntVar(&cfg.inflight, "inflight", 64, "unconfirmed transactions allowed per client")
	flag.BoolVar(&cfg.skipPreflight, "skip-preflight", false, "send with skipPreflight")
	flag.DurationVar(&cfg.poll, "poll", 10*time.Millisecond, "status polling interval")
	flag.Parse()
	if cfg.clients < 1 || cfg.inflight < 1 || cfg.duration <= 0 || cfg.poll <= 0 {
		fmt.Fprintln(os.Stderr, "loadtest: -clients, -inflight, -duration and -poll must be positive")
		os.Exit(2)
	}
	if err := run(context.Background(), cfg); err != nil {
		fmt.Fprintf(os.Stderr, "loadtest: %v\n", err)
		os.Exit(1)
	}
}

// pending is a sent transfer awaiting confirmation.
type pending struct {
	sig    solana.Signature
	sentAt time.Time
	client int
	amount uint64
}

// tally is what the confirmer saw land for one client.
type tally struct {
	landed   atomic.Uint64 // transactions with a status
	received atomic.Uint64 // lamports of the successful ones
}

// feePerTransfer is the fee of a one-signature transfer.
const feePerTransfer = 5000

type result struct {
	latency time.Duration
	failed  bool
}

func run(ctx context.Context, cfg config) error {
	if cfg.rpcURL == "" {
		v, err := localnet.Start(ctx, localnet.Options{ExtraArgs: []string{"--quiet"}, Stderr: os.Stderr})
		if err != nil {
			return err
		}
		defer v.Stop()
		cfg.rpcURL = v.RPCURL
	}
	admin := rpc.New(cfg.rpcURL)

	// Fund a payer and a rent-exempt recipient per client.
	payers := make([]solana.PrivateKey, cfg.clients)
	recipients := make([]solana.PublicKey, cfg.clients)
	var sigs []solana.Signature
	for i := range payers {
		payers[i] = solana.NewWallet().PrivateKey
		recipients[i] = solana.NewWallet().PublicKey()
		for _, k := range []solana.PublicKey{payers[i].PublicKey(), recipients[i]} {
			sig, err := admin.RequestAirdrop(ctx, k, 100*solana.LAMPORTS_PER_SOL, rpc.CommitmentConfirmed)
			if err != nil {
				return fmt.Errorf("fund client %d: %w", i, err)
			}
			sigs = append(sigs, sig)
		}
	}
	if err := waitAll(ctx, admin, sigs, 30*time.Second); err != nil {
		return fmt.Errorf("funding: %w", err)
	}
	startBalances, err := balances(ctx, admin, append(slices.Clone(recipients), publicKeys(payers)...))
	if err != nil {
		return err
	}
	countBefore, err := admin.GetTransactionCount(ctx, rpc.CommitmentFinalized)
	if err != nil {
		return fmt.Errorf("getTransactionCount: %w", err)
	}

	bh, err := newBlockhashCache(ctx, admin)
	if err != nil {
		return err
	}
	sendCtx, stopSending := context.WithTimeout(ctx, cfg.duration)
	defer stopSending()
	go bh.refresh(sendCtx, admin, time.Second)

	queue := make(chan pending, cfg.clients*cfg.inflight)
	results := make(chan result, cfg.clients*cfg.inflight)
	slots := make([]chan struct{}, cfg.clients) // per-client in-flight limit
	for i := range slots {
		slots[i] = make(chan struct{}, cfg.inflight)
	}
	tallies := make([]tally, cfg.clients)
	var sendErrors atomic.Int64
	var sent atomic.Int64

	confirmerDone := make(chan error, 1)
	go func() { confirmerDone <- confirm(ctx, admin, queue, results, slots, tallies, cfg.poll) }()

	started := time.Now()
	var wg sync.WaitGroup
	for i := range cfg.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := rpc.New(cfg.rpcURL) // own connection per client
			opts := rpc.TransactionOpts{SkipPreflight: cfg.skipPreflight, PreflightCommitment: rpc.CommitmentProcessed}
			for n := uint64(1); ; n++ {
				select {
				case slots[i] <- struct{}{}:
				case <-sendCtx.Done():
					return
				}
				if sendCtx.Err() != nil {
					<-slots[i]
					return
				}
				// Distinct amounts make every transaction unique.
				tx, err := solana.NewTransaction([]solana.Instruction{
					system.NewTransferInstruction(n, payers[i].PublicKey(), recipients[i]).Build(),
				}, bh.get(), solana.TransactionPayer(payers[i].PublicKey()))
				if err == nil {
					_, err = tx.Sign(func(solana.PublicKey) *solana.PrivateKey { return &payers[i] })
				}
				if err != nil {
					slog.Error("build transaction", "err", err)
					sendErrors.Add(1)
					<-slots[i]
					return
				}
				at := time.Now()
				sig, err := client.SendTransactionWithOpts(ctx, tx, opts)
				if err != nil {
					slog.Error("send", "client", i, "err", err)
					sendErrors.Add(1)
					<-slots[i]
					continue
				}
				sent.Add(1)
				queue <- pending{sig: sig, sentAt: at, client: i, amount: n}
			}
		}()
	}

	var latencies []time.Duration
	var failed int
	collectorDone := make(chan struct{})
	go func() {
		for r := range results {
			latencies = append(latencies, r.latency)
			if r.failed {
				failed++
			}
		}
		close(collectorDone)
	}()
	wg.Wait()
	sendWindow := time.Since(started)
	close(queue)
	if err := <-confirmerDone; err != nil {
		return err
	}
	close(results)
	<-collectorDone
	confirmWindow := time.Since(started)

	// Verify on chain: each recipient got exactly its confirmed transfers,
	// each payer paid them plus one fee per transfer, and the transaction
	// count moved by exactly the number confirmed.
	endBalances, err := balances(ctx, admin, append(slices.Clone(recipients), publicKeys(payers)...))
	if err != nil {
		return err
	}
	countAfter, err := admin.GetTransactionCount(ctx, rpc.CommitmentFinalized)
	if err != nil {
		return fmt.Errorf("getTransactionCount: %w", err)
	}
	var mismatches int
	for i := range recipients {
		got := endBalances[i] - startBalances[i]
		if want := tallies[i].received.Load(); got != want {
			slog.Error("recipient balance mismatch", "client", i, "received", got, "confirmed", want)
			mismatches++
		}
		p := cfg.clients + i
		spent := startBalances[p] - endBalances[p]
		if want := tallies[i].received.Load() + feePerTransfer*tallies[i].landed.Load(); spent != want {
			slog.Error("payer balance mismatch", "client", i, "spent", spent, "want", want)
			mismatches++
		}
	}
	n := uint64(len(latencies))
	lost := sent.Load() - int64(n)
	slices.Sort(latencies)
	fmt.Printf("clients=%d inflight=%d skipPreflight=%v duration=%s\n", cfg.clients, cfg.inflight, cfg.skipPreflight, cfg.duration)
	fmt.Printf("sent=%d confirmed=%d failed=%d lost=%d send_errors=%d balance_mismatches=%d tx_count_delta=%d\n",
		sent.Load(), n, failed, lost, sendErrors.Load(), mismatches, countAfter-countBefore)
	fmt.Printf("sustained: %.0f tx/s (confirmed over %.2fs of sending; %.0f tx/s including drain)\n",
		float64(n)/sendWindow.Seconds(), sendWindow.Seconds(), float64(n)/confirmWindow.Seconds())
	if n > 0 {
		fmt.Printf("confirmation latency: p50=%s p99=%s max=%s\n",
			pct(latencies, 0.50).Round(100*time.Microsecond), pct(latencies, 0.99).Round(100*time.Microsecond),
			latencies[n-1].Round(100*time.Microsecond))
	}
	if failed > 0 || lost != 0 || mismatches > 0 || sendErrors.Load() > 0 || countAfter-countBefore != n {
		return errors.New("lost, failed or duplicated transactions (see above)")
	}
	return nil
}

// confirm polls statuses of queued transactions in batches of 256 until the
// queue is closed and everything queued has an answer (or times out).
func confirm(ctx context.Context, client *rpc.Client, queue <-chan pending, results chan<- result,
	slots []chan struct{}, tallies []tally, poll time.Duration) error {
	const batch = 256
	var waiting []pending
	open := true
	var drainDeadline time.Time
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for open || len(waiting) > 0 {
		if open {
			select {
			case p, ok := <-queue:
				if !ok {
					open = false
					drainDeadline = time.Now().Add(30 * time.Second)
					continue
				}
				waiting = append(waiting, p)
				continue
			case <-tick.C:
			}
		} else {
			if time.Now().After(drainDeadline) {
				slog.Error("unconfirmed after 30s", "count", len(waiting))
				return nil
			}
			<-tick.C
		}
		var still []pending
		for start := 0; start < len(waiting); start += batch {
			part := waiting[start:min(start+batch, len(waiting))]
			sigs := make([]solana.Signature, len(part))
			for i, p := range part {
				sigs[i] = p.sig
			}
			out, err := client.GetSignatureStatuses(ctx, false, sigs...)
			if err != nil {
				return fmt.Errorf("getSignatureStatuses: %w", err)
			}
			now := time.Now()
			for i, st := range out.Value {
				p := part[i]
				if st == nil {
					still = append(still, p)
					continue
				}
				tallies[p.client].landed.Add(1)
				if st.Err == nil {
					tallies[p.client].received.Add(p.amount)
				}
				results <- result{latency: now.Sub(p.sentAt), failed: st.Err != nil}
				<-slots[p.client]
			}
		}
		waiting = still
	}
	return nil
}

type blockhashCache struct {
	mu   sync.Mutex
	hash solana.Hash
}

func newBlockhashCache(ctx context.Context, client *rpc.Client) (*blockhashCache, error) {
	c := &blockhashCache{}
	out, err := client.GetLatestBlockhash(ctx, rpc.CommitmentFinalized)
	if err != nil {
		return nil, fmt.Errorf("getLatestBlockhash: %w", err)
	}
	c.hash = out.Value.Blockhash
	return c, nil
}

func (c *blockhashCache) get() solana.Hash {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hash
}

func (c *blockhashCache) refresh(ctx context.Context, client *rpc.Client, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			out, err := client.GetLatestBlockhash(ctx, rpc.CommitmentFinalized)
			if err != nil {
				continue
			}
			c.mu.Lock()
			c.hash = out.Value.Blockhash
			c.mu.Unlock()
		}
	}
}

func waitAll(ctx context.Context, client *rpc.Client, sigs []solana.Signature, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for len(sigs) > 0 {
		out, err := client.GetSignatureStatuses(ctx, false, sigs...)
		if err != nil {
			return fmt.Errorf("getSignatureStatuses: %w", err)
		}
		var rest []solana.Signature
		for i, st := range out.Value {
			switch {
			case st == nil:
				rest = append(rest, sigs[i])
			case st.Err != nil:
				return fmt.Errorf("transaction %s failed: %v", sigs[i], st.Err)
			}
		}
		sigs = rest
		if len(sigs) > 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("%d transactions unconfirmed after %s", len(sigs), timeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

func balances(ctx context.Context, client *rpc.Client, keys []solana.PublicKey) ([]uint64, error) {
	out := make([]uint64, len(keys))
	for start := 0; start < len(keys); start += 100 {
		part := keys[start:min(start+100, len(keys))]
		res, err := client.GetMultipleAccountsWithOpts(ctx, part, &rpc.GetMultipleAccountsOpts{Commitment: rpc.CommitmentFinalized})
		if err != nil {
			return nil, fmt.Errorf("getMultipleAccounts: %w", err)
		}
		for i, a := range res.Value {
			if a != nil {
				out[start+i] = a.Lamports
			}
		}
	}
	return out, nil
}

func publicKeys(keys []solana.PrivateKey) []solana.PublicKey {
	out := make([]solana.PublicKey, len(keys))
	for i, k := range keys {
		out[i] = k.PublicKey()
	}
	return out
}

func pct(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}
