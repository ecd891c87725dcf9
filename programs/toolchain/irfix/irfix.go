// Package irfix rewrites textual LLVM IR (LLVM 22 syntax, as printed by
// llvm-dis-22) so that upstream llc's BPF backend accepts constructs that
// Solana's LLVM fork handles natively:
//
//   - sret: by-value aggregate returns are lowered with a hidden pointer marked
//     sret, which the BPF backend refuses ("aggregate returns are not
//     supported"). Dropping the attribute keeps the pointer and the semantics.
//   - memcpy/memmove/memset intrinsics whose length is unknown or large become
//     libcalls, which the backend refuses; they are redirected to the
//     sol_memcpy_/sol_memmove_/sol_memset_ syscalls, which take the same
//     (dst, src-or-byte, len) arguments.
//   - Optionally, integer loads and stores are marked naturally aligned: the
//     backend otherwise splits every under-aligned access into byte operations,
//     while the SBPF VM performs unaligned accesses natively.
package irfix

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Options selects the rewrites.
type Options struct {
	// AlignAccesses marks i16/i32/i64 loads and stores as naturally aligned.
	AlignAccesses bool
	// InlineMemLimit is the largest constant length (bytes) left to the backend
	// to expand inline; larger or unknown lengths call the syscalls. The BPF
	// backend expands at most 128 stores, so keep it at or below 128.
	InlineMemLimit int64
}

// Stats counts what Apply changed.
type Stats struct {
	Sret        int // sret attributes removed
	MemSyscalls int // mem intrinsics redirected to syscalls
	Aligned     int // loads/stores re-aligned
}

var memSyscall = map[string]string{
	"llvm.memcpy":  "sol_memcpy_",
	"llvm.memmove": "sol_memmove_",
	"llvm.memset":  "sol_memset_",
}

var memDecl = map[string]string{
	"sol_memcpy_":  "declare void @sol_memcpy_(ptr, ptr, i64)",
	"sol_memmove_": "declare void @sol_memmove_(ptr, ptr, i64)",
	"sol_memset_":  "declare void @sol_memset_(ptr, i8, i64)",
}

var (
	// @llvm.memcpy.p0.p0.i64( — the 64-bit length variants; i32 lengths never
	// appear for a 64-bit target.
	memCallRe = regexp.MustCompile(`@(llvm\.mem(?:cpy|move|set))\.p0(?:\.p0)?\.i64\(`)
	loadRe    = regexp.MustCompile(`^(\s*%[-\w.$"]+ = load (?:volatile )?(i16|i32|i64), .*?, align )(\d+)\b`)
	storeRe   = regexp.MustCompile(`^(\s*store (?:volatile )?(i16|i32|i64) .*?, align )(\d+)\b`)
)

// Apply rewrites a module. It fails, naming the function, on IR it cannot
// parse rather than producing a wrong program.
func Apply(ir string, opts Options) (string, Stats, error) {
	var st Stats
	lines := strings.Split(ir, "\n")
	declared := map[string]bool{}
	needed := map[string]bool{}
	fn := ""
	for i, line := range lines {
		if strings.HasPrefix(line, "define ") {
			fn = functionName(line)
		}
		if strings.HasPrefix(line, "declare ") {
			for name := range memDecl {
				if strings.Contains(line, "@"+name+"(") {
					declared[name] = true
				}
			}
		}
		if strings.Contains(line, "sret(") {
			out, n, err := removeSret(line)
			if err != nil {
				return "", st, fmt.Errorf("function %s: %w", fn, err)
			}
			line, st.Sret = out, st.Sret+n
		}
		if !strings.HasPrefix(line, "declare ") && memCallRe.MatchString(line) {
			out, sys, err := redirectMem(line, opts.InlineMemLimit)
			if err != nil {
				return "", st, fmt.Errorf("function %s: %w", fn, err)
			}
			if sys != "" {
				line = out
				needed[sys] = true
				st.MemSyscalls++
			}
		}
		if opts.AlignAccesses {
			if out, ok := realign(line); ok {
				line = out
				st.Aligned++
			}
		}
		lines[i] = line
	}
	var decls []string
	for _, name := range []string{"sol_memcpy_", "sol_memmove_", "sol_memset_"} {
		if needed[name] && !declared[name] {
			decls = append(decls, memDecl[name])
		}
	}
	out := strings.Join(lines, "\n")
	if len(decls) > 0 {
		out += "\n" + strings.Join(decls, "\n") + "\n"
	}
	return out, st, nil
}

