package runmanager

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// EnvError is a malformed line of an env file.
type EnvError struct {
	File string
	Line int
	Msg  string
}

func (e *EnvError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ReadEnvFile reads an env file (ParseEnv) from path.
func ReadEnvFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseEnv(f, path)
}

// ParseEnv reads KEY=VALUE lines, as the reference run-manager's env file
// and docker's --env-file: blank lines and lines starting with # are skipped,
// an "export " prefix is allowed, and a value may be quoted with ' or " (the
// quotes are removed, nothing inside is interpreted); an unquoted value ends
// at " #" (a comment) and is trimmed. It returns the variables as KEY=VALUE,
// in file order; name is the file's name for errors (*EnvError).
func ParseEnv(r io.Reader, name string) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, args ...any) error {
			return &EnvError{File: name, Line: n, Msg: fmt.Sprintf(format, args...)}
		}
		if rest, ok := strings.CutPrefix(line, "export "); ok {
			line = strings.TrimSpace(rest)
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, bad("not KEY=VALUE: %q", line)
		}
		key = strings.TrimSpace(key)
		if !envKey.MatchString(key) {
			return nil, bad("%q is not a variable name", key)
		}
		val = strings.TrimSpace(val)
		if val != "" && (val[0] == '"' || val[0] == '\'') {
			q := val[0]
			end := strings.IndexByte(val[1:], q)
			if end < 0 {
				return nil, bad("%s: unterminated %c quote", key, q)
			}
			if tail := strings.TrimSpace(val[end+2:]); tail != "" && !strings.HasPrefix(tail, "#") {
				return nil, bad("%s: text after the closing quote", key)
			}
			val = val[1 : end+1]
		} else if i := strings.Index(val, " #"); i >= 0 {
			val = strings.TrimSpace(val[:i])
		}
		out = append(out, key+"="+val)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}
