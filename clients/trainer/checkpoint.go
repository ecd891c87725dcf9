package trainer

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Checkpoints are safetensors files: a u64 little-endian header length, a
// JSON header, then the raw little-endian tensor data. The data section is the
// state blob's float section unchanged: the parameter tensors in storage
// order, then optim.adamw.m and optim.adamw.v, then optim.demo.delta, each
// present when the optimizer has run. The counters live in __metadata__.
const (
	checkpointFormat  = "psyche-trainer-checkpoint"
	checkpointVersion = "1"
	stateHeaderLen    = 56
	maxHeaderLen      = 16 << 20
	stateFlagAdam     = 1
	stateFlagDelta    = 2
)

var errCheckpoint = errors.New("bad checkpoint")

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
	if flags&stateFlagAdam != 0 {
		add("optim.adamw.m", []int{t.n}, t.n)
		add("optim.adamw.v", []int{t.n}, t.n)
	}
	if flags&stateFlagDelta != 0 {
		add("optim.demo.delta", []int{t.n}, t.n)
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
	md := map[string]string{}
	for k, v := range meta {
		if len(k) >= 7 && k[:7] == "psyche." {
			return fmt.Errorf("checkpoint metadata key %q: the psyche. prefix is reserved: %w", k, ErrInvalid)
		}
		md[k] = v
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
	buf := make([]byte, 0, 8+len(hj)+len(state)-stateHeaderLen)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(hj)))
	buf = append(buf, hj...)
	buf = append(buf, state[stateHeaderLen:]...)
	return writeFileAtomic(path, buf)
}

func writeFileAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync checkpoint %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close checkpoint %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("install checkpoint %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory of %s: %w", path, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("sync directory of %s: %w", path, err)
	}
	return nil
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
		return nil, fmt.Errorf("checkpoint %s: %s: %w", path, fmt.Sprintf(format, args...), errCheckpoint)
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
	if c.md["psyche.format"] != checkpointFormat || c.md["psyche.version"] != checkpointVersion {
		return bad("format %q version %q, want %s %s", c.md["psyche.format"], c.md["psyche.version"], checkpointFormat, checkpointVersion)
	}
	if err := json.Unmarshal([]byte(c.md["psyche.config"]), &c.cfg); err != nil {
		return bad("config: %v", err)
	}
	if err := c.cfg.Validate(); err != nil {
		return bad("%v", err)
	}
	return c, nil
}

// LoadCheckpoint creates a trainer from a checkpoint written by SaveCheckpoint.
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

// LoadCheckpoint replaces this trainer's state with a checkpoint of the same
// model shape. A bad checkpoint is rejected and changes nothing.
func (t *Trainer) LoadCheckpoint(path string) error {
	c, err := readCheckpoint(path)
	if err != nil {
		return err
	}
	return t.loadCheckpoint(path, c)
}

func (t *Trainer) loadCheckpoint(path string, c *checkpointFile) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("checkpoint %s: %s: %w", path, fmt.Sprintf(format, args...), errCheckpoint)
	}
	if !t.cfg.sameModel(c.cfg) {
		return bad("model %+v does not match this trainer's %+v", c.cfg, t.cfg)
	}
	flags, err1 := strconv.ParseUint(c.md["psyche.flags"], 10, 32)
	step, err2 := strconv.ParseUint(c.md["psyche.step"], 10, 64)
	adamT, err3 := strconv.ParseUint(c.md["psyche.adam_t"], 10, 64)
	lrBits, err4 := strconv.ParseUint(c.md["psyche.demo_lr_bits"], 16, 32)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
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
	state := make([]byte, stateHeaderLen, stateHeaderLen+len(c.data))
	copy(state, "PSYS")
	binary.LittleEndian.PutUint32(state[4:], 1)
	for i, v := range []int{t.cfg.Vocab, t.cfg.PaddedVocab, t.cfg.Layers, t.cfg.Channels, t.cfg.Heads, t.cfg.SeqLen} {
		binary.LittleEndian.PutUint32(state[8+4*i:], uint32(v))
	}
	binary.LittleEndian.PutUint64(state[32:], step)
	binary.LittleEndian.PutUint64(state[40:], adamT)
	binary.LittleEndian.PutUint32(state[48:], uint32(lrBits))
	binary.LittleEndian.PutUint32(state[52:], uint32(flags))
	state = append(state, c.data...)
	return t.ImportState(state)
}
