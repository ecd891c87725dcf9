// Package build turns the program crates of a Cargo workspace into deployable
// SBPF v0 shared objects without Solana's platform-tools:
//
//	cargo -Zbuild-std (Debian rustc-web, target bpfel-unknown-none: rlibs hold bitcode)
//	-> llvm-link (program + only what it needs from its dependencies, core and compiler_builtins)
//	-> opt (internalize all but the entrypoint, O3)
//	-> irfix (sret, mem intrinsics, alignment)
//	-> llc -march=bpfel -mcpu=v2
//	-> sbpf.Link
//
// A crate is a program when its Cargo.toml has a [package.metadata.sbpf] table;
// `test = true` in it marks a test program, written to a separate directory so
// that deployment recipes never pick it up.
package build

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/ianlancetaylor/demangle"

	"github.com/psyche-go/psyche/internal/atomicfile"
	"github.com/psyche-go/psyche/programs/toolchain/irfix"
	"github.com/psyche-go/psyche/programs/toolchain/sbpf"
)

const target = "bpfel-unknown-none"

// Config says what to build and with which tools. Zero values pick the
// defaults documented on each field.
type Config struct {
	// Workspace is the directory of the Cargo workspace (programs/).
	Workspace string
	// Packages limits the build to these package names; all programs when empty.
	Packages []string
	// TargetDir holds cargo's output, including core and compiler_builtins built
	// from rust-src; default <Workspace>/target/sbpf-<rustc version>. Keying it by
	// compiler version keeps one cache per toolchain.
	TargetDir string
	// DeployDir and TestDeployDir receive the .so files; defaults
	// <Workspace>/target/deploy and <Workspace>/target/test-deploy.
	DeployDir, TestDeployDir string
	// Rustc and Cargo default to Debian's /usr/bin/rustc and /usr/bin/cargo: the
	// rustup toolchain on PATH does not match rust-web-src.
	Rustc, Cargo string
	// LLVMLink, Opt, LLVMDis, LLC default to the llvm-22 tools on PATH; they must
	// read the bitcode of rustc's LLVM.
	LLVMLink, Opt, LLVMDis, LLC string
	// KeepUnaligned turns off the fix-up that marks integer loads and stores as
	// naturally aligned (the VM handles unaligned access; llc otherwise splits
	// them into byte operations).
	KeepUnaligned bool
	// Stderr receives cargo's diagnostics; os.Stderr when nil.
	Stderr io.Writer
	Log    *slog.Logger
}

// Program is one built program.
type Program struct {
	Package    string
	Name       string // library name, also the .so name
	Test       bool
	Path       string // the .so
	Size       int
	TextSize   int
	RodataSize int
	Syscalls   []string
	Fixes      irfix.Stats
	LinkTime   time.Duration // bitcode link to .so, excluding cargo
}

type metadata struct {
	Packages []struct {
		Name         string `json:"name"`
		ID           string `json:"id"`
		ManifestPath string `json:"manifest_path"`
		Targets      []struct {
			Name string   `json:"name"`
			Kind []string `json:"kind"`
		} `json:"targets"`
		Metadata struct {
			SBPF *struct {
				Test bool `json:"test"`
			} `json:"sbpf"`
		} `json:"metadata"`
	} `json:"packages"`
	WorkspaceMembers []string `json:"workspace_members"`
}

type programCrate struct {
	pkg, lib, manifest string
	test               bool
	rlib               string
}

func (c *Config) setDefaults() error {
	if c.Workspace == "" {
		return errors.New("no workspace directory given")
	}
	abs, err := filepath.Abs(c.Workspace)
	if err != nil {
		return err
	}
	c.Workspace = abs
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Rustc, "/usr/bin/rustc")
	def(&c.Cargo, "/usr/bin/cargo")
	def(&c.LLVMLink, "llvm-link-22")
	def(&c.Opt, "opt-22")
	def(&c.LLVMDis, "llvm-dis-22")
	def(&c.LLC, "llc-22")
	def(&c.DeployDir, filepath.Join(c.Workspace, "target", "deploy"))
	def(&c.TestDeployDir, filepath.Join(c.Workspace, "target", "test-deploy"))
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	for _, tool := range []string{c.Rustc, c.Cargo, c.LLVMLink, c.Opt, c.LLVMDis, c.LLC} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is missing (scripts/setup.sh installs rustc-web, rust-web-src, cargo-web and llvm-22): %w", tool, err)
		}
	}
	return nil
}

