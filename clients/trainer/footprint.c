// footprint.c: the memory a model holds for training, from the layouts
// (layout.h) and the optimizers' chunk layouts alone, nothing allocated:
// what tr_create, the optimizers and, on the GPU path, trg_create and the
// device's optimizer buffers allocate, by category, in host and in device
// memory (trainer.h says what is and is not counted). The footprint tests
// hold it to the bytes malloc (mallinfo2, and a counting interposer for a
// call's peak) and the emulated cudaMalloc hand out, so a buffer added,
// resized or dropped anywhere fails there; sizes this file restates from
// the allocating code (the per-call scratch, trg_grow's) are pinned so.

#include "internal.h"

// DCT-II bases (D then D^T, 2 n^2 floats) of every chunk edge in t, each
// once. The CPU path also builds the trivial base of edge 1 (demo.c
// tr_demo_scratch_alloc); the GPU skips edges of 1 (model.cu trg_dct).
static size_t tr_dct_bytes(const tr_demo_tensor *t, int nt, int with_one) {
    char seen[TR_DEMO_MAX_CHUNK + 1] = {0};
    size_t b = 0;
    for (int i = 0; i < nt; i++) {
        int e[2] = {t[i].cr, t[i].cc};
        for (int j = 0; j < 2; j++)
            if ((e[j] > 1 || with_one) && !seen[e[j]]) {
                seen[e[j]] = 1;
                b += sizeof(float) * 2 * (size_t)e[j] * (size_t)e[j];
            }
    }
    return b;
}

static size_t tr_max(size_t a, size_t b) { return a > b ? a : b; }

// Whether every size below fits 64 bits with room: a bound on the largest
// buffers, in double (the layouts' size_t products would wrap silently).
static int tr_footprint_fits(const tr_config *c) {
    double L = c->layers, B = c->micro_batch, T = c->seq_len, NH = c->heads, C = c->channels, Vp = c->padded_vocab;
    double H = tr_is_llama(c) ? c->hidden : 4.0 * C;
    double floats = L * B * NH * T * T + (B * T + 64) * (Vp + 8 * C + 3 * H + 64) * (L + 2) * 2 +
                    (2 * Vp + T + L * (4 * C + 3 * H + 16)) * C;
    return floats * 256 < 9.2e18;
}

