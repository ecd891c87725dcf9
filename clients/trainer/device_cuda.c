//go:build cuda || cudaemu

// device_cuda.c: a tr_model's GPU (cuda/model.cu): forward/backward and the
// optimizers (AdamW, DeMo, SparseLoCo) run there, and the weights, gradients
// and optimizer state stay there across steps. The residency flags
// (internal.h) say which side is newer; the host's entry points download
// what they need through tr_dev_download. DeMo's and SparseLoCo's payloads
// stay on the host: it writes the entries the device selected into them,
// and decodes the clients' payloads into entries for the device.

#include "internal.h"
#include "cuda/trainer_cuda.h"

// The host and device buffers of each TR_BUF_* bit (ADAM: both moments;
// ANCHOR: the weights, and the moments when the round began with some). A
// buffer the host does not hold has nothing to copy.
typedef struct {
    unsigned bit;
    int buf;
    float *host;
} tr_dev_buf;

enum { TR_DEV_BUFS = 10 };

static void tr_dev_bufs(tr_model *m, tr_dev_buf b[TR_DEV_BUFS]) {
    float *am = m->anchor_moments ? m->anchor_m : NULL, *av = m->anchor_moments ? m->anchor_v : NULL;
    tr_dev_buf all[TR_DEV_BUFS] = {
        {TR_BUF_PARAMS, TRG_PARAMS, m->params},     {TR_BUF_GRADS, TRG_GRADS, m->grads},
        {TR_BUF_ADAM, TRG_ADAM_M, m->adam_m},       {TR_BUF_ADAM, TRG_ADAM_V, m->adam_v},
        {TR_BUF_DELTA, TRG_DELTA, m->delta},        {TR_BUF_LOOKAHEAD, TRG_LOOKAHEAD, m->lookahead},
        {TR_BUF_ANCHOR, TRG_ANCHOR, m->anchor},     {TR_BUF_ANCHOR, TRG_ANCHOR_M, am},
        {TR_BUF_ANCHOR, TRG_ANCHOR_V, av},          {TR_BUF_PENDING, TRG_PENDING, m->pending},
    };
    memcpy(b, all, sizeof all);
}

static int tr_dev_copy(tr_model *m, unsigned bufs, int up) {
    tr_dev_buf b[TR_DEV_BUFS];
    tr_dev_bufs(m, b);
    for (int i = 0; i < TR_DEV_BUFS; i++) {
        if (!(bufs & b[i].bit) || !b[i].host) continue;
        int rc = up ? trg_upload(m->dev, b[i].buf, b[i].host, m->num_params) : trg_download(m->dev, b[i].buf, b[i].host, m->num_params);
        if (rc) return rc;
    }
    return TR_OK;
}

static int tr_dev_download(tr_model *m, unsigned bufs) { return tr_dev_copy(m, bufs, 0); }

// Before a device operation: its copies of bufs made current.
static int tr_dev_use(tr_model *m, unsigned bufs) {
    unsigned need = m->dev_stale & bufs;
    int rc = need ? tr_dev_copy(m, need, 1) : TR_OK;
    if (rc == TR_OK) {
        m->dev_stale &= ~need;
        m->peer_stale |= need;
    }
    return rc;
}

#ifdef TR_POISON_STALE
// Under the cudaemu tag (tests): stale host copies hold NaN, so that an entry
// point reading one without tr_host_read shows in its results.
static void tr_poison(tr_model *m, unsigned bufs) {
    tr_dev_buf b[TR_DEV_BUFS];
    tr_dev_bufs(m, b);
    for (int i = 0; i < TR_DEV_BUFS; i++)
        for (size_t j = 0; (bufs & b[i].bit) && b[i].host && j < m->num_params; j++) b[i].host[j] = tr_bits2f(0x7fc00000u);
}
#endif

// After a device operation that changed bufs: the host's copies are stale.
static void tr_dev_wrote(tr_model *m, unsigned bufs) {
    m->dev_stale &= ~bufs;
    m->host_stale |= bufs;
    m->peer_stale |= bufs;
#ifdef TR_POISON_STALE
    tr_poison(m, bufs);
#endif
}

