package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/gagliardetto/solana-go"
	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/schedule"
	"github.com/psyche-go/psyche/clients/trainer"
)

// psyche-client verify replays one contribution offline, as a verifier or
// a dispute's committee does on chain: the trainer's replay state before
// the step on the run's model of the step before, its assigned batch, Step
// and DeMoGenerate at the step's learning rate; then it compares the hashes
// of the payload and of the replay state after (the state once the round
// is applied, trainer.AfterApply) with the commitment the chain holds.

func verifyCommand() *cli.Command {
	flags := []cli.Flag{runIDFlag,
		&cli.UintFlag{Name: "step", Usage: "the step to replay (required)"},
		&cli.StringFlag{Name: "client", Usage: "the trainer's signer pubkey (required)"},
		&cli.UintFlag{Name: "index", Usage: "the trainer's member index in the round, when the chain can no longer tell it (members left the epoch since)", DefaultText: "from the chain"},
		&cli.StringFlag{Name: "model", Usage: "the run's model of the step before: a checkpoint or model file (safetensors: <run>-step<S>.model.safetensors of train --write-gradients-dir) or a shared model file (PSYMODL1) (required)"},
		&cli.StringFlag{Name: "state", Usage: "the trainer's replay state before the step (<run>-step<S>.state of train --write-gradients-dir) (required)"},
		&cli.StringFlag{Name: "payload", Usage: "the payload the trainer published (<run>-step<S>.demo): on a mismatch, name the first tensor that differs"},
		&cli.StringFlag{Name: "data-url", Usage: "data server to read the batch from instead of the run's data location (the run's pinned root still applies)"},
		&cli.StringFlag{Name: "data-dir", Usage: "local dataset directory to read the batch from instead of the run's data location (the run's pinned root still applies)"},
		dataCacheDirFlag,
		&cli.IntFlag{Name: "threads", Usage: "trainer threads (0: all cores; results do not depend on it)"},
		&cli.IntFlag{Name: "micro-batch-size", Usage: "sequences per forward/backward pass: bounds memory and changes no bit of the result", Value: client.DefaultMicroBatch},
		&cli.StringFlag{Name: "device", Usage: "auto, cpu, cuda or cuda:N (every backend computes the same bits)", Value: "auto"},
	}
	return &cli.Command{
		Name: "verify",
		Usage: "replay one trainer's contribution to a step offline and compare it with its commitment on chain: " +
			"prints MATCH (exit 0) or MISMATCH and what differs (exit 1)",
		Flags:  append(flags, coordinatorReadFlags()...),
		Action: verify,
	}
}

