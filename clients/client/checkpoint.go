package client

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/hub"
	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/trainer"
)

// checkpointPath is where this client keeps its checkpoint of a step.
func (c *Client) checkpointPath(step uint32) string {
	return filepath.Join(c.cfg.CheckpointDir, fmt.Sprintf("%s-step%d.safetensors", c.cfg.RunID, step))
}

// loadLocalCheckpoint restores the model from this client's own checkpoint
// of step, when it has one (a restart after the run paused or every member
// left, or a restart between epochs): the full state, momentum included. A
// missing or unreadable checkpoint leaves the model as it was; the caller
// then asks peers.
func (c *Client) loadLocalCheckpoint(step uint32) bool {
	if c.cfg.CheckpointDir == "" {
		return false
	}
	path := c.checkpointPath(step)
	if _, err := os.Stat(path); err != nil {
		return false
	}
	if err := c.tr.LoadCheckpoint(path); err != nil {
		c.log.Warn("own checkpoint unusable; loading the model from peers", "path", path, "err", err)
		return false
	}
	c.e.loadedFrom(step)
	c.e.checkpoint = step
	c.log.Info("model restored from this client's checkpoint", "step", step, "path", path)
	return true
}

// saveCheckpoint writes the model at the end of an epoch.
func (c *Client) saveCheckpoint(step uint32) {
	path := c.checkpointPath(step)
	if err := os.MkdirAll(c.cfg.CheckpointDir, 0o755); err != nil {
		c.log.Warn("checkpoint", "err", err)
		return
	}
	if err := c.tr.SaveCheckpoint(path, map[string]string{"run_id": c.cfg.RunID, "step": strconv.Itoa(int(step))}); err != nil {
		c.log.Warn("checkpoint", "err", err)
		return
	}
	c.cfg.Recorder.SetCheckpoint(status.Checkpoint{Step: uint64(step), Location: path})
	c.log.Info("checkpoint written", "step", step, "path", path)
	if c.cfg.DeleteOldSteps {
		c.deleteOldCheckpoints()
	}
}

// deleteOldCheckpoints keeps the newest KeepSteps checkpoints of this run.
func (c *Client) deleteOldCheckpoints() {
	cks := c.ownCheckpoints()
	for _, k := range cks[min(c.cfg.KeepSteps, len(cks)):] {
		_ = os.Remove(k.path)
	}
}

// ownCheckpoint is one of this client's checkpoints of this run.
type ownCheckpoint struct {
	step uint32
	path string
}

// ownCheckpoints lists this client's checkpoints of this run in
// CheckpointDir, newest step first.
func (c *Client) ownCheckpoints() []ownCheckpoint {
	if c.cfg.CheckpointDir == "" {
		return nil
	}
	prefix := c.cfg.RunID + "-step"
	entries, err := os.ReadDir(c.cfg.CheckpointDir)
	if err != nil {
		return nil
	}
	var cks []ownCheckpoint
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ".safetensors") {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, prefix), ".safetensors"), 10, 32); err == nil {
			cks = append(cks, ownCheckpoint{uint32(n), filepath.Join(c.cfg.CheckpointDir, name)})
		}
	}
	sort.Slice(cks, func(i, j int) bool { return cks[i].step > cks[j].step })
	return cks
}

// restore resumes, when no peer holds the model of a.step, from the newest
// checkpoint of this run at or before it: this client's own (momentum
// included) or the run's hub checkpoint, whichever is newer. Its weights
// become the model of a.step; the run's rounds after the checkpoint are
// lost. With neither, it says what is missing and what to do, at WARN at
// most every restoreWarnEvery, and keeps waiting.
func (c *Client) restore(ctx context.Context, v *coordinator.View, a restoreAction) error {
	nobody := "no client holds the model of step " + strconv.FormatUint(uint64(a.step), 10)
	if a.holders > 0 {
		nobody = fmt.Sprintf("none of the %d clients that finished the last epoch announced the model of step %d (each restarted without it?)", a.holders, a.step)
	}
	var from ownCheckpoint
	for _, ck := range c.ownCheckpoints() {
		if ck.step <= a.step {
			from = ck
			break
		}
	}
	where := "this client's checkpoint"
	h, hubWhy := c.hubFallback(ctx, v, a.step)
	if hubWhy == "" && h.step > from.step {
		from, where = h, "the run's hub checkpoint"
	}
	if from.path == "" {
		c.noCheckpoint(nobody, a.step, hubWhy)
		return nil
	}
	if err := c.tr.LoadCheckpoint(from.path); err != nil {
		c.log.Warn(where+" is unusable; looking again later", "path", from.path, "err", err)
		return nil
	}
	c.e.loadedFrom(a.step)
	c.inbox.prune(a.step)
	if from.step == a.step {
		c.log.Info(nobody+": resuming from "+where, "step", a.step, "path", from.path)
	} else {
		c.log.Info(fmt.Sprintf("%s: resuming from %s of step %d; the run's steps %d-%d are lost", nobody, where, from.step, from.step+1, a.step),
			"step", a.step, "checkpoint_step", from.step, "path", from.path)
	}
	return c.ready(ctx)
}

