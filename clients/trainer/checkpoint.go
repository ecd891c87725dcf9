package trainer

/*
#include "trainer.h"
*/
import "C"

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/psyche-go/psyche/internal/atomicfile"
)

// Checkpoints are safetensors files: a u64 little-endian header length, a
// JSON header, then the raw little-endian tensor data. The data section is the
// state blob's float section unchanged: the parameter tensors in storage
// order, then optim.adamw.m and optim.adamw.v, then optim.demo.delta, then
// optim.demo.pending, each present when the optimizer has made it. The counters live in __metadata__.
const (
	checkpointFormat  = "psyche-trainer-checkpoint"
	modelFormat       = "psyche-trainer-model"
	checkpointVersion = "1"
	maxHeaderLen      = 16 << 20
)

// ErrCheckpoint marks a checkpoint or model file that is malformed or does
// not fit the trainer.
var ErrCheckpoint = errors.New("bad checkpoint")

type stEntry struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// checkpointTensors lists name, shape and float count of every tensor stored
// for the given state flags, in data order.
func (t *Trainer) checkpointTensors(flags uint32) ([]string, map[string]stEntry, error) {
	tensors, err := t.Tensors()
	if err != nil {
		return nil, nil, err
	}
	var names []string
	entries := map[string]stEntry{}
	var off int64
	add := func(name string, shape []int, size int) {
		names = append(names, name)
		entries[name] = stEntry{DType: "F32", Shape: shape, Offsets: [2]int64{off, off + 4*int64(size)}}
		off += 4 * int64(size)
	}
	for _, ts := range tensors {
		add(ts.Name, ts.Shape, ts.Size)
	}
	if flags&flagAdam != 0 {
		add("optim.adamw.m", []int{t.n}, t.n)
		add("optim.adamw.v", []int{t.n}, t.n)
	}
	if flags&flagDelta != 0 {
		add("optim.demo.delta", []int{t.n}, t.n)
	}
	if flags&flagPending != 0 {
		add("optim.demo.pending", []int{t.n}, t.n)
	}
	return names, entries, nil
}

// SaveCheckpoint writes the full state to path atomically (temporary file,
// fsync, rename, fsync of the directory). meta adds string metadata (run id,
// step...); keys starting with "psyche." are reserved.
func (t *Trainer) SaveCheckpoint(path string, meta map[string]string) error {
	state, err := t.ExportState()
	if err != nil {
		return err
	}
	flags := binary.LittleEndian.Uint32(state[52:])
	_, entries, err := t.checkpointTensors(flags)
	if err != nil {
		return err
	}
	cfg, err := json.Marshal(t.cfg)
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	md, err := userMetadata(meta)
	if err != nil {
		return err
	}
	md["psyche.format"] = checkpointFormat
	md["psyche.version"] = checkpointVersion
	md["psyche.config"] = string(cfg)
	md["psyche.step"] = strconv.FormatUint(binary.LittleEndian.Uint64(state[32:]), 10)
	md["psyche.adam_t"] = strconv.FormatUint(binary.LittleEndian.Uint64(state[40:]), 10)
	md["psyche.demo_lr_bits"] = strconv.FormatUint(uint64(binary.LittleEndian.Uint32(state[48:])), 16)
	md["psyche.flags"] = strconv.FormatUint(uint64(flags), 10)
	header := map[string]any{"__metadata__": md}
	for name, e := range entries {
		header[name] = e
	}
	hj, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("encode checkpoint header: %w", err)
	}
	for len(hj)%8 != 0 { // keep the data 8-byte aligned, as safetensors writers do
		hj = append(hj, ' ')
	}
	buf := make([]byte, 0, 8+len(hj)+len(state)-t.hdr)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(hj)))
	buf = append(buf, hj...)
	buf = append(buf, state[t.hdr:]...)
	return atomicfile.Write(path, buf, 0o644)
}

// modelShape is the config stored in a params-only model file. MicroBatch is
// left out: it is each client's memory choice, and every replica must write
// the same bytes.
type modelShape struct {
	Name        string  `json:"name"`
	Arch        string  `json:"arch,omitempty"`
	Vocab       int     `json:"vocab"`
	PaddedVocab int     `json:"padded_vocab"`
	Layers      int     `json:"layers"`
	Channels    int     `json:"channels"`
	Heads       int     `json:"heads"`
	SeqLen      int     `json:"seq_len"`
	KVHeads     int     `json:"kv_heads,omitempty"`
	Hidden      int     `json:"hidden,omitempty"`
	Untied      bool    `json:"untied,omitempty"`
	RopeTheta   float32 `json:"rope_theta,omitempty"`
	Knobs
}

