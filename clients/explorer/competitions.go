package explorer

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"sort"

	"github.com/gagliardetto/solana-go"

	cbindings "github.com/psyche-go/psyche/clients/bindings/competition"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/competition"
)

// The Competition program's competitions (programs/competition): the
// indexer lists them (competition.Program.List) and reads each with
// competition.Competition.Summarize at start, at every resync and after
// each of its transactions; from the transactions themselves (read once
// each: the competition's newest Options.History at start, then the
// program's new ones at every poll) it keeps the rounds' history: each
// round_vote's wins, table hash and invalid entries (instruction data),
// and the outcomes the program logged (RoundOpened, RoundSeeded,
// VoteCast, RoundFinalized, RoundExpired, ValidatorFaulted), from which
// the views (compview.go) rebuild every final round's weights and payouts
// with clients/competition/rules.

// Bounds on the history kept per competition: the newest entries are kept.
const (
	maxCompRounds  = 256
	maxCompEvents  = 256
	maxCompFaults  = 256
	maxCompCommits = 64 // per entry
	maxTempChanges = 64
)

// compData is what the indexer knows of one competition.
type compData struct {
	k       competition.Competition
	summary *competition.Summary // nil until read
	readErr string               // why the last read failed
	last    Activity
	// seq numbers what was recorded (instructions and events, in the
	// chain's order), to tell what came before what.
	seq     uint64
	rounds  []*compRound        // by number
	commits map[uint16][]uint64 // each entry's commits (seq)
	temps   []tempChange        // temperature settings (competition_create, competition_update)
	faults  []CompetitionFault
	events  []EventView
	view    cached
	// backfilled: its newest History transactions were read (Run's
	// goroutine only).
	backfilled bool
}

// tempChange is an instruction that set the competition's temperature.
type tempChange struct {
	seq uint64
	ppm uint32
}

// compRound is what the transactions read say of one round.
type compRound struct {
	number uint64
	// From RoundOpened: when, with how many entries, how many eligible.
	opened   *Activity
	openSeq  uint64
	openSlot uint64
	entries  uint16
	eligible uint16
	// From RoundSeeded.
	seeded   bool
	seed     [32]byte
	seedSlot uint64
	deadline uint64
	votes    []compVote
	final    *compFinal
	expired  *Activity
	faulted  []solana.PublicKey
}

// compVote is a round_vote instruction and its VoteCast event.
type compVote struct {
	validator solana.PublicKey
	tableHash [32]byte
	wins      []uint16
	invalid   [32]byte
	cast      *[32]byte // the digest VoteCast logged
	at        Activity
}

// compFinal is a RoundFinalized event.
type compFinal struct {
	digest   [32]byte
	paid     uint64
	credited uint64
	agreeing uint8
	at       Activity
	seq      uint64
}

// errNoCompetition is returned by the views for a competition id the
// indexer does not know.
var errNoCompetition = errors.New("no such competition")

func (cd *compData) touch(at Activity) {
	if at.Slot >= cd.last.Slot {
		cd.last = at
	}
}

// round is the record of round n, made if need be; nil when n is older
// than every round kept.
func (cd *compData) round(n uint64) *compRound {
	i := sort.Search(len(cd.rounds), func(i int) bool { return cd.rounds[i].number >= n })
	if i < len(cd.rounds) && cd.rounds[i].number == n {
		return cd.rounds[i]
	}
	if i == 0 && len(cd.rounds) >= maxCompRounds {
		return nil
	}
	r := &compRound{number: n}
	cd.rounds = insertSorted(cd.rounds, r, func(r *compRound) uint64 { return r.number }, maxCompRounds)
	return r
}

// setSummary records a read of the competition; it says whether anything
// shown changed.
func (cd *compData) setSummary(s *competition.Summary, err error) bool {
	if err != nil {
		changed := cd.readErr != err.Error()
		cd.readErr = err.Error()
		return changed
	}
	changed := cd.readErr != "" || !reflect.DeepEqual(cd.summary, s)
	cd.summary, cd.readErr = s, ""
	return changed
}