func verify(c *cli.Context) error {
	if err := requireFlags(c, runIDFlag.Name, "step", "client", "model", "state"); err != nil {
		return err
	}
	runID := c.String(runIDFlag.Name)
	if c.Uint("step") < 1 || c.Uint("step") > math.MaxUint32 {
		return badInputf("--step must be between 1 and %d", uint32(math.MaxUint32))
	}
	step := uint32(c.Uint("step"))
	signer, err := parsePubkey("--client", c.String("client"))
	if err != nil {
		return err
	}
	index := -1
	if c.IsSet("index") {
		if c.Uint("index") >= coordinator.MaxClients {
			return badInputf("--index must be below %d", coordinator.MaxClients)
		}
		index = int(c.Uint("index"))
	}
	device, ids, err := parseDevice(c.String("device"))
	if err != nil {
		return err
	}
	if len(ids) > 1 {
		return badInputf("--device %s: verify replays on one device", c.String("device"))
	}
	if c.Int("threads") < 0 || c.Int("micro-batch-size") < 1 {
		return badInputf("--threads cannot be negative and --micro-batch-size must be at least 1")
	}
	if c.IsSet("data-url") && c.IsSet("data-dir") {
		return badInputf("give --data-url or --data-dir, not both")
	}
	state, err := os.ReadFile(c.String("state"))
	if err != nil {
		return badInputf("--state: %w", err)
	}
	var published []byte
	if c.IsSet("payload") {
		if published, err = os.ReadFile(c.String("payload")); err != nil {
			return badInputf("--payload: %w", err)
		}
	}
	mf, err := openModelFile(c.String("model"), runID, step-1)
	if err != nil {
		return err
	}

	_, _, s, err := readRun(c)
	if err != nil {
		return err
	}
	com, err := findCommitment(s, step, signer, index)
	if err != nil {
		return err
	}
	model := s.Model
	cfg, err := client.TrainerConfig(&model, c.Int("micro-batch-size"))
	if err != nil {
		return err
	}
	data, err := openRunData(c.Context, c, s)
	if err != nil {
		return err
	}
	defer data.Close()
	if com.batch.Len == 0 {
		return badInputf("the member was assigned no sequences at this step: there is nothing to replay")
	}
	tr, err := replayTrainer(cfg, runID, c.Int("threads"), device, ids)
	if err != nil {
		return err
	}
	defer tr.Close()
	params, err := mf.params(tr)
	if err != nil {
		return err
	}
	u := client.NewUpdate(&model, s.Config.TotalSteps, step, int(model.InnerSteps), com.members, com.epochStartStep, com.coldStart, s.Config.Overlap != 0)
	lr := u.LR()
	rep, err := replayContribution(c.Context, replayInput{
		tr: tr, params: params, state: state, published: published,
		u: u, fetch: func(ctx context.Context, start, n uint64) ([]int32, []int32, int, error) {
			return client.BatchSequences(ctx, data, start, n)
		}, batch: com.batch, commit: com,
	})
	if err != nil {
		return err
	}
	w := c.App.Writer
	fmt.Fprintf(w, "run %s, step %d, member %d (%s): %s\n", runID, step, com.index, signer, com.source)
	fmt.Fprintf(w, "batch        sequences %d..%d, learning rate %g, backend %s\n", com.batch.Start, com.batch.Start+com.batch.Len-1, lr, tr.Backend())
	fmt.Fprintf(w, "state_before %x (the --state file)\n", com.before)
	if rep.replayed {
		fmt.Fprintf(w, "payload      committed %x, replayed %x%s\n", com.payload, rep.payload, equalWord(com.payload == rep.payload))
		fmt.Fprintf(w, "state_after  committed %x, replayed %x%s\n", com.after, rep.after, equalWord(com.after == rep.after))
	} else {
		fmt.Fprintf(w, "payload      committed %x, not replayed\nstate_after  committed %x, not replayed\n", com.payload, com.after)
	}
	verdict := "MATCH"
	if !rep.match {
		verdict = "MISMATCH"
	}
	fmt.Fprintln(w, verdict)
	if rep.reason != "" {
		fmt.Fprintln(w, rep.reason)
	}
	if rep.diff != "" {
		fmt.Fprintln(w, "first differing tensor: "+rep.diff)
	}
	if rep.note != "" {
		fmt.Fprintln(w, rep.note)
	}
	if rep.match {
		return nil
	}
	return cli.Exit(fmt.Sprintf("verify: MISMATCH at step %d, member %d", step, com.index), exitFailure)
}

func equalWord(eq bool) string {
	if eq {
		return " (equal)"
	}
	return " (DIFFERENT)"
}

// commitment is what the chain holds of one contribution: from a dispute
// naming it, else from its stored round.
type commitment struct {
	source                 string // where it was read, in words
	index                  uint16 // the trainer's member index in the round
	members                int    // the round's member count (0 from a dispute: overlapped runs are not verified)
	batch                  schedule.Assignment
	epochStartStep         uint32
	coldStart              bool
	payload, before, after [32]byte
	fresh                  bool
}

