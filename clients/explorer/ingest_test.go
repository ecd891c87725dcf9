package explorer

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/gagliardetto/solana-go"

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
		rd.addReport(witnessReport{step: step, meta: coordinator.WitnessMetadata{Loss: loss, TokensPerSec: 100, Efficiency: 1}})
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
