package sbpf

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// compile builds testdata/<src> with clang-19 (installed by scripts/setup.sh).
func compile(t *testing.T, src string, flags ...string) []byte {
	t.Helper()
	clang, err := exec.LookPath("clang-19")
	if err != nil {
		t.Fatalf("clang-19 is needed to build the linker's test objects (scripts/setup.sh installs it): %v", err)
	}
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(src, ".c")+".o")
	args := append([]string{"-target", "bpfel", "-O2", "-c", filepath.Join("testdata", src), "-o", out}, flags...)
	if msg, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		t.Fatalf("clang-19 %s: %v\n%s", src, err, msg)
	}
	obj, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// funcBytes returns the code of each function symbol in an object.
func funcBytes(t *testing.T, obj []byte) map[string][]byte {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(obj))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Section == elf.SHN_UNDEF {
			continue
		}
		data, err := f.Sections[s.Section].Data()
		if err != nil {
			t.Fatal(err)
		}
		out[s.Name] = data[s.Value : s.Value+s.Size]
	}
	return out
}

// codeMatches reports whether the code at text[at:] is fn, ignoring the imm
// fields of calls and lddw (which the linker rewrites).
func codeMatches(text []byte, at uint64, fn []byte) bool {
	if at+uint64(len(fn)) > uint64(len(text)) {
		return false
	}
	for i := 0; i < len(fn); i += insnSize {
		got, want := text[at+uint64(i):at+uint64(i)+insnSize], fn[i:i+insnSize]
		if got[0] != want[0] {
			return false
		}
		if want[0] == opCall || want[0] == 0 || want[0] == opLddw || want[0] == opCallx {
			continue
		}
		if !bytes.Equal(got, want) {
			return false
		}
	}
	return true
}

func TestLinkBasic(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"one text section", []string{"-mcpu=v2"}},
		{"function sections", []string{"-mcpu=v2", "-ffunction-sections", "-fdata-sections"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := compile(t, "basic.c", tc.flags...)
			fns := funcBytes(t, obj)
			res, err := Link(obj, Options{})
			if err != nil {
				t.Fatalf("Link: %v", err)
			}
			so := res.SO
			f, err := elf.NewFile(bytes.NewReader(so))
			if err != nil {
				t.Fatalf("output is not ELF: %v", err)
			}
			if f.Type != elf.ET_DYN || f.Machine != elf.EM_BPF {
				t.Fatalf("type %v machine %v, want ET_DYN EM_BPF", f.Type, f.Machine)
			}
			if flags := binary.LittleEndian.Uint32(so[48:]); flags != 0 {
				t.Fatalf("e_flags = %d, want 0 (SBPF v0)", flags)
			}
			var names []string
			for _, s := range f.Sections[1:] {
				names = append(names, s.Name)
				if s.Flags&elf.SHF_ALLOC != 0 && s.Addr != s.Offset {
					t.Errorf("%s: sh_addr %#x != sh_offset %#x", s.Name, s.Addr, s.Offset)
				}
			}
			want := []string{".text", ".rodata", ".dynamic", ".dynsym", ".dynstr", ".rel.dyn", ".shstrtab"}
			if !slices.Equal(names, want) {
				t.Fatalf("sections %v, want %v", names, want)
			}
			textSec, roSec := f.Section(".text"), f.Section(".rodata")
			text, _ := textSec.Data()
			ro, _ := roSec.Data()
			funcAt := func(vmAddr uint64) string {
				off := vmAddr - textSec.Addr
				if vmAddr < textSec.Addr || off%insnSize != 0 {
					return ""
				}
				for _, name := range []string{"twice", "thrice", "square", "entrypoint"} {
					if codeMatches(text, off, fns[name]) {
						return name
					}
				}
				return ""
			}
			if got := funcAt(f.Entry); got != "entrypoint" {
				t.Fatalf("e_entry %#x is at %q, want entrypoint", f.Entry, got)
			}
			if !slices.Equal(res.Syscalls, []string{"sol_log_", "sol_log_64_"}) {
				t.Fatalf("syscalls %v", res.Syscalls)
			}

			// Every dynamic relocation is a syscall call with imm -1.
			dynsyms, err := f.DynamicSymbols()
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := f.Section(".rel.dyn").Data()
			if len(rel) != 2*relSize {
				t.Fatalf(".rel.dyn has %d bytes, want 2 entries", len(rel))
			}
			for i := 0; i < len(rel); i += relSize {
				at := binary.LittleEndian.Uint64(rel[i:]) - textSec.Addr
				info := binary.LittleEndian.Uint64(rel[i+8:])
				sym := dynsyms[info>>32-1]
				if uint32(info) != rBPF64_32 || !IsSyscall(sym.Name) || sym.Section != elf.SHN_UNDEF {
					t.Errorf("relocation %d: type %d symbol %+v", i/relSize, uint32(info), sym)
				}
				if text[at] != opCall || int32(binary.LittleEndian.Uint32(text[at+4:])) != -1 {
					t.Errorf("relocation at .text+%#x is not a call -1", at)
				}
			}

			// lddw of the greeting points into .rodata at the string; the
			// pointer table holds the VM addresses of twice, thrice, square;
			// relative calls land on function starts; callx reads imm.
			var sawGreeting, sawCallx bool
			var called []string
			for at := uint64(0); at < uint64(len(text)); at += insnSize {
				switch text[at] {
				case opLddw:
					addr := uint64(binary.LittleEndian.Uint32(text[at+4:])) | uint64(binary.LittleEndian.Uint32(text[at+12:]))<<32
					off := addr - mmRegionSize - roSec.Addr
					if addr < mmRegionSize+roSec.Addr || off >= uint64(len(ro)) {
						t.Fatalf("lddw at .text+%#x loads %#x, outside .rodata", at, addr)
					}
					if bytes.HasPrefix(ro[off:], []byte("hello from basic")) {
						sawGreeting = true
					}
					at += insnSize
				case opCall:
					imm := int32(binary.LittleEndian.Uint32(text[at+4:]))
					if imm != -1 {
						target := int64(at/insnSize) + 1 + int64(imm)
						called = append(called, funcAt(textSec.Addr+uint64(target)*insnSize))
					}
				case opCallx:
					sawCallx = true
					if imm := binary.LittleEndian.Uint32(text[at+4:]); imm == 0 || imm > 9 || text[at+1]&0x0f != 0 {
						t.Errorf("callx at .text+%#x: imm %d dst %d, want the register in imm", at, imm, text[at+1]&0x0f)
					}
				}
			}
			if !sawGreeting || !sawCallx {
				t.Fatalf("greeting lddw found: %v, callx found: %v", sawGreeting, sawCallx)
			}
			slices.Sort(called)
			if !slices.Equal(called, []string{"thrice", "twice"}) {
				t.Fatalf("relative calls reach %v, want thrice and twice", called)
			}
			var table []string
			for off := 0; off+8 <= len(ro); off += 8 {
				v := binary.LittleEndian.Uint64(ro[off:])
				if v > mmRegionSize && v < mmRegionSize+roSec.Addr {
					table = append(table, funcAt(v-mmRegionSize))
				}
			}
			if !slices.Equal(table, []string{"twice", "thrice", "square"}) {
				t.Fatalf("pointer table holds %v, want twice thrice square", table)
			}
		})
	}
}