// instruction records an instruction of the program on the competition:
// a vote's ballot, a temperature set by competition_create or _update.
func (cd *compData) instruction(data []byte, signer solana.PublicKey, at Activity) {
	if len(data) < 8 {
		return
	}
	cd.seq++
	switch d := [8]byte(data[:8]); d {
	case cbindings.Instruction_RoundVote:
		p, err := cbindings.UnmarshalRoundVoteParams(data[8:])
		if err != nil {
			return
		}
		if r := cd.round(p.Round); r != nil {
			r.votes = append(r.votes, compVote{validator: signer, tableHash: p.TableHash, wins: p.Wins, invalid: p.Invalid, at: at})
		}
	case cbindings.Instruction_CompetitionCreate:
		if p, err := cbindings.UnmarshalCompetitionCreateParams(data[8:]); err == nil {
			cd.setTemperature(p.TemperaturePpm)
		}
	case cbindings.Instruction_CompetitionUpdate:
		if p, err := cbindings.UnmarshalCompetitionUpdateParams(data[8:]); err == nil && p.TemperaturePpm != nil {
			cd.setTemperature(*p.TemperaturePpm)
		}
	}
}

func (cd *compData) setTemperature(ppm uint32) {
	cd.temps = append(cd.temps, tempChange{seq: cd.seq, ppm: ppm})
	if len(cd.temps) > maxTempChanges {
		cd.temps = cd.temps[1:]
	}
}

// addEvent files one of the program's events: the rounds' own events
// make the rounds, the rest are listed.
func (cd *compData) addEvent(ev any, at Activity) {
	cd.seq++
	switch ev := ev.(type) {
	case *cbindings.RoundOpened:
		if r := cd.round(ev.Round); r != nil {
			r.opened, r.openSeq, r.openSlot, r.entries, r.eligible = &at, cd.seq, ev.OpenSlot, ev.Entries, ev.Eligible
		}
	case *cbindings.RoundSeeded:
		if r := cd.round(ev.Round); r != nil {
			r.seeded, r.seed, r.seedSlot, r.deadline = true, ev.Seed, ev.SeedSlot, ev.DeadlineSlot
		}
	case *cbindings.VoteCast:
		if r := cd.round(ev.Round); r != nil {
			for i := len(r.votes) - 1; i >= 0; i-- {
				if v := &r.votes[i]; v.validator.Equals(ev.Validator) && v.cast == nil {
					digest := ev.Digest
					v.cast = &digest
					break
				}
			}
		}
	case *cbindings.RoundFinalized:
		if r := cd.round(ev.Round); r != nil {
			r.final = &compFinal{digest: ev.Digest, paid: ev.Paid, credited: ev.Credited, agreeing: ev.Agreeing, at: at, seq: cd.seq}
		}
	case *cbindings.RoundExpired:
		if r := cd.round(ev.Round); r != nil {
			r.expired = &at
		}
		cd.listEvent("RoundExpired", fmt.Sprintf("round %d expired: no digest reached the quorum by its deadline; nothing paid", ev.Round), ev, at)
	case *cbindings.ValidatorFaulted:
		if r := cd.round(ev.Round); r != nil {
			r.faulted = append(r.faulted, ev.Validator)
		}
		cd.faults = append(cd.faults, CompetitionFault{Activity: at, Round: ev.Round, Validator: ev.Validator.String(), Forfeited: ev.Forfeited})
		if len(cd.faults) > maxCompFaults {
			cd.faults = cd.faults[1:]
		}
		cd.listEvent("ValidatorFaulted", describeComp(ev), ev, at)
	case *cbindings.SubmissionCommitted:
		c := append(cd.commits[ev.Index], cd.seq)
		if len(c) > maxCompCommits {
			c = c[1:]
		}
		cd.commits[ev.Index] = c
		cd.listEvent("SubmissionCommitted", describeComp(ev), ev, at)
	default:
		cd.listEvent(reflect.TypeOf(ev).Elem().Name(), describeComp(ev), ev, at)
	}
}

// listEvent adds an event to the competition's list.
func (cd *compData) listEvent(name, text string, fields any, at Activity) {
	cd.events = insertSorted(cd.events, EventView{Activity: at, Name: name, Text: text, Data: mustJSON(fields)},
		func(e EventView) uint64 { return e.Activity.Slot }, maxCompEvents)
}

