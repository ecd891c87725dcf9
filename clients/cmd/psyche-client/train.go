package main

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/psyche-go/psyche/clients/authorizer"
	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/client"
	"github.com/psyche-go/psyche/clients/cmd/psyche-client/p2pflags"
	"github.com/psyche-go/psyche/clients/cmd/psyche-client/statusflags"
	"github.com/psyche-go/psyche/clients/competition/miner"
	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/provider"
	"github.com/psyche-go/psyche/clients/eval"
	"github.com/psyche-go/psyche/clients/p2p"
	"github.com/psyche-go/psyche/clients/status"
	"github.com/psyche-go/psyche/clients/trainer"
	"github.com/psyche-go/psyche/idl"
)

// exitVersionMismatch tells a supervisor to fetch the client version the run
// wants and restart (the reference's convention).
const exitVersionMismatch = 10

func trainCommand() *cli.Command {
	flags := []cli.Flag{
		runIDFlag, walletFlag, insecureKeyfileFlag, rpcFlag, wsRPCFlag,
		&cli.StringFlag{Name: "rpc-2", Usage: "first fallback JSON-RPC endpoint", EnvVars: []string{"RPC_2"}},
		&cli.StringFlag{Name: "ws-rpc-2", Usage: "PubSub endpoint of --rpc-2 (default: derived from it)", EnvVars: []string{"WS_RPC_2"}},
		&cli.StringFlag{Name: "rpc-3", Usage: "second fallback JSON-RPC endpoint", EnvVars: []string{"RPC_3"}},
		&cli.StringFlag{Name: "ws-rpc-3", Usage: "PubSub endpoint of --rpc-3 (default: derived from it)", EnvVars: []string{"WS_RPC_3"}},
		coordinatorProgramFlag, authorizerProgramFlag,
		&cli.StringFlag{Name: "authorizer", EnvVars: []string{"AUTHORIZER"},
			Usage: "grantee of the join authorization to use: your key, or 11111111111111111111111111111111 for a permissionless run (default)"},
		&cli.IntFlag{Name: "micro-batch-size", Usage: "sequences per forward/backward pass: bounds memory and changes no bit of the result", Value: client.DefaultMicroBatch},
		&cli.IntFlag{Name: "threads", Usage: "trainer threads (0: all cores; results do not depend on it)"},
		&cli.StringFlag{Name: "device", Usage: "auto, cpu, cuda, or cuda:N[,M...]: the CUDA devices to spread each step over (every backend and split computes the same bits)", Value: "auto"},
		&cli.IntFlag{Name: "data-parallelism", Usage: "groups of CUDA devices that share each step, each training a whole part of the run's grad_shards token shards (a power of two dividing them; " +
			"a run they do not divide is refused before joining, with exit code 2): devices 0 to N x M - 1, or those --device cuda:... names, in groups of M = --tensor-parallelism", Value: 1},
		&cli.BoolFlag{Name: "recompute-activations", Usage: "on a GPU, keep only each layer's input and recompute the layer in backward: about one layer's activations instead of all, " +
			"for a forward pass more a step, the same bits (default: on only where the run's model fits the GPU only so)"},
		&cli.IntFlag{Name: "tensor-parallelism", Usage: "CUDA devices in each group, which split every linear layer's matrix products along their outputs (1 to 8; the same bits as one device; " +
			"each device holds the whole model, so this spreads compute, not memory)", Value: 1},
		&cli.StringSliceFlag{Name: "precision", Usage: "the numeric contracts this client accepts to train under, comma-separated: fp32 (contract v2) and mx8 (contract v3: " +
			"block-scaled int8 matrix products); a run under another is refused before joining, with exit code 2 (default: every one this build trains, fp32,mx8)"},
		&cli.StringFlag{Name: "data-url", Usage: "data server to train from instead of the run's data location (the run's pinned root still applies)"},
		&cli.StringFlag{Name: "data-dir", Usage: "local dataset directory to train from instead of the run's data location (the run's pinned root still applies)"},
		&cli.StringFlag{Name: "eval-data", Usage: "dataset directory or data server URL of held-out data: reports held-out loss"},
		&cli.StringFlag{Name: "eval-data-root", Usage: "root to pin for an --eval-data URL (required for a server, checked for a directory)"},
		dataCacheDirFlag,
		&cli.IntFlag{Name: "eval-every", Usage: "steps between held-out evaluations", Value: client.DefaultEvalEvery},
		&cli.IntFlag{Name: "eval-sequences", Usage: "held-out sequences per evaluation", Value: client.DefaultEvalSequences},
		&cli.StringSliceFlag{Name: "eval-tasks", Usage: "benchmark tasks to score the model of every epoch on, between epochs, and publish on chain: task files (JSONL, " +
			"as psyche-client eval reads them) and/or " + eval.Builtin},
		&cli.IntFlag{Name: "eval-task-max-docs", Aliases: []string{"eval-limit"}, Usage: "items per --eval-tasks task at most, a sample that --eval-seed picks (0: all)"},
		&cli.Uint64Flag{Name: "eval-seed", Usage: "seed of the items --eval-task-max-docs samples and of --prompt-task's prompt: the same seed, file and count score the same items on every client; " +
			"with --competition, of the pages models are scored on", Value: eval.DefaultSeed},
		&cli.BoolFlag{Name: "prompt-task", Usage: "continue a built-in prompt (picked by --eval-seed and the epoch) with the model of every epoch, up to 32 tokens greedily, log the text and publish the tokens on chain, where anyone can check them"},
		&cli.StringFlag{Name: "tokenizer-file", Usage: "the tokenizer.json of a run whose model names one (json:<sha256>): checked against that hash"},
		&cli.StringFlag{Name: "checkpoint-dir", Usage: "write a safetensors checkpoint at the end of every epoch here (a restart resumes from it; hub checkpoints are kept here too); " +
			"with --competition, the model file of every session and the models it starts from"},
		&cli.IntFlag{Name: "keep-steps", Usage: "checkpoints to keep with --delete-old-steps", Value: client.DefaultKeepSteps},
		&cli.BoolFlag{Name: "delete-old-steps", Usage: "delete all but the newest --keep-steps checkpoints", Value: true},
		&cli.BoolFlag{Name: "hub-upload", Usage: "be a checkpointer: at the end of every epoch upload the model to the run's hub repo and announce it on chain"},
		&cli.StringFlag{Name: "hub-token-file", Usage: "file holding the hub's bearer token for --hub-upload, and for --competition's uploads (default: $" + hubTokenEnv + ")"},
		&cli.StringFlag{Name: "write-gradients-dir", Usage: "write this client's DeMo payload of every step here, with its replay state and the model the step started from (one model file per step) for psyche-client verify; " +
			"the newest --keep-gradients-steps steps are kept"},
		&cli.IntFlag{Name: "keep-gradients-steps", Usage: "the newest steps whose --write-gradients-dir files are kept (older ones are removed). verify replays a step whose commitment the chain holds: " +
			"one of the 4 rounds the Coordinator stores (which every open dispute is about) or one its dispute table (32) names; keep more to replay an older disputed step", Value: client.DefaultGradientsKeep},
		&cli.IntFlag{Name: "linger-secs", Usage: "after the run finished, keep the status endpoints up this long (so watchers see the end) or until Ctrl-C"},
		&cli.Float64Flag{Name: "dummy-training-delay-secs", Usage: "extra seconds per training step (simulates a slower device; with --dummy-training, the step's whole compute time)"},
		&cli.BoolFlag{Name: "dummy-training", Usage: "for testing networks and chains at scale: skip the model's forward and backward passes in this member's steps and send the payload of a zero gradient (it does not train: verifiers dispute it)"},
	}
	for _, f := range p2pflags.Flags() {
		if s, ok := f.(*cli.StringFlag); ok && s.Name == p2pflags.IdentityPath {
			s.Aliases = []string{"i"}
		}
		flags = append(flags, f)
	}
	flags = append(flags, statusflags.Flags()...)
	flags = append(flags, cheatFlags()...)
	flags = append(flags, competitionTrainFlags()...)
	return &cli.Command{
		Name: "train",
		Usage: "join a run and train in it until it is Finished (Ctrl-C leaves the run); with --competition, train a model alone for a " +
			"competition and submit it whenever it improves",
		Flags: flags,
		Action: func(c *cli.Context) error {
			if c.IsSet("competition") {
				return competitionTrain(c)
			}
			if err := refuseFlags(c, func(n string) bool { return competitionTrainOnly[n] }, "without --competition"); err != nil {
				return err
			}
			if err := requireFlags(c, runIDFlag.Name); err != nil {
				return err
			}
			return train(c)
		},
	}
}

