package evaluate

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"slices"

	"github.com/psyche-go/psyche/clients/trainer"
)

// The trainer's parameters-only model file (trainer.SaveModel: what a run
// publishes to the hub and `psyche-client model import` writes). A
// competition takes only these: a full-state checkpoint's optimizer state
// is nothing the evaluation reads, and the size bound is the parameters'.
const (
	modelFormat  = "psyche-trainer-model"
	modelVersion = "1"
)

// Check verifies the checkpoint at path (as Fetch left it) against the
// submission and the competition: a parameters-only model file of a valid
// config (ReasonBadCheckpoint otherwise: malformed, a full-state
// checkpoint, tensors that do not tile the data, non-finite parameters), of
// c's architecture (ReasonArchitecture) and vocabulary (ReasonVocab), with a
// context of at least c.SeqLen tokens (ReasonContext) and exactly the
// declared parameter count (ReasonParams), at most c.MaxParams
// (ReasonTooLarge); then it loads it at c's precision as LossTable will,
// and frees it. Errors that are not an *Invalid (reading the file, memory)
// are the validator's.
func Check(path string, sub Submission, c Constraints) error {
	if err := c.Validate(); err != nil {
		return err
	}
	tr, err := load(path, sub, c, 1, 1)
	if err != nil {
		return err
	}
	return tr.Close()
}

// modelHeader is a model file's parsed header.
type modelHeader struct {
	cfg     trainer.Config     // the file's model, as stored
	tensors map[string]stEntry // by name
	dataOff int64              // where the tensor data starts
}

type stEntry struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// readHeader parses the safetensors header of a model file.
func readHeader(r io.Reader, size int64) (*modelHeader, error) {
	bad := func(format string, args ...any) (*modelHeader, error) {
		return nil, invalid(ReasonBadCheckpoint, nil, format, args...)
	}
	var n8 [8]byte
	if _, err := io.ReadFull(r, n8[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return bad("the file is %d bytes, too short for a safetensors header", size)
		}
		return nil, err
	}
	n := binary.LittleEndian.Uint64(n8[:])
	if n > MaxHeaderBytes || int64(n) > size-8 {
		return bad("a header of %d bytes does not fit (at most %d, in a file of %d bytes)", n, MaxHeaderBytes, size)
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, err
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(raw, &hdr); err != nil {
		return bad("the header is not a JSON object: %v", err)
	}
	var md map[string]string
	if err := json.Unmarshal(hdr["__metadata__"], &md); err != nil || md == nil {
		return bad("the header has no __metadata__ of strings")
	}
	if md["psyche.format"] != modelFormat || md["psyche.version"] != modelVersion {
		return bad("format %q version %q: a competition takes a parameters-only model file (%s, version %s), as trainer.SaveModel writes it",
			md["psyche.format"], md["psyche.version"], modelFormat, modelVersion)
	}
	h := &modelHeader{tensors: map[string]stEntry{}, dataOff: 8 + int64(n)}
	if err := json.Unmarshal([]byte(md["psyche.config"]), &h.cfg); err != nil {
		return bad("its config is not JSON: %v", err)
	}
	for name, v := range hdr {
		if name == "__metadata__" {
			continue
		}
		var e stEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return bad("tensor %q: %v", name, err)
		}
		h.tensors[name] = e
	}
	return h, nil
}

// peekConfig is the model config in the header of the file at path.
func peekConfig(path string) (trainer.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return trainer.Config{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return trainer.Config{}, err
	}
	h, err := readHeader(bufio.NewReader(f), st.Size())
	if err != nil {
		return trainer.Config{}, err
	}
	return h.cfg, nil
}

// evalConfig is the trainer config a model of file config f is evaluated
// in: f's model with the competition's numeric contract, one gradient
// shard, and a context of c.SeqLen (a longer one is cut: only GPT-2's
// position embedding has rows per position, and the positions past
// c.SeqLen are never read). MicroBatch is the validator's memory choice,
// which changes no bit.
func evalConfig(f trainer.Config, c Constraints, microBatch int) trainer.Config {
	e := f
	e.Name = "competition-entry"
	e.SeqLen = int(c.SeqLen)
	e.MicroBatch = microBatch
	e.Arith = c.Precision
	e.GradShards = 0
	e.Recompute = false
	return e
}

// fileParams is the parameter count of a model of config f, evaluated as
// e (evalConfig): e's weights, plus GPT-2's position rows past e's context.
func fileParams(f, e trainer.Config) (uint64, error) {
	fp, err := trainer.Footprint(e, trainer.FootprintOptions{Optimizer: "adamw", Threads: 1})
	if err != nil {
		return 0, err
	}
	n := uint64(fp.OnHost.Weights / 4)
	if !f.IsLlama() {
		n += uint64(f.SeqLen-e.SeqLen) * uint64(f.Channels)
	}
	return n, nil
}

