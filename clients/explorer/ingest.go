package explorer

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	bindings "github.com/psyche-go/psyche/clients/bindings/coordinator"
	"github.com/psyche-go/psyche/clients/chain"
)

// unread fetches and decodes the transactions of sigs that seen does not
// hold yet, in order (marking them is the caller's, once recorded).
func (x *Indexer) unread(ctx context.Context, seen *sigSet, sigs []solana.Signature) ([]*txData, error) {
	var todo []solana.Signature
	for _, s := range sigs {
		if !seen.has(s) {
			todo = append(todo, s)
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	res, err := x.fetchTransactions(ctx, todo)
	if err != nil {
		return nil, err
	}
	txs := make([]*txData, 0, len(res))
	for i, r := range res {
		tx, err := decodeTx(todo[i], r)
		if err != nil {
			return nil, err
		}
		txs = append(txs, tx)
	}
	return txs, nil
}

// ingest reads the transactions of sigs not read yet (oldest first),
// records what they hold in the runs they touch, and re-reads those runs.
func (x *Indexer) ingest(ctx context.Context, sigs []solana.Signature) error {
	txs, err := x.unread(ctx, x.seen, sigs)
	if err != nil || len(txs) == 0 {
		return err
	}
	if x.mentionsUnknownRun(txs) {
		if _, err := x.relist(ctx); err != nil {
			return err
		}
	}
	touched := map[*runData]bool{}
	x.mu.Lock()
	for _, tx := range txs {
		x.seen.add(tx.sig)
		if !tx.failed {
			x.recordLocked(tx, touched)
		}
	}
	x.notifyLocked()
	x.mu.Unlock()
	runs := make([]*runData, 0, len(touched))
	for rd := range touched {
		runs = append(runs, rd)
	}
	return x.refresh(ctx, runs)
}

// txData is what the explorer reads from one transaction.
type txData struct {
	sig    solana.Signature
	at     Activity
	keys   []solana.PublicKey // static keys, then loaded writable and read-only ones
	ixs    []solana.CompiledInstruction
	logs   []string
	failed bool
}

func decodeTx(sig solana.Signature, r *rpc.GetTransactionResult) (*txData, error) {
	tx, err := r.Transaction.GetTransaction()
	if err != nil {
		return nil, fmt.Errorf("transaction %s: %w", sig, err)
	}
	d := &txData{sig: sig, at: Activity{Slot: r.Slot, Signature: sig.String()}, ixs: tx.Message.Instructions}
	if r.BlockTime != nil {
		d.at.Time = int64(*r.BlockTime)
	}
	d.keys = append(d.keys, tx.Message.AccountKeys...)
	if r.Meta != nil {
		d.keys = append(append(d.keys, r.Meta.LoadedAddresses.Writable...), r.Meta.LoadedAddresses.ReadOnly...)
		d.logs, d.failed = r.Meta.LogMessages, r.Meta.Err != nil
	}
	return d, nil
}

// key is the account at index i of the transaction (zero when out of range).
func (d *txData) key(i uint16) solana.PublicKey {
	if int(i) < len(d.keys) {
		return d.keys[i]
	}
	return solana.PublicKey{}
}

// runOfLocked is the known run whose coordinator account instruction ix
// lists, if any (x.mu held).
func (x *Indexer) runOfLocked(d *txData, ix solana.CompiledInstruction) *runData {
	for _, a := range ix.Accounts {
		if rd := x.byAcct[d.key(a)]; rd != nil {
			return rd
		}
	}
	return nil
}

// mentionsUnknownRun says whether a Coordinator or Treasurer instruction
// names no known run: a run was created (or closed) since the last listing.
func (x *Indexer) mentionsUnknownRun(txs []*txData) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, d := range txs {
		for _, ix := range d.ixs {
			p := d.key(ix.ProgramIDIndex)
			if !d.failed && (p.Equals(x.opts.Coordinator.ID) || p.Equals(x.tp.ID)) && x.runOfLocked(d, ix) == nil {
				return true
			}
		}
	}
	return false
}

// recordLocked adds what d holds to the runs its instructions name: its
// time, witness reports (instruction data) and the events the Coordinator
// logged while running each instruction (x.mu held).
func (x *Indexer) recordLocked(d *txData, touched map[*runData]bool) {
	d.eachInstruction(x.opts.Coordinator.ID, func(ix solana.CompiledInstruction, program solana.PublicKey, lines []string) {
		rd := x.runOfLocked(d, ix)
		if rd == nil {
			return
		}
		touched[rd] = true
		rd.touch(d.at)
		if program.Equals(x.opts.Coordinator.ID) && bytes.HasPrefix(ix.Data, bindings.Instruction_Witness[:]) && len(ix.Accounts) > 0 {
			if w, err := bindings.UnmarshalWitnessParams(ix.Data[8:]); err == nil {
				rd.addReport(witnessReport{step: w.Step, index: w.Index, signer: d.key(ix.Accounts[0]), meta: w.Metadata, at: d.at})
			}
		}
		for _, data := range chain.EventData(lines) {
			if ev, err := bindings.ParseAnyEvent(data); err == nil {
				rd.addEvent(ev, d.at)
			}
		}
	})
}

// eachInstruction calls f with each top-level instruction of d, the
// program it invokes, and the log lines author wrote while running it
// (logSegments: none when author did not run).
func (d *txData) eachInstruction(author solana.PublicKey, f func(ix solana.CompiledInstruction, program solana.PublicKey, lines []string)) {
	segments := logSegments(d.logs, author)
	for _, ix := range d.ixs {
		program := d.key(ix.ProgramIDIndex)
		// Precompiles (ed25519 proofs) log nothing: a segment belongs to
		// the next instruction of the program it names.
		var lines []string
		if len(segments) > 0 && segments[0].program == program.String() {
			lines, segments = segments[0].lines, segments[1:]
		}
		f(ix, program, lines)
	}
}

// logSegment is the logs of one top-level instruction: the program it
// invoked, and the lines that author wrote itself.
type logSegment struct {
	program string
	lines   []string
}

// logSegments splits a transaction's logs by top-level instruction,
// keeping the lines author wrote (not the programs it called, nor those
// that called it): logs are written by whichever program runs, so an event
// is the Coordinator's only if the Coordinator was running when it was
// logged.
func logSegments(logs []string, author solana.PublicKey) []logSegment {
	id := author.String()
	var out []logSegment
	var stack []string
	for _, l := range logs {
		rest, ok := strings.CutPrefix(l, "Program ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		switch {
		case len(f) == 3 && f[1] == "invoke":
			if f[2] == "[1]" {
				out, stack = append(out, logSegment{program: f[0]}), stack[:0]
			}
			stack = append(stack, f[0])
			continue
		case len(f) >= 2 && (f[1] == "success" || f[1] == "failed:") && len(stack) > 0 && stack[len(stack)-1] == f[0]:
			stack = stack[:len(stack)-1]
			continue
		}
		if len(stack) > 0 && stack[len(stack)-1] == id {
			out[len(out)-1].lines = append(out[len(out)-1].lines, l)
		}
	}
	return out
}

// sigSet remembers the newest signatures read, so that each transaction is
// read once whichever way (subscription, polling, backfill) it arrives.
type sigSet struct {
	max   int
	set   map[solana.Signature]bool
	order []solana.Signature
}

func newSigSet(max int) *sigSet { return &sigSet{max: max, set: map[solana.Signature]bool{}} }

func (s *sigSet) has(sig solana.Signature) bool { return s.set[sig] }

func (s *sigSet) add(sig solana.Signature) {
	if s.set[sig] {
		return
	}
	s.set[sig] = true
	s.order = append(s.order, sig)
	if len(s.order) > s.max {
		delete(s.set, s.order[0])
		s.order = s.order[1:]
	}
}