// noCheckpoint says that nothing can be resumed from (hubWhy: why not the
// hub's checkpoint), and what would help.
func (c *Client) noCheckpoint(nobody string, step uint32, hubWhy string) {
	now := c.now()
	log := c.log.Debug
	if c.e.recovery.warned.IsZero() || now.Sub(c.e.recovery.warned) >= restoreWarnEvery {
		log, c.e.recovery.warned = c.log.Warn, now
	}
	file := c.cfg.RunID + "-stepN.safetensors, as train --checkpoint-dir writes"
	var msg string
	if c.cfg.CheckpointDir == "" {
		msg = fmt.Sprintf("%s, this client keeps no checkpoints (train has no --checkpoint-dir), and %s: "+
			"to resume, restart train with --checkpoint-dir DIR holding a checkpoint of this run at or before step %d (%s), "+
			"or start a client that holds the model; waiting", nobody, hubWhy, step, file)
	} else {
		msg = fmt.Sprintf("%s, %s holds no checkpoint of this run at or before it, and %s: "+
			"to resume, put one there (%s), or start a client that holds the model; waiting", nobody, c.cfg.CheckpointDir, hubWhy, file)
	}
	log(msg, "run_step", step+1, "retry_seconds", restoreRetry.Seconds())
}

// hubFallback is the run's hub checkpoint when it is this run's model of a
// step at or before step (an older one than loadHubCheckpoint takes);
// otherwise why not, as the end of a sentence.
func (c *Client) hubFallback(ctx context.Context, v *coordinator.View, step uint32) (ownCheckpoint, string) {
	repo, rev, ok := hubCheckpoint(v.State)
	if !ok {
		return ownCheckpoint{}, "the run has no hub checkpoint"
	}
	path, err := hub.Fetch(ctx, repo, rev, c.modelDir(), hub.FetchOptions{Log: c.log})
	if err != nil {
		return ownCheckpoint{}, fmt.Sprintf("the run's hub checkpoint %s of %s could not be fetched (%v)", rev, repo, err)
	}
	if trainer.IsHFWeights(path) {
		return ownCheckpoint{}, "the run's hub checkpoint is the model it started from"
	}
	md, err := trainer.CheckpointMetadata(path)
	if err != nil {
		return ownCheckpoint{}, fmt.Sprintf("the run's hub checkpoint %s is unreadable (%v)", rev, err)
	}
	n, err := strconv.ParseUint(md["step"], 10, 32)
	if err != nil || md["run_id"] != c.cfg.RunID || uint32(n) > step {
		return ownCheckpoint{}, fmt.Sprintf("the run's hub checkpoint %s is of run %q, step %q", rev, md["run_id"], md["step"])
	}
	return ownCheckpoint{uint32(n), path}, ""
}

// modelDir holds model files fetched from or uploaded to the hub: the
// checkpoint directory, where `predownload --model` puts them, else the
// work directory.
func (c *Client) modelDir() string {
	if c.cfg.CheckpointDir != "" {
		return c.cfg.CheckpointDir
	}
	return c.workDir
}

// hubRepo is the run's hub repo, if its checkpoint kind (hub, or p2p
// keeping the repo as a fallback) has one.
func hubRepo(s *coordinator.State) (string, bool) {
	kind := s.Model.CheckpointKind
	repo := coordinator.FixedString(s.Model.CheckpointRepo[:])
	return repo, (kind == coordinator.CheckpointHub || kind == coordinator.CheckpointP2P) && repo != ""
}

