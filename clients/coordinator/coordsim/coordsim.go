// Package coordsim runs one Coordinator account on the real run state machine
// (programs/coordinator/logic) without a validator, so that unit tests of
// clients drive whole runs (several clients, several epochs) in milliseconds.
//
// The state machine runs in a child process, programs/coordinator/sim (crate
// psyche-coordinator-sim), which Start builds with cargo on first use (or
// takes prebuilt from $PSYCHE_COORDSIM_BIN, on a machine without cargo). Every
// call sends the instruction data the real client builds (clients/coordinator's
// Run builders over the IDL bindings), the signer, and a clock; the sim decodes
// the arguments with the program's own helpers, runs the logic, and answers
// with the account bytes (the on-chain CoordinatorAccount, discriminator
// included) or the program's error. Errors come back as *chain.TxError named
// from the embedded IDL, as a failed transaction's are:
//
//	var te *chain.TxError
//	if errors.As(err, &te) && te.Name == "TickTooEarly" { ... }
//
// Time is the caller's: now is the Clock's unix_timestamp for that call (keep
// it non-decreasing, as a cluster's is). The SlotHashes entry that seeds each
// round is derived from the seed given to Start and a counter of calls:
// slot = the call's number (from 1), hash = sha256("psyche-coordsim:slot-hash"
// ‖ seed ‖ slot), both little-endian u64; the same calls with the same seed
// give the same rounds.
//
// What the program's glue checks around the logic and the sim does too:
// instruction decoding, the run's main authority (Unauthorized: the sim's
// Authority creates and administers the run), join_run's signer argument,
// checkpoint string lengths, a second init. What it does not model: the
// Authorizer's join authorization (every signer may join: JoinNotAuthorized
// never happens), account metas, signatures, fees and rent, transaction size
// and compute limits, events (read the state instead), and free_coordinator.
package coordsim

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/gagliardetto/solana-go"

	bindings "github.com/psyche-go/psyche/clients/bindings/coordinator"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/idl"
)

// Crate is the cargo package of the simulator, in the programs/ workspace.
const Crate = "psyche-coordinator-sim"

// Response tags of the sim's protocol (programs/coordinator/sim/src/main.rs).
const (
	respOK           = 0
	respProgramError = 1
	respBadRequest   = 2
)

// Sim is one simulated run. Its methods are safe for concurrent use (one call
// at a time).
type Sim struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *tailBuffer
	waited chan struct{}

	seed   uint64
	calls  uint64
	run    coordinator.Run
	errs   chain.ErrorTables
	broken error // set when the process stopped answering

	data  []byte             // the account after the last successful call
	state *coordinator.State // data decoded, on first use (decoding takes about 1 ms)
}

var built struct {
	sync.Mutex
	path string
}

// BinaryEnv names a prebuilt simulator that Binary returns instead of
// building one: for a machine without cargo that runs test binaries built
// elsewhere (scripts/gpu-run.sh).
const BinaryEnv = "PSYCHE_COORDSIM_BIN"

// Binary builds the simulator if needed (cargo build --release -p
// psyche-coordinator-sim in programs/, output in programs/target/release) and
// returns its path; with $PSYCHE_COORDSIM_BIN set, that file, unbuilt. Cargo
// runs once per process; it rebuilds only what changed, so a later process
// reuses the binary.
func Binary(ctx context.Context) (string, error) {
	built.Lock()
	defer built.Unlock()
	if built.path != "" {
		return built.path, nil
	}
	if path := os.Getenv(BinaryEnv); path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("coordsim: $%s: %w", BinaryEnv, err)
		}
		built.path = path
		return path, nil
	}
	programs, err := programsDir()
	if err != nil {
		return "", err
	}
	cargo, err := findCargo()
	if err != nil {
		return "", err
	}
	target := filepath.Join(programs, "target")
	cmd := exec.CommandContext(ctx, cargo, "build", "--release", "--quiet", "-p", Crate,
		"--manifest-path", filepath.Join(programs, "Cargo.toml"), "--target-dir", target)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("coordsim: cargo build -p %s: %w\n%s", Crate, err, out.Bytes())
	}
	path := filepath.Join(target, "release", Crate)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("coordsim: cargo built no %s: %w", path, err)
	}
	built.path = path
	return path, nil
}