// Build builds the selected programs and returns those built, sorted by name,
// with an error for each program that failed.
func Build(ctx context.Context, cfg Config) ([]Program, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := checkRustSrc(ctx, cfg.Rustc); err != nil {
		return nil, err
	}
	if cfg.TargetDir == "" {
		key, err := rustcKey(ctx, cfg.Rustc)
		if err != nil {
			return nil, err
		}
		cfg.TargetDir = filepath.Join(cfg.Workspace, "target", "sbpf-"+key)
	}
	for _, dir := range []*string{&cfg.TargetDir, &cfg.DeployDir, &cfg.TestDeployDir} {
		abs, err := filepath.Abs(*dir)
		if err != nil {
			return nil, err
		}
		*dir = abs
	}
	crates, err := discover(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	// Concurrent builds (parallel test packages) share the link directory.
	unlock, err := lockDir(cfg.TargetDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if len(crates) == 0 {
		cfg.Log.Info("no program crates found", "workspace", cfg.Workspace)
		return nil, nil
	}
	start := time.Now()
	deps, err := cargoBuild(ctx, &cfg, crates)
	if err != nil {
		return nil, err
	}
	cfg.Log.Info("cargo build done", "programs", len(crates), "seconds", time.Since(start).Seconds())

	work := filepath.Join(cfg.TargetDir, "link")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	depsBC, err := linkDeps(ctx, &cfg, work, deps)
	if err != nil {
		return nil, err
	}
	// One program outside the subset does not keep the others from building.
	var (
		out  []Program
		errs []error
	)
	for _, c := range crates {
		p, err := buildProgram(ctx, &cfg, work, depsBC, c)
		if err != nil {
			errs = append(errs, fmt.Errorf("program %s: %w", c.pkg, err))
			continue
		}
		cfg.Log.Info("built", "program", p.Name, "bytes", p.Size, "path", p.Path)
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// checkRustSrc fails early, with the fix, when the compiler has no library
// sources for -Zbuild-std.
func checkRustSrc(ctx context.Context, rustc string) error {
	out, err := exec.CommandContext(ctx, rustc, "--print", "sysroot").Output()
	if err != nil {
		return fmt.Errorf("run %s --print sysroot: %w", rustc, err)
	}
	core := filepath.Join(strings.TrimSpace(string(out)), "lib", "rustlib", "src", "rust", "library", "core", "src", "lib.rs")
	if _, err := os.Stat(core); err != nil {
		return fmt.Errorf("%s has no library sources at %s: install the matching rust-src (Debian: rust-web-src; scripts/setup.sh does): %w", rustc, core, err)
	}
	return nil
}

var rustcRe = regexp.MustCompile(`(?m)^release: (\S+)$|^commit-hash: (\w{9})`)

// rustcKey names the compiler: "1.96.0-ac68faa20".
func rustcKey(ctx context.Context, rustc string) (string, error) {
	out, err := exec.CommandContext(ctx, rustc, "-vV").Output()
	if err != nil {
		return "", fmt.Errorf("run %s -vV: %w", rustc, err)
	}
	var release, commit string
	for _, m := range rustcRe.FindAllStringSubmatch(string(out), -1) {
		if m[1] != "" {
			release = m[1]
		}
		if m[2] != "" {
			commit = m[2]
		}
	}
	if release == "" {
		return "", fmt.Errorf("cannot read the version of %s", rustc)
	}
	if commit != "" {
		release += "-" + commit
	}
	return release, nil
}

func (c *Config) cargoEnv() []string {
	env := os.Environ()
	cargoHome := os.Getenv("CARGO_HOME")
	if cargoHome == "" {
		home, _ := os.UserHomeDir()
		cargoHome = filepath.Join(home, ".cargo")
	}
	// Panic locations of crates.io dependencies do not depend on where the
	// crate cache lives (workspace crates already get relative paths). The
	// flags must not vary between workspaces: they are part of the fingerprint
	// of the cached core build, which would otherwise be rebuilt each time.
	flags := []string{
		"-Ctarget-cpu=v2",
		"--remap-path-prefix=" + filepath.Join(cargoHome, "registry", "src") + "=/crates",
	}
	return append(env,
		"RUSTC="+c.Rustc,
		"RUSTC_BOOTSTRAP=1", // -Zbuild-std on a stable compiler
		"RUSTFLAGS=",
		"CARGO_ENCODED_RUSTFLAGS="+strings.Join(flags, "\x1f"),
		"CARGO_PROFILE_RELEASE_OPT_LEVEL=3",
		"CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1",
		"CARGO_PROFILE_RELEASE_PANIC=abort",
		"CARGO_PROFILE_RELEASE_LTO=false",
		"CARGO_PROFILE_RELEASE_DEBUG=0",
		"CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=false",
		"CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=false",
		"CARGO_PROFILE_RELEASE_INCREMENTAL=false",
	)
}

// discover lists the workspace's program crates (those with [package.metadata.sbpf]).
func discover(ctx context.Context, cfg *Config) ([]programCrate, error) {
	cmd := exec.CommandContext(ctx, cfg.Cargo, "metadata", "--format-version", "1", "--no-deps",
		"--manifest-path", filepath.Join(cfg.Workspace, "Cargo.toml"))
	cmd.Env = cfg.cargoEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("cargo metadata in %s: %w\n%s", cfg.Workspace, err, stderr.String())
	}
	var md metadata
	if err := json.Unmarshal(raw, &md); err != nil {
		return nil, fmt.Errorf("parse cargo metadata: %w", err)
	}
	members := map[string]bool{}
	for _, id := range md.WorkspaceMembers {
		members[id] = true
	}
	want, missing := map[string]bool{}, map[string]bool{}
	for _, p := range cfg.Packages {
		want[p], missing[p] = true, true
	}
	var out []programCrate
	for _, p := range md.Packages {
		if !members[p.ID] || p.Metadata.SBPF == nil || (len(want) > 0 && !want[p.Name]) {
			continue
		}
		delete(missing, p.Name)
		lib := ""
		for _, t := range p.Targets {
			for _, k := range t.Kind {
				if k == "lib" || k == "rlib" {
					lib = t.Name
				}
			}
		}
		if lib == "" {
			return nil, fmt.Errorf("program %s has no library target (programs are built from src/lib.rs)", p.Name)
		}
		out = append(out, programCrate{pkg: p.Name, lib: lib, manifest: p.ManifestPath, test: p.Metadata.SBPF.Test})
	}
	if len(missing) > 0 {
		var names []string
		for p := range missing {
			names = append(names, p)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("not program crates of %s: %s (a program needs [package.metadata.sbpf] in its Cargo.toml and must be a workspace member)",
			cfg.Workspace, strings.Join(names, ", "))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].lib < out[j].lib })
	return out, nil
}

type artifact struct {
	Reason       string `json:"reason"`
	ManifestPath string `json:"manifest_path"`
	Target       struct {
		Kind []string `json:"kind"`
	} `json:"target"`
	Filenames []string `json:"filenames"`
	Success   bool     `json:"success"`
}

// cargoBuild compiles the programs and their dependencies to rlibs. It fills
// in each program's rlib and returns the dependency rlibs (not programs).
func cargoBuild(ctx context.Context, cfg *Config, crates []programCrate) ([]string, error) {
	args := []string{"build", "--release", "--lib", "--target", target,
		"-Zbuild-std=core,compiler_builtins", "--message-format=json-render-diagnostics",
		"--manifest-path", filepath.Join(cfg.Workspace, "Cargo.toml"), "--target-dir", cfg.TargetDir}
	for _, c := range crates {
		args = append(args, "-p", c.pkg)
	}
	cmd := exec.CommandContext(ctx, cfg.Cargo, args...)
	cmd.Env = cfg.cargoEnv()
	cmd.Dir = cfg.Workspace
	cmd.Stderr = cfg.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start cargo: %w", err)
	}
	byManifest := map[string]*programCrate{}
	for i := range crates {
		byManifest[crates[i].manifest] = &crates[i]
	}
	var deps []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var a artifact
		if json.Unmarshal(sc.Bytes(), &a) != nil || a.Reason != "compiler-artifact" {
			continue
		}
		for _, f := range a.Filenames {
			if !strings.HasSuffix(f, ".rlib") {
				continue
			}
			if c, ok := byManifest[a.ManifestPath]; ok {
				c.rlib = f
			} else {
				deps = append(deps, f)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("cargo build for %s failed (diagnostics above): %w", target, err)
	}
	for _, c := range crates {
		if c.rlib == "" {
			return nil, fmt.Errorf("cargo produced no rlib for %s", c.pkg)
		}
	}
	sort.Strings(deps)
	return deps, nil
}

// run executes a tool and returns its combined output in the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return &toolError{tool: name, err: err, output: string(out)}
	}
	return nil
}

