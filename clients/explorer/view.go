package explorer

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/treasurer"
)

// The API's JSON (server.go). Floats read from the chain are status.Float:
// a NaN loss a witness published is "NaN", not a broken document.

// RunList is GET /api/runs: every run, the most recently active first.
type RunList struct {
	// Source is how the indexer hears of changes: SourceWebsocket or SourcePolling.
	Source string `json:"source"`
	// Error is the last failure to read the chain ("" when reads work);
	// ErrorSince is when reads started failing (unix seconds; 0 when they
	// work). The data shown is the last read.
	Error      string       `json:"error,omitempty"`
	ErrorSince int64        `json:"error_since,omitempty"`
	Runs       []RunSummary `json:"runs"`
}

// RunSummary is one run in the list.
type RunSummary struct {
	RunID   string `json:"run_id"`
	Account string `json:"coordinator_account"`
	// State is the phase (coordinator.RunState's names), "" until read.
	State      string `json:"state"`
	StateError string `json:"state_error,omitempty"`
	Epoch      uint32 `json:"epoch"`
	// Step is the round's step the run is at; once every step is done
	// (Cooldown, Finished), the last one, total_steps.
	Step         uint32         `json:"step"`
	Members      int            `json:"members"`
	Config       *ConfigSummary `json:"config"` // null until configured
	LastActivity *Activity      `json:"last_activity"`
	Treasurer    bool           `json:"treasurer"`
}

// ConfigSummary is what a run trains and how.
type ConfigSummary struct {
	Name         string `json:"name"`
	Architecture string `json:"architecture"`
	// Precision is the run's numeric contract: "fp32" or "mx8".
	Precision string `json:"precision"`
	// GradShards is the number of token shards a step's gradients are
	// summed over (1 to 64).
	GradShards int    `json:"grad_shards"`
	Parameters uint64 `json:"parameters"` // 0: not given in the run's metadata
	Layers     uint16 `json:"layers"`
	Width      uint32 `json:"width"`
	SeqLen     uint32 `json:"seq_len"`
	BatchStart uint16 `json:"batch_start"`
	BatchEnd   uint16 `json:"batch_end"`
	TotalSteps uint32 `json:"total_steps"`
	// Mode is the optimizer ("distro", "sparseloco"), with its inner steps
	// per round and whether rounds overlap.
	Mode         string `json:"mode"`
	InnerSteps   uint32 `json:"inner_steps"`
	Overlap      bool   `json:"overlap"`
	MinClients   uint16 `json:"min_clients"`
	Verification uint8  `json:"verification_percent"`
}

// Activity is a transaction: where and when it landed.
type Activity struct {
	Slot      uint64 `json:"slot"`
	Time      int64  `json:"time"` // unix seconds; 0 when the node does not say
	Signature string `json:"signature"`
}

// RunDetail is GET /api/runs/{id}.
type RunDetail struct {
	Source     string `json:"source"`
	Error      string `json:"error,omitempty"`
	ErrorSince int64  `json:"error_since,omitempty"`
	RunSummary
	Instance      string `json:"instance"`
	MainAuthority string `json:"main_authority"`
	JoinAuthority string `json:"join_authority"`
	Description   string `json:"description"`
	ClientVersion string `json:"client_version"`
	PendingPause  bool   `json:"pending_pause"`
	// PhaseStart and Deadline (unix seconds, by the chain's clock) time the
	// phase; Deadline is 0 for phases without a timer.
	PhaseStart   int64          `json:"phase_start"`
	Deadline     int64          `json:"deadline"`
	MemberList   []MemberView   `json:"member_list"`
	Rounds       []RoundView    `json:"rounds"`
	Loss         []LossPoint    `json:"loss"`
	Evals        []EvalPoint    `json:"evals"`
	Prompts      []PromptPoint  `json:"prompts"`
	Timeline     []PhaseChange  `json:"timeline"`
	Events       []EventView    `json:"events"`
	Verification map[string]any `json:"verification"`
	Treasury     *TreasuryView  `json:"treasury"`
}

