package irfix

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var (
	sprintf = fmt.Sprintf
	itoa    = strconv.Itoa
)

func TestApplyLines(t *testing.T) {
	opts := Options{AlignAccesses: true, InlineMemLimit: 128}
	for _, tc := range []struct {
		name, in, want string
		st             Stats
	}{
		{
			name: "sret on a definition with a quoted type",
			in:   `define internal fastcc void @f(ptr dead_on_unwind noalias writable sret(%"core::option::Option<(u64, u64)>") align 8 %0, i64 %1) {`,
			want: `define internal fastcc void @f(ptr dead_on_unwind noalias writable align 8 %0, i64 %1) {`,
			st:   Stats{Sret: 1},
		},
		{
			name: "sret on a call site with a literal struct",
			in:   `  call fastcc void @f(ptr noalias nonnull sret({ i64, [2 x i64] }) align 8 %3, i64 %x)`,
			want: `  call fastcc void @f(ptr noalias nonnull align 8 %3, i64 %x)`,
			st:   Stats{Sret: 1},
		},
		{
			name: "variable memcpy becomes sol_memcpy_",
			in:   `  tail call void @llvm.memcpy.p0.p0.i64(ptr nonnull align 1 %0, ptr nonnull readonly align 1 %1, i64 range(i64 0, 65) %2, i1 false), !alias.scope !18`,
			want: `  tail call void @sol_memcpy_(ptr nonnull align 1 %0, ptr nonnull readonly align 1 %1, i64 range(i64 0, 65) %2), !alias.scope !18`,
			st:   Stats{MemSyscalls: 1},
		},
		{
			name: "large constant memset becomes sol_memset_",
			in:   `  call void @llvm.memset.p0.i64(ptr noundef nonnull align 8 dereferenceable(1024) %4, i8 0, i64 1024, i1 false)`,
			want: `  call void @sol_memset_(ptr noundef nonnull align 8 dereferenceable(1024) %4, i8 0, i64 1024)`,
			st:   Stats{MemSyscalls: 1},
		},
		{
			name: "small constant memmove stays inline",
			in:   `  call void @llvm.memmove.p0.p0.i64(ptr align 8 %a, ptr align 8 %b, i64 32, i1 false)`,
			want: `  call void @llvm.memmove.p0.p0.i64(ptr align 8 %a, ptr align 8 %b, i64 32, i1 false)`,
		},
		{
			name: "under-aligned load",
			in:   `  %5 = load i64, ptr %4, align 1, !noalias !3`,
			want: `  %5 = load i64, ptr %4, align 8, !noalias !3`,
			st:   Stats{Aligned: 1},
		},
		{
			name: "under-aligned store",
			in:   `  store i32 %v, ptr %p, align 2`,
			want: `  store i32 %v, ptr %p, align 4`,
			st:   Stats{Aligned: 1},
		},
		{
			name: "aligned and byte accesses untouched",
			in:   "  %a = load i64, ptr %p, align 8\n  %b = load i8, ptr %p, align 1\n  store <2 x i64> %v, ptr %p, align 1",
			want: "  %a = load i64, ptr %p, align 8\n  %b = load i8, ptr %p, align 1\n  store <2 x i64> %v, ptr %p, align 1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st, err := Apply(tc.in, opts)
			if err != nil {
				t.Fatal(err)
			}
			got = strings.SplitN(got, "\ndeclare void @sol_", 2)[0]
			if got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
			if st != tc.st {
				t.Fatalf("stats %+v, want %+v", st, tc.st)
			}
		})
	}
}

func TestApplyRejectsBrokenCalls(t *testing.T) {
	for _, in := range []string{
		"define void @g() {\n  call void @llvm.memcpy.p0.p0.i64(ptr %a, ptr %b, i64 %n\n}",
		"define void @g() {\n  call void @llvm.memset.p0.i64(ptr %a, i8 0)\n}",
		"define void @g(ptr sret(%\"T\" %0 {",
	} {
		if _, _, err := Apply(in, Options{InlineMemLimit: 128}); err == nil || !strings.Contains(err.Error(), "function g") {
			t.Errorf("Apply(%q) error = %v, want one naming function g", in, err)
		}
	}
}

