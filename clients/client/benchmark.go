package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/data/tokenizer"
	"github.com/psyche-go/psyche/clients/eval"
	"github.com/psyche-go/psyche/clients/status"
)

// Benchmarks (Config.EvalTasks, the reference's --eval-tasks): between
// epochs, in Cooldown or once the run is Finished, a client scores the
// epoch's model on each task, records the scores and publishes them on
// chain with report_eval. The prompt task (Config.PromptTask, the
// reference's --prompt-task) then continues one of eval.Prompts with the
// same model and publishes the tokens with report_prompt. Both run in the
// background on the replay trainer (one task at a time, between replays),
// so the loop keeps its deadlines; a client whose run finished waits for
// them before it stops.

// benchmarkAction scores the model of step (the last of epoch) and
// continues its prompt.
type benchmarkAction struct{ step, epoch uint32 }

func (a benchmarkAction) String() string {
	return fmt.Sprintf("benchmark the model of step %d", a.step)
}

// benchmark decides scoring the model of step once, when it is current.
func (e *engine) benchmark(v *coordinator.View, current bool, step uint32) (action, bool) {
	if !e.benchmarks || !current || step == 0 || e.benchmarked == step {
		return nil, false
	}
	e.benchmarked = step
	return benchmarkAction{step: step, epoch: v.Epoch}, true
}

// startBenchmark scores a copy of the model in the background.
func (c *Client) startBenchmark(ctx context.Context, a benchmarkAction) error {
	tok, err := RunTokenizer(&c.model, c.cfg.Tokenizer)
	if err != nil {
		return err
	}
	params, err := c.tr.Params()
	if err != nil {
		return err
	}
	c.benchmarking.Add(1)
	go func() {
		defer c.benchmarking.Done()
		for _, task := range c.cfg.EvalTasks {
			r, err := c.scoreTask(ctx, params, tok, task)
			if err != nil {
				c.log.Warn("benchmark failed", "task", task.Key, "step", a.step, "err", err)
				continue
			}
			report := coordinator.EvalReport{Step: a.step, Task: r.Key, Acc: float32(r.Acc), AccNorm: float32(r.AccNorm), Count: uint32(r.N)}
			published := c.chain.Submit(ctx, op{kind: opReportEval, eval: report}, false) == nil
			if !published {
				c.log.Warn("benchmark scores not published", "task", r.Key, "step", a.step)
			}
			c.log.Info("benchmark", "task", r.Key, "step", a.step, "acc", r.Acc, "acc_norm", r.AccNorm, "items", r.N, "chance", r.Chance)
			b := status.Benchmark{Step: uint64(a.step), Epoch: uint64(a.epoch), Task: r.Key, Items: r.N, Acc: r.Acc, AccNorm: r.AccNorm, Published: published}
			if err := c.cfg.Recorder.RecordBenchmark(b); err != nil {
				c.log.Warn("benchmark not recorded", "err", err)
			}
		}
		if c.cfg.PromptTask {
			c.promptTask(ctx, params, tok, a)
		}
	}()
	return nil
}

// promptTask continues the epoch's prompt with the model params, logs and
// records the text, and publishes the tokens with report_prompt. Failures
// are logged: they never stop training.
func (c *Client) promptTask(ctx context.Context, params []float32, tok tokenizer.Tokenizer, a benchmarkAction) {
	index := eval.PromptFor(c.cfg.EvalSeed, a.epoch)
	prompt := eval.Prompts[index]
	ids, err := c.continuePrompt(ctx, params, tok, prompt)
	if err == nil && len(ids) == 0 {
		err = errors.New("no token generated")
	}
	if err != nil {
		c.log.Warn("prompt task failed", "prompt", index, "step", a.step, "err", err)
		return
	}
	tokens := make([]uint32, len(ids))
	for i, id := range ids {
		tokens[i] = uint32(id)
	}
	text, err := tok.Decode(tokens)
	if err != nil {
		c.log.Warn("prompt task: tokens do not decode", "prompt", index, "step", a.step, "err", err)
	}
	report := coordinator.PromptReport{Step: a.step, Prompt: uint16(index), Tokens: tokens}
	published := c.chain.Submit(ctx, op{kind: opReportPrompt, prompt: report}, false) == nil
	if !published {
		c.log.Warn("prompt task tokens not published", "prompt", index, "step", a.step)
	}
	c.log.Info("prompt task", "step", a.step, "prompt", index, "text", prompt+text)
	p := status.Prompt{Step: uint64(a.step), Epoch: uint64(a.epoch), Index: index, Prompt: prompt, Tokens: tokens, Text: text, Published: published}
	if err := c.cfg.Recorder.RecordPrompt(p); err != nil {
		c.log.Warn("prompt task not recorded", "err", err)
	}
}

// continuePrompt generates coordinator.MaxPromptTokens tokens at most after
// prompt with the model params, on the replay trainer, as scoreTask scores.
func (c *Client) continuePrompt(ctx context.Context, params []float32, tok tokenizer.Tokenizer, prompt string) ([]int32, error) {
	c.replayMu.Lock()
	defer c.replayMu.Unlock()
	tr, err := c.replayer()
	if err != nil {
		return nil, err
	}
	if err := tr.SetParams(params); err != nil {
		return nil, err
	}
	return eval.Continue(ctx, tr, tok, prompt, coordinator.MaxPromptTokens)
}

// scoreTask scores the model params on task, on the replay trainer. The
// trainer is taken one task at a time, so replays due in the next epoch's
// rounds wait for one task at most.
func (c *Client) scoreTask(ctx context.Context, params []float32, tok tokenizer.Tokenizer, task eval.Task) (eval.Result, error) {
	c.replayMu.Lock()
	defer c.replayMu.Unlock()
	tr, err := c.replayer()
	if err != nil {
		return eval.Result{}, err
	}
	if err := tr.SetParams(params); err != nil {
		return eval.Result{}, err
	}
	return eval.Run(ctx, tr, tok, task)
}

// RunTokenizer is the tokenizer the run's model names: byte, gpt2, or the
// tokenizer.json file a client gives (path), which must be the one the run
// pins by hash.
func RunTokenizer(m *coordinator.Model, path string) (tokenizer.Tokenizer, error) {
	switch m.Tokenizer {
	case coordinator.TokenizerByte:
		return tokenizer.New(tokenizer.ByteName)
	case coordinator.TokenizerGPT2:
		return tokenizer.New(tokenizer.GPT2Name)
	case coordinator.TokenizerJSON:
		if path == "" {
			return nil, fmt.Errorf("the run's tokenizer is the tokenizer.json with sha256 %x: give that file (train --tokenizer-file)", m.TokenizerHash)
		}
		tok, err := tokenizer.LoadJSON(path)
		if err != nil {
			return nil, err
		}
		if tok.Hash() != m.TokenizerHash {
			return nil, fmt.Errorf("tokenizer file %s has sha256 %x, but the run pins %x", path, tok.Hash(), m.TokenizerHash)
		}
		return tok, nil
	}
	return nil, fmt.Errorf("the run's tokenizer tag %d is not one this client knows", m.Tokenizer)
}

// runTokenizerName is the name data shards of the run's tokenizer record.
func runTokenizerName(m *coordinator.Model) string {
	switch m.Tokenizer {
	case coordinator.TokenizerByte:
		return tokenizer.ByteName
	case coordinator.TokenizerGPT2:
		return tokenizer.GPT2Name
	}
	return tokenizer.JSONName(m.TokenizerHash)
}