// competitionTrainFlags are the flags of train's competition mode
// (competitionTrain); --data-dir, --data-url, --checkpoint-dir, --threads,
// --hub-token-file and --eval-seed serve both modes.
func competitionTrainFlags() []cli.Flag {
	lr, _ := strconv.ParseFloat(strconv.FormatFloat(float64(miner.Defaults.LR), 'g', -1, 32), 64)
	return []cli.Flag{
		&cli.StringFlag{Name: "competition", Usage: "train a model alone for this competition (its id), as SN9's miners do, instead of joining a run: " +
			"sessions of --steps AdamW steps over the competition's dataset (--data-dir/--data-url: a copy of it), each ending with the model " +
			"written to --checkpoint-dir (required), scored on --eval-pages pages of the dataset drawn from sha256 of --eval-seed's decimal digits, " +
			"and uploaded to --hub-repo (required) and submitted when its loss beats the best (the start model's, else the wallet's own entry's) " +
			"by more than the competition's epsilon"},
		competitionProgramFlag,
		&cli.IntFlag{Name: "steps", Usage: "with --competition: training steps of a session", Value: 100},
		&cli.IntFlag{Name: "sessions", Usage: "with --competition: sessions to train", Value: 1},
		&cli.IntFlag{Name: "batch-size", Usage: "with --competition: sequences of a training step", Value: miner.Defaults.Batch},
		&cli.Float64Flag{Name: "learning-rate", Usage: "with --competition: the peak learning rate (reached after a warmup of " +
			strconv.Itoa(miner.Defaults.Warmup) + " steps)", Value: lr},
		&cli.StringFlag{Name: "model-config", Usage: "with --competition: start from fresh weights of this shape: a preset (" +
			strings.Join(trainer.ConfigNames(), ", ") + ") or a model file; the vocabulary is the dataset's, the context the competition's"},
		&cli.Uint64Flag{Name: "init-seed", Usage: "with --competition and --model-config: the seed of the fresh weights"},
		&cli.BoolFlag{Name: "load-best", Usage: "with --competition: start from the model of the entry with the highest weight in the last final round (ties: the lower index)"},
		&cli.StringFlag{Name: "load-submission", Usage: "with --competition: start from this miner's submitted model (its pubkey)"},
		&cli.StringFlag{Name: "hub-repo", Usage: "with --competition: the hub repo submitted models are uploaded to: a base URL such as http://host:9100/comp, or file:///DIR"},
		&cli.IntFlag{Name: "eval-pages", Usage: "with --competition: pages of the dataset each session's model is scored on", Value: 8},
	}
}