// module needs both fix-ups: llc-22 rejects it as is and accepts the result.
const module = `target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpfel"

%"Pair<(u64, u64)>" = type { i64, i64, i64 }

define internal void @pair(ptr noalias writable sret(%"Pair<(u64, u64)>") align 8 %out, i64 %x) noinline {
  store i64 %x, ptr %out, align 8
  %p1 = getelementptr inbounds i8, ptr %out, i64 8
  store i64 %x, ptr %p1, align 1
  ret void
}

define i64 @entrypoint(ptr %input) {
  %buf = alloca [3 x i64], align 8
  call void @pair(ptr sret(%"Pair<(u64, u64)>") align 8 %buf, i64 7)
  %n = load i64, ptr %input, align 1
  %dst = getelementptr inbounds i8, ptr %input, i64 16
  call void @llvm.memcpy.p0.p0.i64(ptr align 1 %dst, ptr align 1 %buf, i64 %n, i1 false)
  call void @llvm.memset.p0.i64(ptr align 1 %dst, i8 0, i64 %n, i1 false)
  %r = load i64, ptr %buf, align 8
  ret i64 %r
}

declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1 immarg)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1 immarg)
`

func TestFixedModuleCompiles(t *testing.T) {
	llc, err := exec.LookPath("llc-22")
	if err != nil {
		t.Fatalf("llc-22 is needed (scripts/setup.sh installs llvm-22): %v", err)
	}
	dir := t.TempDir()
	run := func(ir string) (string, error) {
		in := filepath.Join(dir, "m.ll")
		if err := os.WriteFile(in, []byte(ir), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(llc, "-march=bpfel", "-mcpu=v2", "-filetype=asm", in, "-o", "-").CombinedOutput()
		return string(out), err
	}
	if out, err := run(module); err == nil {
		t.Fatalf("llc-22 accepted the unfixed module; the test no longer exercises the fix-ups:\n%s", out)
	}
	fixed, st, err := Apply(module, Options{AlignAccesses: true, InlineMemLimit: 128})
	if err != nil {
		t.Fatal(err)
	}
	if st != (Stats{Sret: 2, MemSyscalls: 2, Aligned: 2}) {
		t.Fatalf("stats %+v", st)
	}
	asm, err := run(fixed)
	if err != nil {
		t.Fatalf("llc-22 rejected the fixed module: %v\n%s", err, asm)
	}
	for _, want := range []string{"call sol_memcpy_", "call sol_memset_"} {
		if !strings.Contains(asm, want) {
			t.Errorf("assembly lacks %q", want)
		}
	}
}

// TestMulExpansionMatchesIntrinsics runs the expanded overflow-checked
// multiplies and LLVM's own intrinsics side by side on the host (lli-22) over
// edge values.
func TestMulExpansionMatchesIntrinsics(t *testing.T) {
	lli, err := exec.LookPath("lli-22")
	if err != nil {
		t.Fatalf("lli-22 is needed (scripts/setup.sh installs llvm-22): %v", err)
	}
	fn := func(name, kind string) string {
		return "define { i64, i1 } @" + name + "(i64 %a, i64 %b) {\n" +
			"  %r = call { i64, i1 } @llvm." + kind + "mul.with.overflow.i64(i64 noundef %a, i64 %b)\n" +
			"  ret { i64, i1 } %r\n}\n"
	}
	candidates, st, err := Apply(fn("cand_u", "u")+fn("cand_s", "s"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.MulOverflow != 2 || strings.Contains(candidates, "@llvm.") {
		t.Fatalf("expansion incomplete (%+v):\n%s", st, candidates)
	}
	values := []string{"0", "1", "2", "3", "7", "-1", "-2", "4294967295", "4294967296", "4294967297",
		"3037000499", "3037000500", "-3037000500", "9223372036854775807", "-9223372036854775808",
		"-4294967296", "6148914691236517205", "12345678901"}
	var b strings.Builder
	b.WriteString(candidates + fn("ref_u", "u") + fn("ref_s", "s"))
	b.WriteString("define i32 @main() {\nentry:\n")
	acc, k := "0", 0
	for _, kind := range []string{"u", "s"} {
		for _, x := range values {
			for _, y := range values {
				emit := func(s string, args ...any) {
					if len(args) > 0 {
						s = sprintf(s, args...)
					}
					b.WriteString(strings.ReplaceAll(s, "K", itoa(k)) + "\n")
				}
				emit("  %%hK = call { i64, i1 } @cand_%s(i64 %s, i64 %s)", kind, x, y)
				emit("  %%rK = call { i64, i1 } @ref_%s(i64 %s, i64 %s)", kind, x, y)
				emit("  %hvK = extractvalue { i64, i1 } %hK, 0")
				emit("  %rvK = extractvalue { i64, i1 } %rK, 0")
				emit("  %hoK = extractvalue { i64, i1 } %hK, 1")
				emit("  %roK = extractvalue { i64, i1 } %rK, 1")
				emit("  %dvK = icmp ne i64 %hvK, %rvK")
				emit("  %doK = icmp ne i1 %hoK, %roK")
				emit("  %dK = or i1 %dvK, %doK")
				emit("  %zK = zext i1 %dK to i32")
				emit("  %%accK = add i32 %s, %%zK", acc)
				acc = "%acc" + itoa(k)
				k++
			}
		}
	}
	b.WriteString("  ret i32 " + acc + "\n}\n")
	b.WriteString("declare { i64, i1 } @llvm.umul.with.overflow.i64(i64, i64)\n")
	b.WriteString("declare { i64, i1 } @llvm.smul.with.overflow.i64(i64, i64)\n")
	path := filepath.Join(t.TempDir(), "mul.ll")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(lli, path).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("lli-22 exited %d (mismatching products, of %d) \n%s", ee.ExitCode(), k, out)
	} else if err != nil {
		t.Fatalf("lli-22: %v\n%s", err, out)
	}
}

func TestCheckedMulCompiles(t *testing.T) {
	llc, err := exec.LookPath("llc-22")
	if err != nil {
		t.Fatal(err)
	}
	ir := `target triple = "bpfel"
define i64 @entrypoint(ptr %p) {
  %a = load i64, ptr %p, align 8
  %q = getelementptr i8, ptr %p, i64 8
  %b = load i64, ptr %q, align 8
  %u = call { i64, i1 } @llvm.umul.with.overflow.i64(i64 %a, i64 %b)
  %s = call { i64, i1 } @llvm.smul.with.overflow.i64(i64 %a, i64 %b)
  %uv = extractvalue { i64, i1 } %u, 0
  %so = extractvalue { i64, i1 } %s, 1
  %r = select i1 %so, i64 0, i64 %uv
  ret i64 %r
}
declare { i64, i1 } @llvm.umul.with.overflow.i64(i64, i64)
declare { i64, i1 } @llvm.smul.with.overflow.i64(i64, i64)
`
	fixed, st, err := Apply(ir, Options{InlineMemLimit: 128})
	if err != nil {
		t.Fatal(err)
	}
	if st.MulOverflow != 2 {
		t.Fatalf("stats %+v", st)
	}
	path := filepath.Join(t.TempDir(), "m.ll")
	if err := os.WriteFile(path, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(llc, "-march=bpfel", "-mcpu=v2", path, "-o", os.DevNull).CombinedOutput(); err != nil {
		t.Fatalf("llc-22 rejected checked multiplication after the fix-up: %v\n%s", err, out)
	}
}