// load checks the model file at path against sub and c (Check) and returns
// it loaded in a trainer of c's precision, micro-batch microBatch and
// threads threads.
func load(path string, sub Submission, c Constraints, microBatch, threads int) (*trainer.Trainer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if limit := MaxFileSize(min(sub.Params, c.MaxParams)); size > limit {
		return nil, invalid(ReasonTooLarge, nil, "the file is %d bytes, over the %d a model of %d parameters may have", size, limit, min(sub.Params, c.MaxParams))
	}
	r := bufio.NewReaderSize(f, 1<<20)
	h, err := readHeader(r, size)
	if err != nil {
		return nil, err
	}
	// Not the model's but each run's or machine's: what a file says of them
	// is ignored (a model file stores none of them).
	fc := h.cfg
	fc.MicroBatch, fc.Arith, fc.GradShards, fc.Recompute = 1, "", 0, false
	arch := fc.Arch
	if arch == "" {
		arch = trainer.ArchGPT2
	}
	ec := evalConfig(fc, c, microBatch)
	switch err := fc.Validate(); {
	case err != nil:
		return nil, invalid(ReasonBadCheckpoint, err, "%v", err)
	case arch != c.Architecture:
		return nil, invalid(ReasonArchitecture, nil, "the model is %s, the competition's architecture %s", arch, c.Architecture)
	case fc.Vocab != int(c.Vocab):
		return nil, invalid(ReasonVocab, nil, "the model's vocabulary is %d tokens, the dataset's %d", fc.Vocab, c.Vocab)
	case fc.SeqLen < int(c.SeqLen):
		return nil, invalid(ReasonContext, nil, "the model's context is %d tokens, the competition evaluates %d", fc.SeqLen, c.SeqLen)
	}
	if err := ec.Validate(); err != nil {
		return nil, invalid(ReasonBadCheckpoint, err, "at the competition's precision %s: %v", c.Precision, err)
	}
	params, err := fileParams(fc, ec)
	switch {
	case err != nil:
		// Only buffer sizes past 64 bits fail here: no machine holds it.
		return nil, invalid(ReasonTooLarge, err, "%v", err)
	case params > c.MaxParams:
		return nil, invalid(ReasonTooLarge, nil, "the model has %d parameters, over the competition's %d", params, c.MaxParams)
	case params != sub.Params:
		return nil, invalid(ReasonParams, nil, "the model has %d parameters, its miner declared %d", params, sub.Params)
	case size != h.dataOff+4*int64(params):
		return nil, invalid(ReasonBadCheckpoint, nil, "the file is %d bytes; a %d-byte header and %d parameters make %d", size, h.dataOff, params, h.dataOff+4*int64(params))
	}

	tr, err := trainer.New(ec, 0)
	if err != nil {
		if errors.Is(err, trainer.ErrInvalid) {
			return nil, invalid(ReasonBadCheckpoint, err, "the trainer refuses the model: %v", err)
		}
		return nil, err // memory, the device: the validator's
	}
	ok := false
	defer func() {
		if !ok {
			tr.Close()
		}
	}()
	if threads > 0 {
		if err := tr.SetThreads(threads); err != nil {
			return nil, err
		}
	}
	params32, err := readParams(r, tr, h, fc)
	if err != nil {
		return nil, err
	}
	if err := tr.SetParams(params32); err != nil {
		return nil, err
	}
	ok = true
	return tr, nil
}

// readParams reads the tensor data (r just past the header) into the flat
// parameter vector of tr, checking that the header's tensors are tr's, in
// its storage order, tiling the data: GPT-2's wpe has the file's context
// (fc.SeqLen rows), of which the first tr's context are kept.
func readParams(r io.Reader, tr *trainer.Trainer, h *modelHeader, fc trainer.Config) ([]float32, error) {
	tensors, err := tr.Tensors()
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) ([]float32, error) {
		return nil, invalid(ReasonBadCheckpoint, nil, format, args...)
	}
	if len(h.tensors) != len(tensors) {
		return bad("%d tensors, a %s model has %d", len(h.tensors), fc.Arch, len(tensors))
	}
	out := make([]float32, tr.NumParams())
	buf := make([]byte, 1<<20)
	var off int64
	for _, t := range tensors {
		e, ok := h.tensors[t.Name]
		want := slices.Clone(t.Shape)
		if t.Name == "wpe" {
			want[0] = fc.SeqLen
		}
		fileSize := int64(1)
		for _, d := range want {
			fileSize *= int64(d)
		}
		switch {
		case !ok:
			return bad("no tensor %s", t.Name)
		case e.DType != "F32" || !slices.Equal(e.Shape, want) || e.Offsets != [2]int64{off, off + 4*fileSize}:
			return bad("tensor %s is %s%v at %v, want F32%v at %v", t.Name, e.DType, e.Shape, e.Offsets, want, [2]int64{off, off + 4*fileSize})
		}
		dst := out[t.Offset : t.Offset+t.Size]
		for i := int64(0); i < fileSize; {
			k := min(int64(len(buf))/4, fileSize-i)
			if _, err := io.ReadFull(r, buf[:4*k]); err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					return bad("the data ends inside tensor %s", t.Name) // the file shrank since Stat
				}
				return nil, err
			}
			for j := range k {
				v := math.Float32frombits(binary.LittleEndian.Uint32(buf[4*j:]))
				if v-v != 0 {
					return bad("tensor %s holds a non-finite value (%v) at %d", t.Name, v, i+j)
				}
				if i+j < int64(len(dst)) { // wpe past the evaluated context: read, checked, dropped
					dst[i+j] = v
				}
			}
			i += k
		}
		off += 4 * fileSize
	}
	return out, nil
}
