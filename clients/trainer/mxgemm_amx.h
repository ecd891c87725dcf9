// mxgemm_amx.h: mxgemm.c's AMX-INT8 kernel, included there twice: with
// MXT_* as the tile instructions, and as their emulation in C (any CPU:
// what the tests check where there is no AMX). MXT_NAME(x) names this
// copy's functions, MXT_TARGET is their target attribute; the end of this
// file undefines them all for the next copy.

// A thread configures its tiles (the configuration is per thread) for each
// task and releases them after it, back to the init state that context
// switches do not save.
MXT_TARGET static void MXT_NAME(enter)(void) { MXT_CONFIG(&mx_amx_config); }
MXT_TARGET static void MXT_NAME(leave)(void) { MXT_RELEASE(); }

// 32 x 32, per block: four TDPBSSD with K = 32 into C tiles 0-3 (rows
// 0-15 and 16-31 x columns 0-15 and 16-31) from A tiles 4, 5 (16 rows of
// 32 codes: A's panel keeps a row's codes contiguous) and B tiles 6, 7 (8
// rows of 16 columns x 4 codes: B's panel [group of 4][column][4] as it
// is, at a stride of its 32 columns), stored, then one fma per element
// into its fp32 chain. The fma loop is C: the real copy's target makes it
// AVX-512 (vcvtdq2ps, vmulps, vfmadd), the emulated one scalar fmaf.
MXT_TARGET static void MXT_NAME(kernel)(int nb, const int8_t *ap, const float *as, const int8_t *bp, const float *bs,
                                        const int32_t *bc, float *c, int ldc) {
    (void)bc;
    _Alignas(64) int32_t d[32][32];
    for (int b = 0; b < nb; b++, ap += MX_BLK * 32, bp += MX_BLK * 32, as += 32, bs += 32) {
        MXT_ZERO(0);
        MXT_ZERO(1);
        MXT_ZERO(2);
        MXT_ZERO(3);
        MXT_LOAD(4, ap, MX_BLK);
        MXT_LOAD(5, ap + 16 * MX_BLK, MX_BLK);
        MXT_LOAD(6, bp, 128);
        MXT_LOAD(7, bp + 64, 128);
        MXT_DPBSSD(0, 4, 6);
        MXT_DPBSSD(1, 4, 7);
        MXT_DPBSSD(2, 5, 6);
        MXT_DPBSSD(3, 5, 7);
        MXT_STORE(0, &d[0][0], 128);
        MXT_STORE(1, &d[0][16], 128);
        MXT_STORE(2, &d[16][0], 128);
        MXT_STORE(3, &d[16][16], 128);
        for (int r = 0; r < 32; r++) {
            float *cr = c + (size_t)r * ldc;
            const float sa = as[r];
            #pragma GCC ivdep
            for (int j = 0; j < 32; j++) cr[j] = trk_mx_step(cr[j], d[r][j], sa, bs[j]);
        }
    }
}

#undef MXT_NAME
#undef MXT_TARGET
#undef MXT_CONFIG
#undef MXT_RELEASE
#undef MXT_ZERO
#undef MXT_LOAD
#undef MXT_STORE
#undef MXT_DPBSSD