// hubCheckpoint is the run's announced hub checkpoint, if it has one.
func hubCheckpoint(s *coordinator.State) (repo, rev string, ok bool) {
	repo, ok = hubRepo(s)
	rev = coordinator.FixedString(s.Model.CheckpointRevision[:])
	return repo, rev, ok && rev != ""
}

// loadHubCheckpoint loads the run's hub checkpoint into tr when it is what
// this client needs: the weights a fresh run starts from (step 1, any
// model file of the right shape), or the consensus model of the step before
// the current one (a file this run's checkpointer announced). A checkpoint
// of another step is skipped (the caller asks peers). At step 1 every
// replica must start from it, so failing to fetch it is an error.
func (c *Client) loadHubCheckpoint(ctx context.Context, v *coordinator.View) (bool, error) {
	s := v.State
	repo, rev, ok := hubCheckpoint(s)
	if !ok {
		return false, nil
	}
	first := s.Progress.Step <= 1
	path, err := hub.Fetch(ctx, repo, rev, c.modelDir(), hub.FetchOptions{Log: c.log})
	if err != nil {
		if first {
			return false, fmt.Errorf("the run starts from hub checkpoint %s of %s: %w", rev, repo, err)
		}
		c.log.Warn("hub checkpoint unavailable; loading the model from peers", "repo", repo, "revision", rev, "err", err)
		return false, nil
	}
	if trainer.IsHFWeights(path) {
		return c.loadHFStart(repo, rev, path, first)
	}
	md, err := trainer.CheckpointMetadata(path)
	if err != nil {
		return false, fmt.Errorf("hub checkpoint %s: %w", rev, err)
	}
	want := s.Progress.Step - 1
	if !first && (md["run_id"] != c.cfg.RunID || md["step"] != strconv.FormatUint(uint64(want), 10)) {
		c.log.Info("the hub checkpoint is of another step; loading the model from peers", "revision", rev, "its_run", md["run_id"], "its_step", md["step"], "want", want)
		return false, nil
	}
	if err := c.tr.LoadCheckpoint(path); err != nil {
		return false, fmt.Errorf("hub checkpoint %s does not fit the run's model: %w", rev, err)
	}
	if !first && !c.hubAgrees(v, rev, want) {
		return false, nil // the weights loaded are replaced by the peers' model
	}
	if first {
		want = 0
	}
	c.e.loadedFrom(want)
	c.log.Info("model loaded from the hub", "repo", repo, "revision", rev, "step", want)
	return true, nil
}

// hubAgrees checks the model just loaded from the hub as step against the
// root a quorum of the model holders announced for that step: the replica
// the members agree on. Without such a quorum yet (every holder may be gone:
// then the hub is the only source), the elected checkpointer's announcement
// stands.
func (c *Client) hubAgrees(v *coordinator.View, rev string, step uint32) bool {
	root, ok := quorumRoot(c.e.modelHolders(v), c.inbox.rootsAt(step))
	if !ok {
		c.log.Info("no quorum of model holders announced this step yet; taking the hub checkpoint its elected checkpointer announced", "revision", rev, "step", step)
		return true
	}
	got, err := sharedRoot(c.tr, step)
	if err != nil || got != root {
		c.log.Warn("the hub checkpoint is not the model the run's members hold; loading the model from peers",
			"revision", rev, "step", step, "its_root", got.String(), "members_root", root.String(), "err", err)
		return false
	}
	c.log.Info("the hub checkpoint matches the model a quorum of members holds", "revision", rev, "step", step)
	return true
}

// loadHFStart loads a Hugging Face model the run starts from: its weights
// file, pinned by the revision, read with the run's own model config. A
// file:// repo that is a whole Hugging Face directory also has its
// config.json checked against the run's. Past step 1 the replicas have moved
// on from it, so the caller asks peers.
func (c *Client) loadHFStart(repo, rev, path string, first bool) (bool, error) {
	if !first {
		c.log.Info("the hub's model is the one the run started from; loading the model from peers", "revision", rev)
		return false, nil
	}
	if dir := hub.LocalDir(repo); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, trainer.HFConfigFile)); err == nil {
			hf, err := trainer.ReadHFConfig(dir, 1)
			if err == nil {
				err = trainer.HFConfigFits(hf, c.tr.Config())
			}
			if err != nil {
				return false, fmt.Errorf("the run starts from the Hugging Face model in %s: %w", dir, err)
			}
		}
	}
	if err := c.tr.LoadHF(path); err != nil {
		return false, fmt.Errorf("the run starts from Hugging Face model %s of %s, which does not fit the run's model: %w", rev, repo, err)
	}
	c.e.loadedFrom(0)
	c.log.Info("model loaded from a Hugging Face model file", "repo", repo, "revision", rev)
	return true, nil
}