type toolError struct {
	tool, output string
	err          error
}

func (e *toolError) Error() string {
	return fmt.Sprintf("%s: %v\n%s", e.tool, e.err, strings.TrimSpace(e.output))
}

func (e *toolError) Unwrap() error { return e.err }

// writeMembers extracts an rlib's bitcode into dir as <prefix>-<n>.bc files.
func writeMembers(rlib, dir, prefix string) ([]string, error) {
	raw, err := os.ReadFile(rlib)
	if err != nil {
		return nil, err
	}
	members, err := bitcodeMembers(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(rlib), err)
	}
	var files []string
	for i, m := range members {
		p := filepath.Join(dir, fmt.Sprintf("%s-%d.bc", prefix, i))
		if err := os.WriteFile(p, m.data, 0o644); err != nil {
			return nil, err
		}
		files = append(files, p)
	}
	return files, nil
}

// linkDeps merges every dependency's bitcode into one module, from which each
// program then takes only what it references.
func linkDeps(ctx context.Context, cfg *Config, work string, rlibs []string) (string, error) {
	dir := filepath.Join(work, "deps")
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var files []string
	for i, r := range rlibs {
		f, err := writeMembers(r, dir, fmt.Sprintf("%03d", i))
		if err != nil {
			return "", err
		}
		files = append(files, f...)
	}
	out := filepath.Join(work, "deps.bc")
	if err := run(ctx, cfg.LLVMLink, append([]string{"-o", out}, files...)...); err != nil {
		return "", fmt.Errorf("link dependency bitcode: %w", err)
	}
	return out, nil
}

