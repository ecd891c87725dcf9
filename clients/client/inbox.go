package client

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/psyche-go/psyche/clients/coordinator"
	"github.com/psyche-go/psyche/clients/p2p"
)

// inbox is what arrives from peers while the loop runs: payload
// announcements and the validated payloads, announced model roots, and a
// finished model download. It is the only client state that other
// goroutines write; the loop reads it through snapshots.
type inbox struct {
	node network
	self peer.ID
	log  *slog.Logger
	// spawn runs background work (payload fetches); tests run it inline.
	spawn func(func())

	mu          sync.Mutex
	curStep     uint32 // newest round step seen: bounds what peers may announce
	appliedStep uint32 // newest step applied: announcements up to it are dropped
	anns        map[uint32]map[peer.ID]p2p.Announcement
	payloads    map[p2p.Hash][]byte // validated payloads by hash
	roots       map[uint32]map[peer.ID]p2p.Hash
	loaded      *loadedModel
	verdicts    map[replayKey]replayResult // replays finished in the background
	judgements  map[uint64]judgement       // replays of disputed contributions
	// validator checks payloads: the model's trainer, set once it is built
	// (a payload's shape does not depend on the weights).
	validator replica
	model     coordinator.Model
}

func newInbox(node network, log *slog.Logger) *inbox {
	return &inbox{node: node, self: node.ID(), log: log, spawn: func(f func()) { go f() },
		anns: map[uint32]map[peer.ID]p2p.Announcement{}, payloads: map[p2p.Hash][]byte{}, roots: map[uint32]map[peer.ID]p2p.Hash{},
		verdicts: map[replayKey]replayResult{}, judgements: map[uint64]judgement{}}
}

// setValidator makes tr check the payloads of model from now on.
func (b *inbox) setValidator(tr replica, model coordinator.Model) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.validator, b.model = tr, model
}

// setStep records the run's current step.
func (b *inbox) setStep(step uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.curStep = step
}

// run reads the p2p messages until ctx ends.
func (b *inbox) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-b.node.Messages():
			if !ok {
				return
			}
			b.deliver(ctx, m)
		}
	}
}

// deliver keeps an announcement of a step this client has yet to apply (up
// to the next step) and fetches and validates its payload in the
// background; and keeps the model roots peers announce.
func (b *inbox) deliver(ctx context.Context, m p2p.Message) {
	if f := m.Finished; f != nil && f.Signer != b.self {
		b.recordShare(f)
		return
	}
	a := m.Announcement
	if a == nil || a.Signer == b.self {
		return
	}
	b.mu.Lock()
	cur, applied := b.curStep, b.appliedStep
	_, dup := b.anns[uint32(a.Step)][a.Signer]
	b.mu.Unlock()
	if dup || a.Step <= uint64(applied) || a.Step > uint64(cur)+1 || a.Step+maxBufferedSteps < uint64(cur) {
		return
	}
	b.store(*a, nil)
	ann := *a
	b.spawn(func() {
		if _, err := b.fetch(ctx, ann); err != nil {
			b.log.Debug("payload fetch failed", "step", ann.Step, "from", ann.Signer, "err", err)
		}
	})
}

// fetch downloads a's payload (hash-checked by the p2p layer) and keeps it
// if it is valid.
func (b *inbox) fetch(ctx context.Context, a p2p.Announcement) ([]byte, error) {
	data, err := b.node.FetchBlob(ctx, a)
	if err != nil {
		return nil, err
	}
	if err := b.keep(a, data); err != nil {
		return nil, err
	}
	return data, nil
}

func (b *inbox) store(a p2p.Announcement, payload []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	step := uint32(a.Step)
	if b.anns[step] == nil {
		b.anns[step] = map[peer.ID]p2p.Announcement{}
	}
	b.anns[step][a.Signer] = a
	if payload != nil {
		b.payloads[a.Hash] = payload
	}
}

