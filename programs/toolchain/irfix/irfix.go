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
//   - 64-bit multiplication with overflow check (checked_mul, saturating_mul,
//     overflowing_mul on u64/i64) becomes a 128-bit multiply libcall; it is
//     replaced by a helper built from one native unsigned division.
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
	MulOverflow int // 64-bit overflow-checked multiplications redirected
}

// mulOverflow expands llvm.{u,s}mul.with.overflow.i64, which the BPF backend
// lowers to a __multi3 libcall, into branch-free code around one native
// unsigned division: a*b overflows iff b != 0 and |a| > limit/|b|, with limit
// 2^64-1 unsigned, and 2^63-1 (2^63 for a negative product) signed.
var mulOverflow = map[string]string{
	"llvm.umul.with.overflow.i64": `P.p = mul i64 A, B
P.bz = icmp eq i64 B, 0
P.bs = select i1 P.bz, i64 1, i64 B
P.q = udiv i64 -1, P.bs
P.big = icmp ugt i64 A, P.q
P.nbz = xor i1 P.bz, true
P.ov = and i1 P.big, P.nbz
P.r = insertvalue { i64, i1 } poison, i64 P.p, 0
R = insertvalue { i64, i1 } P.r, i1 P.ov, 1`,
	"llvm.smul.with.overflow.i64": `P.p = mul i64 A, B
P.an = icmp slt i64 A, 0
P.bn = icmp slt i64 B, 0
P.na = sub i64 0, A
P.nb = sub i64 0, B
P.ma = select i1 P.an, i64 P.na, i64 A
P.mb = select i1 P.bn, i64 P.nb, i64 B
P.neg = xor i1 P.an, P.bn
P.limit = select i1 P.neg, i64 -9223372036854775808, i64 9223372036854775807
P.bz = icmp eq i64 P.mb, 0
P.bs = select i1 P.bz, i64 1, i64 P.mb
P.q = udiv i64 P.limit, P.bs
P.big = icmp ugt i64 P.ma, P.q
P.nbz = xor i1 P.bz, true
P.ov = and i1 P.big, P.nbz
P.r = insertvalue { i64, i1 } poison, i64 P.p, 0
R = insertvalue { i64, i1 } P.r, i1 P.ov, 1`,
}

var mulCallRe = regexp.MustCompile(`^(\s*)(%[-\w.$]+|%"[^"]+") = (?:tail |notail )?call \{ i64, i1 \} @(llvm\.[su]mul\.with\.overflow\.i64)\(`)

// expandMul rewrites one overflow-checked multiply call; n makes its
// temporaries unique.
func expandMul(line string, n int) (string, error) {
	m := mulCallRe.FindStringSubmatchIndex(line)
	indent, result, intrinsic := line[m[2]:m[3]], line[m[4]:m[5]], line[m[6]:m[7]]
	end, err := closeParen(line, m[1]-1)
	if err != nil {
		return "", err
	}
	args := splitArgs(line[m[1] : end-1])
	if len(args) != 2 {
		return "", fmt.Errorf("unexpected %s call %q", intrinsic, strings.TrimSpace(line))
	}
	a, b := strings.Fields(args[0]), strings.Fields(args[1])
	body := strings.NewReplacer("P.", fmt.Sprintf("%%__sbpf_mul%d.", n), "R =", result+" =", "A", a[len(a)-1], "B", b[len(b)-1]).
		Replace(mulOverflow[intrinsic])
	return indent + strings.ReplaceAll(body, "\n", "\n"+indent), nil
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
		if mulCallRe.MatchString(line) {
			out, err := expandMul(line, st.MulOverflow)
			if err != nil {
				return "", st, fmt.Errorf("function %s: %w", fn, err)
			}
			line = out
			st.MulOverflow++
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
