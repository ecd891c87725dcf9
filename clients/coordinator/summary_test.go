package coordinator_test

import (
	"testing"

	"github.com/psyche-go/psyche/clients/coordinator"
)

// The program's epoch.last_step ends the drain, one step after the epoch's
// last and possibly past the run's end (103 in a 100-step run);
// EpochLastStep is the last step the epoch trains.
func TestEpochLastStep(t *testing.T) {
	for _, c := range []struct{ raw, total, want uint32 }{
		{0, 100, 0},     // the epoch's time is not up
		{50, 100, 49},   // two drain rounds after step 47
		{103, 100, 100}, // the drain would pass the run's end
		{101, 100, 100},
	} {
		var s coordinator.State
		s.Epoch.LastStep, s.Config.TotalSteps = c.raw, c.total
		if got := coordinator.EpochLastStep(&s); got != c.want {
			t.Errorf("last_step %d of %d steps: %d, want %d", c.raw, c.total, got, c.want)
		}
	}
}
