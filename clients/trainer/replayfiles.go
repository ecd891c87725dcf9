package trainer

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

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

// PruneReplayFiles keeps the replay files (ReplayFileNames, ReplayModelName)
// of run runID's newest keep steps in dir and removes those of its older
// steps, so that a trainer writing a model file per step holds a bounded
// amount of disk. Files of other runs, and any other file, are left alone.
func PruneReplayFiles(dir, runID string, keep int) error {
	if keep < 1 {
		return fmt.Errorf("replay files: keep %d steps: at least 1", keep)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("replay files: %w", err)
	}
	byStep := map[uint32][]string{}
	for _, e := range entries {
		if step, ok := replayFileStep(e.Name(), runID); ok && e.Type().IsRegular() {
			byStep[step] = append(byStep[step], e.Name())
		}
	}
	steps := slices.Sorted(maps.Keys(byStep))
	var errs []error
	for _, step := range steps[:max(0, len(steps)-keep)] {
		for _, name := range byStep[step] {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("replay files: %w", err)
	}
	return nil
}

// replayFileStep is the step of a replay file of run runID named name.
func replayFileStep(name, runID string) (uint32, bool) {
	rest, ok := strings.CutPrefix(name, runID+"-step")
	if !ok {
		return 0, false
	}
	for _, suffix := range []string{".demo", ".state", ".model.safetensors"} {
		if digits, ok := strings.CutSuffix(rest, suffix); ok {
			step, err := strconv.ParseUint(digits, 10, 32)
			// Exactly the digits ReplayFileNames writes: no sign, no leading zero.
			return uint32(step), err == nil && strconv.FormatUint(step, 10) == digits
		}
	}
	return 0, false
}
