// trainer.c: the single cgo translation unit; the C sources live in csrc/ so
// that cgo compiles them exactly once, in this order.
// ISO C mode (-std=c11, which defines __STRICT_ANSI__) makes GCC default to
// -ffp-contract=off: no fused multiply-add, so the bits do not depend on -march.
// (cgo does not allow passing -ffp-contract=off itself.)
#if !defined(__STRICT_ANSI__) || defined(__FAST_MATH__)
#error "the numeric contract needs -std=c11 and no -ffast-math"
#endif

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "csrc/trainer.h"
#include "csrc/mathfn.h"
#include "csrc/gemm.c"
#include "csrc/gpt.c"
#include "csrc/demo.c"
#include "csrc/adamw.c"
#include "csrc/state.c"