// findCommitment reads the commitment of signer's contribution to step: a
// dispute naming it (the newest), else the stored round of that step, where
// the trainer is at index (-1: find it). Not finding it is bad input.
func findCommitment(s *coordinator.State, step uint32, signer solana.PublicKey, index int) (commitment, error) {
	var d *coordinator.Dispute
	for i := range s.Disputes {
		x := &s.Disputes[i]
		if x.State == coordinator.DisputeFree || x.Step != step || !coordinator.SlotSigner(s, x.TrainerSlot).Equals(signer) {
			continue
		}
		if d == nil || x.Id > d.Id {
			d = x
		}
	}
	if d != nil {
		if index >= 0 && index != int(d.TrainerIndex) {
			return commitment{}, badInputf("--index %d, but dispute %d names member %d", index, d.Id, d.TrainerIndex)
		}
		return commitment{
			source: fmt.Sprintf("commitment of dispute %d (%s, %s, opened by %s)", d.Id, coordinator.DisputeStateName(d.State), coordinator.VerdictName(d.Kind), coordinator.SlotSigner(s, d.AccuserSlot)),
			index:  d.TrainerIndex, batch: schedule.Assignment{Start: d.BatchStart, Len: uint64(d.BatchLen)},
			epochStartStep: d.EpochStartStep, coldStart: d.ColdStart != 0,
			payload: d.Payload, before: d.StateBefore, after: d.StateAfter, fresh: d.Fresh != 0,
		}, nil
	}
	r := storedRound(s, step)
	if r == nil {
		return commitment{}, badInputf("the chain holds no round or dispute of step %d (it keeps the epoch's last %d rounds and open or recently settled disputes)", step, coordinator.StoredRounds)
	}
	n := int(r.ClientsLen)
	note := ""
	switch signers, known := coordinator.RoundSigners(s, r); {
	case known:
		pos := -1
		for i, k := range signers {
			if k.Equals(signer) {
				pos = i
			}
		}
		if pos < 0 {
			return commitment{}, badInputf("%s is not a member of the round of step %d", signer, step)
		}
		if index >= 0 && index != pos {
			return commitment{}, badInputf("--index %d, but %s is member %d of the round of step %d", index, signer, pos, step)
		}
		index = pos
	case index >= 0:
		if index >= n {
			return commitment{}, badInputf("--index %d: the round of step %d has %d members", index, step, n)
		}
		note = ", index from --index (the chain no longer tells whose it is)"
	default:
		// Its newest commitment's state after is on its slot: the one
		// commitment of the round with that state after is its own.
		if slot, ok := coordinator.Slot(s, signer); ok && slot.StateAfter != [32]byte{} {
			found := 0
			for i := range n {
				if c := r.Commits[i]; c.Flags&coordinator.CommitCommitted != 0 && c.StateAfter == slot.StateAfter {
					index, found = i, found+1
				}
			}
			if found != 1 {
				index = -1
			}
		}
		if index < 0 {
			return commitment{}, badInputf("members left the epoch since step %d, so its member indices changed: give --index", step)
		}
		note = ", index from its slot's state_after"
	}
	c := r.Commits[index]
	if c.Flags&coordinator.CommitCommitted == 0 {
		return commitment{}, badInputf("member %d made no commitment at step %d", index, step)
	}
	role, err := coordinator.ScheduleRound(s, r).Role(uint16(index))
	if err != nil {
		return commitment{}, err
	}
	return commitment{
		source: fmt.Sprintf("commitment of the round of step %d (height %d, verdict %s%s)", r.Step, r.Height, coordinator.VerdictName(c.Verdict), note),
		index:  uint16(index), members: n, batch: role.Batch, epochStartStep: s.Epoch.StartStep, coldStart: s.Epoch.ColdStart != 0,
		payload: c.Payload, before: c.StateBefore, after: c.StateAfter, fresh: c.Flags&coordinator.CommitFresh != 0,
	}, nil
}

// storedRound is the stored round of step in the epoch, nil if none (a new
// epoch empties the rounds of the last).
func storedRound(s *coordinator.State, step uint32) *coordinator.Round {
	for i := range s.Epoch.Rounds {
		if r := &s.Epoch.Rounds[i]; r.ClientsLen > 0 && r.Step == step {
			return r
		}
	}
	return nil
}

// openRunData opens the data a run trains on, as train does: --data-url or
// --data-dir when given, else the run's data location, the run's pinned
// root applying either way; the data must fit the run's model.
func openRunData(ctx context.Context, c *cli.Context, s *coordinator.State) (provider.Provider, error) {
	flag, loc := "", coordinator.FixedString(s.Model.DataLocation[:])
	for _, f := range []string{"data-url", "data-dir"} {
		if v := c.String(f); v != "" {
			flag, loc = f, v
		}
	}
	p, err := openDataSource(ctx, c, flag, loc, runDataRoot(s))
	if err != nil {
		return nil, err
	}
	if err := client.DataFits(&s.Model, p.Info()); err != nil {
		p.Close()
		return nil, badInput(err)
	}
	return p, nil
}