func buildProgram(ctx context.Context, cfg *Config, work, depsBC string, c programCrate) (Program, error) {
	start := time.Now()
	dir := filepath.Join(work, c.lib)
	if err := os.RemoveAll(dir); err != nil {
		return Program{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Program{}, err
	}
	own, err := writeMembers(c.rlib, dir, "prog")
	if err != nil {
		return Program{}, err
	}
	linked := filepath.Join(dir, "linked.bc")
	if err := run(ctx, cfg.LLVMLink, append(append([]string{"-o", linked}, own...), "--only-needed", depsBC)...); err != nil {
		return Program{}, fmt.Errorf("link bitcode: %w", err)
	}
	optimized := filepath.Join(dir, "opt.bc")
	if err := run(ctx, cfg.Opt, "-passes=internalize,globaldce,default<O3>", "-internalize-public-api-list=entrypoint",
		linked, "-o", optimized); err != nil {
		return Program{}, fmt.Errorf("optimize: %w", err)
	}
	ll := filepath.Join(dir, "opt.ll")
	if err := run(ctx, cfg.LLVMDis, optimized, "-o", ll); err != nil {
		return Program{}, fmt.Errorf("disassemble bitcode: %w", err)
	}
	ir, err := os.ReadFile(ll)
	if err != nil {
		return Program{}, err
	}
	if !bytes.Contains(ir, []byte("@entrypoint(")) {
		return Program{}, errors.New("no entrypoint function: declare one with psyche_sdk::entrypoint!")
	}
	fixed, stats, err := irfix.Apply(string(ir), irfix.Options{AlignAccesses: !cfg.KeepUnaligned, InlineMemLimit: 128})
	if err != nil {
		return Program{}, fmt.Errorf("IR fix-ups: %w", err)
	}
	fixedPath := filepath.Join(dir, "fixed.ll")
	if err := os.WriteFile(fixedPath, []byte(fixed), 0o644); err != nil {
		return Program{}, err
	}
	obj := filepath.Join(dir, "program.o")
	if err := run(ctx, cfg.LLC, "-march=bpfel", "-mcpu=v2", "--bpf-stack-size=4096", "-O3", "-filetype=obj", fixedPath, "-o", obj); err != nil {
		var te *toolError
		if errors.As(err, &te) {
			return Program{}, subsetError(te.output)
		}
		return Program{}, err
	}
	raw, err := os.ReadFile(obj)
	if err != nil {
		return Program{}, err
	}
	linkedSO, err := sbpf.Link(raw, sbpf.Options{})
	if err != nil {
		return Program{}, fmt.Errorf("link: %w", err)
	}
	outDir := cfg.DeployDir
	if c.test {
		outDir = cfg.TestDeployDir
	}
	path := filepath.Join(outDir, c.lib+".so")
	if err := writeAtomic(path, linkedSO.SO); err != nil {
		return Program{}, err
	}
	return Program{
		Package: c.pkg, Name: c.lib, Test: c.test, Path: path, Size: len(linkedSO.SO),
		TextSize: linkedSO.TextSize, RodataSize: linkedSO.RodataSize, Syscalls: linkedSO.Syscalls,
		Fixes: stats, LinkTime: time.Since(start),
	}, nil
}

// llcErrRe matches "error: <unknown>:0:0: in function NAME TYPE: MESSAGE".
var llcErrRe = regexp.MustCompile(`in function (\S+) [^:]*: (.+)`)

// nodeAddrRe matches the SelectionDAG node addresses llc prints in some errors.
var nodeAddrRe = regexp.MustCompile(`0x[0-9a-f]+: `)

// subset rules: what llc says -> what the program author should change.
var subsetAdvice = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`stack arguments|too many arguments|pass by value`), "calls a function with more than 5 arguments that was not inlined: pass a struct by reference, or mark the callee #[inline(always)]"},
	{regexp.MustCompile(`aggregate returns`), "returns an aggregate the sret fix-up could not handle: return through a &mut out-parameter"},
	{regexp.MustCompile(`__(mul|udiv|umod|div|mod)ti3`), "multiplies or divides u128/i128: use u64 arithmetic (checked_mul/checked_div) or split into u64 halves"},
	{regexp.MustCompile(`__\w*[sdt]f\d?\b|__\w*[sdt]f[sdt]?i\b|floating`), "uses floating point (f32/f64): use integer or fixed-point arithmetic"},
	{regexp.MustCompile(`__(div|mod)[sd]i3|[Ss]igned division|sdiv|srem`), "divides signed integers: divide the unsigned magnitudes and apply the sign yourself"},
	{regexp.MustCompile(`'mem(cpy|move|set|cmp)'`), "uses a memory intrinsic the IR fix-ups could not rewrite: copy through the SDK's memory helpers"},
	{regexp.MustCompile(`stack limit|stack size`), "has a stack frame larger than 4 KiB: keep big arrays in account data and split large functions"},
}

