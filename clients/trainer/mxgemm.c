// mxgemm.c: the GEMM of numeric contract v3 ("mx8"), one kernel per ISA
// level, all equal to trk_mx_gemm_element (kernels.h) bit for bit.
//
// Both operands are quantized once per GEMM (the threads sharing rows) into
// panels of NR rows of B and MR rows of A, their int8 codes laid out for
// the int8 dot-product instructions, [block][group of 4 codes][row][4],
// with one scale per row and block. A register tile runs, for each block,
// the int32 dot products of its MR x NR elements (exact in any order), then
// one fma per element into its fp32 chain; between k steps (gemm.c's
// blocking) the chains wait in the output, so blocking, tiles and threads
// change no bit. VNNI's vpdpbusd multiplies unsigned by signed bytes: its
// kernels take A's codes as q + 128 and start each block's sums at -128 *
// (the block's sum of B's codes), which B's panels carry. AMX's TDPBSSD
// multiplies signed bytes, one block per instruction (mxgemm_amx.h), and
// takes A's codes row by row. Every sum stays exact in int32.

#include <immintrin.h>
#include <stdio.h>

#include "internal.h"

#define MX_BLK TRK_MX_BLOCK
#define MX_KB 16     // blocks per k step: 512 codes
#define MX_MAXR 32   // largest MR
#define MX_MAXN 32   // largest NR (also the rows mx_pack gathers at a time)

// nb blocks of an MR x NR tile: ap codes [nb][8][MR][4] (or [nb][MR][32]
// when a_rows) and as scales [nb][MR]; bp codes [nb][8][NR][4], bs scales
// and bc corrections [nb][NR].
typedef void (*tr_mx_ukernel)(int nb, const int8_t *ap, const float *as, const int8_t *bp, const float *bs,
                              const int32_t *bc, float *c, int ldc);

typedef int (*tr_mx_quant)(const float *v, int8_t *q, int *sum, int8_t *q2, int *sum2);

typedef struct {
    tr_mx_ukernel uk;
    int mr, nr;
    int a_u8; // A's codes stored as q + 128 (for vpdpbusd), with B's corrections
    tr_mx_quant quant;
    int a_rows;                   // A's codes row by row per block (AMX's A tiles)
    void (*enter)(void), (*leave)(void); // per task and thread: AMX's tile configuration
} tr_mx_kernel;

static inline int mx_min(int a, int b) { return a < b ? a : b; }

static inline int32_t mx_word(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

// Plain C: the reference order written out.
static void mxk_base(int nb, const int8_t *ap, const float *as, const int8_t *bp, const float *bs, const int32_t *bc,
                     float *c, int ldc) {
    enum { MR = 4, NR = 8 };
    (void)bc;
    float acc[MR][NR];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) acc[r][j] = c[(size_t)r * ldc + j];
    for (int b = 0; b < nb; b++, ap += MX_BLK * MR, bp += MX_BLK * NR, as += MR, bs += NR) {
        int32_t d[MR][NR] = {{0}};
        for (int g = 0; g < MX_BLK / 4; g++)
            for (int r = 0; r < MR; r++)
                for (int j = 0; j < NR; j++)
                    for (int t = 0; t < 4; t++) d[r][j] += (int32_t)ap[(g * MR + r) * 4 + t] * bp[(g * NR + j) * 4 + t];
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < NR; j++) acc[r][j] = trk_mx_step(acc[r][j], d[r][j], as[r], bs[j]);
    }
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) c[(size_t)r * ldc + j] = acc[r][j];
}

// The vector kernels name each accumulator, as gemm.c's do.
#define MX_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)

// AVX2 without VNNI, 6 x 8: |a| times b with a's sign (vpmaddubsw: each
// pair of products is at most 2 * 127 * 127, no saturation), pairs summed
// into int32 lanes (vpmaddwd by ones).
#define MXA2_LOAD(r) __m256 f##r = _mm256_loadu_ps(c + r * (size_t)ldc); __m256i i##r;
#define MXA2_ZERO(r) i##r = _mm256_setzero_si256();
#define MXA2_DOT(r)                                                                              \
    {                                                                                            \
        __m256i a = _mm256_set1_epi32(mx_word(ap + (g * 6 + r) * 4));                            \
        __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b0, a));        \
        i##r = _mm256_add_epi32(i##r, _mm256_madd_epi16(p, ones));                               \
    }