func TestLinkIsDeterministic(t *testing.T) {
	a := compile(t, "basic.c", "-mcpu=v2")
	b := compile(t, "basic.c", "-mcpu=v2")
	first, err := Link(a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range [][]byte{a, b, a} {
		again, err := Link(obj, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first.SO, again.SO) {
			t.Fatal("linking the same source twice gave different bytes")
		}
	}
}

func TestLinkRejects(t *testing.T) {
	for _, tc := range []struct {
		src   string
		flags []string
		want  []string
	}{
		{"writable.c", []string{"-mcpu=v2"}, []string{"writable section .data", "counter"}},
		{"bss.c", []string{"-mcpu=v2"}, []string{"writable section .bss", "calls"}},
		{"badsyscall.c", []string{"-mcpu=v2"}, []string{"entrypoint calls sol_lgg_", "known syscall"}},
		{"noentry.c", []string{"-mcpu=v2"}, []string{`no "entrypoint" function`}},
		{"jmp32.c", []string{"-mcpu=v3"}, []string{"entrypoint:", "JMP32"}},
	} {
		t.Run(tc.src, func(t *testing.T) {
			_, err := Link(compile(t, tc.src, tc.flags...), Options{})
			if err == nil {
				t.Fatal("Link succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLinkMalformedInput(t *testing.T) {
	obj := compile(t, "basic.c", "-mcpu=v2")
	x86, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string][]byte{"empty": nil, "text": []byte("not an object"), "host executable": x86[:4096]}
	for _, n := range []int{16, 64, 200, len(obj) / 2, len(obj) - 8} {
		inputs["truncated"+string(rune('a'+len(inputs)))] = obj[:n]
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			if _, err := Link(in, Options{}); err == nil {
				t.Fatal("Link accepted malformed input")
			}
		})
	}
}

// FuzzLink feeds mutated objects to the linker: it may reject them, never
// panic. Seeds: the test objects. Run with: go test -fuzz FuzzLink ./programs/toolchain/sbpf
func FuzzLink(f *testing.F) {
	for _, src := range []string{"basic.c", "writable.c", "badsyscall.c"} {
		clang, err := exec.LookPath("clang-19")
		if err != nil {
			f.Fatalf("clang-19 is needed: %v", err)
		}
		out := filepath.Join(f.TempDir(), src+".o")
		if msg, err := exec.Command(clang, "-target", "bpfel", "-O2", "-mcpu=v2", "-c", filepath.Join("testdata", src), "-o", out).CombinedOutput(); err != nil {
			f.Fatalf("clang-19 %s: %v\n%s", src, err, msg)
		}
		obj, err := os.ReadFile(out)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(obj)
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		res, err := Link(obj, Options{})
		if err == nil && (len(res.SO) == 0 || res.TextSize == 0) {
			t.Fatal("Link succeeded with an empty program")
		}
	})
}