// subsetError turns llc's diagnostics into errors that name the Rust function
// and say what to change.
func subsetError(output string) error {
	var order []string
	why := map[string]string{}
	llc := map[string][]string{}
	for _, line := range strings.Split(output, "\n") {
		m := llcErrRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fn, msg := demangle.Filter(m[1]), strings.TrimSpace(nodeAddrRe.ReplaceAllString(m[2], ""))
		if _, ok := why[fn]; !ok {
			order = append(order, fn)
			why[fn] = "uses a construct upstream LLVM's BPF backend rejects"
			for _, a := range subsetAdvice {
				if a.re.MatchString(msg) {
					why[fn] = a.why
					break
				}
			}
		}
		if !slices.Contains(llc[fn], msg) {
			llc[fn] = append(llc[fn], msg)
		}
	}
	if len(order) == 0 {
		return fmt.Errorf("llc-22 failed:\n%s", strings.TrimSpace(output))
	}
	var msgs []string
	for _, fn := range order {
		msgs = append(msgs, fmt.Sprintf("%s %s\n    (llc: %s)", fn, why[fn], strings.Join(llc[fn], " ")))
	}
	return fmt.Errorf("code outside the supported language subset (see programs/README.md):\n  %s", strings.Join(msgs, "\n  "))
}

// lockDir takes an exclusive lock on dir/.build-lock until the returned
// function is called.
func lockDir(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".build-lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// writeAtomic replaces path with data, making its directory if missing.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o644)
}