#define MXA2_STEP(r) f##r = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i##r), _mm256_mul_ps(_mm256_set1_ps(as[r]), s0), f##r);
#define MXA2_STORE(r) _mm256_storeu_ps(c + r * (size_t)ldc, f##r);
__attribute__((target("avx2,fma"))) static void mxk_avx2(int nb, const int8_t *ap, const float *as, const int8_t *bp,
                                                         const float *bs, const int32_t *bc, float *c, int ldc) {
    (void)bc;
    const __m256i ones = _mm256_set1_epi16(1);
    MX_ROWS6(MXA2_LOAD)
    for (int b = 0; b < nb; b++, ap += MX_BLK * 6, bp += MX_BLK * 8, as += 6, bs += 8) {
        MX_ROWS6(MXA2_ZERO)
        for (int g = 0; g < MX_BLK / 4; g++) {
            __m256i b0 = _mm256_loadu_si256((const __m256i *)(bp + g * 32));
            MX_ROWS6(MXA2_DOT)
        }
        __m256 s0 = _mm256_loadu_ps(bs);
        MX_ROWS6(MXA2_STEP)
    }
    MX_ROWS6(MXA2_STORE)
}

// AVX-VNNI, 6 x 8: vpdpbusd on 256-bit registers.
#define MXV2_INIT(r) i##r = c0;
#define MXV2_DOT(r) i##r = _mm256_dpbusd_avx_epi32(i##r, _mm256_set1_epi32(mx_word(ap + (g * 6 + r) * 4)), b0);
__attribute__((target("avx2,fma,avxvnni"))) static void mxk_avxvnni(int nb, const int8_t *ap, const float *as,
                                                                    const int8_t *bp, const float *bs,
                                                                    const int32_t *bc, float *c, int ldc) {
    MX_ROWS6(MXA2_LOAD)
    for (int b = 0; b < nb; b++, ap += MX_BLK * 6, bp += MX_BLK * 8, as += 6, bs += 8, bc += 8) {
        __m256i c0 = _mm256_loadu_si256((const __m256i *)bc);
        MX_ROWS6(MXV2_INIT)
        for (int g = 0; g < MX_BLK / 4; g++) {
            __m256i b0 = _mm256_loadu_si256((const __m256i *)(bp + g * 32));
            MX_ROWS6(MXV2_DOT)
        }
        __m256 s0 = _mm256_loadu_ps(bs);
        MX_ROWS6(MXA2_STEP)
    }
    MX_ROWS6(MXA2_STORE)
}

// AVX-512 VNNI, 6 x 32: twelve int32 and twelve fp32 accumulators.
#define MXV5_LOAD(r) \
    __m512 f##r##a = _mm512_loadu_ps(c + r * (size_t)ldc), f##r##b = _mm512_loadu_ps(c + r * (size_t)ldc + 16); __m512i i##r##a, i##r##b;
#define MXV5_INIT(r) i##r##a = c0; i##r##b = c1;
#define MXV5_DOT(r)                                                   \
    {                                                                 \
        __m512i a = _mm512_set1_epi32(mx_word(ap + (g * 6 + r) * 4)); \
        i##r##a = _mm512_dpbusd_epi32(i##r##a, a, b0);                \
        i##r##b = _mm512_dpbusd_epi32(i##r##b, a, b1);                \
    }
#define MXV5_STEP(r)                                                                                   \
    {                                                                                                  \
        __m512 sa = _mm512_set1_ps(as[r]);                                                             \
        f##r##a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i##r##a), _mm512_mul_ps(sa, s0), f##r##a);       \
        f##r##b = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i##r##b), _mm512_mul_ps(sa, s1), f##r##b);       \
    }