// SaveModel writes the parameters only (no optimizer state, no counters) to
// path as safetensors, atomically. The bytes depend only on the parameters,
// the model shape and meta, so replicas at the same step write identical
// files (the trainer's own step counter is left out: a replica that joined
// late has counted fewer steps). Keys of meta starting with "psyche." are
// reserved; put the run's step there.
func (t *Trainer) SaveModel(path string, meta map[string]string) error {
	md, err := userMetadata(meta)
	if err != nil {
		return err
	}
	tensors, err := t.Tensors()
	if err != nil {
		return err
	}
	params, err := t.paramBytes()
	if err != nil {
		return err
	}
	c := t.cfg
	shape, err := json.Marshal(modelShape{c.Name, c.Arch, c.Vocab, c.PaddedVocab, c.Layers, c.Channels, c.Heads, c.SeqLen,
		c.KVHeads, c.Hidden, c.Untied, c.RopeTheta, c.Knobs})
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	md["psyche.format"] = modelFormat
	md["psyche.version"] = checkpointVersion
	md["psyche.config"] = string(shape)
	// The header is built by hand so the key order is fixed: metadata first
	// (json.Marshal sorts map keys), then the tensors in storage order.
	mj, err := json.Marshal(md)
	if err != nil {
		return fmt.Errorf("encode model metadata: %w", err)
	}
	hj := append([]byte(`{"__metadata__":`), mj...)
	var off int64
	for _, ts := range tensors {
		name, _ := json.Marshal(ts.Name)
		e, err := json.Marshal(stEntry{DType: "F32", Shape: ts.Shape, Offsets: [2]int64{off, off + 4*int64(ts.Size)}})
		if err != nil {
			return fmt.Errorf("encode model header: %w", err)
		}
		hj = append(append(append(append(hj, ','), name...), ':'), e...)
		off += 4 * int64(ts.Size)
	}
	hj = append(hj, '}')
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	buf := make([]byte, 0, 8+len(hj)+len(params))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(hj)))
	buf = append(buf, hj...)
	buf = append(buf, params...)
	return atomicfile.Write(path, buf, 0o644)
}