// MemberView is a registered client: a member of the epoch (by index) or
// one waiting for the next.
type MemberView struct {
	Index  *int   `json:"index"` // in the epoch; null when not in it
	Signer string `json:"signer"`
	// State is healthy, dropped, left or faulted in the epoch; pending
	// (joins when the next epoch forms) or registered (holds points) otherwise.
	State        string `json:"state"`
	Earned       uint64 `json:"earned"`
	Slashed      uint64 `json:"slashed"`
	Unvested     uint64 `json:"unvested"`
	Burned       uint64 `json:"burned"`
	HasFault     bool   `json:"has_fault"`
	OpenDisputes uint8  `json:"open_disputes"`
	// With a Treasurer run: points claimed, what a claim would pay now,
	// and the join deposit held.
	Claimed   *uint64 `json:"claimed,omitempty"`
	Claimable *uint64 `json:"claimable,omitempty"`
	Deposit   *uint64 `json:"deposit,omitempty"`
}

// RoundView is a round the Coordinator still stores, the current one first.
type RoundView struct {
	Step              uint32        `json:"step"`
	Height            uint32        `json:"height"`
	Current           bool          `json:"current"`
	Clients           uint16        `json:"clients"`
	BatchSize         uint16        `json:"batch_size"`
	DataIndex         uint64        `json:"data_index"`
	InnerSteps        uint16        `json:"inner_steps"`
	WitnessesElected  uint16        `json:"witnesses_elected"`
	WitnessesReported uint16        `json:"witnesses_reported"`
	Witnesses         []WitnessView `json:"witnesses"`
}

// WitnessView is a witness's report of a round: from the account (which
// members it saw participate) and from its transaction (the metadata the
// client publishes: the loss and tokens/s it trained at; the metadata's
// bandwidth and efficiency fields are not shown, as clients leave them 0).
type WitnessView struct {
	Index  uint16 `json:"index"`
	Signer string `json:"signer,omitempty"`
	// Participants is how many of the round's members its participant
	// filter holds; null once the members are no longer known.
	Participants *int          `json:"participants"`
	Loss         *status.Float `json:"loss"` // null: its transaction was not read
	TokensPerSec uint64        `json:"tokens_per_sec"`
	Signature    string        `json:"signature,omitempty"`
}

// LossPoint is a step's training loss: the mean of what its witnesses
// published (WitnessMetadata), with their throughput.
type LossPoint struct {
	Step         uint32       `json:"step"`
	Loss         status.Float `json:"loss"`
	TokensPerSec float64      `json:"tokens_per_sec"`
	Witnesses    int          `json:"witnesses"`
	Time         int64        `json:"time"`
}

// EvalPoint is an EvalReported event: a client's benchmark score.
type EvalPoint struct {
	Activity
	Step    uint32       `json:"step"`
	Epoch   uint32       `json:"epoch"`
	Task    string       `json:"task"`
	Acc     status.Float `json:"acc"`
	AccNorm status.Float `json:"acc_norm"`
	Count   uint32       `json:"count"`
	Signer  string       `json:"signer"`
}

// PromptPoint is a PromptReported event: the tokens a client's model
// generated after prompt number Prompt of the clients' prompt task, and
// their text where the run's tokenizer is a built-in one (byte, gpt2).
type PromptPoint struct {
	Activity
	Step   uint32   `json:"step"`
	Epoch  uint32   `json:"epoch"`
	Prompt uint16   `json:"prompt"`
	Tokens []uint32 `json:"tokens"`
	Text   string   `json:"text"`
	Signer string   `json:"signer"`
}

// PhaseChange is a StateChanged event.
type PhaseChange struct {
	Activity
	From  string `json:"from"`
	To    string `json:"to"`
	Epoch uint32 `json:"epoch"`
	Step  uint32 `json:"step"`
}

// EventView is any other event of the Coordinator: its name, a line saying
// what it means, and its fields.
type EventView struct {
	Activity
	Name string          `json:"name"`
	Text string          `json:"text"`
	Data json.RawMessage `json:"data"`
}