func findCargo() (string, error) {
	cargo, err := exec.LookPath("cargo")
	if err != nil {
		return "", fmt.Errorf("coordsim: cargo is needed to build the Coordinator simulator (scripts/setup.sh installs Rust): %w", err)
	}
	return cargo, nil
}

// programsDir finds the Cargo workspace: next to this source file, or above
// the working directory.
func programsDir() (string, error) {
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok {
		dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "programs")
		if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err == nil {
			return filepath.Clean(dir), nil
		}
		tried = append(tried, dir)
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			p := filepath.Join(dir, "programs")
			if _, err := os.Stat(filepath.Join(p, "Cargo.toml")); err == nil {
				return p, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
		tried = append(tried, "above "+wd)
	}
	return "", fmt.Errorf("coordsim: programs/Cargo.toml not found (looked at %v)", tried)
}

// Start builds the simulator if needed and starts a fresh one: an account
// not yet initialised. seed fixes the entropy of every call.
func Start(ctx context.Context, seed uint64) (*Sim, error) {
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	errs, err := idl.ErrorTables()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &Sim{
		cmd:    cmd,
		in:     in,
		out:    bufio.NewReaderSize(out, coordinator.AccountSize+16),
		stderr: &tailBuffer{max: 4096},
		waited: make(chan struct{}),
		seed:   seed,
		run:    coordinator.Run{Program: coordinator.Default()},
		errs:   errs,
	}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("coordsim: starting %s: %w", bin, err)
	}
	go func() {
		_ = cmd.Wait()
		close(s.waited)
	}()
	return s, nil
}

// Close stops the simulator.
func (s *Sim) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.in == nil {
		return nil
	}
	err := s.in.Close()
	s.in = nil
	<-s.waited
	if s.broken == nil {
		s.broken = errors.New("coordsim: closed")
	}
	if st := s.cmd.ProcessState; err == nil && st != nil && !st.Success() {
		err = fmt.Errorf("coordsim: simulator exited with %v: %s", st, s.stderr)
	}
	return err
}

// Authority is the run's main authority (and its payer and join authority):
// Create and SetPaused sign with it.
func (s *Sim) Authority() solana.PublicKey {
	sum := sha256.Sum256([]byte("psyche-coordsim:authority"))
	return solana.PublicKeyFromBytes(sum[:])
}

// State is the account after the last successful call, decoded with
// coordinator.DecodeState (a fresh copy each call; nil before the first).
func (s *Sim) State() *coordinator.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil {
		return nil
	}
	if s.state == nil {
		st, err := coordinator.DecodeState(s.data)
		if err != nil {
			// call checked size and discriminator, and every bit pattern of
			// the fixed layout decodes.
			panic(fmt.Sprintf("coordsim: the account does not decode: %v", err))
		}
		s.state = st
	}
	c := *s.state // arrays and plain values only: a deep copy
	return &c
}

// Account is the raw account data after the last successful call (a copy):
// the bytes a validator would return for the coordinator account.
func (s *Sim) Account() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.data)
}

// Create initializes the run as `psyche-client create-run` and
// `update-config` would (init_coordinator, then an update with the metadata
// if params has one, then one with config, model and progress) and resumes
// it, so that it waits for members.
func (s *Sim) Create(runID, clientVersion string, params coordinator.UpdateParams, now int64) error {
	auth := s.Authority()
	ix, err := bindings.NewInitCoordinatorInstruction(bindings.InitCoordinatorParams{
		MainAuthority: auth,
		JoinAuthority: auth,
		RunId:         runID,
		ClientVersion: clientVersion,
	}, auth, solana.PublicKey{}, solana.PublicKey{}, solana.SystemProgramID)
	if err := s.call(auth, ix, err, now); err != nil {
		return err
	}
	if params.Metadata != nil {
		if err := s.Update(coordinator.UpdateParams{Metadata: params.Metadata}, now); err != nil {
			return err
		}
	}
	if params.Config != nil || params.Model != nil || params.Progress != nil {
		if err := s.Update(coordinator.UpdateParams{Config: params.Config, Model: params.Model, Progress: params.Progress}, now); err != nil {
			return err
		}
	}
	return s.SetPaused(false, now)
}