int tr_footprint(const tr_config *c, const tr_footprint_opts *o, tr_mem *host, tr_mem *dev) {
    if (!o || !host || !dev || tr_config_check(c) || !tr_footprint_fits(c)) return TR_EINVAL;
    int demo = o->optimizer == TR_OPT_DEMO, loco = o->optimizer == TR_OPT_LOCO;
    if ((!demo && !loco && o->optimizer != TR_OPT_ADAMW) || (o->gpu != 0 && o->gpu != 1) || o->threads < 1 ||
        o->threads > TR_MAX_THREADS || (o->lookahead != 0 && o->lookahead != 1) || (o->overlap != 0 && o->overlap != 1))
        return TR_EINVAL;
    if ((o->lookahead && !demo) || (o->overlap && !demo && !loco) || (o->lookahead && o->overlap)) return TR_EINVAL;
    if ((demo || loco) && (o->chunk < 1 || o->chunk > TR_DEMO_MAX_CHUNK || o->topk < 1 || o->topk > 65535 || o->payloads < 1))
        return TR_EINVAL;
    memset(host, 0, sizeof *host);
    memset(dev, 0, sizeof *dev);

    const size_t f = sizeof(float), thr = (size_t)o->threads, n = (size_t)(o->payloads > 0 ? o->payloads : 1);
    size_t sizes[TR_MAX_TENSORS];
    const size_t N = tr_param_layout(c, sizes, NULL), wte = sizes[0], nb = trk_norm_blocks(N);
    const size_t B = (size_t)c->micro_batch, T = (size_t)c->seq_len, BT = B * T;
    const size_t acts = f * (tr_act_floats(c, (int)B, (int)T, 0) + tr_act_floats(c, (int)B, (int)T, 1));
    const size_t rope = tr_is_llama(c) ? f * 2 * T * ((size_t)c->channels / c->heads / 2) : 0;
    size_t qa = 0, qb = 0;
    if (c->arith == TR_ARITH_MX8) tr_mx_operand_codes(c, &qa, &qb);

    // Optimizer state, N floats each, kept on the host and, on the GPU
    // path, on the device too: AdamW's moments (SparseLoCo's inner steps),
    // DeMo's momentum or SparseLoCo's error feedback, DeMo's lookahead point
    // (lookahead or overlap), the pending update (overlap), and a
    // SparseLoCo round's start: weights and moments.
    size_t state = 0;
    if (!demo) state += 2;
    if (demo) state += 1 + (o->overlap || o->lookahead) + o->overlap;
    if (loco) state += 1 + 3 + o->overlap;

    // Host: tr_create's buffers, on either path (model.c).
    host->weights = f * N;
    // dwte_emb, and the shard tree's partial sums above grads (layout.h);
    // one device holds as many, each of D devices fewer (client.fits).
    const size_t levels = (size_t)tr_shard_levels(tr_shards(c)) - 1;
    host->grads = f * (N + wte + N * levels);
    host->optimizer = f * N * state;
    host->activations = acts;
    host->mx8 = c->arith == TR_ARITH_MX8 ? tr_mx_scratch_bytes(qa, qb) : 0;
    host->scratch = f * thr * (TR_GEMM_PACK + tr_attn_floats(c)) + rope;

    // The chunk layout's payload entries (E per payload) and per-call
    // scratch: chunk (demo.c tr_demo_scratch, loco.c tr_loco_generate: two
    // floats and two indices per element of the largest chunk, per thread)
    // and seen (a payload decode's index stamps, one chunk).
    tr_demo_tensor t[TR_MAX_TENSORS];
    tr_chunk_sizes z = {0, 0, 0, 0};
    int nt = 0, sort = 0;
    if (demo || loco) {
        nt = tr_chunk_layout(c, o->chunk, o->topk, t);
        z = tr_chunk_totals(t, nt);
        for (int i = 0; i < nt; i++) sort |= t[i].k > TRK_TOPK_SMALL;
    }
    const size_t E = z.entries, MT = z.max_tensor, seen = 4 * z.max_chunk, chunk = 16 * z.max_chunk * thr;
    // An overlapped generate decodes its own payload into the pending
    // update: DeMo transforms it back with a second chunk scratch (and the
    // model's tensor buffers and DCT bases), SparseLoCo scatters it.
    const size_t pend_demo = o->overlap ? 8 * E + chunk : 0, pend_loco = o->overlap ? 8 * E + seen : 0;
    if (demo && (!o->gpu || o->overlap)) host->scratch += f * 4 * MT + tr_dct_bytes(t, nt, 1); // demo_buf

    if (!o->gpu) {
        // Gradient norm blocks (AdamW, DeMo's clipping), then each call's
        // buffers: DeMo generate selects (8E) and apply decodes n payloads
        // (8nE), each with its chunk scratch; SparseLoCo generate keeps
        // indices, codes and a scale per chunk, its apply decodes and sums
        // into an N-float accumulator with per-thread counts.
        size_t tr = f * nb;
        if (demo) tr = tr_max(tr, tr_max(chunk + 8 * E + pend_demo, 8 * n * E + chunk));
        if (loco) tr = tr_max(tr, tr_max(chunk + 4 * z.chunks + 8 * E + pend_loco, 8 * n * E + f * N + 4 * z.max_chunk * thr));
        host->transient = tr;
        return TR_OK;
    }

    // GPU path (cuda/model.cu trg_create and its buffers; device_cuda.c).
    // Attaching the device frees the host buffers only the CPU's forward
    // and backward use (model.c tr_cpu_release): activations, mx8 codes,
    // the shard tree. The host adds page-locked losses and norm blocks, and
    // holds the entries crossing to and from the device during a call.
    host->activations = host->mx8 = 0;
    host->grads -= f * N * levels;
    host->scratch += f * (BT + nb);
    if (demo) host->transient = tr_max(8 * E + pend_demo, 8 * n * E + seen);
    if (loco) host->transient = tr_max(8 * E + 4 * z.chunks + pend_loco, 8 * n * E + seen);
    dev->weights = f * N;
    dev->grads = f * (N + wte + N * levels);
    dev->optimizer = f * N * state;
    // Activations (of attention's probabilities one layer's: backward
    // recomputes each) and their gradients; attention's score gradients of
    // one layer and its row scratch (max, sum and the 32 lane sums); token ids.
    // Recomputing, one layer's of all of them, and each layer's output.
    tr_config one = *c;
    if (c->recompute) one.layers = 1;
    dev->activations = f * (tr_gpu_act_floats(&one, (int)B, (int)T) + tr_act_floats(c, (int)B, (int)T, 1)) +
                       f * tr_att_rows(c) * (T + 2 + TRK_LANES) + 2 * sizeof(int32_t) * BT +
                       (c->recompute ? f * (size_t)c->layers * BT * (size_t)c->channels : 0);
    dev->mx8 = c->arith == TR_ARITH_MX8 ? qa + qb + f * (qa / TRK_MX_BLOCK + qb / TRK_MX_BLOCK) : 0;
    dev->scratch = f * nb + rope;
    // The optimizers' scratch grows to the largest call and stays
    // (trg_grow): tensor-sized floats (work), sort indices (work_u: two per
    // element of the largest tensor when some k needs the merge sort, else
    // apply's counts) and payload entries (ent: selected, or n payloads'
    // decoded).
    size_t work_u = 4 * tr_max(sort ? 2 * MT : 0, MT);
    if (demo) dev->scratch += tr_dct_bytes(t, nt, 0) + f * (3 * MT + E) + work_u + 8 * n * E;
    if (loco) dev->scratch += f * (MT + E) + work_u + tr_max(8 * E + 4 * z.chunks, 8 * n * E);
    return TR_OK;
}