// functionName extracts @name from a define line.
func functionName(line string) string {
	at := strings.Index(line, "@")
	if at < 0 {
		return "?"
	}
	rest := line[at+1:]
	if strings.HasPrefix(rest, `"`) {
		if end := strings.Index(rest[1:], `"`); end >= 0 {
			return rest[1 : end+1]
		}
	}
	if end := strings.IndexByte(rest, '('); end >= 0 {
		return rest[:end]
	}
	return rest
}

// closeParen returns the index just past the parenthesis that closes the one
// opened at s[open], skipping quoted names such as %"Option<(u64, u64)>".
func closeParen(s string, open int) (int, error) {
	depth, quoted := 0, false
	for i := open; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted:
			if c == '"' {
				quoted = false
			}
		case c == '"':
			quoted = true
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unbalanced parentheses in %q", s)
}

func removeSret(line string) (string, int, error) {
	n := 0
	for {
		at := strings.Index(line, "sret(")
		if at < 0 {
			return line, n, nil
		}
		end, err := closeParen(line, at+len("sret"))
		if err != nil {
			return "", 0, err
		}
		start := at
		if start > 0 && line[start-1] == ' ' {
			start--
		}
		line = line[:start] + line[end:]
		n++
	}
}

// splitArgs splits a call's argument list at top-level commas.
func splitArgs(s string) []string {
	var args []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted:
			if c == '"' {
				quoted = false
			}
		case c == '"':
			quoted = true
		case c == '(' || c == '[' || c == '{' || c == '<':
			depth++
		case c == ')' || c == ']' || c == '}' || c == '>':
			depth--
		case c == ',' && depth == 0:
			args = append(args, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(args, strings.TrimSpace(s[start:]))
}

// redirectMem rewrites one mem intrinsic call to its syscall, unless its length
// is a small constant the backend expands inline. It returns the syscall used,
// or "" when the line is left as is.
func redirectMem(line string, inlineLimit int64) (string, string, error) {
	loc := memCallRe.FindStringSubmatchIndex(line)
	intrinsic := line[loc[2]:loc[3]]
	open := loc[1] - 1
	end, err := closeParen(line, open)
	if err != nil {
		return "", "", err
	}
	args := splitArgs(line[open+1 : end-1])
	if len(args) != 4 || !strings.HasPrefix(args[3], "i1 ") {
		return "", "", fmt.Errorf("unexpected %s call %q", intrinsic, strings.TrimSpace(line))
	}
	lenArg := strings.Fields(args[2])
	if n, err := strconv.ParseInt(lenArg[len(lenArg)-1], 10, 64); err == nil && n <= inlineLimit {
		return line, "", nil
	}
	sys := memSyscall[intrinsic]
	call := "@" + sys + "(" + strings.Join(args[:3], ", ") + ")"
	return line[:loc[0]] + call + line[end:], sys, nil
}

func realign(line string) (string, bool) {
	for _, re := range []*regexp.Regexp{loadRe, storeRe} {
		m := re.FindStringSubmatchIndex(line)
		if m == nil {
			continue
		}
		bits, _ := strconv.Atoi(line[m[4]+1 : m[5]])
		natural := strconv.Itoa(bits / 8)
		if line[m[6]:m[7]] == natural {
			return line, false
		}
		cur, _ := strconv.Atoi(line[m[6]:m[7]])
		if cur >= bits/8 {
			return line, false
		}
		return line[:m[6]] + natural + line[m[7]:], true
	}
	return line, false
}