// paramBytes returns the parameters as little-endian bytes.
func (t *Trainer) paramBytes() ([]byte, error) {
	if err := t.lock(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	params := make([]byte, 4*t.n)
	if err := codeErr(C.tr_state_floats(t.m, 0, C.size_t(t.n), (*C.uint8_t)(&params[0])), "read parameters"); err != nil {
		return nil, err
	}
	return params, nil
}

func userMetadata(meta map[string]string) (map[string]string, error) {
	md := map[string]string{}
	for k, v := range meta {
		if strings.HasPrefix(k, "psyche.") {
			return nil, fmt.Errorf("checkpoint metadata key %q: the psyche. prefix is reserved: %w", k, ErrInvalid)
		}
		md[k] = v
	}
	return md, nil
}

type checkpointFile struct {
	cfg  Config
	md   map[string]string
	hdr  map[string]json.RawMessage
	data []byte
}

func readCheckpoint(path string) (*checkpointFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	bad := func(format string, args ...any) (*checkpointFile, error) {
		return nil, fmt.Errorf("checkpoint %s: %s: %w", path, fmt.Sprintf(format, args...), ErrCheckpoint)
	}
	if len(raw) < 8 {
		return bad("file too short")
	}
	n := binary.LittleEndian.Uint64(raw)
	if n > maxHeaderLen || n > uint64(len(raw)-8) {
		return bad("header length %d does not fit", n)
	}
	c := &checkpointFile{data: raw[8+n:]}
	if err := json.Unmarshal(raw[8:8+n], &c.hdr); err != nil {
		return bad("header is not JSON: %v", err)
	}
	if err := json.Unmarshal(c.hdr["__metadata__"], &c.md); err != nil || c.md == nil {
		return bad("missing __metadata__")
	}
	if f := c.md["psyche.format"]; f != checkpointFormat && f != modelFormat || c.md["psyche.version"] != checkpointVersion {
		return bad("format %q version %q, want %s or %s, version %s", c.md["psyche.format"], c.md["psyche.version"], checkpointFormat, modelFormat, checkpointVersion)
	}
	if err := json.Unmarshal([]byte(c.md["psyche.config"]), &c.cfg); err != nil {
		return bad("config: %v", err)
	}
	if c.md["psyche.format"] == modelFormat {
		c.cfg.MicroBatch = defaultMicroBatch(c.cfg)
	}
	if err := c.cfg.Validate(); err != nil {
		return bad("%v", err)
	}
	return c, nil
}

// LoadCheckpoint creates a trainer from a file written by SaveCheckpoint or
// SaveModel (then with fresh optimizer state).
func LoadCheckpoint(path string) (*Trainer, error) {
	c, err := readCheckpoint(path)
	if err != nil {
		return nil, err
	}
	t, err := New(c.cfg, 0)
	if err != nil {
		return nil, err
	}
	if err := t.loadCheckpoint(path, c); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// LoadCheckpoint replaces this trainer's state with a checkpoint or model
// file (SaveModel) of the same model shape; a model file resets the
// optimizer state as in a new trainer. A bad file is rejected and changes
// nothing.
func (t *Trainer) LoadCheckpoint(path string) error {
	c, err := readCheckpoint(path)
	if err != nil {
		return err
	}
	return t.loadCheckpoint(path, c)
}

// counters reads the state flags and counters from the metadata. A model file
// has none: it loads like a new trainer's state (all zero).
func (c *checkpointFile) counters() (flags, step, adamT, lrBits uint64, err error) {
	if c.md["psyche.format"] == modelFormat {
		return 0, 0, 0, 0, nil
	}
	num := func(key string, base, size int) (uint64, error) { return strconv.ParseUint(c.md[key], base, size) }
	flags, err1 := num("psyche.flags", 10, 32)
	step, err2 := num("psyche.step", 10, 64)
	adamT, err3 := num("psyche.adam_t", 10, 64)
	lrBits, err4 := num("psyche.demo_lr_bits", 16, 32)
	return flags, step, adamT, lrBits, errors.Join(err1, err2, err3, err4)
}

// defaultMicroBatch is the micro-batch for a model loaded from a file that
// does not record one: the named config's when the shape matches, else 1.
func defaultMicroBatch(cfg Config) int {
	if named, ok := namedConfigs[cfg.Name]; ok && named.sameModel(cfg) {
		return named.MicroBatch
	}
	return 1
}

func (t *Trainer) loadCheckpoint(path string, c *checkpointFile) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("checkpoint %s: %s: %w", path, fmt.Sprintf(format, args...), ErrCheckpoint)
	}
	if !t.cfg.sameModel(c.cfg) {
		return bad("model %+v does not match this trainer's %+v", c.cfg, t.cfg)
	}
	flags, step, adamT, lrBits, err := c.counters()
	if err != nil {
		return bad("metadata: %v", err)
	}
	names, want, err := t.checkpointTensors(uint32(flags))
	if err != nil {
		return err
	}
	if len(c.hdr) != len(names)+1 {
		return bad("%d tensors, want %d", len(c.hdr)-1, len(names))
	}
	for _, name := range names {
		var got stEntry
		if err := json.Unmarshal(c.hdr[name], &got); err != nil {
			return bad("tensor %s: %v", name, err)
		}
		w := want[name]
		if got.DType != w.DType || got.Offsets != w.Offsets || fmt.Sprint(got.Shape) != fmt.Sprint(w.Shape) {
			return bad("tensor %s is %s%v at %v, want %s%v at %v", name, got.DType, got.Shape, got.Offsets, w.DType, w.Shape, w.Offsets)
		}
	}
	last := want[names[len(names)-1]].Offsets[1]
	if int64(len(c.data)) != last {
		return bad("%d data bytes, want %d", len(c.data), last)
	}
	// The model's own header (its shape), with the checkpoint's counters.
	state, err := t.stateHeader()
	if err != nil {
		return err
	}
	state = slices.Grow(state, len(c.data))
	binary.LittleEndian.PutUint64(state[32:], step)
	binary.LittleEndian.PutUint64(state[40:], adamT)
	binary.LittleEndian.PutUint32(state[48:], uint32(lrBits))
	binary.LittleEndian.PutUint32(state[52:], uint32(flags))
	state = append(state, c.data...)
	return t.ImportState(state)
}

// CheckpointMetadata returns the metadata of a checkpoint or model file (the
// caller's keys and the reserved "psyche." ones) after checking its format.
func CheckpointMetadata(path string) (map[string]string, error) {
	c, err := readCheckpoint(path)
	if err != nil {
		return nil, err
	}
	return c.md, nil
}
