// gemm_kernel.h: one instantiation of the fixed-order GEMM, included once per
// ISA level by gemm.c with GEMM_NAME, GEMM_TILE, GEMM_TARGET, GEMM_PIN,
// GEMM_MR and GEMM_NR set.
//
// out[m][n] = base[m][n] + dot(A[m,:], B[n,:]) where the dot product always
// runs in the same order: lane j (0..7) sums k = j, j+8, j+16, ... (a missing
// tail element counts as 0*0), then the lanes are added as
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). Each lane's mul and add are separate
// IEEE operations (-ffp-contract=off), so SSE2, AVX2 and AVX-512 code give the
// same bits, and an output element is computed by exactly one thread, so the
// thread count does not matter. Tile shapes (MR x NR) and cache blocking differ
// per ISA only to fit its registers and caches; they do not change any
// element's order: splitting k into blocks only parks the 8-lane
// accumulators in memory between blocks.

// One MR x NR tile at rows i0.., columns j0.., k from k0 to k1 (multiples of
// 8), with B's columns for that k range packed in pb as [k/8][NR][8]. park
// holds the tile's MR*NR accumulators between k blocks; on the last block
// (last != 0) the tile also takes the k tail, reduces and stores.
GEMM_TARGET static inline __attribute__((always_inline)) void GEMM_TILE(const tr_gemm_args *g, int i0, int j0, int k0,
                                                                      int k1, int last, const float *restrict pb,
                                                                      v8f *restrict park) {
    const int K = g->K, K8 = K & ~7;
    v8f acc[GEMM_MR * GEMM_NR];
    for (int q = 0; q < GEMM_MR * GEMM_NR; q++) acc[q] = k0 ? park[q] : (v8f){0};
    const float *ap[GEMM_MR], *bp[GEMM_NR];
    for (int r = 0; r < GEMM_MR; r++) ap[r] = g->a + (size_t)(i0 + r) * g->lda;
    for (int c = 0; c < GEMM_NR; c++) bp[c] = g->b + (size_t)(j0 + c) * g->ldb;
    // Unrolled twice to spend fewer of the core's dispatch slots on loop control.
    #pragma GCC unroll 2
    for (int k = k0; k < k1; k += 8, pb += 8 * GEMM_NR) {
        v8f av[GEMM_MR];
        for (int r = 0; r < GEMM_MR; r++) av[r] = tr_load8(ap[r] + k);
        for (int c = 0; c < GEMM_NR; c++) {
            v8f bv = tr_load8(pb + 8 * c);
            GEMM_PIN(bv);
            for (int r = 0; r < GEMM_MR; r++) acc[r * GEMM_NR + c] += av[r] * bv;
        }
    }
    if (!last) {
        for (int q = 0; q < GEMM_MR * GEMM_NR; q++) park[q] = acc[q];
        return;
    }
    if (K8 < K) {
        for (int r = 0; r < GEMM_MR; r++) {
            v8f av = tr_load_tail(ap[r] + K8, K - K8);
            for (int c = 0; c < GEMM_NR; c++)
                acc[r * GEMM_NR + c] += av * tr_load_tail(bp[c] + K8, K - K8);
        }
    }
    // Four consecutive columns of a row at a time, then the leftover columns
    // of all rows in groups of four.
    enum { NR4 = GEMM_NR & ~3, LEFT = GEMM_MR * (GEMM_NR - NR4) };
    for (int r = 0; r < GEMM_MR; r++)
        for (int c = 0; c < NR4; c += 4) {
            const v8f *q = acc + r * GEMM_NR + c;
            tr_gemm_store4(g, i0 + r, j0 + c, tr_hsum8x4(q[0], q[1], q[2], q[3]));
        }
    if (LEFT) {
        v8f left[LEFT + 3];
        for (int q = 0; q < LEFT + 3; q++) left[q] = (v8f){0};
        for (int r = 0, q = 0; r < GEMM_MR; r++)
            for (int c = NR4; c < GEMM_NR; c++) left[q++] = acc[r * GEMM_NR + c];
        float s[LEFT + 3];
        for (int q = 0; q < LEFT; q += 4) {
            v4f v = tr_hsum8x4(left[q], left[q + 1], left[q + 2], left[q + 3]);
            memcpy(s + q, &v, sizeof v);
        }
        for (int r = 0, q = 0; r < GEMM_MR; r++)
            for (int c = NR4; c < GEMM_NR; c++) tr_gemm_store(g, i0 + r, j0 + c, s[q++]);
    }
}

