// gemm.c: the GEMM behind every matmul of the model, one kernel per ISA
// level chosen at run time, all equal to trk_gemm_element (kernels.h) bit
// for bit: every output is one fma chain over k = 0, 1, ..., K-1 from its
// base (bias, previous value or 0).
//
// BLIS-style: a panel of B (kc x NR, k-major) and a panel of A (kc x MR) are
// packed, and an MR x NR register tile of the output runs the chains of its
// MR*NR elements kc steps further, broadcasting A and loading NR/8 or NR/16
// lanes of B per k. Between k blocks the chains wait in the output itself
// (a float is a float), so the blocking, tile shapes and thread count change
// no bit; edge tiles run on a padded copy.

#define _DEFAULT_SOURCE // syscall
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

// Register tiles: MR x NR of the output (AVX-512: 12 x 32).
#define TR_GEMM_MAXR 12 // largest MR
#define TR_GEMM_MAXN 32 // largest NR

typedef void (*tr_ukernel)(int kc, const float *restrict ap, const float *restrict bp, float *c, int ldc);

// x86-64 without FMA: fmaf from libm (correctly rounded), so the same bits, slowly.
static void uk_base(int kc, const float *restrict ap, const float *restrict bp, float *c, int ldc) {
    enum { MR = 4, NR = 8 };
    float acc[MR][NR];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) acc[r][j] = c[(size_t)r * ldc + j];
    for (int k = 0; k < kc; k++, ap += MR, bp += NR)
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < NR; j++) acc[r][j] = trk_fma(ap[r], bp[j], acc[r][j]);
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) c[(size_t)r * ldc + j] = acc[r][j];
}

// The vector kernels name each accumulator (arrays of vectors get spilled
// to the stack by GCC): ROWS(X) expands X(r) for every row r of the tile.
#define TR_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define TR_ROWS12(X) TR_ROWS6(X) X(6) X(7) X(8) X(9) X(10) X(11)

// AVX2 + FMA: 6 x 16, twelve accumulators.
#define TR_AVX2_LOAD(r) __m256 c##r##a = _mm256_loadu_ps(c + r * (size_t)ldc), c##r##b = _mm256_loadu_ps(c + r * (size_t)ldc + 8);
#define TR_AVX2_FMA(r)                          \
    {                                           \
        __m256 a = _mm256_broadcast_ss(ap + r); \
        c##r##a = _mm256_fmadd_ps(a, b0, c##r##a); \
        c##r##b = _mm256_fmadd_ps(a, b1, c##r##b); \
    }
#define TR_AVX2_STORE(r) _mm256_storeu_ps(c + r * (size_t)ldc, c##r##a); _mm256_storeu_ps(c + r * (size_t)ldc + 8, c##r##b);
__attribute__((target("avx2,fma"))) static void uk_avx2(int kc, const float *restrict ap, const float *restrict bp,
                                                        float *c, int ldc) {
    TR_ROWS6(TR_AVX2_LOAD)
    for (int k = 0; k < kc; k++, ap += 6, bp += 16) {
        __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
        TR_ROWS6(TR_AVX2_FMA)
    }
    TR_ROWS6(TR_AVX2_STORE)
}

// AVX-512: 12 x 32, twenty-four accumulators.
#define TR_AVX512_LOAD(r) __m512 c##r##a = _mm512_loadu_ps(c + r * (size_t)ldc), c##r##b = _mm512_loadu_ps(c + r * (size_t)ldc + 16);
#define TR_AVX512_FMA(r)                        \
    {                                           \
        __m512 a = _mm512_set1_ps(ap[r]);       \
        c##r##a = _mm512_fmadd_ps(a, b0, c##r##a); \
        c##r##b = _mm512_fmadd_ps(a, b1, c##r##b); \
    }
#define TR_AVX512_STORE(r) _mm512_storeu_ps(c + r * (size_t)ldc, c##r##a); _mm512_storeu_ps(c + r * (size_t)ldc + 16, c##r##b);
__attribute__((target("avx512f,avx2,fma"))) static void uk_avx512(int kc, const float *restrict ap,
                                                                  const float *restrict bp, float *c, int ldc) {
    TR_ROWS12(TR_AVX512_LOAD)
    for (int k = 0; k < kc; k++, ap += 12, bp += 32) {
        __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
        TR_ROWS12(TR_AVX512_FMA)
    }
    TR_ROWS12(TR_AVX512_STORE)
}

static inline int tr_min(int a, int b) { return a < b ? a : b; }

typedef struct {
    tr_ukernel uk;
    int mr, nr;
} tr_gemm_kernel;

