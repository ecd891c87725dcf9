package competition

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	"github.com/psyche-go/psyche/clients/bindings/competition"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/competition/evaluate"
	"github.com/psyche-go/psyche/clients/competition/rules"
	"github.com/psyche-go/psyche/clients/treasurer"
)

// List returns every competition of the program.
func (p Program) List(ctx context.Context, c *chain.Client) ([]Competition, error) {
	res, err := c.RPC.GetProgramAccountsWithOpts(ctx, p.ID, &rpc.GetProgramAccountsOpts{
		Encoding:   solana.EncodingBase64,
		Commitment: rpc.CommitmentConfirmed,
		Filters:    []rpc.RPCFilter{{Memcmp: &rpc.RPCFilterMemcmp{Offset: 0, Bytes: solana.Base58(competition.Account_Competition[:])}}},
	})
	if err != nil {
		return nil, fmt.Errorf("listing the competitions of %s: %w", p.ID, err)
	}
	var out []Competition
	for _, a := range res {
		acc, err := competition.ParseAccount_Competition(a.Account.Data.GetBinary())
		if err != nil {
			continue // the filter is only a prefix match
		}
		k := Competition{Program: p, Address: a.Pubkey, ID: acc.Id, Board: acc.Board}
		if !acc.RewardMint.IsZero() {
			k.Mint, k.TokenProgram, k.Pool = acc.RewardMint, acc.TokenProgram, acc.Pool
		}
		out = append(out, k)
	}
	return out, nil
}

// Summary is a competition as `competition show` prints it and the explorer
// serves it: its settings, pool, round, entries and validators.
type Summary struct {
	ID          string `json:"id"`
	Address     string `json:"address"`
	Board       string `json:"board"`
	Authority   string `json:"authority"`
	Paused      bool   `json:"paused"`
	Closed      bool   `json:"closed"`
	CreatedSlot uint64 `json:"created_slot"`

	Architecture     string `json:"architecture"`
	MaxParams        uint64 `json:"max_params"`
	SeqLen           uint32 `json:"seq_len"`
	Precision        string `json:"precision"`
	TokenizerHash    string `json:"tokenizer_hash"`
	DataRoot         string `json:"data_root"`
	DataLocation     string `json:"data_location"`
	SequencesPerPage uint32 `json:"sequences_per_page"`

	EpsilonStartPPM   uint32  `json:"epsilon_start_ppm"`
	EpsilonEndPPM     uint32  `json:"epsilon_end_ppm"`
	EpsilonDecaySlots uint64  `json:"epsilon_decay_slots"`
	PagesPerRound     uint16  `json:"pages_per_round"`
	Temperature       float64 `json:"temperature"`
	RoundSlots        uint64  `json:"round_slots"`
	Quorum            uint8   `json:"quorum"`
	Permissioned      bool    `json:"permissioned"`
	ValidatorStake    uint64  `json:"validator_stake"`

	Pool *PoolSummary `json:"pool,omitempty"`

	Round      RoundSummary       `json:"round"`
	Entries    []EntrySummary     `json:"entries"`
	Validators []ValidatorSummary `json:"validators"`
}

// PoolSummary is the reward pool: what it holds, what it must keep
// (claims owed, stakes, forfeited stakes not burned yet) and the rest.
type PoolSummary struct {
	Mint           string `json:"mint"`
	Account        string `json:"account"`
	Balance        uint64 `json:"balance"`
	RewardPerRound uint64 `json:"reward_per_round"`
	Unclaimed      uint64 `json:"unclaimed"`
	Stakes         uint64 `json:"stakes"`
	Forfeited      uint64 `json:"forfeited"`
	Withdrawable   uint64 `json:"withdrawable"`
	TotalPaid      uint64 `json:"total_paid"`
	TotalBurned    uint64 `json:"total_burned"`
}

type RoundSummary struct {
	Number      uint64        `json:"number"`
	Phase       string        `json:"phase"`
	OpenSlot    uint64        `json:"open_slot"`
	SeedSlot    uint64        `json:"seed_slot"`
	Seed        string        `json:"seed,omitempty"`
	Deadline    uint64        `json:"deadline_slot,omitempty"`
	Eligible    []int         `json:"eligible"`
	Pages       uint16        `json:"pages"`
	Quorum      uint8         `json:"quorum"`
	Votes       []VoteSummary `json:"votes"`
	FinalDigest string        `json:"final_digest,omitempty"`
	Paid        uint64        `json:"paid"`
}

type VoteSummary struct {
	Validator string `json:"validator"`
	Digest    string `json:"digest"`
	// Agrees: the digest is the round's final one (only once final).
	Agrees *bool `json:"agrees,omitempty"`
}

type EntrySummary struct {
	Index    int    `json:"index"`
	Miner    string `json:"miner"`
	Slot     uint64 `json:"slot"`
	PrevSlot uint64 `json:"prev_slot,omitempty"`
	Excluded bool   `json:"excluded"`
	// Wins and Weight are of the last final round the entry was in.
	Wins      uint16  `json:"wins"`
	Weight    float64 `json:"weight"`
	Earned    uint64  `json:"earned"`
	Claimed   uint64  `json:"claimed"`
	Claimable uint64  `json:"claimable"`
	Repo      string  `json:"repo,omitempty"`
	Revision  string  `json:"revision,omitempty"`
	Params    uint64  `json:"params,omitempty"`
}

type ValidatorSummary struct {
	Key    string `json:"key"`
	Stake  uint64 `json:"stake"`
	Status string `json:"status"`
	Votes  uint32 `json:"votes"`
	Faults uint32 `json:"faults"`
}