#define MXV5_STORE(r) _mm512_storeu_ps(c + r * (size_t)ldc, f##r##a); _mm512_storeu_ps(c + r * (size_t)ldc + 16, f##r##b);
__attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma"))) static void
mxk_avx512vnni(int nb, const int8_t *ap, const float *as, const int8_t *bp, const float *bs, const int32_t *bc, float *c,
               int ldc) {
    MX_ROWS6(MXV5_LOAD)
    for (int b = 0; b < nb; b++, ap += MX_BLK * 6, bp += MX_BLK * 32, as += 6, bs += 32, bc += 32) {
        __m512i c0 = _mm512_loadu_si512(bc), c1 = _mm512_loadu_si512(bc + 16);
        MX_ROWS6(MXV5_INIT)
        for (int g = 0; g < MX_BLK / 4; g++) {
            __m512i b0 = _mm512_loadu_si512(bp + g * 128), b1 = _mm512_loadu_si512(bp + g * 128 + 64);
            MX_ROWS6(MXV5_DOT)
        }
        __m512 s0 = _mm512_loadu_ps(bs), s1 = _mm512_loadu_ps(bs + 16);
        MX_ROWS6(MXV5_STEP)
    }
    MX_ROWS6(MXV5_STORE)
}

// AMX-INT8 (mxgemm_amx.h): palette 1 with C tiles 0-3 of 16 rows x 16
// int32, A tiles 4-5 of 16 rows x 32 codes, B tiles 6-7 of 8 rows x 64
// codes; the layout LDTILECFG reads: palette, start row, 14 reserved
// bytes, then bytes per row (16 x uint16) and rows (16 x uint8) per tile.
_Alignas(64) static const uint8_t mx_amx_config[64] = {
    1, [16] = 64, 0, 64, 0, 64, 0, 64, 0, 32, 0, 32, 0, 64, 0, 64, 0, [48] = 16, 16, 16, 16, 16, 16, 8, 8,
};

#define MXT_NAME(x) mxk_amx_##x
#define MXT_TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx2,fma")))
#define MXT_CONFIG(cfg) _tile_loadconfig(cfg)
#define MXT_RELEASE() _tile_release()
#define MXT_ZERO(t) _tile_zero(t)
#define MXT_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define MXT_STORE(t, p, stride) _tile_stored(t, p, stride)
#define MXT_DPBSSD(c, a, b) _tile_dpbssd(c, a, b)
#include "mxgemm_amx.h"

// The tile instructions emulated in C from Intel's definitions, for the
// tests: a thread's configuration and eight tiles of at most 16 rows x 64
// bytes, and the faults (#GP, #UD) of bad uses as aborts.
typedef struct {
    int configured, rows[8], colsb[8];
    uint8_t t[8][16][64];
} mxe_state;
static _Thread_local mxe_state mxe;

static void mxe_fault(const char *what) {
    fprintf(stderr, "mxgemm: emulated AMX: %s\n", what);
    abort();
}

// TILERELEASE: back to the init state, unconfigured.
static void mxe_release(void) { memset(&mxe, 0, sizeof mxe); }

// LDTILECFG: palette 0 releases; palette 1 checks the shapes and zeroes the tiles.
static void mxe_config(const void *p) {
    const uint8_t *cfg = p;
    mxe_release();
    if (cfg[0] == 0) return;
    if (cfg[0] != 1 || cfg[1] != 0) mxe_fault("LDTILECFG: palette or start row");
    for (int i = 2; i < 16; i++)
        if (cfg[i]) mxe_fault("LDTILECFG: reserved byte set");
    for (int t = 0; t < 16; t++) {
        int colsb = cfg[16 + 2 * t] | cfg[17 + 2 * t] << 8, rows = cfg[48 + t];
        if (t >= 8 ? colsb || rows : colsb > 64 || rows > 16 || (colsb == 0) != (rows == 0))
            mxe_fault("LDTILECFG: tile shape");
        if (t < 8) mxe.rows[t] = rows, mxe.colsb[t] = colsb;
    }
    mxe.configured = 1;
}

static uint8_t (*mxe_tile(int t))[64] {
    if (!mxe.configured || !mxe.rows[t]) mxe_fault("tile not configured");
    return mxe.t[t];
}

