package explorer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"golang.org/x/sync/errgroup"

	tbindings "github.com/psyche-go/psyche/clients/bindings/treasurer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/treasurer"
)

// signaturesPage is getSignaturesForAddress's largest page.
const signaturesPage = 1000

// signatures lists addr's transactions newer than until (all when zero),
// newest first, at most limit of them (0: no limit).
func (x *Indexer) signatures(ctx context.Context, addr solana.PublicKey, until solana.Signature, limit int) ([]*rpc.TransactionSignature, error) {
	var out []*rpc.TransactionSignature
	var before solana.Signature
	for {
		page := signaturesPage
		if limit > 0 {
			page = min(page, limit-len(out))
		}
		res, err := x.opts.Chain.RPC.GetSignaturesForAddressWithOpts(ctx, addr, &rpc.GetSignaturesForAddressOpts{
			Limit: &page, Before: before, Until: until, Commitment: rpc.CommitmentConfirmed,
		})
		if err != nil {
			return nil, fmt.Errorf("getSignaturesForAddress %s: %w", addr, err)
		}
		out = append(out, res...)
		if len(res) < page || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		before = res[len(res)-1].Signature
	}
}

// chronological turns a newest-first listing into the successful
// transactions' signatures, oldest first.
func chronological(sigs []*rpc.TransactionSignature) []solana.Signature {
	var out []solana.Signature
	for _, s := range slices.Backward(sigs) {
		if s.Err == nil {
			out = append(out, s.Signature)
		}
	}
	return out
}