// g, then peers, hold nothing of m yet: everything uploads on first use.
// They form groups of `tensor` devices (trg_tp_attach: the first of each
// leads), and the groups share each step's shards, so their count must be
// a power of two dividing the shard count.
int tr_device_attach(tr_model *m, trg_model *g, trg_model *const *peers, int npeers, int tensor) {
    int N = npeers + 1, D = tensor > 0 ? N / tensor : 0;
    if (!m || !g || m->dev || npeers < 0 || npeers >= TR_MAX_SHARDS || (npeers && !peers) || tensor < 1 || D * tensor != N ||
        (D & (D - 1)) || tr_shards(&m->cfg) % D)
        return TR_EINVAL;
    for (int j = 0; j < npeers; j++)
        if (!peers[j]) return TR_EINVAL;
    for (int d = 0; d < D && tensor > 1; d++) {
        int rc = trg_tp_attach(d ? peers[d * tensor - 1] : g, peers + d * tensor, tensor - 1);
        if (rc) return rc; // the caller destroys them all, which dissolves the groups made
    }
    for (int j = 0; j < npeers; j++) m->peers[j] = peers[j];
    tr_cpu_release(m); // until the CPU's forward and backward run again
    m->dev = g;
    m->npeers = npeers;
    m->tensor = tensor;
    m->dev_download = tr_dev_download;
    m->dev_stale = TR_BUF_ALL;
    m->host_stale = 0;
    m->peer_stale = TR_BUF_ALL;
    return TR_OK;
}

// Brings everything newer on the device back to the host and forgets the
// devices, which the caller then destroys.
int tr_device_detach(tr_model *m) {
    if (!m || !m->dev) return TR_EINVAL;
    int rc = tr_host_read(m, TR_BUF_ALL);
    if (rc) return rc;
    m->dev = NULL;
    m->npeers = 0;
    m->tensor = 0;
    m->dev_stale = m->host_stale = m->peer_stale = 0;
    return TR_OK;
}

// The peers get the first device's weights wbit (buffer wbuf) when they
// changed.
static int tr_dev_peers(tr_model *m, unsigned wbit, int wbuf) {
    int rc = tr_dev_use(m, wbit);
    for (int j = 0; rc == TR_OK && j < m->npeers && (m->peer_stale & wbit); j++) rc = trg_copy_peer(m->peers[j], wbuf, m->dev, wbuf);
    if (rc == TR_OK) m->peer_stale &= ~wbit;
    return rc;
}

// Group d's leader: the device that steps its subtree of the shard tree.
static trg_model *tr_dev_leader(tr_model *m, int d) { return d ? m->peers[d * m->tensor - 1] : m->dev; }

// Each group steps its subtree of the shard tree at the forward point (with
// its ranks in lockstep: trg_tp_attach), then the groups' subtrees join by
// the same tree, pair by pair: at distance 1, group 0 takes 1's, 2 takes
// 3's, ...; at distance 2, 0 takes 2's; and so on, so the first device ends
// with the whole tree: the bits of one device. Real devices' groups each
// run from an OpenMP thread of their own (the pairs of a level too); the
// emulated ones (cudaemu, not thread-safe) one after another.
int tr_step_device(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss) {
    if (!m || !m->dev || !loss) return TR_EINVAL;
    int la = m->lookahead_on; // the forward point: DeMo's lookahead when it is on
    unsigned wbit = la ? TR_BUF_LOOKAHEAD : TR_BUF_PARAMS;
    int wbuf = la ? TRG_LOOKAHEAD : TRG_PARAMS, D = (m->npeers + 1) / m->tensor, per = tr_shards(&m->cfg) / D;
    int rc = tr_dev_peers(m, wbit, wbuf);
    float sum[TR_MAX_SHARDS];
    int drc[TR_MAX_SHARDS];
#ifdef TR_EMULATED_DEVICE
    int threads = 1;
#else
    int threads = D;
#endif
    if (rc == TR_OK) {
        #pragma omp parallel for schedule(static, 1) num_threads(threads)
        for (int d = 0; d < D; d++) drc[d] = trg_step(tr_dev_leader(m, d), wbuf, tokens, targets, n, t, d * per, per, &sum[d]);
        for (int d = 0; d < D && rc == TR_OK; d++) rc = drc[d];
    }
    for (int dist = 1; rc == TR_OK && dist < D; dist *= 2) {
        #pragma omp parallel for schedule(static, 1) num_threads(threads)
        for (int d = 0; d < D; d += 2 * dist) {
            drc[d] = trg_join(tr_dev_leader(m, d), tr_dev_leader(m, d + dist));
            sum[d] = sum[d] + sum[d + dist]; // the loss sums by the same tree
        }
        for (int d = 0; d < D && rc == TR_OK; d += 2 * dist) rc = drc[d];
    }
    m->have_grads = rc == TR_OK;
    if (rc) return rc;
    tr_dev_wrote(m, TR_BUF_GRADS);
    *loss = trk_loss_mean(sum[0], trk_loss_count(targets, (size_t)n * t));
    return TR_OK;
}

