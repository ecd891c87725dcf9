// layers.c: layers_isa.h compiled for x86-64, AVX2+FMA and AVX-512; the
// model's ISA level picks one table. Every copy gives the same bits (fma is
// exact at every level); only the speed differs.

#include <immintrin.h>

#include "internal.h"

// FP exceptions are never observed here, so GCC may vectorise the
// exp/tanh loops (GELU, softmax); no result changes (unlike -ffast-math).
#pragma GCC optimize("no-trapping-math")

// The vector of each level for the blocked loops of layers_isa.h: TRL_VL
// lanes, loads, stores, broadcasts and fma (one rounding per lane, as
// trk_fma). x86-64 runs them one float at a time.
#define TRL(name) name##_base
#define TRL_VL 1
#define trl_v float
#define trl_load(p) (*(p))
#define trl_store(p, v) (*(p) = (v))
#define trl_set1(x) (x)
#define trl_fma(a, b, c) trk_fma(a, b, c)
#include "layers_isa.h"
#undef TRL
#undef TRL_VL
#undef trl_v
#undef trl_load
#undef trl_store
#undef trl_set1
#undef trl_fma

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define TRL(name) name##_avx2
#define TRL_VL 8
#define trl_v __m256
#define trl_load(p) _mm256_loadu_ps(p)
#define trl_store(p, v) _mm256_storeu_ps(p, v)
#define trl_set1(x) _mm256_set1_ps(x)
#define trl_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#include "layers_isa.h"
#undef TRL
#undef TRL_VL
#undef trl_v
#undef trl_load
#undef trl_store
#undef trl_set1
#undef trl_fma
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#define TRL(name) name##_avx512
#define TRL_VL 16
#define trl_v __m512
#define trl_load(p) _mm512_loadu_ps(p)
#define trl_store(p, v) _mm512_storeu_ps(p, v)
#define trl_set1(x) _mm512_set1_ps(x)
#define trl_fma(a, b, c) _mm512_fmadd_ps(a, b, c)
#include "layers_isa.h"
#undef TRL
#undef TRL_VL
#undef trl_v
#undef trl_load
#undef trl_store
#undef trl_set1
#undef trl_fma
#pragma GCC pop_options

const tr_layers *tr_layers_for(int isa) {
    switch (isa) {
    case TR_ISA_AVX512:
    case TR_ISA_AVX512VNNI:
    case TR_ISA_AMX: return &layers_avx512;
    case TR_ISA_AVX2:
    case TR_ISA_AVXVNNI: return &layers_avx2;
    default: return &layers_base;
    }
}