// Update replaces what params holds, as the main authority.
func (s *Sim) Update(params coordinator.UpdateParams, now int64) error {
	ix, err := s.run.Update(s.Authority(), params)
	return s.call(s.Authority(), ix, err, now)
}

// SetFutureEpochRates sets the rates of the next epoch to form (nil keeps one).
func (s *Sim) SetFutureEpochRates(earning, slashing *uint64, now int64) error {
	ix, err := s.run.SetFutureEpochRates(s.Authority(), earning, slashing)
	return s.call(s.Authority(), ix, err, now)
}

// SetPaused pauses or resumes the run, as the main authority.
func (s *Sim) SetPaused(paused bool, now int64) error {
	ix, err := s.run.SetPaused(s.Authority(), paused)
	return s.call(s.Authority(), ix, err, now)
}

// Join registers signer for the next epoch with its p2p identity.
func (s *Sim) Join(signer solana.PublicKey, p2pIdentity [32]byte, now int64) error {
	ix, err := s.run.JoinRun(signer, solana.PublicKey{}, p2pIdentity)
	return s.call(signer, ix, err, now)
}

// Leave withdraws signer's pending join and leaves the current epoch.
func (s *Sim) Leave(signer solana.PublicKey, now int64) error {
	ix, err := s.run.LeaveRun(signer)
	return s.call(signer, ix, err, now)
}

// Tick advances the run (TickTooEarly when nothing can advance).
func (s *Sim) Tick(signer solana.PublicKey, now int64) error {
	ix, err := s.run.Tick(signer)
	return s.call(signer, ix, err, now)
}

// WarmupWitness reports that signer has the model loaded.
func (s *Sim) WarmupWitness(signer solana.PublicKey, now int64) error {
	ix, err := s.run.WarmupWitness(signer)
	return s.call(signer, ix, err, now)
}

// Witness reports a round as an elected witness.
func (s *Sim) Witness(signer solana.PublicKey, r coordinator.WitnessReport, now int64) error {
	ix, err := s.run.Witness(signer, r)
	return s.call(signer, ix, err, now)
}

// HealthCheck accuses the member at index of not delivering in the previous round.
func (s *Sim) HealthCheck(signer solana.PublicKey, step uint32, index uint16, accused solana.PublicKey, now int64) error {
	ix, err := s.run.HealthCheck(signer, step, index, accused)
	return s.call(signer, ix, err, now)
}

// Checkpoint records where signer uploaded the latest model.
func (s *Sim) Checkpoint(signer solana.PublicKey, repo, revision string, now int64) error {
	ix, err := s.run.Checkpoint(signer, repo, revision)
	return s.call(signer, ix, err, now)
}

// Commit commits signer (the member at c.Index) to its step of the current round.
func (s *Sim) Commit(signer solana.PublicKey, c coordinator.CommitArgs, now int64) error {
	ix, err := s.run.Commit(signer, c)
	return s.call(signer, ix, err, now)
}

// Verify posts signer's verdict on a trainer's commitment.
func (s *Sim) Verify(signer solana.PublicKey, v coordinator.VerifyArgs, now int64) error {
	ix, err := s.run.Verify(signer, v)
	return s.call(signer, ix, err, now)
}

// AnswerDispute answers open MISMATCH dispute id as its trainer with a rerun's hashes.
func (s *Sim) AnswerDispute(signer solana.PublicKey, id uint64, rerunPayload, rerunAfter [32]byte, now int64) error {
	ix, err := s.run.AnswerDispute(signer, id, rerunPayload, rerunAfter)
	return s.call(signer, ix, err, now)
}

// JudgeDispute casts signer's committee vote on open dispute id.
func (s *Sim) JudgeDispute(signer solana.PublicKey, id uint64, vote uint8, now int64) error {
	ix, err := s.run.JudgeDispute(signer, id, vote)
	return s.call(signer, ix, err, now)
}