// describeComp says what an event of the program means, in a line.
func describeComp(ev any) string {
	switch ev := ev.(type) {
	case *cbindings.CompetitionCreated:
		return fmt.Sprintf("competition %q created by %s", ev.Id, ev.Authority)
	case *cbindings.SubmissionCommitted:
		return fmt.Sprintf("%s committed a model (entry %d, %d parameters, revision %s)", ev.Miner, ev.Index, ev.Params, hex.EncodeToString(ev.Revision[:]))
	case *cbindings.ValidatorJoined:
		return fmt.Sprintf("%s joined as validator %d, staking %d", ev.Validator, ev.Index, ev.Stake)
	case *cbindings.ValidatorLeft:
		return fmt.Sprintf("%s left (validator %d), its stake of %d returned", ev.Validator, ev.Index, ev.Stake)
	case *cbindings.ValidatorFaulted:
		return fmt.Sprintf("%s faulted in round %d: its vote disagreed with the final digest; stake of %d forfeited", ev.Validator, ev.Round, ev.Forfeited)
	case *cbindings.RewardsClaimed:
		return fmt.Sprintf("%s claimed %d", ev.Miner, ev.Amount)
	case *cbindings.StakesBurned:
		return fmt.Sprintf("%d of forfeited stakes burned", ev.Amount)
	case *cbindings.RewardsWithdrawn:
		return fmt.Sprintf("%d withdrawn to %s", ev.Amount, ev.Destination)
	case *cbindings.CompetitionClosed:
		return "competition closed"
	}
	return ""
}

// syncCompetitions lists the program's competitions and re-reads each;
// first, it also notes the program's newest transaction (polling for new
// ones resumes after it). A competition not read before has its newest
// History transactions read.
func (x *Indexer) syncCompetitions(ctx context.Context, first bool) error {
	if first {
		newest, err := x.signatures(ctx, x.cp.ID, solana.Signature{}, 1)
		if err != nil {
			return err
		}
		if len(newest) > 0 {
			x.compNewest = newest[0].Signature
		}
	}
	all, err := x.relistCompetitions(ctx, false)
	if err != nil {
		return err
	}
	for _, cd := range all {
		if cd.backfilled {
			continue
		}
		sigs, err := x.signatures(ctx, cd.k.Address, solana.Signature{}, x.opts.History)
		if err != nil {
			return err
		}
		if err := x.ingestCompetitions(ctx, chronological(sigs), false); err != nil {
			return err
		}
		cd.backfilled = true
	}
	return x.refreshCompetitions(ctx, all)
}

// pollCompetitions reads the program's transactions newer than the newest
// one read.
func (x *Indexer) pollCompetitions(ctx context.Context) error {
	sigs, err := x.signatures(ctx, x.cp.ID, x.compNewest, pollLimit)
	if err != nil || len(sigs) == 0 {
		return err
	}
	if err := x.ingestCompetitions(ctx, chronological(sigs), true); err != nil {
		return err
	}
	x.compNewest = sigs[0].Signature
	return nil
}

// relistCompetitions finds the program's competitions: new ones are added
// (backfilled says whether their history is to be read: not when the
// transactions at hand are all they have), closed ones kept (their
// account stays), vanished ones dropped. It returns every competition.
func (x *Indexer) relistCompetitions(ctx context.Context, backfilled bool) ([]*compData, error) {
	listed, err := x.cp.List(ctx, x.opts.Chain)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	comps := map[string]*compData{}
	changed := len(listed) != len(x.comps)
	for _, k := range listed {
		cd := x.comps[k.ID]
		if cd == nil || !cd.k.Address.Equals(k.Address) {
			cd, changed = &compData{k: k, commits: map[uint16][]uint64{}, backfilled: backfilled}, true
		}
		comps[k.ID] = cd
	}
	all := make([]*compData, 0, len(comps))
	for _, cd := range comps {
		all = append(all, cd)
	}
	if changed {
		x.comps = comps
		x.compByAddr = map[solana.PublicKey]*compData{}
		for _, cd := range comps {
			x.compByAddr[cd.k.Address] = cd
		}
		x.notifyLocked()
	}
	return all, nil
}

// ingestCompetitions reads the transactions of sigs not read yet (oldest
// first) and records what they hold in the competitions they name; with
// refresh, those competitions are then re-read.
func (x *Indexer) ingestCompetitions(ctx context.Context, sigs []solana.Signature, refresh bool) error {
	txs, err := x.unread(ctx, x.compSeen, sigs)
	if err != nil || len(txs) == 0 {
		return err
	}
	if x.mentionsUnknownCompetition(txs) {
		// Created since the last listing: these transactions are its history.
		if _, err := x.relistCompetitions(ctx, true); err != nil {
			return err
		}
	}
	touched := map[*compData]bool{}
	x.mu.Lock()
	for _, tx := range txs {
		x.compSeen.add(tx.sig)
		if !tx.failed {
			x.recordCompLocked(tx, touched)
		}
	}
	x.notifyLocked()
	x.mu.Unlock()
	if !refresh {
		return nil
	}
	comps := make([]*compData, 0, len(touched))
	for cd := range touched {
		comps = append(comps, cd)
	}
	return x.refreshCompetitions(ctx, comps)
}

