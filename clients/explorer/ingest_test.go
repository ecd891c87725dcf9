package explorer

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	bindings "github.com/psyche-go/psyche/clients/bindings/coordinator"
	"github.com/psyche-go/psyche/clients/coordinator"
)

// Log lines count as the Coordinator's only while it runs: not those of a
// program that calls it (before and after the call) nor of one it calls,
// and a precompile, which logs nothing, opens no segment.
func TestLogSegments(t *testing.T) {
	coord, treas, token := solana.NewWallet().PublicKey(), solana.NewWallet().PublicKey(), solana.NewWallet().PublicKey()
	logs := []string{
		fmt.Sprintf("Program %s invoke [1]", coord),
		"Program data: AAAA",
		fmt.Sprintf("Program %s consumed 10 of 200000 compute units", coord),
		fmt.Sprintf("Program %s success", coord),
		fmt.Sprintf("Program %s invoke [1]", treas),
		"Program data: BBBB", // the Treasurer's own event
		fmt.Sprintf("Program %s invoke [2]", coord),
		"Program log: Instruction: SetPaused",
		"Program data: CCCC",
		fmt.Sprintf("Program %s invoke [3]", token),
		"Program data: DDDD", // called by the Coordinator, not the Coordinator
		fmt.Sprintf("Program %s success", token),
		"Program data: EEEE",
		fmt.Sprintf("Program %s success", coord),
		"Program data: FFFF",
		fmt.Sprintf("Program %s success", treas),
	}
	want := []logSegment{
		{program: coord.String(), lines: []string{"Program data: AAAA", fmt.Sprintf("Program %s consumed 10 of 200000 compute units", coord)}},
		{program: treas.String(), lines: []string{"Program log: Instruction: SetPaused", "Program data: CCCC", "Program data: EEEE"}},
	}
	if got := logSegments(logs, coord); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// A step's loss is the mean of its witnesses' finite losses (NaN when none
// is), the curve is sampled down to curvePoints ending at the newest step,
// and the steps kept are the newest maxSteps.
func TestLossCurve(t *testing.T) {
	rd := &runData{}
	report := func(step uint32, loss float32) {
		rd.addReport(witnessReport{step: step, meta: coordinator.WitnessMetadata{Loss: loss, TokensPerSec: 100}})
	}
	report(2, 3)
	report(1, 4)
	report(2, float32(math.NaN()))
	report(2, 2)
	report(3, float32(math.Inf(1)))
	curve := rd.lossCurve()
	b, err := json.Marshal(curve)
	if err != nil {
		t.Fatal(err)
	}
	if len(curve) != 3 || curve[0].Step != 1 || curve[0].Loss != 4 || curve[1].Loss != 2.5 || curve[1].Witnesses != 3 ||
		curve[1].TokensPerSec != 100 || !math.IsNaN(float64(curve[2].Loss)) {
		t.Fatalf("curve %s", b)
	}
	for s := uint32(4); s < maxSteps+100; s++ {
		report(s, 1)
	}
	report(100, 1) // the oldest step kept
	report(2, 1)   // dropped: older than every step kept
	if len(rd.steps) != maxSteps || rd.steps[0].step != 100 || rd.steps[0].n != 2 {
		t.Fatalf("%d steps kept, from %d (%d reports)", len(rd.steps), rd.steps[0].step, rd.steps[0].n)
	}
	curve = rd.lossCurve()
	if len(curve) > curvePoints || curve[len(curve)-1].Step != maxSteps+99 {
		t.Fatalf("%d points, the last at step %d", len(curve), curve[len(curve)-1].Step)
	}
}

// While reads fail, the pause before the next one doubles from the poll
// interval up to maxRetryPause (or the poll interval, if longer).
func TestRetryPause(t *testing.T) {
	var got []time.Duration
	for failures := 1; failures <= 7; failures++ {
		got = append(got, retryPause(2*time.Second, failures))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("pauses %v, want %v", got, want)
	}
	if p := retryPause(time.Minute, 3); p != time.Minute {
		t.Fatalf("pause %v with a 1 min poll interval", p)
	}
	if p := retryPause(2*time.Second, 1<<20); p != maxRetryPause {
		t.Fatalf("pause %v after many failures", p)
	}
}

// A dispute settled at the trainer's or the accuser's fault adds a
// MemberFaulted event naming that member, from the dispute's DisputeOpened
// event; other outcomes, and a dispute whose parties are unknown, add none.
// A health check's drop says the member was removed and slashed.
func TestMemberEvents(t *testing.T) {
	trainer, accuser, reporter := solana.NewWallet().PublicKey(), solana.NewWallet().PublicKey(), solana.NewWallet().PublicKey()
	rd := &runData{}
	slot := uint64(10)
	add := func(ev any) {
		slot++
		rd.addEvent(ev, Activity{Slot: slot})
	}
	add(&bindings.DisputeOpened{Id: 1, Step: 5, Trainer: trainer, Accuser: accuser})
	add(&bindings.DisputeOpened{Id: 2, Step: 6, Trainer: trainer, Accuser: accuser})
	add(&bindings.DisputeOpened{Id: 3, Step: 7, Trainer: trainer, Accuser: accuser})
	add(&bindings.DisputeSettled{Id: 1, Outcome: coordinator.DisputeTrainerFault})
	add(&bindings.DisputeSettled{Id: 2, Outcome: coordinator.DisputeAccuserFault})
	add(&bindings.DisputeSettled{Id: 3, Outcome: coordinator.DisputeTransient})
	add(&bindings.DisputeSettled{Id: 9, Outcome: coordinator.DisputeTrainerFault}) // opened before the history read
	add(&bindings.ClientDropped{Client: trainer, Reporter: reporter, Step: 8})
	var got []string
	for _, e := range rd.events {
		if e.Name == MemberFaulted || e.Name == "ClientDropped" {
			got = append(got, e.Text)
		}
	}
	want := []string{
		fmt.Sprintf("%s faulted by dispute 1 (its step 5 was found wrong): slashed, unvested points burned, out of the epoch", trainer),
		fmt.Sprintf("%s faulted by dispute 2 (its accusation of %s's step 6 was refuted): slashed, unvested points burned, out of the epoch", accuser, trainer),
		fmt.Sprintf("%s removed from the epoch at step 8 and slashed: %s's health check found it missing", trainer, reporter),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}