GEMM_TARGET static void GEMM_NAME(const tr_gemm_args *g, int nthreads) {
    const int M = g->M, N = g->N, K = g->K, K8 = K & ~7;
    // Each k block of an NR-column panel of B is packed contiguously (so no
    // two columns fight for the same L1 sets at power-of-two strides) and
    // stays in L1 while the row tiles of a row block of A stream past it from
    // L2; row blocks are sized to stay in L2 (at most TR_GEMM_MB rows, the
    // parked accumulators' room). k blocks are equal, at most TR_GEMM_KC
    // (a short last block would pay the parking for little work).
    const int kblocks = (K8 + TR_GEMM_KC - 1) / TR_GEMM_KC;
    const int kc = kblocks > 1 ? ((K8 + kblocks - 1) / kblocks + 7) & ~7 : TR_GEMM_KC;
    int mb = (int)((192 * 1024) / ((size_t)K * sizeof(float) + 1));
    if (mb > TR_GEMM_MB) mb = TR_GEMM_MB;
    mb = mb < GEMM_MR ? GEMM_MR : mb - mb % GEMM_MR;
    // Blocks of (nearly) equal size, so that the threads' shares of them are too.
    const int mblocks = (M + mb - 1) / mb;
    mb = (M + mblocks - 1) / mblocks;
    mb += (GEMM_MR - mb % GEMM_MR) % GEMM_MR;
    const int nblocks = (N + GEMM_NR * 16 - 1) / (GEMM_NR * 16);
    int nb = (N + nblocks - 1) / nblocks;
    nb += (GEMM_NR - nb % GEMM_NR) % GEMM_NR;
    #pragma omp parallel for collapse(2) schedule(static) num_threads(nthreads)
    for (int ib = 0; ib < mblocks; ib++) {
        for (int jb = 0; jb < nblocks; jb++) {
            v8f park[TR_GEMM_MB / GEMM_MR][GEMM_MR * GEMM_NR];
            float pb[TR_GEMM_KC * GEMM_NR] __attribute__((aligned(64)));
            const int iend = (ib + 1) * mb < M ? (ib + 1) * mb : M;
            const int jend = (jb + 1) * nb < N ? (jb + 1) * nb : N;
            int j0 = jb * nb;
            for (; j0 + GEMM_NR <= jend; j0 += GEMM_NR) {
                int k0 = 0;
                do {
                    const int k1 = K8 - k0 > kc ? k0 + kc : K8;
                    for (int k = k0; k < k1; k += 8)
                        for (int c = 0; c < GEMM_NR; c++)
                            memcpy(pb + (k - k0) * GEMM_NR + 8 * c, g->b + (size_t)(j0 + c) * g->ldb + k, 8 * sizeof(float));
                    for (int i0 = ib * mb, t = 0; i0 + GEMM_MR <= iend; i0 += GEMM_MR, t++)
                        GEMM_TILE(g, i0, j0, k0, k1, k1 == K8, pb, park[t]);
                    k0 = k1;
                } while (k0 < K8);
                // Rows beyond the last full tile.
                for (int i = iend - (iend - ib * mb) % GEMM_MR; i < iend; i++)
                    for (int j = j0; j < j0 + GEMM_NR; j++)
                        tr_gemm_store(g, i, j, tr_dot8(g->a + (size_t)i * g->lda, g->b + (size_t)j * g->ldb, K));
            }
            // Columns beyond the last full tile.
            for (int i = ib * mb; i < iend; i++)
                for (int j = j0; j < jend; j++)
                    tr_gemm_store(g, i, j, tr_dot8(g->a + (size_t)i * g->lda, g->b + (size_t)j * g->ldb, K));
        }
    }
}