// TreasuryView is a run's Treasurer run: its tokens and what it owes.
type TreasuryView struct {
	Run          string `json:"run"`
	Index        uint64 `json:"index"`
	Mint         string `json:"mint"`
	Decimals     uint8  `json:"decimals"`
	TokenAccount string `json:"token_account"`
	Balance      uint64 `json:"balance"`
	// Reserve is the points the run must cover; ReservedTokens adds the
	// deposits held; Withdrawable is the rest of the balance.
	Reserve            treasurer.Reserve `json:"reserve"`
	ReservedTokens     uint64            `json:"reserved_tokens"`
	Withdrawable       uint64            `json:"withdrawable"`
	TotalClaimedPoints uint64            `json:"total_claimed_points"`
	TotalDeposits      uint64            `json:"total_deposits"`
	TotalBurned        uint64            `json:"total_burned"`
	JoinDeposit        uint64            `json:"join_deposit"`
	Closed             bool              `json:"closed"`
	Funding            treasurer.Funding `json:"funding"`
}

func float(v float32) status.Float { return status.Float(v) }

// orEmpty makes a nil list an empty one, so that JSON has [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ListJSON is the body of GET /api/runs.
func (x *Indexer) ListJSON() []byte {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.list.body == nil || x.list.version != x.version {
		out := RunList{Source: x.source, Error: x.lastErr, ErrorSince: x.errSinceLocked(), Runs: []RunSummary{}}
		for _, rd := range x.runs {
			out.Runs = append(out.Runs, rd.summary())
		}
		slices.SortFunc(out.Runs, func(a, b RunSummary) int {
			return cmp.Or(cmp.Compare(activitySlot(b), activitySlot(a)), cmp.Compare(a.RunID, b.RunID))
		})
		x.list = cached{x.version, mustJSON(out)}
	}
	return x.list.body
}

// errSinceLocked is when reads started failing, in unix seconds (0: they work).
func (x *Indexer) errSinceLocked() int64 {
	if x.errSince.IsZero() {
		return 0
	}
	return x.errSince.Unix()
}

func activitySlot(r RunSummary) uint64 {
	if r.LastActivity == nil {
		return 0
	}
	return r.LastActivity.Slot
}

// RunJSON is the body of GET /api/runs/{id}; errNoRun for a run the
// cluster does not have.
func (x *Indexer) RunJSON(id string) ([]byte, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	rd := x.runs[id]
	if rd == nil {
		return nil, fmt.Errorf("%w %q on this cluster", errNoRun, id)
	}
	if rd.view.body == nil || rd.view.version != x.version {
		d := rd.detail()
		d.Source, d.Error, d.ErrorSince = x.source, x.lastErr, x.errSinceLocked()
		rd.view = cached{x.version, mustJSON(d)}
	}
	return rd.view.body, nil
}

// mustJSON encodes what the views build: plain values, status.Float for
// floats, so encoding cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("explorer: encoding a view: %v", err))
	}
	return b
}

func (rd *runData) summary() RunSummary {
	out := RunSummary{RunID: rd.id, Account: rd.run.Account.String(), StateError: rd.stateErr, Treasurer: rd.treasury != nil}
	if rd.last.Slot > 0 {
		last := rd.last
		out.LastActivity = &last
	}
	s := rd.state
	if s == nil {
		return out
	}
	c, m := s.Config, s.Model
	out.State, out.Epoch, out.Step, out.Members = coordinator.Phase(s).String(), s.Progress.Epoch, s.Progress.Step, len(coordinator.Members(s))
	if c.TotalSteps > 0 {
		// The program moves past the last step when it ends (step > total_steps).
		out.Step = min(out.Step, c.TotalSteps)
	}
	if m.Architecture == 0 {
		return out // not configured yet
	}
	out.Config = &ConfigSummary{
		Name: coordinator.FixedString(s.Metadata.Name[:]), Architecture: coordinator.EnumName("architecture", m.Architecture),
		Precision: coordinator.PrecisionName(m.Precision), GradShards: coordinator.GradShards(m.GradShardsLog2),
		Parameters: s.Metadata.NumParameters, Layers: m.NLayer, Width: m.NEmbd, SeqLen: m.MaxSeqLen,
		BatchStart: c.GlobalBatchSizeStart, BatchEnd: c.GlobalBatchSizeEnd, TotalSteps: c.TotalSteps,
		Mode: coordinator.EnumName("optimizer", m.Optimizer), InnerSteps: m.InnerSteps, Overlap: c.Overlap != 0,
		MinClients: c.MinClients, Verification: c.VerificationPercent,
	}
	return out
}