// TILELOADD: rows x colsb bytes, the rest of the tile zeroed.
static void mxe_load(int t, const int8_t *p, long stride) {
    uint8_t(*x)[64] = mxe_tile(t);
    memset(x, 0, sizeof mxe.t[t]);
    for (int r = 0; r < mxe.rows[t]; r++) memcpy(x[r], p + r * stride, mxe.colsb[t]);
}

static void mxe_store(int t, void *p, long stride) {
    uint8_t(*x)[64] = mxe_tile(t);
    for (int r = 0; r < mxe.rows[t]; r++) memcpy((uint8_t *)p + r * stride, x[r], mxe.colsb[t]);
}

static void mxe_zero(int t) { memset(mxe_tile(t), 0, sizeof mxe.t[t]); }

static int32_t mxe_dword(const uint8_t *row, int i) {
    int32_t v;
    memcpy(&v, row + 4 * i, 4);
    return v;
}

// TDPBSSD: for m < c.rows, k < a.colsb / 4, n < c.colsb / 4: c[m].dword[n]
// += the four products of signed bytes a[m].byte[4k + i] * b[k].byte[4n + i]
// (wrapping int32); the rest of c zeroed.
static void mxe_dpbssd(int tc, int ta, int tb) {
    uint8_t(*c)[64] = mxe_tile(tc), (*a)[64] = mxe_tile(ta), (*b)[64] = mxe_tile(tb);
    if (tc == ta || tc == tb || ta == tb) mxe_fault("TDPBSSD: tiles not distinct");
    if (mxe.colsb[ta] % 4 || mxe.colsb[ta] / 4 != mxe.rows[tb] || mxe.colsb[tc] != mxe.colsb[tb] ||
        mxe.rows[tc] != mxe.rows[ta])
        mxe_fault("TDPBSSD: tile shapes do not match");
    for (int m = 0; m < mxe.rows[tc]; m++) {
        uint8_t row[64] = {0};
        for (int n = 0; n < mxe.colsb[tc] / 4; n++) {
            uint32_t acc = (uint32_t)mxe_dword(c[m], n);
            for (int k = 0; k < mxe.colsb[ta] / 4; k++)
                for (int i = 0; i < 4; i++) acc += (uint32_t)((int32_t)(int8_t)a[m][4 * k + i] * (int8_t)b[k][4 * n + i]);
            memcpy(row + 4 * n, &acc, 4);
        }
        memcpy(c[m], row, 64);
    }
    for (int m = mxe.rows[tc]; m < 16; m++) memset(c[m], 0, 64);
}

#define MXT_NAME(x) mxk_amx_emulated_##x
#define MXT_TARGET
#define MXT_CONFIG(cfg) mxe_config(cfg)
#define MXT_RELEASE() mxe_release()
#define MXT_ZERO(t) mxe_zero(t)
#define MXT_LOAD(t, p, stride) mxe_load(t, p, stride)
#define MXT_STORE(t, p, stride) mxe_store(t, p, stride)
#define MXT_DPBSSD(c, a, b) mxe_dpbssd(c, a, b)
#include "mxgemm_amx.h"

// Quantizes one block of 32 values (zeros past its end): codes, returns
// the exponent (trk_mx_exp) and sets *sum to the codes' sum; when q2 is
// set, the second slice's codes (trk_mx_code2) and their sum too. One per
// ISA: the vector ones do the reference's operations in the same order and
// round with the instruction's round-to-nearest-even.
static int mxq_base(const float *v, int8_t *q, int *sum, int8_t *q2, int *sum2) {
    uint32_t amax = 0;
    for (int t = 0; t < MX_BLK; t++) {
        uint32_t u = tr_f2bits(v[t]) & 0x7fffffffu;
        amax = u > amax ? u : amax;
    }
    int e = trk_mx_exp(amax), s = 0, s2 = 0;
    for (int t = 0; t < MX_BLK; t++) {
        q[t] = (int8_t)(e == TRK_MX_NONFINITE ? 0 : trk_mx_code(v[t], e));
        s += q[t];
        if (!q2) continue;
        q2[t] = (int8_t)(e == TRK_MX_NONFINITE ? 0 : trk_mx_code2(v[t], q[t], e));
        s2 += q2[t];
    }
    *sum = s;
    if (q2) *sum2 = s2;
    return e;
}

