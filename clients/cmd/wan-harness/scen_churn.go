package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/psyche-go/psyche/clients/wallet"
)

func init() {
	register("churn", "scenario 3: every epoch a third of the clients leave or are killed and new ones join", cmdChurn)
}

// churnEpoch is what happened in one epoch.
type churnEpoch struct {
	Epoch          int
	Members        int
	Left, Killed   []string
	Joined         []string
	Rounds         int
	MaxRound       float64
	OverLimit      int
	Dropped        []string // members the chain marked dropped or faulted
	HonestDropped  []string // of them, clients the harness did not kill
	StartStep      int
	LastStep       int
	HealthyAtClose int
}

func cmdChurn(ctx context.Context, args []string) error {
	fs := newFlags("churn", "[-clients 6] [-shape 100/50ms/0.5] [-steps 40] [-epoch 40]")
	n := fs.Int("clients", 6, "clients at any time (a third of them leave or die each epoch)")
	shape := fs.String("shape", "100/50ms/0.5", "every client's link")
	steps := fs.Int("steps", 40, "total_steps")
	epoch := fs.Int("epoch", 40, "epoch_time in seconds")
	afterRounds := fs.Int("after-rounds", 3, "churn once this many rounds of an epoch have started")
	timeout := fs.Duration("timeout", 25*time.Minute, "give up after this long")
	seed := fs.Uint64("seed", 1, "which clients leave or die")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, err := parseShape(*shape)
	if err != nil {
		return err
	}
	dir := workDir("churn")
	maxRound, witness := 20, 1
	opt := clusterOptions{Net: netShaped, Config: "tiny", Name: "churn", Dir: dir, Linger: 20,
		Overrides: map[string]string{
			"config.total_steps":             strconv.Itoa(*steps),
			"config.epoch_time":              strconv.Itoa(*epoch),
			"config.warmup_time":             "15",
			"config.cooldown_time":           "5",
			"config.max_round_train_time":    strconv.Itoa(maxRound),
			"config.round_witness_time":      strconv.Itoa(witness),
			"config.init_min_clients":        strconv.Itoa(*n),
			"config.min_clients":             "2",
			"model.cold_start_warmup_steps":  "1",
			"config.global_batch_size_start": "8",
			"config.global_batch_size_end":   "8",
		}}
	c, err := newCluster(ctx, opt, os.Stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(*seed, 7))
	pubOf := map[string]*Client{}
	addStart := func(k int) ([]*Client, error) {
		cls, err := c.AddClients(ctx, k, s)
		if err != nil {
			return nil, err
		}
		for _, cl := range cls {
			key, err := wallet.Load(cl.Wallet)
			if err != nil {
				return nil, err
			}
			pubOf[key.PublicKey().String()] = cl
			if err := c.StartClient(cl); err != nil {
				return nil, err
			}
		}
		return cls, nil
	}
	if err := c.Resume(ctx); err != nil {
		return err
	}
	alive, err := addStart(*n)
	if err != nil {
		return err
	}
	c.say("%d clients started; a third of them leave (SIGINT) or are killed (SIGKILL) once %d rounds of each epoch started", *n, *afterRounds)
	gone := map[*Client]string{} // client -> "left" or "killed"
	epochs := map[int]*churnEpoch{}
	churned := map[int]bool{}
	deadline := time.Now().Add(*timeout)
	var finished bool
	var lastErr error
	lastPhase := ""
	for !finished {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			lastErr = fmt.Errorf("the run did not finish within %v", *timeout)
			break
		}
		st, err := c.RunState(ctx)
		if err != nil {
			if lastErr == nil || lastErr.Error() != err.Error() {
				c.say("reading the run: %v", err)
			}
			lastErr = err
			time.Sleep(2 * time.Second)
			continue
		}
		lastErr = nil
		phase, _ := st["run_state"].(string)
		prog, _ := st["progress"].(map[string]any)
		ep, _ := st["epoch"].(map[string]any)
		epNum := int(num(prog, "epoch"))
		step := int(num(prog, "step"))
		startStep := int(num(ep, "start_step"))
		if tr := fmt.Sprintf("epoch %d", epNum); tr != lastPhase {
			c.say("epoch %d: %s at step %d", epNum, phase, step)
			lastPhase = tr
		}
		e := epochs[epNum]
		if e == nil && (phase == "RoundTrain" || phase == "RoundWitness" || phase == "Warmup") {
			e = &churnEpoch{Epoch: epNum, StartStep: startStep}
			epochs[epNum] = e
		}
		if e != nil {
			members, _ := ep["members"].([]any)
			healthy := 0
			if len(members) > e.Members {
				e.Members = len(members)
			}
			for _, m := range members {
				mm, _ := m.(map[string]any)
				state, _ := mm["state"].(string)
				signer, _ := mm["signer"].(string)
				cl := pubOf[signer]
				name := signer[:8]
				if cl != nil {
					name = cl.Name
				}
				switch state {
				case "healthy":
					healthy++
				case "dropped", "faulted":
					if !slices.Contains(e.Dropped, name) {
						e.Dropped = append(e.Dropped, name)
						if cl == nil || gone[cl] == "" {
							e.HonestDropped = append(e.HonestDropped, name)
						}
						c.say("epoch %d: the chain marks %s %s", epNum, name, state)
					}
				}
			}
			e.HealthyAtClose = healthy
			if step > e.LastStep && (phase == "RoundTrain" || phase == "RoundWitness" || phase == "Cooldown") {
				e.LastStep = step
			}
		}
		if phase == "Finished" {
			finished = true
			break
		}
		// Churn once this epoch has run a few rounds, unless the run is about
		// to end (the next epoch must have time to take the joiners in).
		// Either phase of a round: polls every second or two alias with rounds
		// of about 2 s, so requiring one phase could miss a whole epoch.
		if e != nil && !churned[epNum] && (phase == "RoundTrain" || phase == "RoundWitness") && step-startStep >= *afterRounds && step+5 < *steps {
			churned[epNum] = true
			k := max(1, len(alive)/3)
			perm := rng.Perm(len(alive))
			var victims []*Client
			for _, i := range perm[:k] {
				victims = append(victims, alive[i])
			}
			for j, v := range victims {
				if j%2 == 0 {
					v.P.Signal(syscall.SIGINT)
					gone[v] = "left"
					e.Left = append(e.Left, v.Name)
				} else {
					v.P.Signal(syscall.SIGKILL)
					gone[v] = "killed"
					e.Killed = append(e.Killed, v.Name)
				}
			}
			alive = slices.DeleteFunc(alive, func(c *Client) bool { return gone[c] != "" })
			joined, err := addStart(k)
			if err != nil {
				return err
			}
			for _, j := range joined {
				e.Joined = append(e.Joined, j.Name)
			}
			alive = append(alive, joined...)
			c.say("epoch %d, step %d: left %v, killed %v, joining %v", epNum, step, e.Left, e.Killed, e.Joined)
		}
		for _, cl := range alive {
			if ok, err := cl.P.Exited(); ok && !cl.Events.Finished() {
				lastErr = fmt.Errorf("client %s exited (%v); see %s", cl.Name, err, cl.P.Log)
			}
		}
		time.Sleep(2 * time.Second)
	}
	// Let the survivors log Finished.
	for _, cl := range alive {
		for range 60 {
			if cl.Events.Finished() {
				break
			}
			time.Sleep(time.Second)
		}
	}
	// Round times per epoch from the survivors' and the leavers' logs.
	limit := float64(maxRound + witness + 3)
	var all []*Client
	all = append(all, c.Clients()...)
	var res trainingResult
	collect(context.WithoutCancel(ctx), c, all, &res)
	perStep := map[int]float64{}
	for _, cl := range all {
		lg := cl.Events.snapshot()
		for s, ev := range lg.steps {
			if ev.Trained && ev.Round > perStep[int(s)] {
				perStep[int(s)] = ev.Round
			}
		}
	}
	var eps []int
	for k := range epochs {
		eps = append(eps, k)
	}
	slices.Sort(eps)
	for i, k := range eps {
		e := epochs[k]
		end := e.LastStep
		if i+1 < len(eps) {
			end = min(end, epochs[eps[i+1]].StartStep-1)
		}
		for s := e.StartStep; s <= end; s++ {
			if r, ok := perStep[s]; ok {
				e.Rounds++
				e.MaxRound = max(e.MaxRound, r)
				if r > limit {
					e.OverLimit++
				}
			}
		}
	}
	survivorsFinished := 0
	for _, cl := range alive {
		if cl.Events.Finished() {
			survivorsFinished++
		}
	}
	honest := 0
	fmt.Printf("\nscenario 3: churn, %d clients on %s links, epoch_time %d s, max_round_train_time %d s (files: %s)\n", *n, s, *epoch, maxRound, dir)
	tb := newTable("epoch", "steps", "members", "left (SIGINT)", "killed (SIGKILL)", "joined", "rounds timed", "longest round", "rounds over limit", "dropped by the chain", "honest clients dropped")
	for _, k := range eps {
		e := epochs[k]
		honest += len(e.HonestDropped)
		last := e.LastStep
		if j := slices.Index(eps, k); j+1 < len(eps) {
			last = min(last, epochs[eps[j+1]].StartStep-1)
		}
		tb.Row(e.Epoch, fmt.Sprintf("%d-%d", e.StartStep, last), e.Members, list(e.Left), list(e.Killed), list(e.Joined),
			e.Rounds, fmtSec(e.MaxRound), fmt.Sprintf("%d (limit %.0f s)", e.OverLimit, limit), list(e.Dropped), list(e.HonestDropped))
	}
	tb.Print(os.Stdout)
	var short []string
	for s := range res.IncompleteSteps {
		short = append(short, strconv.FormatUint(s, 10))
	}
	slices.SortFunc(short, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	fmt.Printf("run Finished: %v; survivors that logged Finished: %d/%d; digests equal at %d/%d steps compared\n",
		finished, survivorsFinished, len(alive), res.Compared-res.Mismatched, res.Compared)
	fmt.Printf("steps applied without some member's payload (expected: the rounds a killed member was in): %s\n", list(short))
	over := 0
	for _, e := range epochs {
		over += e.OverLimit
	}
	switch {
	case lastErr != nil:
		return lastErr
	case !finished:
		return fmt.Errorf("the run did not reach Finished")
	case honest > 0:
		return fmt.Errorf("%d honest clients were dropped", honest)
	case over > 0:
		return fmt.Errorf("%d rounds took longer than their limit", over)
	case res.Mismatched > 0:
		return fmt.Errorf("digests differ at %d steps", res.Mismatched)
	}
	return nil
}

func num(m map[string]any, k string) float64 {
	v, _ := m[k].(float64)
	return v
}

func list(v []string) string {
	if len(v) == 0 {
		return "-"
	}
	return strings.Join(v, " ")
}