static const tr_gemm_kernel tr_kernels[] = {
    [TR_ISA_BASE] = {uk_base, 4, 8},
    [TR_ISA_AVX2] = {uk_avx2, 6, 16},
    [TR_ISA_AVXVNNI] = {uk_avx2, 6, 16},
    [TR_ISA_AVX512] = {uk_avx512, 12, 32},
    [TR_ISA_AVX512VNNI] = {uk_avx512, 12, 32},
    [TR_ISA_AMX] = {uk_avx512, 12, 32},
};

// dst rows i (stride ds) = src column i (src rows of stride ss), 8 x 8.
__attribute__((target("avx2"))) void tr_t8x8(const float *src, size_t ss, float *dst, size_t ds) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * ss);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4)
        for (int j = 0; j < 2; j++) {
            r[i + 2 * j] = _mm256_shuffle_ps(t[i + j], t[i + j + 2], 0x44);
            r[i + 2 * j + 1] = _mm256_shuffle_ps(t[i + j], t[i + j + 2], 0xee);
        }
    // r[0..3]: columns {0,4} {1,5} {2,6} {3,7} of rows 0-3 (low and high
    // halves), r[4..7] the same of rows 4-7.
    for (int j = 0; j < 4; j++) {
        _mm256_storeu_ps(dst + j * ds, _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
        _mm256_storeu_ps(dst + (j + 4) * ds, _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
    }
}

// Packs rows [p0, p0+w) x k [k0, k0+kc) of an operand X as [k][w], zero
// past its n rows; X(p, k) is x[p*ld + k], or x[k*ld + p] when trans. avx:
// transpose in 8 x 8 register blocks. Data movement only: no bit changes.
static void pack(const float *x, int ld, int trans, int n, int p0, int w, int k0, int kc, int avx, float *restrict dst) {
    int rows = n - p0 < w ? n - p0 : w;
    if (trans) {
        for (int k = 0; k < kc; k++) {
            const float *src = x + (size_t)(k0 + k) * ld + p0;
            for (int r = 0; r < w; r++) dst[k * w + r] = r < rows ? src[r] : 0.0f;
        }
        return;
    }
    int r = 0;
    if (avx)
        for (; r + 8 <= rows; r += 8) {
            const float *src = x + (size_t)(p0 + r) * ld + k0;
            int k = 0;
            for (; k + 8 <= kc; k += 8) tr_t8x8(src + k, (size_t)ld, dst + k * w + r, (size_t)w);
            for (; k < kc; k++)
                for (int i = 0; i < 8; i++) dst[k * w + r + i] = src[(size_t)i * ld + k];
        }
    for (; r < w; r++) {
        const float *src = x + (size_t)(p0 + r) * ld + k0;
        if (r < rows)
            for (int k = 0; k < kc; k++) dst[k * w + r] = src[k];
        else
            for (int k = 0; k < kc; k++) dst[k * w + r] = 0.0f;
    }
}

// Rows [m0, m1) x columns [n0, n1) of the output: one task.
static void tr_gemm_task(const tr_gemm_args *g, const tr_gemm_kernel *kn, int m0, int m1, int n0, int n1, float *buf) {
    const int mr = kn->mr, nr = kn->nr, K = g->K, avx = kn->uk != uk_base;
    int nc = TR_GEMM_NC - TR_GEMM_NC % nr;
    float *pa = buf, *pb = buf + (size_t)TR_GEMM_KC * TR_GEMM_MC;
    if (!g->accumulate)
        for (int i = m0; i < m1; i++)
            for (int j = n0; j < n1; j++) g->out[(size_t)i * g->ldo + j] = g->bias ? g->bias[j] : 0.0f;
    for (int k0 = 0; k0 < K; k0 += TR_GEMM_KC) {
        int kc = K - k0 < TR_GEMM_KC ? K - k0 : TR_GEMM_KC;
        for (int j0 = n0; j0 < n1; j0 += nc) {
            int j1 = j0 + nc < n1 ? j0 + nc : n1;
            for (int j = j0; j < j1; j += nr) pack(g->b, g->ldb, g->tb, g->N, j, nr, k0, kc, avx, pb + (size_t)(j - j0) * kc);
            for (int i0 = m0; i0 < m1; i0 += TR_GEMM_MC) {
                int i1 = i0 + TR_GEMM_MC < m1 ? i0 + TR_GEMM_MC : m1;
                for (int i = i0; i < i1; i += mr) pack(g->a, g->lda, g->ta, g->M, i, mr, k0, kc, avx, pa + (size_t)(i - i0) * kc);
                for (int j = j0; j < j1; j += nr)
                    for (int i = i0; i < i1; i += mr) {
                        const float *ap = pa + (size_t)(i - i0) * kc, *bp = pb + (size_t)(j - j0) * kc;
                        float *c = g->out + (size_t)i * g->ldo + j;
                        if (i + mr <= i1 && j + nr <= j1) {
                            kn->uk(kc, ap, bp, c, g->ldo);
                            continue;
                        }
                        // Edge tile: the chains of the real elements in a padded copy.
                        float t[TR_GEMM_MAXR * TR_GEMM_MAXN] = {0};
                        int rows = i1 - i < mr ? i1 - i : mr, cols = j1 - j < nr ? j1 - j : nr;
                        for (int r = 0; r < rows; r++) memcpy(t + r * nr, c + (size_t)r * g->ldo, sizeof(float) * cols);
                        kn->uk(kc, ap, bp, t, nr);
                        for (int r = 0; r < rows; r++) memcpy(c + (size_t)r * g->ldo, t + r * nr, sizeof(float) * cols);
                    }
            }
        }
    }
}

// One task per thread: mt row ranges (mb rows each) x nt column ranges (nb
// columns), the split that packs least (each task packs its rows of A once
// per column block and its columns of B once per k block).
void tr_gemm_split(const tr_gemm_args *g, int mr, int nr, int nthreads, int *mt, int *nt, int *mb, int *nb) {
    *mt = 1, *nt = 1;
    long long best = -1;
    for (int r = 1; r <= nthreads; r++) {
        int c = nthreads / r;
        if (nthreads % r || (g->M + mr - 1) / mr < r || (g->N + nr - 1) / nr < c) continue;
        long long cost = (long long)g->M * c + (long long)g->N * r;
        if (best < 0 || cost < best) best = cost, *mt = r, *nt = c;
    }
    *mb = (g->M + *mt - 1) / *mt, *nb = (g->N + *nt - 1) / *nt;
    *mb += (mr - *mb % mr) % mr;
    *nb += (nr - *nb % nr) % nr;
}

void tr_gemm_run(const tr_gemm_args *g, int isa, int nthreads, float *pack) {
    if (isa < TR_ISA_BASE || isa > TR_ISA_AMX) isa = TR_ISA_BASE; // the emulated AMX level too
    const tr_gemm_kernel *kn = &tr_kernels[isa];
    int mt, nt, mb, nb;
    tr_gemm_split(g, kn->mr, kn->nr, nthreads, &mt, &nt, &mb, &nb);
    if (mt * nt == 1) {
        tr_gemm_task(g, kn, 0, g->M, 0, g->N, pack);
        return;
    }
    #pragma omp parallel for collapse(2) schedule(static) num_threads(mt * nt)
    for (int it = 0; it < mt; it++)
        for (int jt = 0; jt < nt; jt++)
            if (it * mb < g->M && jt * nb < g->N)
                tr_gemm_task(g, kn, it * mb, tr_min(g->M, (it + 1) * mb), jt * nb, tr_min(g->N, (jt + 1) * nb),
                             pack + (size_t)omp_get_thread_num() * TR_GEMM_PACK);
}

// AMX-INT8 is usable when the CPU has AMX-TILE and AMX-INT8 (CPUID leaf 7:
// EDX bits 24, 25), the OS enables the tile state (XCR0 bits 17 XTILECFG
// and 18 XTILEDATA) and Linux grants this process XTILEDATA (component 18)
// on request, which it refuses while a thread's signal stack is too small
// for the tiles (Go's are 32 KiB, enough). The grant is per process, so
// every thread, OpenMP's started later included, may use the tiles: asked
// once, and only by a pick that could choose AMX.
static int tr_amx_usable;
static void tr_amx_probe(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 24 & 1) || !(d >> 25 & 1)) return;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1)) return; // OSXSAVE: XGETBV readable
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo >> 17 & 3) != 3) return;
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    tr_amx_usable = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

