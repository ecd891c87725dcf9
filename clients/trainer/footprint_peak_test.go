package trainer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// mallocCounter is a malloc interposer (LD_PRELOAD) that counts the bytes
// asked for and not yet freed, exactly, by block, and reports them through
// mallinfo2: uordblks the bytes in use, usmblks the most in use since the
// last mallinfo2 call. glibc cannot say the latter: a call's temporary
// buffers are gone by the time it returns.
const mallocCounter = `
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static void *(*real_memalign)(size_t, size_t);

// dlsym may calloc before real_calloc is known: a static pool serves it.
static char boot[1 << 16];
static size_t boot_used;
static int resolving;

// Block sizes by address: open addressing, linear probing, backward-shift
// deletion; one lock.
#define SLOTS (1u << 22)
static struct { uintptr_t p; size_t n; } tab[SLOTS];
static size_t live, peak;
static char lk;
static void lock(void) { while (__atomic_test_and_set(&lk, __ATOMIC_ACQUIRE)) {} }
static void unlock(void) { __atomic_clear(&lk, __ATOMIC_RELEASE); }
static size_t slot(uintptr_t p) { return (size_t)(((p >> 4) * 0x9E3779B97F4A7C15ull) >> 40) & (SLOTS - 1); }

static void add(void *p, size_t n) {
    if (!p) return;
    lock();
    size_t i = slot((uintptr_t)p);
    while (tab[i].p) i = (i + 1) & (SLOTS - 1);
    tab[i].p = (uintptr_t)p;
    tab[i].n = n;
    live += n;
    if (live > peak) peak = live;
    unlock();
}

static void del(void *p) {
    if (!p) return;
    lock();
    size_t i = slot((uintptr_t)p);
    while (tab[i].p && tab[i].p != (uintptr_t)p) i = (i + 1) & (SLOTS - 1);
    if (tab[i].p) {
        live -= tab[i].n;
        for (size_t j = i;;) {
            j = (j + 1) & (SLOTS - 1);
            if (!tab[j].p) break;
            size_t k = slot(tab[j].p);
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
            tab[i] = tab[j];
            i = j;
        }
        tab[i].p = 0;
    }
    unlock();
}

static void resolve(void) {
    resolving = 1;
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_memalign = dlsym(RTLD_NEXT, "memalign");
    resolving = 0;
}
__attribute__((constructor)) static void init(void) { if (!real_malloc) resolve(); }

void *malloc(size_t n) {
    if (!real_malloc) resolve();
    void *p = real_malloc(n);
    add(p, n);
    return p;
}
void *calloc(size_t a, size_t b) {
    if (!real_calloc) {
        if (resolving) {
            size_t n = (a * b + 15) & ~(size_t)15;
            if (boot_used + n > sizeof boot) return NULL;
            boot_used += n;
            return boot + boot_used - n;
        }
        resolve();
    }
    void *p = real_calloc(a, b);
    add(p, a * b);
    return p;
}
void free(void *p) {
    if (!p || ((char *)p >= boot && (char *)p < boot + sizeof boot)) return;
    if (!real_free) resolve();
    del(p);
    real_free(p);
}
void *realloc(void *p, size_t n) {
    if (!real_realloc) resolve();
    void *q = real_realloc(p, n);
    if (q || n == 0) {
        del(p);
        add(q, n);
    }
    return q;
}
void *memalign(size_t al, size_t n) {
    if (!real_memalign) resolve();
    void *p = real_memalign(al, n);
    add(p, n);
    return p;
}
void *aligned_alloc(size_t al, size_t n) { return memalign(al, n); }
void *valloc(size_t n) { return memalign(4096, n); }
void *pvalloc(size_t n) { return memalign(4096, (n + 4095) & ~(size_t)4095); }
int posix_memalign(void **out, size_t al, size_t n) {
    void *p = memalign(al, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
struct mallinfo2 mallinfo2(void) {
    struct mallinfo2 m;
    memset(&m, 0, sizeof m);
    lock();
    m.uordblks = live;
    m.usmblks = peak;
    peak = live;
    unlock();
    return m;
}
`

// footprintChildEnv, set, makes the peak tests measure (in a process
// with the malloc counter preloaded) instead of starting that process.
const footprintChildEnv = "TRAINER_FOOTPRINT_CHILD"