int tr_eval_device(tr_model *m, const int32_t *tokens, const int32_t *targets, int n, int t, float *loss) {
    if (!m || !m->dev) return TR_EINVAL;
    int rc = m->tensor > 1 ? tr_dev_peers(m, TR_BUF_PARAMS, TRG_PARAMS) : tr_dev_use(m, TR_BUF_PARAMS); // eval runs on group 0
    return rc ? rc : trg_eval(m->dev, tokens, targets, n, t, loss);
}

// tr_adamw_step on the device: the same checks, counters and arithmetic.
int tr_adamw_step_device(tr_model *m, const tr_adamw *hp) {
    int rc = tr_adamw_check(m, hp);
    if (rc) return rc;
    if (!m->dev) return TR_EINVAL;
    if ((rc = tr_adam_alloc(m)) || (rc = tr_dev_use(m, TR_BUF_PARAMS | TR_BUF_GRADS | TR_BUF_ADAM))) return rc;
    if ((rc = trg_adamw(m->dev, hp, m->adam_t + 1))) return rc;
    tr_dev_wrote(m, TR_BUF_PARAMS | TR_BUF_ADAM);
    m->adam_t++;
    m->step++;
    m->have_grads = 0;
    m->lookahead_on = 0;
    return TR_OK;
}

// The entries of a payload of this chunk layout, and its chunks.
static tr_chunk_sizes tr_dev_sizes(const tr_model *m, int chunk, int topk) {
    tr_demo_tensor t[TR_MAX_TENSORS];
    return tr_chunk_totals(t, tr_chunk_layout(&m->cfg, chunk, topk, t));
}

// tr_demo_refresh_lookahead on the device.
static int tr_lookahead_device(tr_model *m, int on) {
    m->lookahead_on = 0;
    if (!tr_lookahead_wanted(m, on)) return TR_OK;
    unsigned src = m->pending ? TR_BUF_PENDING : TR_BUF_DELTA;
    int rc = tr_dev_use(m, TR_BUF_PARAMS | src);
    if (rc || (rc = trg_lookahead(m->dev, m->pending ? TRG_PENDING : TRG_DELTA, m->demo_lr))) return rc;
    tr_dev_wrote(m, TR_BUF_LOOKAHEAD);
    m->lookahead_on = 1;
    return TR_OK;
}

// tr_demo_generate on the device: the momentum stays there, the selected
// entries come back for the payload.
int tr_demo_generate_device(tr_model *m, const tr_demo *hp, uint8_t *out, size_t cap, size_t *len) {
    int rc = tr_demo_generate_check(m, hp, out, cap, len);
    if (rc == TR_OK && !m->dev) rc = TR_EINVAL;
    if (rc) return rc;
    size_t e = tr_dev_sizes(m, hp->chunk, hp->topk).entries;
    uint32_t *idx = malloc(sizeof(uint32_t) * e);
    float *val = malloc(sizeof(float) * e);
    if (!idx || !val) { rc = TR_ENOMEM; goto done; }
    if ((rc = tr_delta_alloc(m)) || (rc = tr_dev_use(m, TR_BUF_GRADS | TR_BUF_DELTA)) || (rc = trg_demo_generate(m->dev, hp, idx, val)))
        goto done;
    tr_dev_wrote(m, TR_BUF_DELTA);
    *len = tr_demo_pack(m, hp, idx, val, out);
    m->have_grads = 0;
    // The pending update is computed here (one more inverse transform) and
    // goes up with the lookahead.
    int had = m->pending != NULL;
    if ((rc = tr_demo_pending(m, hp, out, *len)) == TR_OK && (had || m->pending))
        rc = tr_lookahead_device(m, m->pending != NULL);
done:
    free(idx); free(val);
    return rc;
}

int tr_demo_apply_device(tr_model *m, const tr_demo *hp, const uint8_t *payloads, const size_t *lens, int n) {
    uint32_t *idx;
    float *val;
    // All payloads are checked before anything changes.
    int rc = tr_demo_decode(m, hp, payloads, lens, n, &idx, &val);
    if (rc == TR_OK && !m->dev) rc = TR_EINVAL;
    if (rc || ((hp->lookahead || m->pending) && (rc = tr_lookahead_alloc(m))) || (rc = tr_dev_use(m, TR_BUF_PARAMS)) ||
        (rc = trg_demo_apply(m->dev, hp, n, idx, val)))
        goto done;
    tr_dev_wrote(m, TR_BUF_PARAMS);
    m->demo_lr = hp->lr;
    m->step++;
    rc = tr_lookahead_device(m, hp->lookahead || m->pending);
done:
    free(idx); free(val);
    return rc;
}

