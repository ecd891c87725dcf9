// gemm.c: the deterministic GEMM behind every matmul of the model, with one
// kernel per ISA level chosen at run time. See gemm_kernel.h for the order.

#include "internal.h"

static inline __attribute__((always_inline)) void tr_gemm_store(const tr_gemm_args *g, int i, int j, float s) {
    float *o = g->out + (size_t)i * g->ldo + j;
    if (g->accumulate) *o = *o + s;
    else if (g->bias) *o = g->bias[j] + s;
    else *o = s;
}

#define GEMM_NAME gemm_base
#define GEMM_TARGET
#define GEMM_MR 2
#define GEMM_NR 3
#include "gemm_kernel.h"
#undef GEMM_NAME
#undef GEMM_TARGET
#undef GEMM_MR
#undef GEMM_NR

#define GEMM_NAME gemm_avx2
#define GEMM_TARGET __attribute__((target("avx2")))
#define GEMM_MR 3
#define GEMM_NR 4
#include "gemm_kernel.h"
#undef GEMM_NAME
#undef GEMM_TARGET
#undef GEMM_MR
#undef GEMM_NR

#define GEMM_NAME gemm_avx512
#define GEMM_TARGET __attribute__((target("avx512f,avx512vl")))
#define GEMM_MR 6
#define GEMM_NR 4
#include "gemm_kernel.h"
#undef GEMM_NAME
#undef GEMM_TARGET
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