// openDataSource opens the dataset at loc (a directory or a data server URL)
// pinned to root, keeping chunks in --data-cache-dir. flag names the flag
// loc came from, "" for the run's own data location.
func openDataSource(ctx context.Context, c *cli.Context, flag, loc, root string) (provider.Provider, error) {
	p, err := provider.Open(ctx, []provider.Source{{Location: loc, Root: root}}, provider.HTTPOptions{CacheDir: c.String(dataCacheDirFlag.Name)})
	switch {
	case err == nil:
		return p, nil
	case flag != "":
		return nil, badInputf("--%s: %w", flag, err)
	}
	return nil, fmt.Errorf("open the run's data (%s): %w; give --data-dir DIR or --data-url URL to read a copy of it", loc, err)
}

// replayTrainer builds the run's trainer as a client does.
func replayTrainer(cfg trainer.Config, runID string, threads int, device client.Device, ids []int) (*trainer.Trainer, error) {
	tr, err := trainer.New(cfg, client.InitSeed(runID))
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*trainer.Trainer, error) { tr.Close(); return nil, err }
	if threads > 0 {
		if err := tr.SetThreads(threads); err != nil {
			return fail(err)
		}
	}
	switch device {
	case client.DeviceCPU:
		if err := tr.SetGPU(false); err != nil {
			return fail(err)
		}
	case client.DeviceCUDA:
		on := tr.SetGPU(true)
		if ids != nil {
			on = tr.SetDevices(ids, 1)
		}
		if on != nil {
			return fail(badInputf("--device: %w", on))
		}
	}
	return tr, nil
}

// sharedModelMagic starts a model file clients share with joiners (see
// clients/client, lifecycle.go): magic, u32 step, u32 parameter count,
// then the parameters as little-endian fp32.
const sharedModelMagic = "PSYMODL1"

// modelFile is a --model file whose step was checked.
type modelFile struct {
	path   string
	shared bool // PSYMODL1, else safetensors
}

// openModelFile checks that path is a model file of run runID at step want
// where it says (a file without a run or step is taken as it is).
func openModelFile(path, runID string, want uint32) (*modelFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, badInputf("--model: %w", err)
	}
	head := make([]byte, len(sharedModelMagic)+8)
	_, err = io.ReadFull(f, head)
	f.Close()
	if err == nil && string(head[:len(sharedModelMagic)]) == sharedModelMagic {
		if got := binary.LittleEndian.Uint32(head[8:]); got != want {
			return nil, badInputf("--model %s holds the model of step %d; step %d replays from the model of step %d", path, got, want+1, want)
		}
		return &modelFile{path: path, shared: true}, nil
	}
	md, err := trainer.CheckpointMetadata(path)
	if err != nil {
		return nil, badInputf("--model: %w (want a checkpoint or model file, or a shared PSYMODL1 model)", err)
	}
	if r, ok := md["run_id"]; ok && r != runID {
		return nil, badInputf("--model %s is a model of run %q, not %q", path, r, runID)
	}
	if st, ok := md["step"]; ok && st != strconv.FormatUint(uint64(want), 10) {
		return nil, badInputf("--model %s holds the model of step %s; step %d replays from the model of step %d", path, st, want+1, want)
	}
	return &modelFile{path: path}, nil
}

// params loads the file's parameters for the run's trainer tr.
func (m *modelFile) params(tr *trainer.Trainer) ([]float32, error) {
	if !m.shared {
		if err := tr.LoadCheckpoint(m.path); err != nil {
			return nil, badInputf("--model: %w", err)
		}
		return tr.Params()
	}
	data, err := os.ReadFile(m.path)
	if err != nil {
		return nil, badInputf("--model: %w", err)
	}
	n := tr.NumParams()
	hdr := len(sharedModelMagic) + 8
	if len(data) != hdr+4*n || binary.LittleEndian.Uint32(data[12:]) != uint32(n) {
		return nil, badInputf("--model %s does not hold the %d parameters of the run's model", m.path, n)
	}
	params := make([]float32, n)
	for i := range params {
		params[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[hdr+4*i:]))
	}
	return params, nil
}

// replayInput is one contribution to replay: the trainer (any state; it is
// replaced), the model's parameters before the step, the replay state the
// trainer committed to, how the contribution is computed, where its
// sequences come from, its batch, and the commitment.
type replayInput struct {
	tr        *trainer.Trainer
	params    []float32
	state     []byte
	published []byte // the payload the trainer published, if known
	u         client.Update
	fetch     client.FetchFunc
	batch     schedule.Assignment
	commit    commitment
}

