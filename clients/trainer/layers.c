// layers.c: layers_isa.h compiled for x86-64, AVX2+FMA and AVX-512; the
// model's ISA level picks one table. Every copy gives the same bits (fma is
// exact at every level); only the speed differs.

#include "internal.h"

// FP exceptions are never observed here, so GCC may vectorise the
// exp/tanh loops (GELU, softmax); no result changes (unlike -ffast-math).
#pragma GCC optimize("no-trapping-math")

#define TRL(name) name##_base
#include "layers_isa.h"
#undef TRL

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define TRL(name) name##_avx2
#include "layers_isa.h"
#undef TRL
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#define TRL(name) name##_avx512
#include "layers_isa.h"
#undef TRL
#pragma GCC pop_options

const tr_layers *tr_layers_for(int isa) {
    switch (isa) {
    case TR_ISA_AVX512:
    case TR_ISA_AVX512VNNI: return &layers_avx512;
    case TR_ISA_AVX2:
    case TR_ISA_AVXVNNI: return &layers_avx2;
    default: return &layers_base;
    }
}