func (rd *runData) detail() *RunDetail {
	d := &RunDetail{
		RunSummary: rd.summary(), Instance: rd.run.Instance.String(),
		MainAuthority: rd.inst.MainAuthority.String(), JoinAuthority: rd.inst.JoinAuthority.String(),
		MemberList: []MemberView{}, Rounds: []RoundView{}, Loss: rd.lossCurve(),
		Evals: orEmpty(rd.evals), Prompts: []PromptPoint{}, Timeline: orEmpty(rd.timeline), Events: orEmpty(rd.events),
	}
	s := rd.state
	if s == nil {
		return d
	}
	d.Prompts = promptTexts(rd.prompts, s.Model.Tokenizer)
	d.Description, d.ClientVersion = coordinator.FixedString(s.Metadata.Description[:]), coordinator.FixedString(s.ClientVersion[:])
	d.PendingPause, d.PhaseStart = s.PendingPause != 0, s.RunStateStart
	if secs, ok := coordinator.PhaseDuration(s); ok {
		d.Deadline = s.RunStateStart + secs
	}
	d.MemberList = rd.members()
	for _, r := range coordinator.StoredRoundsOf(s) {
		d.Rounds = append(d.Rounds, rd.round(r))
	}
	d.Verification = coordinator.VerificationSummary(s)
	d.Treasury = rd.treasuryView()
	return d
}

// members lists the epoch's members in index order, then the other
// registered clients.
func (rd *runData) members() []MemberView {
	s := rd.state
	var out []MemberView
	inEpoch := map[uint16]bool{}
	add := func(slot uint16, index *int, state string) {
		c := &s.Clients[int(slot)%coordinator.MaxClients]
		m := MemberView{Index: index, Signer: c.Signer.String(), State: state, Earned: c.Earned, Slashed: c.Slashed,
			Burned: c.Burned, HasFault: c.HasFault != 0, OpenDisputes: c.OpenDisputes}
		for _, u := range c.Unvested {
			m.Unvested += u
		}
		if t := rd.treasury; t != nil && t.acc != nil {
			p := t.participants[c.Signer]
			claimable := treasurer.Claimable(s, p, c.Signer)
			var claimed, deposit uint64
			if p != nil {
				claimed = p.ClaimedPoints
				if p.Deposited {
					deposit = p.Deposit
				}
			}
			m.Claimed, m.Claimable, m.Deposit = &claimed, &claimable, &deposit
		}
		out = append(out, m)
	}
	for i, e := range s.Epoch.Clients[:min(int(s.Epoch.ClientsLen), coordinator.MaxClients)] {
		inEpoch[e.Slot] = true
		add(e.Slot, &i, coordinator.MemberStateName(e.State))
	}
	for i := range s.Clients {
		c := &s.Clients[i]
		if c.Occupied == 0 || inEpoch[uint16(i)] {
			continue
		}
		state := "registered"
		if c.Pending != 0 {
			state = "pending"
		}
		add(uint16(i), nil, state)
	}
	return out
}

