package client

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	bindings "github.com/psyche-go/psyche/clients/bindings/coordinator"
	"github.com/psyche-go/psyche/clients/coordinator"
)

// A client's own log says, once each, when a verdict, a dispute, a fault, a
// slash or a burn goes against it.
func TestFaultLogWarnsOnceAboutWhatGoesAgainstUs(t *testing.T) {
	me := solana.NewWallet().PublicKey()
	s := new(coordinator.State)
	s.Version = coordinator.StateVersion
	s.RunState = uint8(coordinator.RoundWitness)
	s.Clients[5] = coordinator.ClientSlot{Signer: me, Occupied: 1, InEpoch: 1}
	s.Epoch.ClientsLen = 2
	s.Epoch.Clients[1] = bindings.EpochClient{Slot: 5, State: coordinator.MemberHealthy}
	r := coordinator.CurrentRound(s)
	r.ClientsLen, r.Step = 2, 7
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var f faultLog
	view := func() { f.observe(coordinator.NewView(s, me, time.Unix(100, 0)), log) }
	warns := func() []string {
		var out []string
		for _, l := range strings.Split(buf.String(), "\n") {
			if strings.Contains(l, "level=WARN") {
				out = append(out, l)
			}
		}
		buf.Reset()
		return out
	}
	view()
	if w := warns(); len(w) != 0 {
		t.Fatalf("a clean slot: %q", w)
	}
	// A MISMATCH on our step, and the dispute it opens: one WARN each,
	// however often the state is read.
	r.Commits[1] = coordinator.Commitment{Flags: coordinator.CommitCommitted, Verdict: coordinator.VerdictMismatch}
	s.Disputes[0] = coordinator.Dispute{Id: 3, State: coordinator.DisputeOpen, Kind: coordinator.VerdictMismatch, TrainerSlot: 5, AccuserSlot: 9, Step: 7}
	view()
	view()
	if w := warns(); len(w) != 2 || !strings.Contains(w[0], "verdict=MISMATCH") || !strings.Contains(w[1], "dispute=3") {
		t.Fatalf("verdict and dispute: %q", w)
	}
	// Settled against us: the outcome, the fault, the slash and the burn.
	s.Disputes[0].State = coordinator.DisputeTrainerFault
	s.Clients[5].HasFault, s.Clients[5].LastFaultEpoch, s.Clients[5].Slashed, s.Clients[5].Burned = 1, 0, 10, 300
	view()
	w := warns()
	want := []string{"outcome=trainer_fault", "found at fault", "slashed", "burned"}
	if len(w) != len(want) {
		t.Fatalf("after the fault: %q", w)
	}
	for i, s := range want {
		if !strings.Contains(w[i], s) {
			t.Errorf("line %d: %q, want %q", i, w[i], s)
		}
	}
	view()
	if w := warns(); len(w) != 0 {
		t.Fatalf("said twice: %q", w)
	}
	// A dispute we opened as the accuser, and its settling for us, are INFO.
	s.Disputes[2] = coordinator.Dispute{Id: 5, State: coordinator.DisputeOpen, Kind: coordinator.VerdictMismatch, TrainerSlot: 9, AccuserSlot: 5}
	view()
	if w := warns(); len(w) != 0 {
		t.Fatalf("our accusation: %q", w)
	}
	s.Disputes[1] = coordinator.Dispute{Id: 4, State: coordinator.DisputeTrainerFault, Kind: coordinator.VerdictMismatch, TrainerSlot: 9, AccuserSlot: 5}
	view()
	out := buf.String()
	if w := warns(); len(w) != 0 || !strings.Contains(out, "dispute=4") {
		t.Fatalf("a dispute won: warns %q, log %q", w, out)
	}
	// A restarted client says once that it is on probation, not the history.
	var g faultLog
	buf.Reset()
	g.observe(coordinator.NewView(s, me, time.Unix(100, 0)), log)
	if w := warns(); len(w) < 1 || !strings.Contains(w[0], "probation") {
		t.Fatalf("restarted: %q", w)
	}
}