// compOfLocked is the known competition whose account instruction ix
// lists, if any (x.mu held).
func (x *Indexer) compOfLocked(d *txData, ix solana.CompiledInstruction) *compData {
	for _, a := range ix.Accounts {
		if cd := x.compByAddr[d.key(a)]; cd != nil {
			return cd
		}
	}
	return nil
}

// mentionsUnknownCompetition says whether an instruction of the program
// names no known competition: one was created since the last listing.
func (x *Indexer) mentionsUnknownCompetition(txs []*txData) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, d := range txs {
		for _, ix := range d.ixs {
			if !d.failed && d.key(ix.ProgramIDIndex).Equals(x.cp.ID) && x.compOfLocked(d, ix) == nil {
				return true
			}
		}
	}
	return false
}

// recordCompLocked adds what d holds to the competitions its instructions
// of the program name: its time, the instruction (a vote's ballot, a
// temperature) and the events the program logged while running it (x.mu
// held).
func (x *Indexer) recordCompLocked(d *txData, touched map[*compData]bool) {
	d.eachInstruction(x.cp.ID, func(ix solana.CompiledInstruction, program solana.PublicKey, lines []string) {
		if !program.Equals(x.cp.ID) {
			return
		}
		cd := x.compOfLocked(d, ix)
		if cd == nil {
			return
		}
		touched[cd] = true
		cd.touch(d.at)
		var signer solana.PublicKey
		if len(ix.Accounts) > 0 {
			signer = d.key(ix.Accounts[0])
		}
		cd.instruction(ix.Data, signer, d.at)
		for _, data := range chain.EventData(lines) {
			if ev, err := cbindings.ParseAnyEvent(data); err == nil && eventCompetition(ev).Equals(cd.k.Address) {
				cd.addEvent(ev, d.at)
			}
		}
	})
}

// eventCompetition is the competition an event of the program names.
func eventCompetition(ev any) solana.PublicKey {
	if v := reflect.ValueOf(ev).Elem().FieldByName("Competition"); v.IsValid() {
		if k, ok := v.Interface().(solana.PublicKey); ok {
			return k
		}
	}
	return solana.PublicKey{}
}

// refreshCompetitions re-reads the competitions (Summarize); a closed one,
// whose board is gone, keeps what was last read, marked closed. It goes on
// past a failure and returns the first.
func (x *Indexer) refreshCompetitions(ctx context.Context, comps []*compData) error {
	var first error
	for _, cd := range comps {
		s, err := cd.k.Summarize(ctx, x.opts.Chain)
		if err != nil {
			s, err = x.closedSummary(ctx, cd, err)
		}
		x.mu.Lock()
		if cd.setSummary(s, err) {
			x.notifyLocked()
		}
		x.mu.Unlock()
		if err != nil {
			first = cmp.Or(first, fmt.Errorf("competition %q: %w", cd.k.ID, err))
		}
	}
	return first
}

// closedSummary is the summary of a competition that Summarize could not
// read (failed): when it is closed (its board is gone), what was last read
// of it, marked closed; else failed.
func (x *Indexer) closedSummary(ctx context.Context, cd *compData, failed error) (*competition.Summary, error) {
	acc, err := cd.k.Account(ctx, x.opts.Chain)
	if err != nil || !acc.Closed {
		return nil, failed
	}
	x.mu.Lock()
	prev := cd.summary
	x.mu.Unlock()
	s := &competition.Summary{ID: acc.Id, Address: cd.k.Address.String(), Board: acc.Board.String(), Authority: acc.Authority.String(),
		CreatedSlot: acc.CreatedSlot, Entries: []competition.EntrySummary{}, Validators: []competition.ValidatorSummary{}}
	if prev != nil {
		c := *prev
		s = &c
	}
	s.Closed, s.Paused = true, acc.Paused
	if s.Pool != nil {
		pool := *s.Pool
		pool.TotalPaid, pool.TotalBurned, pool.Unclaimed, pool.Stakes, pool.Forfeited = acc.TotalPaid, acc.TotalBurned, acc.Unclaimed, acc.Stakes, acc.Forfeited
		s.Pool = &pool
	}
	return s, nil
}