// 32 int32 codes (four registers) stored as int8, in order; returns their sum.
__attribute__((target("avx2,fma"))) static int mxq_store8_avx2(const __m256i c[4], int8_t *q) {
    // packs work within 128-bit lanes, the permute restores the order.
    __m256i w16 = _mm256_packs_epi32(c[0], c[1]), x16 = _mm256_packs_epi32(c[2], c[3]);
    __m256i b8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w16, x16), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)q, b8);
    __m256i acc = _mm256_add_epi32(_mm256_add_epi32(c[0], c[1]), _mm256_add_epi32(c[2], c[3]));
    acc = _mm256_add_epi32(acc, _mm256_permute2x128_si256(acc, acc, 1));
    acc = _mm256_add_epi32(acc, _mm256_shuffle_epi32(acc, 0x4e));
    acc = _mm256_add_epi32(acc, _mm256_shuffle_epi32(acc, 0xb1));
    return _mm256_cvtsi256_si32(acc);
}

__attribute__((target("avx2,fma"))) static int mxq_avx2(const float *v, int8_t *q, int *sum, int8_t *q2, int *sum2) {
    const __m256i abs = _mm256_set1_epi32(0x7fffffff);
    __m256 x[4];
    __m256i m = _mm256_setzero_si256();
    for (int i = 0; i < 4; i++) {
        x[i] = _mm256_loadu_ps(v + 8 * i);
        m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_castps_si256(x[i]), abs));
    }
    m = _mm256_max_epu32(m, _mm256_permute2x128_si256(m, m, 1));
    m = _mm256_max_epu32(m, _mm256_shuffle_epi32(m, 0x4e));
    m = _mm256_max_epu32(m, _mm256_shuffle_epi32(m, 0xb1));
    int e = trk_mx_exp((uint32_t)_mm256_cvtsi256_si32(m));
    if (e == TRK_MX_NONFINITE) {
        memset(q, 0, MX_BLK);
        *sum = 0;
        if (q2) memset(q2, 0, MX_BLK), *sum2 = 0;
        return e;
    }
    const __m256 inv = _mm256_set1_ps(tr_pow2i(-e)), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    const int rn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m256i c[4];
    for (int i = 0; i < 4; i++)
        c[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(x[i], inv), lo), hi), rn));
    *sum = mxq_store8_avx2(c, q);
    if (!q2) return e;
    const __m256 s = _mm256_set1_ps(tr_pow2i(e)), inv2 = _mm256_set1_ps(tr_pow2i(8 - e));
    __m256i c2[4];
    for (int i = 0; i < 4; i++) {
        __m256 r = _mm256_sub_ps(x[i], _mm256_mul_ps(_mm256_cvtepi32_ps(c[i]), s));
        c2[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(r, inv2), lo), hi), rn));
    }
    *sum2 = mxq_store8_avx2(c2, q2);
    return e;
}

__attribute__((target("avx512f,avx512bw,avx2,fma"))) static int mxq_avx512(const float *v, int8_t *q, int *sum, int8_t *q2,
                                                                          int *sum2) {
    const __m512i abs = _mm512_set1_epi32(0x7fffffff);
    __m512 x0 = _mm512_loadu_ps(v), x1 = _mm512_loadu_ps(v + 16);
    __m512i m = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(x0), abs), _mm512_and_si512(_mm512_castps_si512(x1), abs));
    int e = trk_mx_exp(_mm512_reduce_max_epu32(m));
    if (e == TRK_MX_NONFINITE) {
        memset(q, 0, MX_BLK);
        *sum = 0;
        if (q2) memset(q2, 0, MX_BLK), *sum2 = 0;
        return e;
    }
    const __m512 inv = _mm512_set1_ps(tr_pow2i(-e)), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    const int rn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m512i c0 = _mm512_cvt_roundps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x0, inv), lo), hi), rn);
    __m512i c1 = _mm512_cvt_roundps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x1, inv), lo), hi), rn);
    _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(c0));
    _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtepi32_epi8(c1));
    *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(c0, c1));
    if (!q2) return e;
    const __m512 s = _mm512_set1_ps(tr_pow2i(e)), inv2 = _mm512_set1_ps(tr_pow2i(8 - e));
    __m512 r0 = _mm512_sub_ps(x0, _mm512_mul_ps(_mm512_cvtepi32_ps(c0), s));
    __m512 r1 = _mm512_sub_ps(x1, _mm512_mul_ps(_mm512_cvtepi32_ps(c1), s));
    __m512i d0 = _mm512_cvt_roundps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(r0, inv2), lo), hi), rn);
    __m512i d1 = _mm512_cvt_roundps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(r1, inv2), lo), hi), rn);
    _mm_storeu_si128((__m128i *)q2, _mm512_cvtepi32_epi8(d0));
    _mm_storeu_si128((__m128i *)(q2 + 16), _mm512_cvtepi32_epi8(d1));
    *sum2 = _mm512_reduce_add_epi32(_mm512_add_epi32(d0, d1));
    return e;
}