func train(c *cli.Context) error {
	runID := c.String(runIDFlag.Name)
	program := coordinator.Default()
	if s := c.String(coordinatorProgramFlag.Name); s != "" {
		id, err := parsePubkey("--"+coordinatorProgramFlag.Name, s)
		if err != nil {
			return err
		}
		program.ID = id
	}
	if _, err := program.InstanceAddress(runID); err != nil {
		return badInput(err)
	}
	key, err := loadSigner(c)
	if err != nil {
		return err
	}
	grantee := authorizer.Everyone
	if s := c.String("authorizer"); s != "" {
		if grantee, err = parsePubkey("--authorizer", s); err != nil {
			return err
		}
	}
	tp := c.Int("tensor-parallelism")
	device, devices, err := trainDevices(c.String("device"), c.Int("data-parallelism"), c.IsSet("data-parallelism"), tp, trainer.GPUCount())
	if err != nil {
		return err
	}
	if err := trainer.GPUAvailable(); device == client.DeviceCUDA && err != nil {
		return badInputf("--device %s: %v; use --device cpu or auto", c.String("device"), err)
	}
	var precisions []string // nil: every contract this build trains
	if c.IsSet("precision") {
		if precisions, err = client.ParsePrecisions(c.StringSlice("precision")); err != nil {
			return badInputf("--precision: %w", err)
		}
	}
	for _, name := range []string{"micro-batch-size", "eval-every", "eval-sequences", "keep-steps", "keep-gradients-steps"} {
		if c.Int(name) < 1 {
			return badInputf("--%s must be at least 1", name)
		}
	}
	if c.Int("threads") < 0 || c.Int("linger-secs") < 0 || c.Int("eval-task-max-docs") < 0 {
		return badInputf("--threads, --linger-secs and --eval-task-max-docs cannot be negative")
	}
	var tasks []eval.Task
	for _, spec := range c.StringSlice("eval-tasks") {
		task, err := eval.Open(c.Context, spec, eval.DefaultBuiltinItems)
		if err != nil {
			return badInputf("--eval-tasks: %w", err)
		}
		tasks = append(tasks, task.Sample(c.Int("eval-task-max-docs"), c.Uint64("eval-seed")))
	}
	delay := c.Float64("dummy-training-delay-secs")
	if delay < 0 || delay > 3600 {
		return badInputf("--dummy-training-delay-secs must be between 0 and 3600")
	}
	if c.IsSet("data-url") && c.IsSet("data-dir") {
		return badInputf("give --data-url or --data-dir, not both")
	}
	hubTok, err := hubToken(c, "hub-token-file")
	if err != nil {
		return err
	}
	chains, loopback, err := trainChains(c)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rec := status.NewRecorder(runID, status.Options{})
	obs, err := statusflags.Start(ctx, c, rec, cancel, statusflags.Terminal{Stdin: os.Stdin, Stdout: c.App.Writer, Stderr: c.App.ErrWriter},
		statusflags.ClientIdentity(key.PublicKey().String(), cmp.Or(os.Getenv("CLIENT_VERSION"), client.Version)))
	if err != nil {
		return badInput(err)
	}
	log := obs.Log
	if c.Bool("dummy-training") {
		log.Warn("--dummy-training: this client computes zero gradients; its contributions do not train the model")
	}

	pcfg, err := p2pflags.Config(c, runID, log)
	if err != nil {
		return badInput(err)
	}
	// Tests and local runs must not reach the internet: on a loopback cluster
	// the public DHT and NAT traversal are off unless asked for.
	if loopback {
		if !c.IsSet(p2pflags.PublicDHT) {
			pcfg.PublicDHT = false
		}
		if !c.IsSet(p2pflags.NATTraversal) {
			pcfg.NATTraversal = false
		}
	}
	// After every check of the flags: the endpoints' answers come last.
	primary, err := reachableChain(ctx, chains)
	if err != nil {
		return badInput(err)
	}
	run, inst, err := program.Open(ctx, primary, runID)
	if err != nil {
		return err
	}
	auth, err := authorizerProgram(c)
	if err != nil {
		return err
	}
	authAddr, _, err := auth.Address(inst.JoinAuthority, grantee, authorizer.JoinRunScope)
	if err != nil {
		return err
	}

	s, err := run.FetchState(ctx, primary)
	if err != nil {
		return err
	}
	if len(tasks) > 0 || c.IsSet("tokenizer-file") {
		if _, err := client.RunTokenizer(&s.Model, c.String("tokenizer-file")); err != nil {
			return badInputf("--tokenizer-file: %w", err)
		}
	}
	pinned := runDataRoot(s)
	var data, eval provider.Provider
	for _, d := range []struct {
		dst        *provider.Provider
		flag, root string
	}{{&data, "data-url", pinned}, {&data, "data-dir", pinned}, {&eval, "eval-data", c.String("eval-data-root")}} {
		loc := c.String(d.flag)
		if loc == "" {
			continue
		}
		p, err := openDataSource(ctx, c, d.flag, loc, d.root)
		if err != nil {
			return err
		}
		defer p.Close()
		*d.dst = p
	}

	node, err := p2p.New(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("start p2p: %w", err)
	}
	defer node.Close()

	ccfg := client.Config{
		RunID: runID, Program: program, Chains: chains, Wallet: key, Authorization: authAddr,
		Node: node, Recorder: rec, Log: log, Version: os.Getenv("CLIENT_VERSION"),
		Data: data, Eval: eval, EvalEvery: c.Int("eval-every"), EvalSequences: c.Int("eval-sequences"),
		MicroBatch: c.Int("micro-batch-size"), Threads: c.Int("threads"), Device: device, Devices: devices, TensorParallelism: tp, RecomputeActivations: c.Bool("recompute-activations"), Precisions: precisions,
		TrainingDelay: time.Duration(delay * float64(time.Second)),
		DummyTraining: c.Bool("dummy-training"),
		CheckpointDir: c.String("checkpoint-dir"), KeepSteps: c.Int("keep-steps"), DeleteOldSteps: c.Bool("delete-old-steps"),
		GradientsDir: c.String("write-gradients-dir"), GradientsKeep: c.Int("keep-gradients-steps"), HubUpload: c.Bool("hub-upload"), HubToken: hubTok,
		EvalTasks: tasks, PromptTask: c.Bool("prompt-task"), EvalSeed: c.Uint64("eval-seed"), Tokenizer: c.String("tokenizer-file"),
		Tracer: obs.Tracer,
	}
	if err := applyCheat(c, &ccfg); err != nil {
		return err
	}
	cl, err := client.New(ccfg)
	if err != nil {
		return badInput(err)
	}
	runErr := cl.Run(ctx)
	if runErr == nil && c.Int("linger-secs") > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(c.Int("linger-secs")) * time.Second):
		}
	}
	cancel()
	waitErr := obs.Wait()
	switch {
	case errors.Is(runErr, client.ErrVersionMismatch):
		return cli.Exit(runErr.Error(), exitVersionMismatch)
	case errors.Is(runErr, client.ErrPrecision), errors.Is(runErr, client.ErrParallelism), errors.Is(runErr, client.ErrMemory), errors.Is(runErr, client.ErrNeedsGPU),
		errors.Is(runErr, client.ErrData):
		// The run and --precision, --data-parallelism or this machine disagree: restarting will not help.
		return badInput(runErr)
	case errors.Is(runErr, context.Canceled):
		return waitErr
	case runErr != nil:
		return runErr
	}
	return waitErr
}

