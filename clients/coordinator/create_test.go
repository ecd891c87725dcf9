package coordinator_test

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/gagliardetto/solana-go"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/localnet/localnettest"
)

// An account written by the program decodes with the generated bindings, and
// every field holds what the instructions set.
func TestCreateUpdateDecode(t *testing.T) {
	e := setup(t, "decode-run")
	inst, err := e.p.FetchInstance(e.ctx(), e.c, e.run.Instance)
	if err != nil {
		t.Fatal(err)
	}
	if inst.RunId != "decode-run" || !inst.MainAuthority.Equals(e.authority.PublicKey()) || !inst.CoordinatorAccount.Equals(e.run.Account) {
		t.Fatalf("instance %+v", inst)
	}
	s := e.state()
	if coordinator.Phase(s) != coordinator.Uninitialized || s.Version != coordinator.StateVersion || s.Nonce != 0 ||
		coordinator.FixedString(s.RunId[:]) != "decode-run" || coordinator.FixedString(s.ClientVersion[:]) != "v1" {
		t.Fatalf("fresh state: phase %v version %d nonce %d run %q client %q", coordinator.Phase(s), s.Version, s.Nonce, s.RunId, s.ClientVersion)
	}

	var meta coordinator.RunMetadata
	copy(meta.Name[:], "decode test")
	copy(meta.Description[:], "a run whose fields are read back")
	meta.NumParameters, meta.VocabSize = 1234567, 256
	// The shipped light config is accepted by the program as it is.
	light, err := coordinator.LoadRunConfig("../../config/tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	lp, err := light.Params()
	if err != nil {
		t.Fatal(err)
	}
	e.mustSend(e.authority, e.ix(e.run.Update(e.authority.PublicKey(), coordinator.UpdateParams{Config: lp.Config, Model: lp.Model})))
	// A fine-tuned Llama 3.1 with every knob: the account holds the run
	// config's model.
	knobs := withLines(t, "../../config/llama-tiny.toml", "rope_theta", llama3Knobs)
	kp := parseParams(t, "knobs.toml", []byte(strings.Replace(string(knobs), `data_type = "pretraining"`, `data_type = "finetuning"`, 1)))
	e.mustSend(e.authority, e.ix(e.run.Update(e.authority.PublicKey(), coordinator.UpdateParams{Config: kp.Config, Model: kp.Model})))
	if got := e.state().Model; got != *kp.Model || !coordinator.FineTuning(&got) || got.QkvBias != 1 || got.RopeScaling != coordinator.RopeLlama3 {
		t.Errorf("the account's model %+v, want the run config's %+v", got, *kp.Model)
	}
	config, model := testRun(t)
	// A tokenizer.json model: the program wants its hash, and stores it.
	model.Tokenizer = coordinator.TokenizerJSON
	e.expectError("ModelTokenizer", e.authority, e.ix(e.run.Update(e.authority.PublicKey(), coordinator.UpdateParams{Model: &model})))
	model.TokenizerHash = sha256.Sum256([]byte("tokenizer.json"))
	progress := coordinator.Progress{Step: 3, DataIndex: 77}
	e.mustSend(e.authority, e.ix(e.run.Update(e.authority.PublicKey(), coordinator.UpdateParams{Metadata: &meta})))
	e.mustSend(e.authority, e.ix(e.run.Update(e.authority.PublicKey(), coordinator.UpdateParams{Config: &config, Model: &model, Progress: &progress})))
	earning, slashing := uint64(1000), uint64(7)
	e.mustSend(e.authority, e.ix(e.run.SetFutureEpochRates(e.authority.PublicKey(), &earning, &slashing)))
	e.mustSend(e.authority, e.ix(e.run.UpdateClientVersion(e.authority.PublicKey(), "v2")))

	s = e.state()
	if s.Metadata != meta || s.Config != config || s.Model != model || s.Progress != progress {
		t.Errorf("decoded state differs from what was set:\nmeta %+v\nconfig %+v\nmodel %+v\nprogress %+v", s.Metadata, s.Config, s.Model, s.Progress)
	}
	if s.FutureRates.EarningRateTotalShared != earning || s.FutureRates.SlashingRatePerClient != slashing {
		t.Errorf("future rates %+v", s.FutureRates)
	}
	if got := coordinator.FixedString(s.ClientVersion[:]); got != "v2" || s.Nonce != 6 {
		t.Errorf("client version %q nonce %d", got, s.Nonce)
	}

	// The run id is taken: a second init for it fails and changes nothing.
	account := solana.NewWallet().PrivateKey
	ixs, _, err := e.p.CreateRun(e.ctx(), e.c, e.authority.PublicKey(), account.PublicKey(), coordinator.CreateParams{
		RunID: "decode-run", MainAuthority: e.authority.PublicKey(), JoinAuthority: e.authority.PublicKey(), ClientVersion: "v1",
	})
	if err != nil {
		t.Fatal(err)
	}
	e.expectError("AlreadyInitialized", e.authority, ixs, account)

	// Closing returns both accounts' rent to the spill account.
	spill := solana.NewWallet().PublicKey()
	held := uint64(0)
	for _, a := range []solana.PublicKey{e.run.Instance, e.run.Account} {
		b, err := e.c.Balance(e.ctx(), a)
		if err != nil {
			t.Fatal(err)
		}
		held += b
	}
	e.mustSend(e.authority, e.ix(e.run.Free(e.authority.PublicKey(), spill)))
	if got, _ := e.c.Balance(e.ctx(), spill); got != held {
		t.Errorf("spill got %d, want %d", got, held)
	}
	for _, a := range []solana.PublicKey{e.run.Instance, e.run.Account} {
		if data, _, err := e.c.AccountData(e.ctx(), a); err == nil && !bytes.Equal(data, nil) {
			t.Errorf("%s still holds %d bytes after free_coordinator", a, len(data))
		}
	}

	// A freed run id is free (programs/coordinator/program/README.md):
	// anyone may take it again, and nothing of the old run carries over.
	other := localnettest.NewFundedKeypair(t, e.v, 5*solana.LAMPORTS_PER_SOL)
	account = solana.NewWallet().PrivateKey
	ixs, run, err := e.p.CreateRun(e.ctx(), e.c, other.PublicKey(), account.PublicKey(), coordinator.CreateParams{
		RunID: "decode-run", MainAuthority: other.PublicKey(), JoinAuthority: other.PublicKey(), ClientVersion: "v9",
	})
	if err != nil {
		t.Fatal(err)
	}
	e.mustSend(other, ixs, account)
	_, inst, err = e.p.Open(e.ctx(), e.c, "decode-run")
	if err != nil || !inst.MainAuthority.Equals(other.PublicKey()) {
		t.Fatalf("the re-created run: %+v, %v; want %s its main authority", inst, err, other.PublicKey())
	}
	if s, err := run.FetchState(e.ctx(), e.c); err != nil || s.Nonce != 0 || s.Progress.Step != 0 && s.Progress.Step != 1 {
		t.Fatalf("the re-created run's state carries something over: %+v, %v", s.Progress, err)
	}
}