// Quantizes the nb blocks of rows [p0, p0+np) of an operand X into panels
// of w rows (np a multiple of w), each block as its parts (TR_MX_PARTS:
// part j is the slice slice[j]), nbl = nb * parts blocks in all: a panel's
// codes [nbl][8][w][4] (q, or q + 128 when u8), or [nbl][w][32] when
// by_row, scales [nbl][w], and when corr is set -128 * the sum of each
// row's codes in a block, [nbl][w]. X(p, k) is x[p*ld + k], or x[k*ld + p]
// when trans (gathered 8 x 8 through registers when avx); rows from n on
// and codes past a block's end are 0. Rows go 32 at a time.
static void mx_pack(tr_mx_quant quant, int u8, int by_row, int avx, const float *x, int ld, int trans, int n, int p0, int np,
                    int w, int K, int kseg, int nb, int parts, const int *slice, int8_t *restrict dst, float *restrict scale,
                    int32_t *restrict corr) {
    float v[MX_BLK][MX_BLK];
    const uint32_t flip = u8 ? 0x80808080u : 0;
    for (int c0 = 0; c0 < np; c0 += MX_BLK) {
        int cw = mx_min(MX_BLK, np - c0), rows = mx_min(cw, n - (p0 + c0));
        const float *xc = trans ? x + p0 + c0 : x + (size_t)(p0 + c0) * ld;
        for (int bi = 0; bi < nb; bi++) {
            int k0, k1;
            trk_mx_block_range(bi, K, kseg, &k0, &k1);
            int len = k1 - k0;
            if (trans) {
                int r = 0;
                if (avx && len == MX_BLK)
                    for (; r + 8 <= rows; r += 8)
                        for (int t = 0; t < MX_BLK; t += 8) tr_t8x8(xc + (size_t)(k0 + t) * ld + r, (size_t)ld, &v[r][t], MX_BLK);
                for (int t = 0; t < len; t++) {
                    const float *src = xc + (size_t)(k0 + t) * ld;
                    for (int rr = r; rr < rows; rr++) v[rr][t] = src[rr];
                }
                if (len < MX_BLK)
                    for (int rr = 0; rr < rows; rr++) memset(v[rr] + len, 0, sizeof(float) * (MX_BLK - len));
            } else {
                for (int r = 0; r < rows; r++) {
                    memcpy(v[r], xc + (size_t)r * ld + k0, sizeof(float) * len);
                    memset(v[r] + len, 0, sizeof(float) * (MX_BLK - len));
                }
            }
            for (int r = 0; r < cw; r++) {
                int pr = c0 + r, panel = pr / w, in = pr % w;
                int8_t q[2][MX_BLK] = {{0}};
                int e = TRK_MX_EMIN, sum[2] = {0, 0};
                if (r < rows) e = quant(v[r], q[0], &sum[0], parts > 1 ? q[1] : NULL, &sum[1]);
                for (int j = 0; j < parts; j++) {
                    size_t lb = (size_t)panel * nb * parts + (size_t)bi * parts + j;
                    int sl = slice[j];
                    int8_t *d = dst + lb * MX_BLK * w;
                    if (by_row)
                        memcpy(d + in * MX_BLK, q[sl], MX_BLK);
                    else
                        for (int g = 0; g < MX_BLK / 4; g++) {
                            uint32_t word;
                            memcpy(&word, q[sl] + 4 * g, 4);
                            word ^= flip;
                            memcpy(d + (g * w + in) * 4, &word, 4);
                        }
                    scale[lb * w + in] = trk_mx_scale(sl && e != TRK_MX_NONFINITE ? e - 8 : e);
                    if (corr) corr[lb * w + in] = -128 * sum[sl];
                }
            }
        }
    }
}