// Highest level the CPU supports, capped at want (TR_ISA_AUTO: no cap);
// TR_ISA_AMX_EMULATED runs anywhere. The levels are not nested (AMD's
// AVX-512 parts lack AVX-VNNI): each needs its own features.
int tr_isa_pick(int want) {
    if (want == TR_ISA_AMX_EMULATED) return want;
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    int amx = 0;
    if (avx512 && (want == TR_ISA_AUTO || want >= TR_ISA_AMX)) {
        static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
        pthread_once(&amx_once, tr_amx_probe);
        amx = tr_amx_usable;
    }
    int ok[TR_ISA_AMX + 1] = {
        [TR_ISA_BASE] = 1,
        [TR_ISA_AVX2] = avx2,
        [TR_ISA_AVXVNNI] = avx2 && __builtin_cpu_supports("avxvnni"),
        [TR_ISA_AVX512] = avx512,
        [TR_ISA_AVX512VNNI] = avx512 && __builtin_cpu_supports("avx512vnni"),
        [TR_ISA_AMX] = amx,
    };
    int best = TR_ISA_BASE;
    for (int l = TR_ISA_BASE; l <= TR_ISA_AMX; l++)
        if (ok[l] && (want == TR_ISA_AUTO || l <= want)) best = l;
    return best;
}
