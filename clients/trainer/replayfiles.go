package trainer

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/psyche-go/psyche/internal/atomicfile"
)

// Replay files: what a trainer keeps of a step so that anyone can replay it
// offline (psyche-client verify): the DeMo payload it published and the
// replay state (ReplayState) it started the step from. With the run's model
// of the step before (a checkpoint or model file) and the run's data, they
// are everything the replay needs besides what the chain holds.

// ReplayFileNames are the names, in a replay files directory, of the
// payload and the replay state before the step of run runID at step:
// "<run>-step<S>.demo" and "<run>-step<S>.state".
func ReplayFileNames(runID string, step uint32) (payload, state string) {
	base := fmt.Sprintf("%s-step%d", runID, step)
	return base + ".demo", base + ".state"
}

// ReplayModelName is the name of the model file (SaveModel) of the weights
// step started from, which a trainer keeps with its replay files.
func ReplayModelName(runID string, step uint32) string {
	return fmt.Sprintf("%s-step%d.model.safetensors", runID, step)
}

// WriteReplayFiles writes a step's payload and its replay state before the
// step (stateBefore, as ReplayState returned it) into dir, made if missing,
// each file atomically (ReplayFileNames). A nil stateBefore writes the
// payload only.
func WriteReplayFiles(dir, runID string, step uint32, payload, stateBefore []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("replay files: %w", err)
	}
	p, s := ReplayFileNames(runID, step)
	if err := atomicfile.Write(filepath.Join(dir, p), payload, 0o644); err != nil {
		return fmt.Errorf("replay files: %w", err)
	}
	if stateBefore == nil {
		return nil
	}
	if err := atomicfile.Write(filepath.Join(dir, s), stateBefore, 0o644); err != nil {
		return fmt.Errorf("replay files: %w", err)
	}
	return nil
}