// runDataRoot is the run's pinned data root in hex, "" when none is pinned.
func runDataRoot(s *coordinator.State) string {
	if s.Model.DataRoot == ([32]byte{}) {
		return ""
	}
	return hex.EncodeToString(s.Model.DataRoot[:])
}

// trainChains builds the primary and fallback RPC clients; loopback reports
// whether the primary is on this machine.
func trainChains(c *cli.Context) ([]*chain.Client, bool, error) {
	tables, err := idl.ErrorTables()
	if err != nil {
		return nil, false, err
	}
	var out []*chain.Client
	for _, p := range [][2]string{{rpcFlag.Name, wsRPCFlag.Name}, {"rpc-2", "ws-rpc-2"}, {"rpc-3", "ws-rpc-3"}} {
		rpcURL := c.String(p[0])
		if rpcURL == "" {
			if c.String(p[1]) != "" {
				return nil, false, badInputf("--%s needs --%s", p[1], p[0])
			}
			continue
		}
		cl, err := chain.New(rpcURL, c.String(p[1]))
		if err != nil {
			return nil, false, badInputf("--%s: %w", p[0], err)
		}
		cl.Errors = tables
		out = append(out, cl)
	}
	u, _ := url.Parse(out[0].RPCURL())
	host := u.Hostname()
	ip := net.ParseIP(host)
	return out, host == "localhost" || (ip != nil && ip.IsLoopback()), nil
}