// tr_loco_begin on the device: the round's start is copied there.
int tr_loco_begin_device(tr_model *m) {
    if (!m || !m->dev || m->in_round) return TR_EINVAL;
    int rc = tr_anchor_alloc(m);
    if (rc || (rc = tr_dev_use(m, TR_BUF_PARAMS | (m->adam_m ? TR_BUF_ADAM : 0))) || (rc = trg_copy(m->dev, TRG_ANCHOR, TRG_PARAMS)))
        return rc;
    if (m->adam_m && ((rc = trg_copy(m->dev, TRG_ANCHOR_M, TRG_ADAM_M)) || (rc = trg_copy(m->dev, TRG_ANCHOR_V, TRG_ADAM_V))))
        return rc;
    if (m->pending) {
        if ((rc = tr_dev_use(m, TR_BUF_PENDING)) || (rc = trg_loco_start(m->dev))) return rc;
        tr_dev_wrote(m, TR_BUF_PARAMS);
    }
    tr_loco_started(m);
    tr_dev_wrote(m, TR_BUF_ANCHOR);
    return TR_OK;
}

// The round-start weights and step counter back (generate and abort).
static int tr_loco_end_device(tr_model *m) {
    int rc = tr_dev_use(m, TR_BUF_ANCHOR);
    if (rc || (rc = trg_copy(m->dev, TRG_PARAMS, TRG_ANCHOR))) return rc;
    tr_dev_wrote(m, TR_BUF_PARAMS);
    tr_loco_ended(m);
    return TR_OK;
}

int tr_loco_abort_device(tr_model *m) {
    if (!m || !m->dev || !m->in_round) return TR_EINVAL;
    int rc = tr_dev_use(m, TR_BUF_ANCHOR);
    if (rc) return rc;
    if (m->anchor_moments) {
        if ((rc = trg_copy(m->dev, TRG_ADAM_M, TRG_ANCHOR_M)) || (rc = trg_copy(m->dev, TRG_ADAM_V, TRG_ANCHOR_V))) return rc;
        tr_dev_wrote(m, TR_BUF_ADAM);
    } else {
        tr_adam_free(m);
    }
    m->adam_t = m->anchor_adam_t;
    if ((rc = tr_loco_end_device(m))) return rc;
    return tr_lookahead_device(m, m->anchor_lookahead);
}

// tr_loco_generate on the device: the error feedback stays there, the
// selected entries' indices, codes and scales come back for the payload.
int tr_loco_generate_device(tr_model *m, const tr_loco *hp, uint8_t *out, size_t cap, size_t *len) {
    int rc = tr_loco_generate_check(m, hp, out, cap, len);
    if (rc == TR_OK && !m->dev) rc = TR_EINVAL;
    if (rc) return rc;
    tr_chunk_sizes z = tr_dev_sizes(m, hp->chunk, hp->topk);
    uint32_t *sel = malloc(sizeof(uint32_t) * z.entries), *code = malloc(sizeof(uint32_t) * z.entries);
    float *scale = malloc(sizeof(float) * z.chunks);
    if (!sel || !code || !scale) { rc = TR_ENOMEM; goto done; }
    if ((rc = tr_delta_alloc(m)) ||
        (rc = tr_dev_use(m, TR_BUF_PARAMS | TR_BUF_ANCHOR | TR_BUF_DELTA | (m->pending ? TR_BUF_PENDING : 0))) ||
        (rc = trg_loco_generate(m->dev, hp, m->pending != NULL, sel, code, scale)))
        goto done;
    tr_dev_wrote(m, TR_BUF_DELTA);
    *len = tr_loco_pack(m, hp, sel, code, scale, out);
    // The pending update is made here and goes up at the next begin.
    if ((rc = tr_loco_end_device(m)) == TR_OK) rc = tr_loco_pending(m, hp, out, *len);
done:
    free(sel); free(code); free(scale);
    return rc;
}

int tr_loco_apply_device(tr_model *m, const tr_loco *hp, const uint8_t *payloads, const size_t *lens, int n) {
    if (!m || !m->dev || m->in_round) return TR_EINVAL;
    uint32_t *idx;
    float *val;
    // All payloads are checked before anything changes.
    int rc = tr_loco_decode(m, hp, payloads, lens, n, &idx, &val);
    if (rc == TR_OK && n > 0 && !(rc = tr_dev_use(m, TR_BUF_PARAMS)) && !(rc = trg_loco_apply(m->dev, hp, n, idx, val)))
        tr_dev_wrote(m, TR_BUF_PARAMS);
    if (rc == TR_OK) tr_loco_applied(m);
    free(idx); free(val);
    return rc;
}