static const tr_mx_kernel tr_mx_kernels[] = {
    [TR_ISA_BASE] = {mxk_base, 4, 8, 0, mxq_base},
    [TR_ISA_AVX2] = {mxk_avx2, 6, 8, 0, mxq_avx2},
    [TR_ISA_AVXVNNI] = {mxk_avxvnni, 6, 8, 1, mxq_avx2},
    [TR_ISA_AVX512] = {mxk_avx2, 6, 8, 0, mxq_avx512}, // AVX-512 without VNNI: the AVX2 kernel
    [TR_ISA_AVX512VNNI] = {mxk_avx512vnni, 6, 32, 1, mxq_avx512},
    [TR_ISA_AMX] = {mxk_amx_kernel, 32, 32, 0, mxq_avx512, 1, mxk_amx_enter, mxk_amx_leave},
    [TR_ISA_AMX_EMULATED] = {mxk_amx_emulated_kernel, 32, 32, 0, mxq_base, 1, mxk_amx_emulated_enter, mxk_amx_emulated_leave},
};

// Panels of one operand in the scratch: codes [panel][block][8][w][4] (or
// [panel][block][w][32]), scales [panel][block][w] (and B's corrections
// likewise).
typedef struct {
    int8_t *codes;
    float *scales;
    int32_t *corr;
} mx_panels;

// Bytes of the scratch for operands of a and b codes (tr_mx_operand_codes).
size_t tr_mx_scratch_bytes(size_t a, size_t b) { return a + b + 4 * (a / MX_BLK) + 8 * (b / MX_BLK) + 64; }

// Quantizes rows [0, n) of operand A (a_side) or B into panels of w rows,
// nblocks blocks in parts for the slices (TR_MX_PARTS), as kernel kn
// takes them, nthreads at a time (8 panels per share).
static void mx_quantize(const tr_mx_kernel *kn, int a_side, const float *x, int ld, int trans, int n, int w, int K, int kseg,
                        int nblocks, int slices, const mx_panels *p, int nthreads) {
    int group = 8 * w, groups = (n + group - 1) / group, avx = kn->quant != mxq_base, parts = TR_MX_PARTS(slices), slice[3];
    for (int j = 0; j < parts; j++) slice[j] = trk_mx_part_slice(slices, !a_side, j);
    size_t nbl = (size_t)nblocks * parts;
    #pragma omp parallel for schedule(static) num_threads(nthreads)
    for (int gi = 0; gi < groups; gi++) {
        int p0 = gi * group, np = mx_min(group, (n - p0 + w - 1) / w * w);
        size_t panel = (size_t)p0 / w;
        mx_pack(kn->quant, a_side && kn->a_u8, a_side && kn->a_rows, avx, x, ld, trans, n, p0, np, w, K, kseg, nblocks, parts,
                slice, p->codes + panel * nbl * MX_BLK * w, p->scales + panel * nbl * w, p->corr ? p->corr + panel * nbl * w : NULL);
    }
}

