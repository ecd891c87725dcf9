// gemm.c: the deterministic GEMM behind every matmul of the model, with one
// kernel per ISA level chosen at run time. See gemm_kernel.h for the order.

#include "internal.h"

static inline __attribute__((always_inline)) void tr_gemm_store(const tr_gemm_args *g, int i, int j, float s) {
    float *o = g->out + (size_t)i * g->ldo + j;
    if (g->accumulate) *o = *o + s;
    else if (g->bias) *o = g->bias[j] + s;
    else *o = s;
}

// Most rows per row block: bounds the accumulators a thread parks between k blocks.
#define TR_GEMM_MB 192
// Longest k block: 6 packed columns of B then take 18 KiB of the 32 KiB L1.
#define TR_GEMM_KC 768

typedef float v4f __attribute__((vector_size(16)));

// Four results to out[i][j..j+3], each exactly as tr_gemm_store would.
static inline __attribute__((always_inline)) void tr_gemm_store4(const tr_gemm_args *g, int i, int j, v4f s) {
    float *o = g->out + (size_t)i * g->ldo + j;
    v4f base;
    if (g->accumulate) memcpy(&base, o, sizeof base);
    else if (g->bias) memcpy(&base, g->bias + j, sizeof base);
    else {
        memcpy(o, &s, sizeof s);
        return;
    }
    s = base + s;
    memcpy(o, &s, sizeof s);
}

// The horizontal sums of four accumulators at once, each in the fixed order
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)): adjacent pairs within each 128-bit
// half, then pairs of pairs, then the two halves. Every lane does the same
// IEEE additions as tr_hsum8, with shuffles instead of scalar extracts.
static inline __attribute__((always_inline)) v4f tr_hsum8x4(v8f a, v8f b, v8f c, v8f d) {
    v8f ab = __builtin_shufflevector(a, b, 0, 2, 8, 10, 4, 6, 12, 14) + __builtin_shufflevector(a, b, 1, 3, 9, 11, 5, 7, 13, 15);
    v8f cd = __builtin_shufflevector(c, d, 0, 2, 8, 10, 4, 6, 12, 14) + __builtin_shufflevector(c, d, 1, 3, 9, 11, 5, 7, 13, 15);
    v8f q = __builtin_shufflevector(ab, cd, 0, 2, 8, 10, 4, 6, 12, 14) + __builtin_shufflevector(ab, cd, 1, 3, 9, 11, 5, 7, 13, 15);
    return __builtin_shufflevector(q, q, 0, 1, 2, 3) + __builtin_shufflevector(q, q, 4, 5, 6, 7);
}

#define GEMM_NAME gemm_base
#define GEMM_TILE gemm_base_tile
#define GEMM_TARGET
#define GEMM_PIN(v) (void)0
#define GEMM_MR 2
#define GEMM_NR 3
#include "gemm_kernel.h"
#undef GEMM_NAME
#undef GEMM_TILE
#undef GEMM_TARGET
#undef GEMM_PIN
#undef GEMM_MR
#undef GEMM_NR

#define GEMM_NAME gemm_avx2
#define GEMM_TILE gemm_avx2_tile
#define GEMM_TARGET __attribute__((target("avx2")))
#define GEMM_PIN(v) __asm__("" : "+x"(v))
#define GEMM_MR 2
#define GEMM_NR 6
#include "gemm_kernel.h"
#undef GEMM_NAME
#undef GEMM_TILE
#undef GEMM_TARGET
#undef GEMM_PIN
#undef GEMM_MR
#undef GEMM_NR

#define GEMM_NAME gemm_avx512
#define GEMM_TILE gemm_avx512_tile
#define GEMM_TARGET __attribute__((target("avx512f,avx512vl")))
#define GEMM_PIN(v) __asm__("" : "+v"(v))
#define GEMM_MR 4
#define GEMM_NR 6
#include "gemm_kernel.h"
#undef GEMM_NAME
#undef GEMM_TILE
#undef GEMM_TARGET
#undef GEMM_PIN
#undef GEMM_MR
#undef GEMM_NR

// Highest level the CPU supports, capped at want (TR_ISA_AUTO: no cap).
int tr_isa_pick(int want) {
    __builtin_cpu_init();
    int best = TR_ISA_BASE;
    if (__builtin_cpu_supports("avx2")) best = TR_ISA_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) best = TR_ISA_AVX512;
    if (want != TR_ISA_AUTO && want < best) best = want;
    return best;
}

tr_gemm_fn tr_isa_kernel(int isa) {
    switch (isa) {
    case TR_ISA_AVX512: return gemm_avx512;
    case TR_ISA_AVX2: return gemm_avx2;
    default: return gemm_base;
    }
}