// round shows a stored round with its witnesses' reports.
func (rd *runData) round(r *coordinator.Round) RoundView {
	s := rd.state
	v := RoundView{Step: r.Step, Height: r.Height, Current: r == coordinator.CurrentRound(s), Clients: r.ClientsLen,
		BatchSize: r.BatchSize, DataIndex: r.DataIndex, InnerSteps: r.InnerSteps,
		WitnessesElected: r.WitnessCount, WitnessesReported: r.WitnessesLen, Witnesses: []WitnessView{}}
	signers, known := coordinator.RoundSigners(s, r)
	for _, w := range r.Witnesses[:min(int(r.WitnessesLen), len(r.Witnesses))] {
		wv := WitnessView{Index: w.Index}
		if known && int(w.Index) < len(signers) {
			wv.Signer = signers[w.Index].String()
			bloom, n := coordinator.ScheduleBloom(w.ParticipantBloom), 0
			for _, k := range signers {
				if bloom.Contains(k) {
					n++
				}
			}
			wv.Participants = &n
		}
		if rep, ok := rd.report(r.Step, w.Index); ok {
			loss := float(rep.meta.Loss)
			wv.Signer, wv.Loss, wv.TokensPerSec, wv.Signature = rep.signer.String(), &loss, rep.meta.TokensPerSec, rep.at.Signature
		}
		v.Witnesses = append(v.Witnesses, wv)
	}
	return v
}

// report is the newest report read for a step from the witness at index.
func (rd *runData) report(step uint32, index uint16) (witnessReport, bool) {
	for _, w := range slices.Backward(rd.reports) {
		if w.step == step && w.index == index {
			return w, true
		}
		if w.step < step {
			break
		}
	}
	return witnessReport{}, false
}

// curvePoints bounds the loss curve the API sends: a longer history is
// sampled evenly, ending at the newest step.
const curvePoints = 600

// lossCurve is each step's mean of its witness reports.
func (rd *runData) lossCurve() []LossPoint {
	stride := (len(rd.steps) + curvePoints - 1) / curvePoints
	out := []LossPoint{}
	for i, s := range rd.steps {
		if (len(rd.steps)-1-i)%max(stride, 1) != 0 {
			continue
		}
		out = append(out, LossPoint{Step: s.step, Loss: s.loss.mean(), TokensPerSec: s.tps / float64(s.n), Witnesses: s.n, Time: s.time})
	}
	return out
}

func (rd *runData) treasuryView() *TreasuryView {
	t := rd.treasury
	if t == nil || t.acc == nil {
		return nil
	}
	s := rd.state
	if t.acc.Closed {
		s = nil
	}
	reserved := treasurer.ReservedTokens(t.acc, s)
	return &TreasuryView{
		Run: t.run.Address.String(), Index: t.run.Index, Mint: t.run.Mint.String(), Decimals: t.mint.Decimals,
		TokenAccount: t.run.Collateral.String(), Balance: t.balance,
		Reserve: treasurer.ReserveOfRun(t.acc, s), ReservedTokens: reserved, Withdrawable: t.balance - min(t.balance, reserved),
		TotalClaimedPoints: t.acc.TotalClaimedPoints, TotalDeposits: t.acc.TotalDeposits, TotalBurned: t.acc.TotalBurned,
		JoinDeposit: t.acc.JoinDeposit, Closed: t.acc.Closed, Funding: treasurer.FundingOf(t.acc, s, t.mint, t.balance),
	}
}

// promptTexts are the prompt reports with their tokens decoded by the
// built-in tokenizer the run names (a tokenizer.json is not at hand: its
// reports show the token ids only).
func promptTexts(ps []PromptPoint, tag uint8) []PromptPoint {
	out := slices.Clone(orEmpty(ps))
	name := map[uint8]string{coordinator.TokenizerByte: tokenizer.ByteName, coordinator.TokenizerGPT2: tokenizer.GPT2Name}[tag]
	if name == "" || len(out) == 0 {
		return out
	}
	tok, err := tokenizer.New(name)
	if err != nil {
		return out
	}
	for i, p := range out {
		if text, err := tok.Decode(p.Tokens); err == nil {
			out[i].Text = strings.ToValidUTF8(text, "\uFFFD")
		}
	}
	return out
}