// Rows [m0, m1) x columns [n0, n1) of the output (whole panels): one task,
// MX_KB blocks at a time, each B panel's blocks staying in L1 while MC rows
// of A panels (in L2) pass it. The thread's AMX tiles, if any, are
// configured for the task (kn->enter) and released after it.
static void tr_mx_task(const tr_gemm_args *g, int nblocks, const tr_mx_kernel *kn, const mx_panels *pa, const mx_panels *pb,
                       int m0, int m1, int n0, int n1) {
    const int mr = kn->mr, nr = kn->nr;
    if (!g->accumulate)
        for (int i = m0; i < m1; i++)
            for (int j = n0; j < n1; j++) g->out[(size_t)i * g->ldo + j] = g->bias ? g->bias[j] : 0.0f;
    if (kn->enter) kn->enter();
    for (int b0 = 0; b0 < nblocks; b0 += MX_KB) {
        int nb = mx_min(MX_KB, nblocks - b0);
        for (int i0 = m0; i0 < m1; i0 += TR_GEMM_MC) {
            for (int j = n0; j < n1; j += nr) {
                size_t bo = ((size_t)(j / nr) * nblocks + b0) * nr;
                const int8_t *bp = pb->codes + bo * MX_BLK;
                const float *bs = pb->scales + bo;
                const int32_t *bc = pb->corr ? pb->corr + bo : NULL;
                for (int i = i0; i < mx_min(i0 + TR_GEMM_MC, m1); i += mr) {
                    size_t ao = ((size_t)(i / mr) * nblocks + b0) * mr;
                    const int8_t *ap = pa->codes + ao * MX_BLK;
                    const float *as = pa->scales + ao;
                    float *c = g->out + (size_t)i * g->ldo + j;
                    if (i + mr <= m1 && j + nr <= n1) {
                        kn->uk(nb, ap, as, bp, bs, bc, c, g->ldo);
                        continue;
                    }
                    // Edge tile: the chains of the real elements in a padded copy.
                    float t[MX_MAXR * MX_MAXN];
                    int rows = mx_min(m1 - i, mr), cols = mx_min(n1 - j, nr);
                    memset(t, 0, sizeof(float) * mr * nr);
                    for (int r = 0; r < rows; r++) memcpy(t + r * nr, c + (size_t)r * g->ldo, sizeof(float) * cols);
                    kn->uk(nb, ap, as, bp, bs, bc, t, nr);
                    for (int r = 0; r < rows; r++) memcpy(c + (size_t)r * g->ldo, t + r * nr, sizeof(float) * cols);
                }
            }
        }
    }
    if (kn->leave) kn->leave();
}

int tr_mx_gemm_run(const tr_gemm_args *g, int kseg, int isa, int nthreads, void *scratch, size_t cap) {
    if (isa < TR_ISA_BASE || isa > TR_ISA_AMX_EMULATED) isa = TR_ISA_BASE;
    if (kseg < 1 || kseg > g->K) kseg = g->K;
    const tr_mx_kernel *kn = &tr_mx_kernels[isa];
    const int mr = kn->mr, nr = kn->nr, kblocks = trk_mx_blocks(g->K, kseg), nblocks = kblocks * TR_MX_PARTS(g->mx_slices);
    size_t ma = (size_t)(g->M + mr - 1) / mr * mr * nblocks, nbr = (size_t)(g->N + nr - 1) / nr * nr * nblocks;
    if (tr_mx_scratch_bytes(ma * MX_BLK, nbr * MX_BLK) > cap) return TR_ESHORT;
    // Both operands quantized once, every thread sharing them.
    int8_t *base = (int8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    mx_panels pa = {base, (float *)(base + (ma + nbr) * MX_BLK), NULL};
    mx_panels pb = {base + ma * MX_BLK, pa.scales + ma, NULL};
    pb.corr = kn->a_u8 ? (int32_t *)(pb.scales + nbr) : NULL;
    mx_quantize(kn, 1, g->a, g->lda, g->ta, g->M, mr, g->K, kseg, kblocks, g->mx_slices, &pa, nthreads);
    mx_quantize(kn, 0, g->b, g->ldb, g->tb, g->N, nr, g->K, kseg, kblocks, g->mx_slices, &pb, nthreads);
    int mt, nt, mb, nbk;
    tr_gemm_split(g, mr, nr, nthreads, &mt, &nt, &mb, &nbk);
    #pragma omp parallel for collapse(2) schedule(static) num_threads(mt * nt) if (mt * nt > 1)
    for (int it = 0; it < mt; it++)
        for (int jt = 0; jt < nt; jt++)
            if (it * mb < g->M && jt * nbk < g->N)
                tr_mx_task(g, nblocks, kn, &pa, &pb, it * mb, mx_min(g->M, (it + 1) * mb), jt * nbk, mx_min(g->N, (jt + 1) * nbk));
    return TR_OK;
}