// ReportEval publishes signer's benchmark score of the model after e.Step.
// The account does not change, and the sim returns no events: success or the
// program's error is all there is to see.
func (s *Sim) ReportEval(signer solana.PublicKey, e coordinator.EvalReport, now int64) error {
	ix, err := s.run.ReportEval(signer, e)
	return s.call(signer, ix, err, now)
}

// ReportPrompt publishes signer's generated tokens for the model after
// p.Step; like ReportEval, it changes nothing and returns no events.
func (s *Sim) ReportPrompt(signer solana.PublicKey, p coordinator.PromptReport, now int64) error {
	ix, err := s.run.ReportPrompt(signer, p)
	return s.call(signer, ix, err, now)
}

// call sends one instruction signed by signer at time now.
func (s *Sim) call(signer solana.PublicKey, ix solana.Instruction, buildErr error, now int64) error {
	if buildErr != nil {
		return buildErr
	}
	data, err := ix.Data()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return s.broken
	}
	s.calls++
	req := make([]byte, 4, 4+80+len(data))
	req = append(req, signer[:]...)
	req = binary.LittleEndian.AppendUint64(req, uint64(now))
	req = binary.LittleEndian.AppendUint64(req, s.calls)
	hash := slotHash(s.seed, s.calls)
	req = append(req, hash[:]...)
	req = append(req, data...)
	binary.LittleEndian.PutUint32(req, uint32(len(req)-4))
	resp, err := s.roundTrip(req)
	if err != nil {
		s.broken = err
		return err
	}
	switch {
	case len(resp) == 1+coordinator.AccountSize && resp[0] == respOK:
		if !bytes.Equal(resp[1:9], bindings.Account_CoordinatorAccount[:]) {
			s.broken = fmt.Errorf("coordsim: the account's discriminator is %x", resp[1:9])
			return s.broken
		}
		s.data, s.state = resp[1:], nil
		return nil
	case len(resp) >= 5 && resp[0] == respProgramError:
		return s.programError(binary.LittleEndian.Uint32(resp[1:5]), string(resp[5:]))
	case len(resp) >= 1 && resp[0] == respBadRequest:
		return fmt.Errorf("coordsim: %s", resp[1:])
	default:
		s.broken = fmt.Errorf("coordsim: malformed response of %d bytes", len(resp))
		return s.broken
	}
}

func (s *Sim) roundTrip(req []byte) ([]byte, error) {
	if _, err := s.in.Write(req); err != nil {
		return nil, s.died(err)
	}
	var n [4]byte
	if _, err := io.ReadFull(s.out, n[:]); err != nil {
		return nil, s.died(err)
	}
	resp := make([]byte, binary.LittleEndian.Uint32(n[:]))
	if _, err := io.ReadFull(s.out, resp); err != nil {
		return nil, s.died(err)
	}
	return resp, nil
}

func (s *Sim) died(err error) error {
	<-s.waited
	return fmt.Errorf("coordsim: simulator stopped (%v, %v): %s", err, s.cmd.ProcessState, s.stderr)
}

// programError is the error a failed transaction of this instruction gives:
// code and name as chain.Client decodes them from the IDL.
func (s *Sim) programError(code uint32, name string) error {
	program := s.run.Program.ID
	te := &chain.TxError{Instruction: 0, Program: program, Kind: "Custom", Code: &code, Name: name}
	if pe, ok := s.errs.Lookup(program, code); ok {
		if pe.Name != name {
			return fmt.Errorf("coordsim: error %d is %s in the simulator but %s in the IDL (stale IDL or simulator)", code, name, pe.Name)
		}
		te.Message = pe.Message
	}
	return te
}

// slotHash is the SlotHashes entry the sim reports for call number slot.
func slotHash(seed, slot uint64) [32]byte {
	b := []byte("psyche-coordsim:slot-hash")
	b = binary.LittleEndian.AppendUint64(b, seed)
	b = binary.LittleEndian.AppendUint64(b, slot)
	return sha256.Sum256(b)
}

// tailBuffer keeps the last max bytes written (the sim's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