// relist finds the program's runs: new ones are added (with their
// Treasurer run, if any), closed ones dropped. It returns every run.
func (x *Indexer) relist(ctx context.Context) ([]*runData, error) {
	listed, err := x.opts.Coordinator.ListRuns(ctx, x.opts.Chain)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	known := x.runs
	x.mu.Unlock()
	runs := map[string]*runData{}
	for _, l := range listed {
		rd := known[l.Instance.RunId]
		if rd == nil || !rd.run.Account.Equals(l.Run.Account) {
			rd = &runData{id: l.Instance.RunId, run: l.Run, inst: l.Instance}
			if rd.treasury, err = x.findTreasury(ctx, l.Instance); err != nil {
				return nil, err
			}
		}
		runs[rd.id] = rd
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(runs) != len(x.runs) || !sameRuns(runs, x.runs) {
		x.runs = runs
		x.byAcct = map[solana.PublicKey]*runData{}
		for _, rd := range runs {
			x.byAcct[rd.run.Account] = rd
		}
		x.notifyLocked()
	}
	all := make([]*runData, 0, len(runs))
	for _, rd := range runs {
		all = append(all, rd)
	}
	return all, nil
}

func sameRuns(a, b map[string]*runData) bool {
	for id, rd := range a {
		if b[id] != rd {
			return false
		}
	}
	return true
}

// findTreasury finds the Treasurer run that is inst's main authority, if any.
func (x *Indexer) findTreasury(ctx context.Context, inst *coordinator.Instance) (*treasury, error) {
	if x.tp.ID.IsZero() {
		return nil, nil
	}
	data, owner, err := x.opts.Chain.AccountData(ctx, inst.MainAuthority)
	switch {
	case errors.Is(err, chain.ErrAccountNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case !owner.Equals(x.tp.ID):
		return nil, nil
	}
	acc, err := tbindings.ParseAccount_Run(data)
	if err != nil {
		return nil, nil // some other account of the program
	}
	run, _, err := x.tp.OpenRunAt(ctx, x.opts.Chain, acc.Index, inst.RunId)
	if errors.Is(err, treasurer.ErrOtherRun) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &treasury{run: run}, nil
}

// multipleAccountsPage is getMultipleAccounts's largest request.
const multipleAccountsPage = 100

// refresh re-reads the runs' coordinator accounts (in few requests) and
// Treasurer runs.
func (x *Indexer) refresh(ctx context.Context, runs []*runData) error {
	for page := range slices.Chunk(runs, multipleAccountsPage) {
		keys := make([]solana.PublicKey, len(page))
		for i, rd := range page {
			keys[i] = rd.run.Account
		}
		res, err := x.opts.Chain.RPC.GetMultipleAccountsWithOpts(ctx, keys, &rpc.GetMultipleAccountsOpts{
			Encoding: solana.EncodingBase64, Commitment: rpc.CommitmentConfirmed,
		})
		if err != nil {
			return fmt.Errorf("getMultipleAccounts: %w", err)
		}
		if len(res.Value) != len(page) {
			return fmt.Errorf("getMultipleAccounts: %d accounts for %d keys", len(res.Value), len(page))
		}
		for i, rd := range page {
			var s *coordinator.State
			err := fmt.Errorf("coordinator account %s: %w", rd.run.Account, chain.ErrAccountNotFound)
			if acc := res.Value[i]; acc != nil {
				if !acc.Owner.Equals(x.opts.Coordinator.ID) {
					err = fmt.Errorf("coordinator account %s is owned by %s: %w", rd.run.Account, acc.Owner, coordinator.ErrNotCoordinator)
				} else {
					s, err = coordinator.DecodeState(acc.Data.GetBinary())
				}
			}
			x.mu.Lock()
			if rd.setState(s, err) {
				x.notifyLocked()
			}
			x.mu.Unlock()
		}
	}
	var first error
	for _, rd := range runs {
		if rd.treasury == nil {
			continue
		}
		t, err := x.readTreasury(ctx, rd.treasury.run)
		if err != nil {
			first = cmp.Or(first, fmt.Errorf("run %q's Treasurer run: %w", rd.id, err))
			continue // the other runs still show
		}
		x.mu.Lock()
		if rd.setTreasury(t) {
			x.notifyLocked()
		}
		x.mu.Unlock()
	}
	return first
}

// readTreasury reads a Treasurer run: its account, token balance, mint and
// every Participant record.
func (x *Indexer) readTreasury(ctx context.Context, r treasurer.Run) (*treasury, error) {
	t := &treasury{run: r}
	var err error
	if _, t.acc, err = x.tp.Open(ctx, x.opts.Chain, r.Index); err != nil {
		return nil, err
	}
	held, err := treasurer.FetchTokenAccount(ctx, x.opts.Chain, r.Collateral)
	if err != nil {
		return nil, err
	}
	t.balance = held.Amount
	if t.mint, err = treasurer.FetchMint(ctx, x.opts.Chain, r.Mint); err != nil {
		return nil, err
	}
	res, err := x.opts.Chain.RPC.GetProgramAccountsWithOpts(ctx, x.tp.ID, &rpc.GetProgramAccountsOpts{
		Encoding: solana.EncodingBase64, Commitment: rpc.CommitmentConfirmed,
		Filters: []rpc.RPCFilter{
			{Memcmp: &rpc.RPCFilterMemcmp{Offset: 0, Bytes: solana.Base58(tbindings.Account_Participant[:])}},
			{Memcmp: &rpc.RPCFilterMemcmp{Offset: participantRunOffset, Bytes: solana.Base58(r.Address[:])}},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("listing the participants of %s: %w", r.Address, err)
	}
	t.participants = map[solana.PublicKey]*treasurer.Participant{}
	for _, acc := range res {
		if p, err := tbindings.ParseAccount_Participant(acc.Account.Data.GetBinary()); err == nil && p.Run.Equals(r.Address) {
			t.participants[p.User] = p
		}
	}
	return t, nil
}

// participantRunOffset is where a Participant account holds its Run: after
// the discriminator and the bump.
const participantRunOffset = 8 + 1

// fetchConcurrency bounds the getTransaction requests in flight.
const fetchConcurrency = 4

// fetchTransactions reads sigs' transactions, in sigs' order.
func (x *Indexer) fetchTransactions(ctx context.Context, sigs []solana.Signature) ([]*rpc.GetTransactionResult, error) {
	out := make([]*rpc.GetTransactionResult, len(sigs))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchConcurrency)
	for i, sig := range sigs {
		g.Go(func() error {
			var err error
			out[i], err = x.fetchTransaction(ctx, sig)
			return err
		})
	}
	return out, g.Wait()
}

// fetchTransaction reads one transaction, waiting briefly for one that a
// subscription announced before the node serves it.
func (x *Indexer) fetchTransaction(ctx context.Context, sig solana.Signature) (*rpc.GetTransactionResult, error) {
	version := uint64(0)
	for attempt := 0; ; attempt++ {
		tx, err := x.opts.Chain.RPC.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{
			Encoding: solana.EncodingBase64, Commitment: rpc.CommitmentConfirmed, MaxSupportedTransactionVersion: &version,
		})
		if err == nil && tx != nil && tx.Transaction != nil {
			return tx, nil
		}
		if (err != nil && !errors.Is(err, rpc.ErrNotFound)) || attempt == 4 {
			return nil, fmt.Errorf("getTransaction %s: %v", sig, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
