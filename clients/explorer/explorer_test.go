package explorer_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/chain"
	"github.com/psyche-go/psyche/clients/explorer"
	"github.com/psyche-go/psyche/clients/explorer/explorertest"
)

// The API against a real run on localnet: a Treasurer run whose two
// clients trained two steps (witness reports with losses 3.5 and 3.0) and
// scored step 1, beside an unconfigured plain run. Then a round played
// while a browser would be watching arrives over the stream, whether the
// indexer hears of it by websocket or, with an unreachable websocket, by
// polling.
func TestExplorerAPI(t *testing.T) {
	n := sharedNet(t)
	r := trainingRun(t, n, "api-run", 3.5, 3.0)
	if _, err := explorertest.NewRun(testCtx(t, time.Minute), n, "api-idle", 0); err != nil {
		t.Fatal(err)
	}
	_, url, _ := startExplorer(t, n, nil, true)

	var list explorer.RunList
	get(t, url+"/api/runs", 200, &list)
	byID := map[string]explorer.RunSummary{}
	for _, s := range list.Runs {
		byID[s.RunID] = s
	}
	run, idle := byID["api-run"], byID["api-idle"]
	if list.Source != explorer.SourceWebsocket || list.Error != "" || len(list.Runs) < 2 || list.Runs[0].RunID != "api-idle" {
		t.Fatalf("list: source %q error %q, runs %+v (the newest first)", list.Source, list.Error, list.Runs)
	}
	if c := run.Config; run.State != "RoundTrain" || run.Members != 2 || !run.Treasurer || c == nil || c.Architecture != "gpt2" || c.Precision != "fp32" || c.GradShards != 1 ||
		c.Mode != "distro" || c.TotalSteps != 100 || c.BatchStart != 8 || c.Layers != 4 || c.Name != "smoke" ||
		run.LastActivity == nil || run.LastActivity.Time == 0 || run.Account != r.Coord.Account.String() {
		t.Fatalf("api-run: %+v, config %+v", run, run.Config)
	}
	if idle.State != "Uninitialized" || idle.Members != 0 || idle.Treasurer || idle.LastActivity == nil {
		t.Fatalf("api-idle: %+v", idle)
	}

	var d explorer.RunDetail
	get(t, url+"/api/runs/api-run", 200, &d)
	if len(d.Loss) != 2 || d.Loss[0].Loss != 3.5 || d.Loss[1].Loss != 3.0 || d.Loss[1].Step != d.Loss[0].Step+1 ||
		d.Loss[0].Witnesses != 2 || d.Loss[0].TokensPerSec != 1000.5 {
		t.Fatalf("loss curve: %+v", d.Loss)
	}
	if len(d.Evals) != 1 || d.Evals[0].Task != "sotu" || d.Evals[0].Step != 1 || float32(d.Evals[0].AccNorm) != 0.4 ||
		d.Evals[0].Signer != r.Clients[0].PublicKey().String() || d.Evals[0].Signature == "" {
		t.Fatalf("evals: %+v", d.Evals)
	}
	// The run's byte tokenizer decodes the prompt task's tokens.
	if len(d.Prompts) != 1 || d.Prompts[0].Step != 1 || d.Prompts[0].Prompt != 3 || d.Prompts[0].Text != "hi!" ||
		!slices.Equal(d.Prompts[0].Tokens, []uint32{'h', 'i', '!'}) || d.Prompts[0].Signer != r.Clients[0].PublicKey().String() {
		t.Fatalf("prompts: %+v", d.Prompts)
	}
	if len(d.MemberList) != 2 {
		t.Fatalf("members: %+v", d.MemberList)
	}
	for i, m := range d.MemberList {
		if m.Index == nil || *m.Index != i || m.State != "healthy" || m.Claimable == nil || m.Claimed == nil ||
			!slices.ContainsFunc(r.Clients, func(k solana.PrivateKey) bool { return k.PublicKey().String() == m.Signer }) {
			t.Fatalf("member %d: %+v", i, m)
		}
	}
	var phases []string
	for _, p := range d.Timeline {
		phases = append(phases, p.From+">"+p.To)
	}
	if got := strings.Join(phases, " "); !strings.Contains(got, "Uninitialized>WaitingForMembers WaitingForMembers>Warmup Warmup>RoundTrain RoundTrain>RoundWitness RoundWitness>RoundTrain") {
		t.Fatalf("timeline: %s", got)
	}
	if len(d.Rounds) < 2 || !d.Rounds[0].Current || d.Rounds[0].Step != d.Loss[1].Step+1 {
		t.Fatalf("rounds: %+v", d.Rounds)
	}
	if played := d.Rounds[1]; played.Step != d.Loss[1].Step || played.WitnessesReported != 2 || len(played.Witnesses) != 2 ||
		played.Witnesses[0].Loss == nil || *played.Witnesses[0].Loss != 3.0 || played.Witnesses[0].Participants == nil ||
		*played.Witnesses[0].Participants != 2 || played.Witnesses[0].Signature == "" {
		t.Fatalf("the last round played: %+v", played)
	}
	joined := 0
	for _, e := range d.Events {
		if e.Name == "ClientJoined" && slices.ContainsFunc(r.Clients, func(k solana.PrivateKey) bool { return strings.HasPrefix(e.Text, k.PublicKey().String()+" joined") }) {
			joined++
		}
	}
	if joined != 2 {
		t.Fatalf("events: %+v", d.Events)
	}
	if tr := d.Treasury; tr == nil || tr.Balance != 1_000_000 || tr.Decimals != 6 || tr.Mint != r.Mint.PublicKey().String() ||
		tr.TokenAccount != r.Treasury.Collateral.String() || tr.Funding.EarningRate != 1000 || tr.Withdrawable != 1_000_000 {
		t.Fatalf("treasury: %+v", d.Treasury)
	}
	if v := d.Verification; v == nil || v["percent"] != 0.0 || len(v["rounds"].([]any)) != len(d.Rounds) {
		t.Fatalf("verification: %v", d.Verification)
	}

	// Unknown runs and pages: 404 with a message, and the server stays up.
	for _, path := range []string{"/api/runs/nope", "/api/runs/" + strings.Repeat("x", 40), "/api/runs/nope/stream"} {
		if body := get(t, url+path, 404, nil); !strings.Contains(body, `"error":"no such run`) {
			t.Errorf("GET %s: %s", path, body)
		}
	}
	if body := get(t, url+"/runs/nope%2Fother", 404, nil); !strings.Contains(body, `no such run &#34;nope/other&#34; on this cluster`) {
		t.Errorf("GET /runs/nope%%2Fother: %s", body)
	}
	if body := get(t, url+"/elsewhere", 404, nil); !strings.Contains(body, "the explorer serves / and /runs/RUN_ID") {
		t.Errorf("GET /elsewhere: %s", body)
	}
	if page := get(t, url+"/runs/api-run", 200, nil); !strings.Contains(page, `<script src="/static/app.js"`) {
		t.Errorf("run page: %s", page)
	}

	// A new round arrives over the stream (websocket), and so does a new run.
	stream := openStream(t, url+"/api/runs/api-run/stream")
	runs := openStream(t, url+"/api/stream")
	stream.until(t, 10*time.Second, &d, func() bool { return len(d.Loss) == 2 })
	start := time.Now()
	playRound(t, r, 2.5)
	stream.until(t, 20*time.Second, &d, func() bool { return len(d.Loss) == 3 && d.Loss[2].Loss == 2.5 })
	t.Logf("websocket: the round's witness reports reached the stream %v after the round started being played", time.Since(start))
	if _, err := explorertest.NewRun(testCtx(t, time.Minute), n, "api-new", 0); err != nil {
		t.Fatal(err)
	}
	runs.until(t, 20*time.Second, &list, func() bool {
		return slices.ContainsFunc(list.Runs, func(s explorer.RunSummary) bool { return s.RunID == "api-new" })
	})

	// With a websocket endpoint that does not answer, the indexer polls.
	deaf, err := chain.New(n.Chain.RPCURL(), "ws://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	_, url2, logs := startExplorer(t, n, deaf, true)
	var d2 explorer.RunDetail
	polled := openStream(t, url2+"/api/runs/api-run/stream")
	polled.until(t, 10*time.Second, &d2, func() bool { return d2.Source == explorer.SourcePolling && lossValues(&d2) == lossValues(&d) })
	playRound(t, r, 2.0)
	polled.until(t, 20*time.Second, &d2, func() bool { return len(d2.Loss) == 4 && d2.Loss[3].Loss == 2.0 })
	if !strings.Contains(logs.String(), "websocket updates stopped; polling until they resume") {
		t.Errorf("no log line says the explorer polls:\n%s", logs)
	}
}

// A run whose only step's dispute found a member at fault, then finished:
// the list and the run say step 1 (the program's step is then 2, past
// total_steps 1), and the events name the member faulted beside the
// dispute's own events.
func TestExplorerMemberFault(t *testing.T) {
	n := sharedNet(t)
	_, member := faultedRun(t, n)
	_, url, _ := startExplorer(t, n, nil, true)

	var list explorer.RunList
	get(t, url+"/api/runs", 200, &list)
	i := slices.IndexFunc(list.Runs, func(s explorer.RunSummary) bool { return s.RunID == "fault-run" })
	if i < 0 || list.Runs[i].State != "Finished" || list.Runs[i].Step != 1 {
		t.Fatalf("runs: %+v", list.Runs)
	}
	var d explorer.RunDetail
	get(t, url+"/api/runs/fault-run", 200, &d)
	if d.State != "Finished" || d.Step != 1 || d.Config == nil || d.Config.TotalSteps != 1 {
		t.Fatalf("fault-run: state %s, step %d, config %+v", d.State, d.Step, d.Config)
	}
	var names []string
	var fault *explorer.EventView
	for i, e := range d.Events {
		names = append(names, e.Name)
		if e.Name == explorer.MemberFaulted {
			fault = &d.Events[i]
		}
	}
	if got := strings.Join(names, " "); !strings.Contains(got, "DisputeOpened") || !strings.Contains(got, "DisputeSettled MemberFaulted") {
		t.Fatalf("events: %s", got)
	}
	var fields struct {
		Member, Role string
		Dispute      uint64
		Step         uint32
	}
	if err := json.Unmarshal(fault.Data, &fields); err != nil {
		t.Fatal(err)
	}
	if fields.Member != member.String() || fields.Role != "trainer" || fields.Dispute != 1 || fields.Step != 1 ||
		!strings.HasPrefix(fault.Text, member.String()+" faulted by dispute 1 (its step 1 was found wrong): slashed") {
		t.Fatalf("MemberFaulted: %s %s", fault.Text, fault.Data)
	}
}

// While the RPC endpoint fails, the API says since when (the data stays),
// the log says so once however many retries fail, and once when reads work
// again, which the API shows too.
func TestExplorerChainUnreachable(t *testing.T) {
	n := sharedNet(t)
	sw := newRPCSwitch(t, n.Chain.RPCURL())
	c, err := chain.New(sw.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	_, url, logs := startExplorer(t, n, c, false)
	runs := openStream(t, url+"/api/stream")
	var list explorer.RunList
	runs.until(t, 10*time.Second, &list, func() bool { return list.Error == "" && list.ErrorSince == 0 })
	before := len(list.Runs)

	sw.down.Store(true)
	start := time.Now().Unix()
	runs.until(t, 20*time.Second, &list, func() bool { return list.Error != "" })
	if list.ErrorSince < start || list.ErrorSince > time.Now().Unix() || !strings.Contains(list.Error, "503") || len(list.Runs) != before {
		t.Fatalf("while the endpoint fails: error %q since %d (turned off at %d), %d runs (%d before)", list.Error, list.ErrorSince, start, len(list.Runs), before)
	}
	sw.waitRefused(t, 4)
	if n := strings.Count(logs.String(), "reading the chain failed"); n != 1 {
		t.Errorf("%d log lines say reading the chain failed after %d failed requests, want 1:\n%s", n, sw.refused.Load(), logs)
	}
	sw.down.Store(false)
	runs.until(t, time.Minute, &list, func() bool { return list.Error == "" })
	if list.ErrorSince != 0 {
		t.Errorf("reads work again, but error_since is %d", list.ErrorSince)
	}
	if n := strings.Count(logs.String(), "reading the chain works again"); n != 1 {
		t.Errorf("%d log lines say reading the chain works again, want 1:\n%s", n, logs)
	}
}