// replayReport is a replay's outcome.
type replayReport struct {
	match, replayed bool
	payload, after  [32]byte // the replay's hashes (when replayed)
	reason          string   // why it is a MISMATCH, when not the hashes alone
	note            string   // about the --payload file
	diff            string   // the first entry the published and replayed payloads differ in
}

// replayContribution replays in.commit's step and compares the payload and
// the replay state after with the commitment. A state that is not the
// committed one is bad input; a committed state no trainer could have (not
// fresh though committed as fresh, or malformed) is a MISMATCH, as the
// program's verifiers judge it.
func replayContribution(ctx context.Context, in replayInput) (replayReport, error) {
	var rep replayReport
	if h := sha256.Sum256(in.state); h != in.commit.before {
		return rep, badInputf("--state: its sha256 %x is not the committed state_before %x: not the replay state the trainer started this step from", h, in.commit.before)
	}
	if in.commit.fresh && !trainer.FreshReplayState(in.state) {
		rep.reason = "the state was committed as fresh but holds optimizer history"
		return rep, nil
	}
	if err := in.tr.LoadReplayState(in.state, in.params); err != nil {
		if errors.Is(err, trainer.ErrState) {
			rep.reason = fmt.Sprintf("the committed state does not load into the run's model: %v", err)
			return rep, nil
		}
		return rep, err
	}
	payload, _, _, err := in.u.Run(ctx, in.tr, in.fetch, in.batch)
	if err != nil {
		return rep, err
	}
	rs, err := in.tr.ReplayState()
	if err != nil {
		return rep, err
	}
	// The state after a trainer commits to is the one its next step starts
	// from: once the round is applied.
	after, err := in.u.After(rs)
	if err != nil {
		return rep, err
	}
	rep.replayed, rep.payload, rep.after = true, sha256.Sum256(payload), sha256.Sum256(after)
	rep.match = rep.payload == in.commit.payload && rep.after == in.commit.after
	if in.published == nil {
		if rep.payload != in.commit.payload {
			rep.note = "give --payload FILE (the payload the trainer published) to see the first tensor that differs"
		}
		return rep, nil
	}
	if sha256.Sum256(in.published) != in.commit.payload {
		rep.note = "note: the --payload file is not the payload the trainer committed to"
	}
	if !bytes.Equal(in.published, payload) {
		rep.diff = firstDifference(in.tr, &in.u, in.published, payload)
	}
	return rep, nil
}

// firstDifference names the first entry, tensor by tensor in parameter
// order, in which payload a (published) differs from b (replayed).
func firstDifference(tr *trainer.Trainer, u *client.Update, a, b []byte) string {
	decode := func(p []byte) (*trainer.Payload, error) {
		if hp, ok := u.DeMo(); ok {
			return trainer.DecodePayload(tr.Config(), hp, p)
		}
		hp, _ := u.LoCo()
		return trainer.DecodeLoCoPayload(tr.Config(), hp, p)
	}
	pa, err := decode(a)
	if err != nil {
		return fmt.Sprintf("none: the published payload does not decode: %v", err)
	}
	pb, err := decode(b)
	if err != nil {
		return fmt.Sprintf("none: the replayed payload does not decode: %v", err)
	}
	tensors, err := tr.Tensors()
	if err != nil || len(tensors) != len(pa.Tensors) {
		return fmt.Sprintf("none: the model's tensors: %v", err)
	}
	for i := range pa.Tensors {
		ta, tb := &pa.Tensors[i], &pb.Tensors[i]
		for j := range ta.Indices {
			ea, eb := payloadEntry(ta, j), payloadEntry(tb, j)
			if ea != eb {
				return fmt.Sprintf("%d (%s), entry %d (chunk %d, entry %d of %d): published %s, replayed %s",
					i, tensors[i].Name, j, j/ta.K, j%ta.K, ta.K, ea, eb)
			}
		}
	}
	return "none: the payloads hold the same entries"
}

// payloadEntry describes entry j of a decoded payload tensor.
func payloadEntry(t *trainer.PayloadTensor, j int) string {
	if t.Signs != nil {
		sign := "+1"
		if t.Signs[j] {
			sign = "-1"
		}
		return fmt.Sprintf("index %d sign %s", t.Indices[j], sign)
	}
	return fmt.Sprintf("index %d value %g", t.Indices[j], t.Values[j])
}