// runFootprintChild builds the malloc counter and reruns this test binary,
// only the test named, with it preloaded; the test's checks run there.
func runFootprintChild(t *testing.T, test string) {
	t.Helper()
	cc := strings.Fields(os.Getenv("CC")) // cgo's compiler: $CC, else gcc
	if len(cc) == 0 {
		cc = []string{"gcc"}
	}
	dir := t.TempDir()
	src, lib := filepath.Join(dir, "count.c"), filepath.Join(dir, "count.so")
	if err := os.WriteFile(src, []byte(mallocCounter), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(cc[1:], "-O2", "-shared", "-fPIC", "-o", lib, src, "-ldl")
	if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
		t.Fatalf("building the malloc counter with %s (CC): %v\n%s", cc, err, out)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), footprintChildEnv+"=1", "LD_PRELOAD="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s under the malloc counter: %v\n%s", test, err, out)
	}
	t.Logf("%s", out)
}

// Slack for a call's peak: OpenMP's teams. A parallel region of another
// size than the last one frees the team libgomp keeps and allocates one of
// its own (a few hundred bytes a thread), inside the call.
const footprintPeakSlack = 4 << 10

// checkPeaks trains as c says twice over: the first time the steady
// buffers come into being, the second time every call is measured for
// what it holds beyond them at its peak, which must be the footprint's
// Transient (to OpenMP's teams), the most of any call. On the CPU path the
// steady bytes must be the footprint's too, to footprintHostSlack (the
// model struct, 3.2 KiB, and an OpenMP team, about 2.9 KiB in the first
// case a process runs); on the GPU path the device test checks them, the
// emulated device's blocks being malloc's too.
func checkPeaks(t *testing.T, cfg Config, c footprintCase, gpu bool) {
	t.Helper()
	runtime.LockOSThread() // one OpenMP pool
	defer runtime.UnlockOSThread()
	base, _ := heapStats()
	tr := footprintTrainer(t, cfg, gpu)
	defer tr.Close()
	trainFootprint(t, tr, c, nil)
	var most int64
	var which string
	trainFootprint(t, tr, c, func(what string, f func() error) {
		before, _ := heapStats() // from here the counter's peak
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		after, peak := heapStats()
		if d := after - before; d < -footprintPeakSlack || d > footprintPeakSlack {
			t.Errorf("%s: %+d bytes in use after the call, in steady state", what, d)
		}
		if peak-before > most {
			most, which = peak-before, what
		}
	})
	opt := c.opt
	opt.GPU, opt.Threads = gpu, max(defaultThreads(), footprintThreads)
	fp, err := Footprint(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	want := fp.OnHost.Transient
	if most < want || most > want+footprintPeakSlack {
		t.Errorf("peak of a call: %d bytes (%s), Footprint's Transient %d (%+d)", most, which, want, most-want)
	}
	steady, _ := heapStats()
	steady -= base
	if d := steady - fp.OnHost.Steady(); !gpu && (d < 0 || d > footprintHostSlack) {
		t.Errorf("steady: %d bytes in use, Footprint %d (%+d)", steady, fp.OnHost.Steady(), d)
	}
	t.Logf("transient %d bytes (%s), Footprint %d; steady %+d", most, which, want, steady-fp.OnHost.Steady())
}

// The most one call holds beyond the steady buffers is the footprint's
// Transient, and the steady bytes its steady ones, counted exactly, block
// by block, by a malloc interposer in a child process: every optimizer
// case, both architectures, fp32 and mx8, on the CPU path.
func TestFootprintPeakMatches(t *testing.T) {
	if os.Getenv(footprintChildEnv) == "" {
		runFootprintChild(t, "TestFootprintPeakMatches")
		return
	}
	if _, peak := heapStats(); peak <= 0 {
		t.Fatal("the malloc counter is not preloaded (no peak from mallinfo2)")
	}
	for _, cfg := range footprintConfigs() {
		for _, c := range footprintCases() {
			t.Run(fmt.Sprintf("%s/%s", cfg.Name, c.name), func(t *testing.T) { checkPeaks(t, cfg, c, false) })
		}
	}
}