// PoolBalance is the reward pool's balance and what of it nobody is owed
// (the program's reserve: unclaimed rewards, stakes, forfeited stakes), what
// competition_withdraw may take.
func (k Competition) PoolBalance(ctx context.Context, c *chain.Client, acc *Account) (balance, withdrawable uint64, err error) {
	ta, err := treasurer.FetchTokenAccount(ctx, c, k.Pool)
	if err != nil {
		return 0, 0, fmt.Errorf("the reward pool: %w", err)
	}
	reserve := acc.Unclaimed + acc.Stakes + acc.Forfeited
	return ta.Amount, ta.Amount - min(ta.Amount, reserve), nil
}

var validatorStatus = map[uint8]string{ValidatorActive: "active", ValidatorLeft: "left", ValidatorFaulted: "faulted"}

// Summarize reads the competition's accounts and each entry's submission.
func (k Competition) Summarize(ctx context.Context, c *chain.Client) (*Summary, error) {
	acc, err := k.Account(ctx, c)
	if err != nil {
		return nil, err
	}
	b, err := k.ReadBoard(ctx, c)
	if err != nil {
		return nil, err
	}
	arch, prec := fmt.Sprint(acc.Architecture), fmt.Sprint(acc.Precision)
	if a, err := evaluate.ArchitectureOf(acc.Architecture); err == nil {
		arch = a
	}
	if p, err := evaluate.PrecisionOf(acc.Precision); err == nil {
		prec = p
	}
	s := &Summary{
		ID: acc.Id, Address: k.Address.String(), Board: k.Board.String(), Authority: acc.Authority.String(),
		Paused: acc.Paused, Closed: acc.Closed, CreatedSlot: acc.CreatedSlot,
		Architecture: arch, MaxParams: acc.MaxParams, SeqLen: acc.SeqLen, Precision: prec,
		TokenizerHash: hex.EncodeToString(acc.TokenizerHash[:]), DataRoot: hex.EncodeToString(acc.DataRoot[:]),
		DataLocation: acc.DataLocation, SequencesPerPage: acc.SequencesPerPage,
		EpsilonStartPPM: acc.EpsilonStartPpm, EpsilonEndPPM: acc.EpsilonEndPpm, EpsilonDecaySlots: acc.EpsilonDecaySlots,
		PagesPerRound: acc.PagesPerRound, Temperature: float64(acc.TemperaturePpm) / 1e6, RoundSlots: acc.RoundSlots,
		Quorum: acc.Quorum, Permissioned: acc.Permissioned, ValidatorStake: acc.ValidatorStake,
	}
	if k.HasPool() {
		balance, withdrawable, err := k.PoolBalance(ctx, c, acc)
		if err != nil {
			return nil, err
		}
		s.Pool = &PoolSummary{Mint: k.Mint.String(), Account: k.Pool.String(), Balance: balance, RewardPerRound: acc.RewardPerRound,
			Unclaimed: acc.Unclaimed, Stakes: acc.Stakes, Forfeited: acc.Forfeited, Withdrawable: withdrawable,
			TotalPaid: acc.TotalPaid, TotalBurned: acc.TotalBurned}
	}
	r := b.Round
	s.Round = RoundSummary{Number: r.Number, Phase: Phase(r.State).String(), OpenSlot: r.OpenSlot, SeedSlot: r.SeedSlot,
		Pages: r.Pages, Quorum: r.Quorum, Paid: r.Paid, Eligible: []int{}, Votes: []VoteSummary{}}
	if Phase(r.State) >= PhaseEvaluating {
		s.Round.Seed, s.Round.Deadline = hex.EncodeToString(r.Seed[:]), r.DeadlineSlot
	}
	for i := range int(r.Entries) {
		if rules.Bit(r.Eligible, i) {
			s.Round.Eligible = append(s.Round.Eligible, i)
		}
	}
	final := Phase(r.State) == PhaseFinal
	if final {
		s.Round.FinalDigest = hex.EncodeToString(r.FinalDigest[:])
	}
	for _, v := range r.Votes[:r.VoteCount] {
		vs := VoteSummary{Validator: b.Validators[v.Validator].Key.String(), Digest: hex.EncodeToString(v.Digest[:])}
		if final {
			agrees := v.Digest == r.FinalDigest
			vs.Agrees = &agrees
		}
		s.Round.Votes = append(s.Round.Votes, vs)
	}
	for i := range int(b.SubmissionCount) {
		e := b.Submissions[i]
		es := EntrySummary{Index: i, Miner: e.Miner.String(), Slot: e.Slot, PrevSlot: e.PrevSlot, Excluded: e.Status == EntryExcluded,
			Wins: e.Wins, Weight: float64(e.Weight) / float64(rules.WeightOne), Earned: e.Earned, Claimed: e.Claimed, Claimable: e.Earned - min(e.Claimed, e.Earned)}
		sub, err := k.ReadSubmission(ctx, c, e.Miner)
		if err != nil {
			return nil, err
		}
		if sub != nil {
			es.Repo, es.Revision, es.Params = sub.Current.Repo, hex.EncodeToString(sub.Current.Revision[:]), sub.Current.Params
		}
		s.Entries = append(s.Entries, es)
	}
	for i := range int(b.ValidatorCount) {
		v := b.Validators[i]
		s.Validators = append(s.Validators, ValidatorSummary{Key: v.Key.String(), Stake: v.Stake, Status: validatorStatus[v.Status], Votes: v.Votes, Faults: v.Faults})
	}
	return s, nil
}
