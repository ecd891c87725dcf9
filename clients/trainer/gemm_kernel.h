// gemm_kernel.h: one instantiation of the fixed-order GEMM, included once per
// ISA level by gemm.c with GEMM_NAME, GEMM_TARGET, GEMM_MR and GEMM_NR set.
//
// out[m][n] = base[m][n] + dot(A[m,:], B[n,:]) where the dot product always
// runs in the same order: lane j (0..7) sums k = j, j+8, j+16, ... (a missing
// tail element counts as 0*0), then the lanes are added as
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). Each lane's mul and add are separate
// IEEE operations (-ffp-contract=off), so SSE2, AVX2 and AVX-512 code give the
// same bits, and an output element is computed by exactly one thread, so the
// thread count does not matter. Tile shapes (MR x NR) differ per ISA only to
// fit its register file; they do not change any element's order.

GEMM_TARGET static void GEMM_NAME(const tr_gemm_args *g, int nthreads) {
    const int M = g->M, N = g->N, K = g->K;
    const int K8 = K & ~7;
    // Column blocks of B sized so a block stays in L2 while all row tiles of A pass it.
    int nb = (int)((256 * 1024) / ((size_t)K * sizeof(float) + 1));
    nb = nb < GEMM_NR ? GEMM_NR : nb - nb % GEMM_NR;
    const int nblocks = (N + nb - 1) / nb;
    const int mtiles = (M + GEMM_MR - 1) / GEMM_MR;
    #pragma omp parallel for collapse(2) schedule(static) num_threads(nthreads)
    for (int jb = 0; jb < nblocks; jb++) {
        for (int it = 0; it < mtiles; it++) {
            const int i0 = it * GEMM_MR;
            const int jend = (jb + 1) * nb < N ? (jb + 1) * nb : N;
            int j0 = jb * nb;
            if (i0 + GEMM_MR <= M) {
                for (; j0 + GEMM_NR <= jend; j0 += GEMM_NR) {
                    v8f acc[GEMM_MR][GEMM_NR];
                    for (int r = 0; r < GEMM_MR; r++)
                        for (int c = 0; c < GEMM_NR; c++) acc[r][c] = (v8f){0};
                    const float *ap[GEMM_MR], *bp[GEMM_NR];
                    for (int r = 0; r < GEMM_MR; r++) ap[r] = g->a + (size_t)(i0 + r) * g->lda;
                    for (int c = 0; c < GEMM_NR; c++) bp[c] = g->b + (size_t)(j0 + c) * g->ldb;
                    for (int k = 0; k < K8; k += 8) {
                        v8f av[GEMM_MR];
                        for (int r = 0; r < GEMM_MR; r++) av[r] = tr_load8(ap[r] + k);
                        for (int c = 0; c < GEMM_NR; c++) {
                            v8f bv = tr_load8(bp[c] + k);
                            for (int r = 0; r < GEMM_MR; r++) acc[r][c] += av[r] * bv;
                        }
                    }
                    if (K8 < K) {
                        for (int r = 0; r < GEMM_MR; r++) {
                            v8f av = tr_load_tail(ap[r] + K8, K - K8);
                            for (int c = 0; c < GEMM_NR; c++)
                                acc[r][c] += av * tr_load_tail(bp[c] + K8, K - K8);
                        }
                    }
                    for (int r = 0; r < GEMM_MR; r++)
                        for (int c = 0; c < GEMM_NR; c++)
                            tr_gemm_store(g, i0 + r, j0 + c, tr_hsum8(acc[r][c]));
                }
            }
            // Edges (rows beyond the last full tile, columns beyond the last full tile).
            for (int i = i0; i < i0 + GEMM_MR && i < M; i++) {
                for (int j = j0; j < jend; j++)
                    tr_gemm_store(g, i, j, tr_dot8(g->a + (size_t)i * g->lda, g->b + (size_t)j * g->ldb, K));
            }
        }
    }
}