// keep validates a fetched payload and keeps it; a peer that sent an
// invalid one is banned.
func (b *inbox) keep(a p2p.Announcement, data []byte) error {
	b.mu.Lock()
	tr, model := b.validator, b.model
	b.mu.Unlock()
	if tr == nil {
		return errors.New("no model to check the payload against yet")
	}
	if err := validatePayload(tr, &model, data); err != nil {
		b.log.Warn("rejected an invalid payload", "step", a.Step, "from", a.Signer, "err", err)
		b.node.Ban(a.Signer, "invalid payload")
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.anns[uint32(a.Step)]; ok {
		b.payloads[a.Hash] = data
	}
	return nil
}

// payload is the validated payload id announced for step, fetched now if
// the background fetch has not got it.
func (b *inbox) payload(ctx context.Context, step uint32, id peer.ID) ([]byte, error) {
	b.mu.Lock()
	a, ok := b.anns[step][id]
	p, have := b.payloads[a.Hash]
	b.mu.Unlock()
	switch {
	case !ok:
		return nil, errors.New("no announcement")
	case have:
		return p, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return b.fetch(ctx, a)
}

// snapshot copies what decisions read: the payloads of the given steps,
// the announced model roots when wanted, and a finished download (taken).
func (b *inbox) snapshot(steps []uint32, roots bool) *inputs {
	b.mu.Lock()
	defer b.mu.Unlock()
	in := &inputs{payloads: map[uint32]map[peer.ID]payloadState{}, loaded: b.loaded, verdicts: map[replayKey]replayResult{}}
	b.loaded = nil
	for k, r := range b.verdicts {
		in.verdicts[k] = r
	}
	in.judgements = map[uint64]replayResult{}
	for id, j := range b.judgements {
		in.judgements[id] = j.res
	}
	for _, st := range steps {
		m := map[peer.ID]payloadState{}
		for id, a := range b.anns[st] {
			_, have := b.payloads[a.Hash]
			m[id] = payloadState{a.Hash, have}
		}
		in.payloads[st] = m
	}
	if roots {
		in.roots = map[uint32]map[peer.ID]p2p.Hash{}
		for st, byPeer := range b.roots {
			m := make(map[peer.ID]p2p.Hash, len(byPeer))
			for id, r := range byPeer {
				m[id] = r
			}
			in.roots[st] = m
		}
	}
	return in
}

// servedSteps is how many applied steps' payloads this client keeps
// serving, for peers that apply them later (joiners catching up).
const servedSteps = 8

// prune forgets announcements and payloads of steps up to step, and of
// steps too far behind the run to be applied (a joiner loads a newer model).
func (b *inbox) prune(step uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.appliedStep = max(b.appliedStep, step)
	keep := map[p2p.Hash]bool{}
	for st, m := range b.anns {
		if st <= step || st+maxBufferedSteps < b.curStep {
			delete(b.anns, st)
			continue
		}
		for _, a := range m {
			keep[a.Hash] = true
		}
	}
	for h := range b.payloads {
		if !keep[h] {
			delete(b.payloads, h)
		}
	}
	for k := range b.verdicts {
		if k[0] <= step {
			delete(b.verdicts, k)
		}
	}
	for id, j := range b.judgements {
		if j.step+disputeSteps < step {
			delete(b.judgements, id)
		}
	}
	if step > servedSteps {
		b.node.PruneBefore(uint64(step-servedSteps) + 1)
	}
}

// recordShare keeps a peer's announced model root for a recent step.
func (b *inbox) recordShare(f *p2p.Finished) {
	if !f.Warmup {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	step := uint32(f.Step)
	if uint64(step) > uint64(b.curStep) || step+maxBufferedSteps < b.curStep {
		return // a peer cannot make us keep roots of far steps
	}
	if b.roots[step] == nil {
		b.roots[step] = map[peer.ID]p2p.Hash{}
	}
	b.roots[step][f.Signer] = f.Digest
	for st := range b.roots {
		if st+maxBufferedSteps < b.curStep {
			delete(b.roots, st)
		}
	}
}

// rootsAt is a copy of the model roots peers announced for step.
func (b *inbox) rootsAt(step uint32) map[peer.ID]p2p.Hash {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.roots[step])
}

// finishLoad hands a finished model download to the loop.
func (b *inbox) finishLoad(l *loadedModel) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.loaded = l
}

// setVerdict hands a finished replay to the loop.
func (b *inbox) setVerdict(k replayKey, r replayResult) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.verdicts[k] = r
}

// anyPayload is a validated payload some peer announced for step, if one is
// here (for CheatCopyPayload).
func (b *inbox) anyPayload(step uint32) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.anns[step] {
		if p, ok := b.payloads[a.Hash]; ok {
			return p
		}
	}
	return nil
}

// judgement is a finished replay of a disputed contribution of step.
type judgement struct {
	step uint32
	res  replayResult
}

// setJudgement hands a finished replay of dispute id (of step) to the loop.
func (b *inbox) setJudgement(id uint64, step uint32, r replayResult) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.judgements[id] = judgement{step, r}
}