// reachableChain is the first of chains whose endpoint answers, for the
// reads before the client starts (it fails over by itself later). None
// answering is bad input, as for every other command: the endpoints are the
// user's.
func reachableChain(ctx context.Context, chains []*chain.Client) (*chain.Client, error) {
	var errs []string
	for _, cl := range chains {
		err := cl.Ping(ctx)
		if err == nil {
			return cl, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, errors.New(strings.Join(errs, "; "))
}

// parseDevice reads --device: auto, cpu, cuda, or cuda:N[,M...], which
// also returns the CUDA ordinals named.
func parseDevice(s string) (client.Device, []int, error) {
	switch {
	case s == "cpu":
		return client.DeviceCPU, nil, nil
	case s == "auto":
		return client.DeviceAuto, nil, nil
	case s == "cuda":
		return client.DeviceCUDA, nil, nil
	case strings.HasPrefix(s, "cuda:"):
		var ids []int
		for _, f := range strings.Split(strings.TrimPrefix(s, "cuda:"), ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 0 {
				return 0, nil, badInputf("--device %s: %q is not a CUDA device number (cuda:0, or a list such as cuda:0,1)", s, f)
			}
			ids = append(ids, n)
		}
		return client.DeviceCUDA, ids, nil
	}
	return 0, nil, badInputf("--device must be auto, cpu, cuda or cuda:N[,M...], not %q", s)
}

// trainDevices reads train's --device, --data-parallelism and
// --tensor-parallelism against the gpus this machine has: the backend, and
// the CUDA ordinals that share each step, in groups of tp (nil: device 0
// alone).
func trainDevices(s string, dp int, dpSet bool, tp int, gpus int) (client.Device, []int, error) {
	device, ids, err := parseDevice(s)
	if err != nil {
		return 0, nil, err
	}
	if ids != nil && !dpSet && tp >= 1 { // the devices named, in groups of tp
		dp = len(ids) / tp
		switch {
		case len(ids)%tp != 0:
			return 0, nil, badInputf("--device %s names %d devices, which do not split into groups of --tensor-parallelism %d", s, len(ids), tp)
		case dp&(dp-1) != 0:
			return 0, nil, badInputf("--device %s: %d groups of %d devices; data parallelism needs a power of two groups (1, 2, 4, 8, ...)", s, dp, tp)
		}
	}
	flags := fmt.Sprintf("--device %s --data-parallelism %d --tensor-parallelism %d", s, dp, tp)
	switch {
	case dp < 1 || dp&(dp-1) != 0:
		return 0, nil, badInputf("--data-parallelism %d: must be a power of two (1, 2, 4, 8, ...), as the run's grad_shards is", dp)
	case tp < 1 || tp > trainer.MaxTensorParallelism:
		return 0, nil, badInputf("--tensor-parallelism %d: must be 1 to %d", tp, trainer.MaxTensorParallelism)
	case ids != nil && dp*tp != len(ids):
		return 0, nil, badInputf("%s: --device names %d devices, but the parallelism needs %d x %d = %d: name that many, or leave --device out", flags, len(ids), dp, tp, dp*tp)
	case device == client.DeviceCPU && dp*tp > 1:
		return 0, nil, badInputf("%s: parallelism needs CUDA devices, and --device cpu trains on the CPU (its threads: --threads)", flags)
	}
	if ids == nil && dp*tp > 1 {
		device = client.DeviceCUDA
		for i := range dp * tp {
			ids = append(ids, i)
		}
	}
	if len(ids) > 0 && gpus == 0 {
		return 0, nil, badInputf("%s: needs CUDA devices, and this machine has none", flags)
	}
	for _, id := range ids {
		if id >= gpus {
			return 0, nil, badInputf("%s: CUDA device %d does not exist (this machine has %d)", flags, id, gpus)
		}
	}
	return device, ids, nil
}