// announceCheckpoint decides, for a checkpointer (HubUpload), uploading
// the model of the epoch's last step to the run's hub repo and announcing
// its revision with the checkpoint instruction (in Cooldown, or once the
// run is Finished: the program takes the final model from a finisher of
// the last epoch). One try per step, and one more once Finished if the
// Cooldown try did not land (the run can finish while it is in flight).
func (e *engine) announceCheckpoint(v *coordinator.View, current bool, step uint32) (action, bool) {
	repo, ok := hubRepo(v.State)
	if !ok || !e.hubUpload || !current || step == 0 || !electedCheckpointer(v) {
		return nil, false
	}
	final := v.Phase == coordinator.Finished
	landed := e.uploaded.step == step && e.uploaded.landed
	if landed || (e.announced == step && !final) {
		return nil, false
	}
	e.announced = step
	return announceCheckpointAction{repo: repo, rev: coordinator.FixedString(v.State.Model.CheckpointRevision[:])}, true
}

// electedCheckpointer says whether this client may announce the epoch's
// checkpoint: it reported as a witness of the current round (in Cooldown,
// the epoch's last), or once the run is Finished, of its last round (the
// program kept that in the slot). Checkpointers the election passed over
// leave it to the elected ones.
func electedCheckpointer(v *coordinator.View) bool {
	if v.Phase == coordinator.Finished {
		return v.Slot != nil && v.Slot.Checkpointer != 0
	}
	r := v.Round
	if v.Me < 0 || r == nil {
		return false
	}
	for _, w := range r.Witnesses[:min(int(r.WitnessesLen), len(r.Witnesses))] {
		if int(w.Index) == v.Me {
			return true
		}
	}
	return false
}

// uploadCheckpoint uploads the model (once per step) and announces its
// revision. Model files are byte-identical on every honest replica, so a
// revision another checkpointer already announced is not sent again.
func (c *Client) uploadCheckpoint(ctx context.Context, a announceCheckpointAction) {
	step := c.e.lastStep
	if c.e.uploaded.step != step {
		rev, err := c.uploadModel(ctx, a.repo)
		if err != nil {
			c.log.Warn("checkpoint upload failed", "repo", a.repo, "err", err)
			return
		}
		c.e.uploaded = uploadedModel{step: step, rev: rev}
	}
	rev := c.e.uploaded.rev
	if a.rev == rev {
		c.e.uploaded.landed = true
		return
	}
	if err := c.chain.Submit(ctx, op{kind: opCheckpoint, repo: a.repo, rev: rev}, false); err != nil {
		c.log.Warn("checkpoint announcement failed", "err", err)
		return
	}
	c.e.uploaded.landed = true
	c.log.Info("checkpoint announced", "step", step, "repo", a.repo, "revision", rev)
}

// uploadedModel is the newest model file this checkpointer put on the hub.
type uploadedModel struct {
	step   uint32
	rev    string
	landed bool // its announcement is on chain
}

// uploadModel writes the model of the last applied step and uploads it;
// the file stays in modelDir under its revision, where Fetch finds it.
func (c *Client) uploadModel(ctx context.Context, repo string) (string, error) {
	step := strconv.FormatUint(uint64(c.e.lastStep), 10)
	if err := os.MkdirAll(c.modelDir(), 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(c.modelDir(), fmt.Sprintf(".%s-step%s-model.safetensors", c.cfg.RunID, step))
	if err := c.tr.SaveModel(tmp, map[string]string{"run_id": c.cfg.RunID, "step": step}); err != nil {
		return "", fmt.Errorf("writing the model: %w", err)
	}
	defer os.Remove(tmp) // after the rename, a no-op
	rev, err := hub.Upload(ctx, repo, tmp, hub.UploadOptions{Token: c.cfg.HubToken, Log: c.log})
	if err != nil {
		return "", err
	}
	if err := os.Rename(tmp, filepath.Join(c.modelDir(), rev+".safetensors")); err != nil {
		c.log.Warn("keeping the uploaded model", "err", err)
	}
	return rev, nil
}
