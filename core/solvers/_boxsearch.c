/* Node bound and split of the box search (optional: core/solvers/boxsearch.py has a numpy version
 * giving the same answers).
 *
 * The problem, in arrays built once per query by boxsearch.BoxSearch and handed to prepare(), which
 * checks them once and keeps them (a capsule: the nodes' calls then hand over only the box):
 *   off[d], size[d], hat[d]   per feature: offset of its intervals in the flat arrays, their number,
 *                             the query's interval;
 *   flat[F] (float64)         interval costs of every feature (inf: not allowed);
 *   ptr[L+1], ef[nnz], elo[nnz], ehi[nnz]
 *                             per leaf (CSR) the features its box cuts and the allowed interval range;
 *   tree[L]                   per leaf its tree (global over blocks);
 *   nstart[K], nlen[K], nsoff[K], nval[K] (float64), scores[S] (float64)
 *                             per need: the block's leaves [nstart, nstart+nlen), their scores at
 *                             scores[nsoff..] and the sum the trees must reach.
 *   combine                   0: the features' costs add up, 1: the largest counts (L-infinity).
 *
 * prepare(static..., combine) -> problem (a capsule), or None when the problem is not the box search's
 * (the query's interval not allowed on a feature, or costs falling away from it: boxsearch._nearest_allowed).
 * evaluate(problem, lo, hi, p, e) -> (bound, base, holds): for the box [lo, hi], p[d] receives the
 * cheapest cells, e[L] the cost of the cheapest point of each leaf within the box (inf: unreachable),
 * base the cost of p, bound the per-tree radius bound (inf: no solution in the box) and holds whether
 * the leaves holding p meet every need (the caller confirms on the model).
 * split(problem, lo, hi, p, e, bound) -> (feature, level) or None.
 * expand(problem, lo, hi, p, e, cut) -> (bound, base, holds, split): evaluate, then, when the bound is
 * below cut (the box is kept), split; else split is None.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REL_TOL 1e-9
#define N_STATIC 17
#define CAPSULE "core.solvers._boxsearch.problem"

typedef struct {
    Py_buffer b[N_STATIC];
    int n;
    Py_ssize_t d, F, L, nnz, K, S, T;
    const int64_t *off, *size, *hat, *ptr, *ef, *elo, *ehi, *tree, *nstart, *nlen, *nsoff;
    int64_t *prev, *next;   /* per interval, the nearest allowed interval at or below / above it (see nearest) */
    int ok;                 /* the query's intervals allowed, the costs never falling away from them */
    const double *flat, *nval, *scores;
    int combine;
    int64_t *rank;      /* L-infinity: per interval, the rank of its cost among the distinct finite costs */
    double *rvalue;     /* per rank, its cost */
    Py_ssize_t R;       /* the number of distinct finite costs */
    struct Cut *cuts;   /* the leaf bounds (ef, elo, ehi) packed, each with its cheapest interval */
    int64_t *ntb;       /* per need, the number of trees of its block */
    const int64_t *fptr;    /* per feature, its bounds' positions in fcut: fcut[fptr[j] .. fptr[j+1]) */
    const int64_t *fcut;    /* the leaf bounds grouped by feature */
    const int64_t *cleaf;   /* per leaf bound, its leaf */
    int incremental;    /* L-infinity: a box's leaves follow from its parent's (see leaves_from) */
} Prob;

/* a leaf's bound on one feature, packed for the node bound's pass over every leaf: the feature, the
 * allowed interval range, and the cheapest allowed interval of that range (feature-local; -1: none)
 * with the rank of its cost (L-infinity). Within a box that holds that interval, it is the cheapest
 * of the leaf and the box on the feature too. */
struct Cut { int32_t f, lo, hi, best, rank; };

/* item size expected of each static buffer: 8 for int64 and float64 alike; 'd' marks float64 */
static const char kinds[N_STATIC] = {'q', 'q', 'q', 'd', 'q', 'q', 'q', 'q', 'q', 'q', 'q', 'q', 'd', 'd', 'q', 'q', 'q'};

/* a C-contiguous buffer of 8-byte items of the kind asked (int64 'q' or float64 'd'); 0, or -1 with an
 * error set (the buffer is then released) */
static int take(Py_buffer *b, PyObject *o, int writable, char kind, int index) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *fmt = b->format ? b->format : "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
    int ok = b->itemsize == 8 && (kind == 'd' ? strcmp(fmt, "d") == 0 : (strcmp(fmt, "q") == 0 || strcmp(fmt, "l") == 0));
    if (!ok) {
        PyBuffer_Release(b);
        PyErr_Format(PyExc_TypeError, "buffer %d must be %s", index, kind == 'd' ? "float64" : "int64");
        return -1;
    }
    return 0;
}

static void prob_release(Prob *c) {
    for (int i = 0; i < c->n; i++) PyBuffer_Release(&c->b[i]);
    c->n = 0;
}

/* the problem's buffers released and its own memory freed */
static void prob_destroy(Prob *c) {
    prob_release(c);
    PyMem_Free(c->prev); PyMem_Free(c->next); PyMem_Free(c->rank); PyMem_Free(c->rvalue); PyMem_Free(c->cuts);
    PyMem_Free(c->ntb);
    PyMem_Free(c);
}

static void prob_free(PyObject *cap) {
    Prob *c = PyCapsule_GetPointer(cap, CAPSULE);
    if (c) prob_destroy(c);
}

static Py_ssize_t len_of(const Py_buffer *b) { return b->len / 8; }

/* every index the kernels follow stays inside its array (run once per problem); NULL or what is wrong */
static const char *check(const Prob *c) {
    const char *bad = NULL;
    for (Py_ssize_t j = 0; j < c->d && !bad; j++) {
        if (c->size[j] < 1 || c->off[j] < 0 || c->off[j] + c->size[j] > c->F || c->hat[j] < 0 ||
            c->hat[j] >= c->size[j])
            bad = "feature offsets";
    }
    if (!bad && (c->L > 0 && c->ptr[0] != 0)) bad = "leaf pointers";
    for (Py_ssize_t l = 0; l < c->L && !bad; l++) {
        if (c->ptr[l + 1] < c->ptr[l] || c->ptr[l + 1] > c->nnz) bad = "leaf pointers";
        if (c->tree[l] < 0) bad = "trees";
        if (l > 0 && c->tree[l] < c->tree[l - 1]) bad = "trees (leaves must be grouped by tree)";
    }
    if (!bad && c->L > 0 && c->ptr[c->L] != c->nnz) bad = "leaf pointers";
    for (Py_ssize_t k = 0; k < c->nnz && !bad; k++) {
        int64_t f = c->ef[k];
        if (f < 0 || f >= c->d || c->elo[k] < 0 || c->ehi[k] >= c->size[f]) bad = "leaf bounds";
    }
    for (Py_ssize_t q = 0; q < c->K && !bad; q++)
        if (c->nstart[q] < 0 || c->nlen[q] < 0 || c->nstart[q] + c->nlen[q] > c->L || c->nsoff[q] < 0 ||
            c->nsoff[q] + c->nlen[q] > c->S)
            bad = "needs";
    for (Py_ssize_t k = 0; k < c->nnz && !bad; k++)        /* each bound's leaf: the leaf whose bounds hold it */
        if (c->cleaf[k] < 0 || c->cleaf[k] >= c->L || c->ptr[c->cleaf[k]] > k || c->ptr[c->cleaf[k] + 1] <= k)
            bad = "leaf bounds";
    if (!bad && (c->fptr[0] != 0 || c->fptr[c->d] != c->nnz)) bad = "leaf bounds by feature";
    for (Py_ssize_t j = 0; j < c->d && !bad; j++) {         /* the bounds of feature j, each on feature j */
        if (c->fptr[j + 1] < c->fptr[j]) bad = "leaf bounds by feature";
        for (int64_t i = c->fptr[j]; i < c->fptr[j + 1] && !bad; i++)
            if (c->fcut[i] < 0 || c->fcut[i] >= c->nnz || c->ef[c->fcut[i]] != j) bad = "leaf bounds by feature";
    }
    return bad;
}

/* read the static buffers and combine from the arguments; check their lengths and indices */
static int open_static(Prob *c, PyObject *args) {
    c->n = 0;
    if (PyTuple_GET_SIZE(args) != N_STATIC + 1) {
        PyErr_SetString(PyExc_TypeError, "prepare takes the 17 static arrays and combine");
        return -1;
    }
    for (int i = 0; i < N_STATIC; i++) {
        if (take(&c->b[i], PyTuple_GET_ITEM(args, i), 0, kinds[i], i) < 0) return -1;
        c->n++;
    }
    long comb = PyLong_AsLong(PyTuple_GET_ITEM(args, N_STATIC));
    if (comb == -1 && PyErr_Occurred()) return -1;
    c->combine = comb == 1;
    c->off = c->b[0].buf; c->size = c->b[1].buf; c->hat = c->b[2].buf; c->flat = c->b[3].buf;
    c->ptr = c->b[4].buf; c->ef = c->b[5].buf; c->elo = c->b[6].buf; c->ehi = c->b[7].buf;
    c->tree = c->b[8].buf; c->nstart = c->b[9].buf; c->nlen = c->b[10].buf; c->nsoff = c->b[11].buf;
    c->nval = c->b[12].buf; c->scores = c->b[13].buf;
    c->cleaf = c->b[14].buf; c->fptr = c->b[15].buf; c->fcut = c->b[16].buf;
    c->d = len_of(&c->b[0]); c->F = len_of(&c->b[3]); c->L = len_of(&c->b[8]); c->nnz = len_of(&c->b[5]);
    c->K = len_of(&c->b[9]); c->S = len_of(&c->b[13]);
    if (len_of(&c->b[1]) != c->d || len_of(&c->b[2]) != c->d || len_of(&c->b[4]) != c->L + 1 ||
        len_of(&c->b[6]) != c->nnz || len_of(&c->b[7]) != c->nnz || len_of(&c->b[10]) != c->K ||
        len_of(&c->b[11]) != c->K || len_of(&c->b[12]) != c->K || len_of(&c->b[14]) != c->nnz ||
        len_of(&c->b[15]) != c->d + 1 || len_of(&c->b[16]) != c->nnz) {
        PyErr_SetString(PyExc_ValueError, "inconsistent array lengths");
        return -1;
    }
    c->T = 0;
    for (Py_ssize_t l = 0; l < c->L; l++)
        if (c->tree[l] + 1 > c->T) c->T = c->tree[l] + 1;
    const char *bad = check(c);
    if (bad) {
        PyErr_Format(PyExc_ValueError, "invalid box-search arrays: %s", bad);
        return -1;
    }
    return 0;
}

/* per interval the nearest allowed (finite-cost) interval at or below / at or above it within its feature
 * (flat indices; off-1 / off+size when none), and ok: whether the problem is this solver's, the query's
 * interval allowed on every feature and the costs never falling away from it along the allowed intervals
 * on either side (boxsearch._nearest_allowed, the same test); 0, or -1 out of memory */
static int nearest(Prob *c) {
    c->prev = PyMem_Malloc(sizeof(int64_t) * (size_t)(c->F > 0 ? c->F : 1));
    c->next = PyMem_Malloc(sizeof(int64_t) * (size_t)(c->F > 0 ? c->F : 1));
    if (!c->prev || !c->next) return -1;
    c->ok = 1;
    for (Py_ssize_t j = 0; j < c->d; j++) {
        int64_t o = c->off[j], n = c->size[j], here = o + c->hat[j], last = o - 1;
        for (int64_t k = o; k < o + n; k++) {
            if (isfinite(c->flat[k])) {
                if (last >= o) {            /* consecutive allowed intervals: falling to the query's, rising after */
                    double step = c->flat[k] - c->flat[last], tol = 1e-15 * (1 + fabs(c->flat[k]));
                    if ((k <= here && step > tol) || (last >= here && step < -tol)) c->ok = 0;
                }
                last = k;
            }
            c->prev[k] = last;
        }
        last = o + n;
        for (int64_t k = o + n - 1; k >= o; k--) {
            if (isfinite(c->flat[k])) last = k;
            c->next[k] = last;
        }
        if (!isfinite(c->flat[here])) c->ok = 0;
    }
    return 0;
}

/* cheapest allowed interval of feature f within [a, b] as a flat index (-1: none) */
static int64_t range_best(const Prob *c, int64_t f, int64_t a, int64_t b) {
    int64_t o = c->off[f], h = c->hat[f], best;
    if (a > b) return -1;
    if (b < h) best = c->prev[o + b];
    else if (a > h) best = c->next[o + a];
    else best = o + h;
    return (best < o + a || best > o + b) ? -1 : best;
}

/* the packed leaf bounds (struct Cut), and each need's number of trees */
static int make_cuts(Prob *c) {
    c->cuts = PyMem_Malloc(sizeof(struct Cut) * (size_t)(c->nnz > 0 ? c->nnz : 1));
    c->ntb = PyMem_Calloc((size_t)(c->K > 0 ? c->K : 1), sizeof(int64_t));
    unsigned char *seen = PyMem_Calloc((size_t)(c->T > 0 ? c->T : 1), 1);
    if (!c->cuts || !c->ntb || !seen) { PyMem_Free(seen); return -1; }
    for (Py_ssize_t q = 0; q < c->K; q++) {
        int64_t a = c->nstart[q], n = c->nlen[q];
        for (int64_t l = a; l < a + n; l++) seen[c->tree[l]] = 0;
        for (int64_t l = a; l < a + n; l++)
            if (!seen[c->tree[l]]) { seen[c->tree[l]] = 1; c->ntb[q]++; }
    }
    PyMem_Free(seen);
    for (Py_ssize_t k = 0; k < c->nnz; k++) {
        int64_t f = c->ef[k], best = range_best(c, f, c->elo[k], c->ehi[k]);
        struct Cut *u = &c->cuts[k];
        u->f = (int32_t)f; u->lo = (int32_t)c->elo[k]; u->hi = (int32_t)c->ehi[k];
        u->best = best < 0 ? -1 : (int32_t)(best - c->off[f]);
        u->rank = (best < 0 || !c->combine) ? -1 : (int32_t)c->rank[best];
    }
    int64_t most = 0;
    for (Py_ssize_t l = 0; l < c->L; l++)
        if (c->ptr[l + 1] - c->ptr[l] > most) most = c->ptr[l + 1] - c->ptr[l];
    c->incremental = c->combine && most < INT32_MAX && c->L <= INT32_MAX && c->R < INT32_MAX;
    return 0;
}

typedef struct { double e; int64_t i; } Item;

static int by_e(const void *x, const void *y) {
    const Item *a = x, *b = y;
    if (a->e < b->e) return -1;
    if (a->e > b->e) return 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* L-infinity: a leaf's cost within a box is the largest of some interval costs, so its rank among the
 * problem's distinct costs orders the leaves as their costs do (a counting sort, see node_bound) */
static int make_ranks(Prob *c) {
    c->rank = PyMem_Malloc(sizeof(int64_t) * (size_t)(c->F > 0 ? c->F : 1));
    c->rvalue = PyMem_Malloc(sizeof(double) * (size_t)(c->F > 0 ? c->F : 1));
    Item *items = PyMem_Malloc(sizeof(Item) * (size_t)(c->F > 0 ? c->F : 1));
    if (!c->rank || !c->rvalue || !items) { PyMem_Free(items); return -1; }
    Py_ssize_t n = 0;
    for (Py_ssize_t k = 0; k < c->F; k++) {
        c->rank[k] = -1;
        if (isfinite(c->flat[k])) { items[n].e = c->flat[k]; items[n].i = k; n++; }
    }
    qsort(items, (size_t)n, sizeof(Item), by_e);
    c->R = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (k > 0 && items[k].e != items[k - 1].e) c->R++;
        c->rank[items[k].i] = c->R;
        if (k == 0 || items[k].e != items[k - 1].e) c->rvalue[c->R] = items[k].e;
    }
    if (n > 0) c->R++;
    PyMem_Free(items);
    return 0;
}

static PyObject *py_prepare(PyObject *self, PyObject *args) {
    (void)self;
    Prob *c = PyMem_Calloc(1, sizeof(Prob));
    if (!c) return PyErr_NoMemory();
    if (open_static(c, args) < 0) { prob_destroy(c); return NULL; }
    PyObject *cap = NULL;
    if (c->F > INT32_MAX || c->d > INT32_MAX) PyErr_SetString(PyExc_ValueError, "grid too large for the box search");
    else if (nearest(c) < 0) PyErr_NoMemory();
    else if (!c->ok) {                   /* not this solver's problem */
        prob_destroy(c);
        Py_RETURN_NONE;
    }
    else if ((c->combine && make_ranks(c) < 0) || make_cuts(c) < 0) PyErr_NoMemory();
    else cap = PyCapsule_New(c, CAPSULE, prob_free);
    if (!cap) prob_destroy(c);
    return cap;
}

static uint64_t key_of(double e) {
    uint64_t k;
    memcpy(&k, &e, sizeof k);
    return k;
}

/* the items in the order (e, leaf), as qsort with by_e gives it: they enter in leaf order, and a stable
 * least-significant-digit radix sort on the bits of e (non-negative doubles order as their bit patterns;
 * bytes all items share are skipped) keeps equal costs in leaf order. tmp: room for n items. Negative
 * costs (no cost model gives them) go to qsort. */
static void sort_items(Item *items, Item *tmp, Py_ssize_t n, int negative) {
    if (negative) {
        qsort(items, (size_t)n, sizeof(Item), by_e);
        return;
    }
    uint64_t any = 0, all = ~(uint64_t)0;
    for (Py_ssize_t k = 0; k < n; k++) { uint64_t v = key_of(items[k].e); any |= v; all &= v; }
    Item *src = items, *dst = tmp;
    for (int sh = 0; sh < 64; sh += 8) {
        if ((((any ^ all) >> sh) & 0xff) == 0) continue;     /* every item has this byte */
        Py_ssize_t count[257] = {0};
        for (Py_ssize_t k = 0; k < n; k++) count[((key_of(src[k].e) >> sh) & 0xff) + 1]++;
        for (int v = 0; v < 256; v++) count[v + 1] += count[v];
        for (Py_ssize_t k = 0; k < n; k++) dst[count[(key_of(src[k].e) >> sh) & 0xff]++] = src[k];
        Item *t = src; src = dst; dst = t;
    }
    if (src != items) memcpy(items, src, sizeof(Item) * (size_t)n);
}

/* smallest r such that every tree of the need's block has a leaf within r and the best scores within r
 * add up to the need (the per-tree radius); items: the finite leaves sorted by e */
static double radius(const Prob *c, int q, const Item *items, Py_ssize_t n_items, double *tmax,
                     unsigned char *seen) {
    int64_t a = c->nstart[q], n = c->nlen[q];
    if (n == 0) return INFINITY;
    int64_t t0 = c->tree[a], t1 = c->tree[a + n - 1], ntb = c->ntb[q];
    for (int64_t t = t0; t <= t1; t++) seen[t] = 0;
    const double *sc = c->scores + c->nsoff[q];
    double need = c->nval[q], total = 0.0, tol = need - 1e-12 * fmax(1.0, fabs(need));
    int64_t got = 0;
    for (Py_ssize_t k = 0; k < n_items; k++) {
        int64_t l = items[k].i;
        if (l >= a && l < a + n) {
            int64_t t = c->tree[l];
            double s = sc[l - a];
            if (!seen[t]) { seen[t] = 1; tmax[t] = s; total += s; got++; }
            else if (s > tmax[t]) { total += s - tmax[t]; tmax[t] = s; }
        }
        if (k + 1 < n_items && items[k + 1].e == items[k].e) continue;
        if (got == ntb && total >= tol) return items[k].e;
    }
    return INFINITY;
}

/* scratch memory of the node functions, for one caller at a time (a search keeps one; a node call from
 * Python makes its own) */
typedef struct {
    double *m, *tmax, *w, *e;
    Item *items;                 /* 2 L: the items and the radix sort's room */
    unsigned char *seen, *at_p;
    int64_t *best, *pleaf, *near;
    int32_t *erank, *order;      /* L-infinity: each leaf's rank in the box (-1: none), the leaves by rank */
    int32_t *count;              /* R + 1 */
    int32_t *lr, *viol;          /* L-infinity: each leaf's largest rank in the box and bounds p misses */
} Work;

static void work_free(Work *w) {
    free(w->m); free(w->tmax); free(w->w); free(w->e); free(w->items); free(w->seen); free(w->at_p);
    free(w->erank); free(w->order); free(w->best); free(w->pleaf); free(w->near); free(w->count); free(w->lr); free(w->viol);
    memset(w, 0, sizeof *w);
}

static int work_alloc(Work *w, const Prob *c) {
    size_t d1 = (size_t)(c->d > 0 ? c->d : 1), L1 = (size_t)(c->L > 0 ? c->L : 1), T1 = (size_t)(c->T > 0 ? c->T : 1);
    memset(w, 0, sizeof *w);
    w->m = malloc(sizeof(double) * d1); w->tmax = malloc(sizeof(double) * T1); w->w = malloc(sizeof(double) * 2 * d1);
    w->e = malloc(sizeof(double) * L1); w->items = malloc(sizeof(Item) * 2 * L1); w->seen = malloc(T1);
    w->at_p = malloc(L1); w->erank = malloc(sizeof(int32_t) * L1); w->order = malloc(sizeof(int32_t) * L1);
    w->best = malloc(sizeof(int64_t) * T1);
    w->pleaf = malloc(sizeof(int64_t) * T1); w->near = malloc(sizeof(int64_t) * 2 * d1);
    w->count = malloc(sizeof(int32_t) * ((size_t)c->R + 1));
    w->lr = malloc(sizeof(int32_t) * L1); w->viol = malloc(sizeof(int32_t) * L1);
    if (!w->m || !w->tmax || !w->w || !w->e || !w->items || !w->seen || !w->at_p || !w->erank || !w->order || !w->best ||
        !w->pleaf || !w->near || !w->count || !w->lr || !w->viol) {
        work_free(w);
        return -1;
    }
    return 0;
}

/* L-infinity: the finite leaves (erank >= 0) in the order (rank, leaf), which is the order (e, leaf) (a
 * leaf's cost is its rank's, and ranks order costs), by a counting sort into order (count: room for
 * R + 1); their number */
static Py_ssize_t sort_ranked(const Prob *c, const int32_t *erank, int32_t *order, int32_t *count) {
    memset(count, 0, sizeof(int32_t) * ((size_t)c->R + 1));
    for (Py_ssize_t l = 0; l < c->L; l++)
        if (erank[l] >= 0) count[erank[l] + 1]++;
    for (Py_ssize_t r = 0; r < c->R; r++) count[r + 1] += count[r];
    Py_ssize_t n = count[c->R];
    for (Py_ssize_t l = 0; l < c->L; l++)
        if (erank[l] >= 0) order[count[erank[l]]++] = (int32_t)l;
    return n;
}

/* radius() on the leaves sorted by sort_ranked: the same sums in the same order, so the same number */
static double radius_ranked(const Prob *c, int q, const int32_t *order, Py_ssize_t n_items, const int32_t *erank,
                            double *tmax, unsigned char *seen) {
    int64_t a = c->nstart[q], n = c->nlen[q];
    if (n == 0) return INFINITY;
    int64_t t0 = c->tree[a], t1 = c->tree[a + n - 1], ntb = c->ntb[q];
    for (int64_t t = t0; t <= t1; t++) seen[t] = 0;
    const double *sc = c->scores + c->nsoff[q];
    double need = c->nval[q], total = 0.0, tol = need - 1e-12 * fmax(1.0, fabs(need));
    int64_t got = 0;
    for (Py_ssize_t k = 0; k < n_items; k++) {
        int64_t l = order[k];
        if (l >= a && l < a + n) {
            int64_t t = c->tree[l];
            double v = sc[l - a];
            if (!seen[t]) { seen[t] = 1; tmax[t] = v; total += v; got++; }
            else if (v > tmax[t]) { total += v - tmax[t]; tmax[t] = v; }
        }
        if (k + 1 < n_items && erank[order[k + 1]] == erank[l]) continue;
        if (got == ntb && total >= tol) return c->rvalue[erank[l]];
    }
    return INFINITY;
}

/* L-infinity: the rank of the cheapest allowed interval of leaf bound u within the box (c->R: none) */
static inline int32_t cut_rank(const Prob *c, const struct Cut *u, const int64_t *lo, const int64_t *hi) {
    int64_t f = u->f;
    if (u->best >= lo[f] && u->best <= hi[f]) return u->rank;      /* the leaf's cheapest, in the box */
    if (u->best < 0) return (int32_t)c->R;                          /* none in the leaf, none in the box */
    int64_t best = range_best(c, f, u->lo > lo[f] ? u->lo : lo[f], u->hi < hi[f] ? u->hi : hi[f]);
    return best < 0 ? (int32_t)c->R : (int32_t)c->rank[best];
}

/* L-infinity, a box's leaves: lr[l] the largest rank of leaf l's bounds within the box (-1: it has none;
 * c->R: one holds no allowed interval) and viol[l] how many of its bounds the cells p lie outside */
static void leaves_full(const Prob *c, const int64_t *lo, const int64_t *hi, const int64_t *p, int32_t *lr,
                        int32_t *viol) {
    for (Py_ssize_t l = 0; l < c->L; l++) {
        int32_t r = -1, v = 0;
        for (int64_t k = c->ptr[l]; k < c->ptr[l + 1]; k++) {
            const struct Cut *u = &c->cuts[k];
            int32_t g = cut_rank(c, u, lo, hi);
            r = g > r ? g : r;
            v += (p[u->f] < u->lo) | (p[u->f] > u->hi);
        }
        lr[l] = r;
        viol[l] = v;
    }
}

/* a box's parent: its leaves (leaves_full), the feature the parent was split on and the parent's cell there */
typedef struct { const int32_t *lr, *viol; int64_t j, pj; } Parent;

/* leaves_full of a box from its parent's: the box differs from its parent on feature j alone, narrower, so
 * only the bounds on j change, each to a dearer interval (its rank rises: the leaf's largest too, or
 * stays), and p differs on j alone */
static void leaves_from(const Prob *c, const Parent *from, const int64_t *lo, const int64_t *hi,
                        const int64_t *p, int32_t *lr, int32_t *viol) {
    memcpy(lr, from->lr, sizeof(int32_t) * (size_t)c->L);
    memcpy(viol, from->viol, sizeof(int32_t) * (size_t)c->L);
    int64_t j = from->j, was = from->pj, now = p[j];
    for (int64_t i = c->fptr[j]; i < c->fptr[j + 1]; i++) {
        int64_t k = c->fcut[i];
        const struct Cut *u = &c->cuts[k];
        int32_t l = c->cleaf[k], g = cut_rank(c, u, lo, hi);
        if (g > lr[l]) lr[l] = g;
        viol[l] += ((now < u->lo) | (now > u->hi)) - ((was < u->lo) | (was > u->hi));
    }
}

/* the node bound of the box [lo, hi] (see evaluate), and wk->at_p[L]: whether each leaf holds p. With
 * c->incremental, the box's leaves (leaves_full) go to lr and viol (NULL: scratch), from its parent's
 * when from is given, and *kept says so (else 0). Runs without the GIL. */
static void node_bound(const Prob *c, Work *wk, const int64_t *lo, const int64_t *hi, int64_t *p, double *e,
                       const Parent *from, int32_t *lr, int32_t *viol, int *kept,
                       double *bound_out, double *base_out, int *holds_out) {
    double base = 0.0, bound = 0.0;
    int holds = 0;
    Py_ssize_t L1 = c->L > 0 ? c->L : 1;
    double *m = wk->m, *tmax = wk->tmax;
    Item *items = wk->items;
    unsigned char *seen = wk->seen, *at_p = wk->at_p;
    int64_t base_rank = -1;
    *kept = 0;
    for (Py_ssize_t j = 0; j < c->d; j++) {
        int64_t k = range_best(c, j, lo[j], hi[j]);
        m[j] = k < 0 ? INFINITY : c->flat[k];
        p[j] = k < 0 ? c->hat[j] : k - c->off[j];
        if (c->combine) {
            if (m[j] > base) base = m[j];            /* (costs are never NaN: fmax's care not needed) */
            if (k >= 0 && c->rank[k] > base_rank) base_rank = c->rank[k];
        } else base += m[j];
    }
    if (!isfinite(base)) {
        bound = INFINITY;
        for (Py_ssize_t l = 0; l < c->L; l++) { e[l] = INFINITY; at_p[l] = 0; }
    } else {
        /* L-infinity: a leaf's cost is the largest of its features' costs and the base, the cost of the
         * largest of their ranks (ranks order costs), so only ranks are read */
        int by_rank = c->incremental && base_rank >= 0 && c->rvalue[base_rank] == base;
        if (by_rank) {
            lr = lr ? lr : wk->lr;
            viol = viol ? viol : wk->viol;
            if (from) leaves_from(c, from, lo, hi, p, lr, viol);
            else leaves_full(c, lo, hi, p, lr, viol);
            *kept = 1;
            int32_t *erank = wk->erank;
            for (Py_ssize_t l = 0; l < c->L; l++) {
                int32_t r = lr[l] > base_rank ? lr[l] : (int32_t)base_rank;
                int none = lr[l] >= c->R;
                at_p[l] = viol[l] == 0;
                e[l] = none ? INFINITY : c->rvalue[r];
                erank[l] = none ? -1 : r;
            }
            Py_ssize_t n_items = sort_ranked(c, erank, wk->order, wk->count);
            bound = base;
            for (int q = 0; q < c->K && isfinite(bound); q++) {
                double rq = radius_ranked(c, q, wk->order, n_items, erank, tmax, seen);
                if (rq > bound) bound = rq;
            }
        } else {
            Py_ssize_t n_items = 0;
            int negative = 0;
            for (Py_ssize_t l = 0; l < c->L; l++) {
                double v = c->combine ? base : 0.0;
                int in = 1;
                for (int64_t k = c->ptr[l]; k < c->ptr[l + 1]; k++) {
                    const struct Cut *u = &c->cuts[k];
                    int64_t f = u->f, best;
                    if (u->best >= lo[f] && u->best <= hi[f]) best = c->off[f] + u->best;
                    else best = range_best(c, f, u->lo > lo[f] ? u->lo : lo[f], u->hi < hi[f] ? u->hi : hi[f]);
                    double cost = best < 0 ? INFINITY : c->flat[best];
                    if (c->combine) v = cost > v ? cost : v;
                    else v += cost - m[f];
                    in &= (p[f] >= u->lo) & (p[f] <= u->hi);
                }
                at_p[l] = (unsigned char)in;
                e[l] = c->combine ? v : base + v;
                if (isfinite(e[l])) {
                    items[n_items].e = e[l] + 0.0;          /* (-0.0 as 0.0: the same cost, ordered as one) */
                    items[n_items].i = l;
                    negative |= items[n_items].e < 0;
                    n_items++;
                }
            }
            sort_items(items, items + L1, n_items, negative);
            bound = base;
            for (int q = 0; q < c->K && isfinite(bound); q++) {
                double rq = radius(c, q, items, n_items, tmax, seen);
                if (rq > bound) bound = rq;
            }
        }
        holds = 1;
        for (int q = 0; q < c->K && holds; q++) {     /* the scores of the leaves holding p */
            const double *sc = c->scores + c->nsoff[q];
            double total = 0.0, need = c->nval[q];
            for (int64_t l = c->nstart[q]; l < c->nstart[q] + c->nlen[q]; l++)
                if (at_p[l]) total += sc[l - c->nstart[q]];
            if (!(total >= need - 1e-12 * fmax(1.0, fabs(need)))) holds = 0;
        }
    }
    *bound_out = bound;
    *base_out = base;
    *holds_out = holds;
}

/* the (feature, level) the box is split at (see split): *out_j < 0 for none. known_at_p: wk->at_p holds
 * whether each leaf holds p, as node_bound found it (else found here). Runs without the GIL. */
static void node_split(const Prob *c, Work *wk, const int64_t *lo, const int64_t *hi, const int64_t *p,
                       const double *e, double bound, int known_at_p, int64_t *out_j_, int64_t *out_s_) {
    int64_t out_j = -1, out_s = -1;
    unsigned char *at_p = wk->at_p;
    int64_t *best = wk->best, *pleaf = wk->pleaf, *near = wk->near;
    double *w = wk->w;
    for (Py_ssize_t k = 0; k < 2 * c->d; k++) { near[k] = -1; w[k] = 0.0; }
    double lim = bound * (1 + REL_TOL) + 1e-15;
    for (Py_ssize_t l = 0; l < c->L && !known_at_p; l++) {
        at_p[l] = 1;
        for (int64_t k = c->ptr[l]; k < c->ptr[l + 1]; k++) {
            int64_t v = p[c->ef[k]];
            if (v < c->elo[k] || v > c->ehi[k]) { at_p[l] = 0; break; }
        }
    }
    const unsigned char *held = at_p;
    int any = 0;
    for (int q = 0; q < c->K; q++) {
        int64_t a = c->nstart[q], n = c->nlen[q];
        if (n == 0) continue;
        const double *sc = c->scores + c->nsoff[q];
        int64_t t0 = c->tree[a], t1 = c->tree[a + n - 1];
        for (int64_t t = t0; t <= t1; t++) { best[t] = -1; pleaf[t] = -1; }
        for (int64_t l = a; l < a + n; l++) {
            int64_t t = c->tree[l];
            if (held[l] && pleaf[t] < 0) pleaf[t] = l;
            if (isfinite(e[l]) && e[l] <= lim && (best[t] < 0 || sc[l - a] > sc[best[t] - a])) best[t] = l;
        }
        for (int64_t t = t0; t <= t1; t++) {
            int64_t l = best[t], pl = pleaf[t];
            if (l < 0 || l == pl) continue;
            double gain = sc[l - a] - (pl >= 0 ? sc[pl - a] : 0.0);
            if (!(gain > 0)) continue;
            for (int64_t k = c->ptr[l]; k < c->ptr[l + 1]; k++) {
                int64_t j = c->ef[k], s, side;
                if (p[j] < c->elo[k]) { s = c->elo[k] > lo[j] ? c->elo[k] : lo[j]; side = 1; }
                else if (p[j] > c->ehi[k]) { s = (c->ehi[k] < hi[j] ? c->ehi[k] : hi[j]) + 1; side = 0; }
                else continue;
                if (!(lo[j] < s && s <= hi[j])) continue;
                int64_t slot = 2 * j + side;
                if (near[slot] < 0 || (side == 1 ? s < near[slot] : s > near[slot])) near[slot] = s;
                w[slot] += gain;
                any = 1;
            }
        }
    }
    if (any) {
        Py_ssize_t top = -1;
        for (Py_ssize_t k = 0; k < 2 * c->d; k++)
            if (w[k] > 0 && (top < 0 || w[k] > w[top])) top = k;
        if (top >= 0) { out_j = top / 2; out_s = near[top]; }
    }
    if (out_j < 0) {      /* a tie at p: split at any leaf bound inside the box */
        for (Py_ssize_t k = 0; k < c->nnz && out_j < 0; k++) {
            int64_t f = c->ef[k];
            if (c->elo[k] > lo[f] && c->elo[k] <= hi[f]) { out_j = f; out_s = c->elo[k]; }
        }
        for (Py_ssize_t k = 0; k < c->nnz && out_j < 0; k++) {
            int64_t f = c->ef[k];
            if (c->ehi[k] >= lo[f] && c->ehi[k] < hi[f]) { out_j = f; out_s = c->ehi[k] + 1; }
        }
    }
    *out_j_ = out_j;
    *out_s_ = out_s;
}

/* a node call's arguments: the problem, then lo, hi, p (writable for evaluate), e (likewise) */
typedef struct {
    Py_buffer b[4];
    int n;
    const Prob *c;
} Node;

static void node_release(Node *nd) {
    for (int i = 0; i < nd->n; i++) PyBuffer_Release(&nd->b[i]);
    nd->n = 0;
}

static int open_node(Node *nd, PyObject *args, Py_ssize_t n_args, const char *usage, int writable) {
    nd->n = 0;
    if (PyTuple_GET_SIZE(args) != n_args) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    nd->c = PyCapsule_GetPointer(PyTuple_GET_ITEM(args, 0), CAPSULE);
    if (!nd->c) return -1;
    const char kind[4] = {'q', 'q', 'q', 'd'};
    for (int i = 0; i < 4; i++) {
        if (take(&nd->b[i], PyTuple_GET_ITEM(args, i + 1), i >= 2 && writable, kind[i], i + 1) < 0) return -1;
        nd->n++;
    }
    const Prob *c = nd->c;
    if (len_of(&nd->b[0]) != c->d || len_of(&nd->b[1]) != c->d) {
        PyErr_SetString(PyExc_ValueError, "lo and hi need one entry per feature");
        return -1;
    }
    if (len_of(&nd->b[2]) != c->d || len_of(&nd->b[3]) != c->L) {
        PyErr_SetString(PyExc_ValueError, "p needs one entry per feature and e one per leaf");
        return -1;
    }
    const int64_t *lo = nd->b[0].buf, *hi = nd->b[1].buf;
    for (Py_ssize_t j = 0; j < c->d; j++)
        if (lo[j] < 0 || hi[j] >= c->size[j]) {
            PyErr_SetString(PyExc_ValueError, "box outside the grid");
            return -1;
        }
    if (!writable) {
        const int64_t *p = nd->b[2].buf;
        for (Py_ssize_t j = 0; j < c->d; j++)
            if (p[j] < 0 || p[j] >= c->size[j]) {
                PyErr_SetString(PyExc_ValueError, "p outside the grid");
                return -1;
            }
    }
    return 0;
}

static PyObject *split_value(int64_t j, int64_t s) {
    if (j < 0) Py_RETURN_NONE;
    return Py_BuildValue("(LL)", (long long)j, (long long)s);
}

static PyObject *py_evaluate(PyObject *self, PyObject *args) {
    (void)self;
    Node nd;
    Work wk;
    if (open_node(&nd, args, 5, "evaluate takes the problem, lo, hi, p, e", 1) < 0) { node_release(&nd); return NULL; }
    if (work_alloc(&wk, nd.c) < 0) { node_release(&nd); return PyErr_NoMemory(); }
    double bound, base;
    int holds, kept;
    Py_BEGIN_ALLOW_THREADS
    node_bound(nd.c, &wk, nd.b[0].buf, nd.b[1].buf, nd.b[2].buf, nd.b[3].buf, NULL, NULL, NULL, &kept, &bound, &base,
               &holds);
    Py_END_ALLOW_THREADS
    work_free(&wk);
    node_release(&nd);
    return Py_BuildValue("(ddi)", bound, base, holds);
}

static PyObject *py_split(PyObject *self, PyObject *args) {
    (void)self;
    Node nd;
    Work wk;
    if (open_node(&nd, args, 6, "split takes the problem, lo, hi, p, e, bound", 0) < 0) { node_release(&nd); return NULL; }
    double bound = PyFloat_AsDouble(PyTuple_GET_ITEM(args, 5));
    if (bound == -1.0 && PyErr_Occurred()) { node_release(&nd); return NULL; }
    if (work_alloc(&wk, nd.c) < 0) { node_release(&nd); return PyErr_NoMemory(); }
    int64_t j, s;
    Py_BEGIN_ALLOW_THREADS
    node_split(nd.c, &wk, nd.b[0].buf, nd.b[1].buf, nd.b[2].buf, nd.b[3].buf, bound, 0, &j, &s);
    Py_END_ALLOW_THREADS
    work_free(&wk);
    node_release(&nd);
    return split_value(j, s);
}

static PyObject *py_expand(PyObject *self, PyObject *args) {
    (void)self;
    Node nd;
    Work wk;
    if (open_node(&nd, args, 6, "expand takes the problem, lo, hi, p, e, cut", 1) < 0) { node_release(&nd); return NULL; }
    double cut = PyFloat_AsDouble(PyTuple_GET_ITEM(args, 5));
    if (cut == -1.0 && PyErr_Occurred()) { node_release(&nd); return NULL; }
    if (work_alloc(&wk, nd.c) < 0) { node_release(&nd); return PyErr_NoMemory(); }
    double bound, base;
    int holds, kept;
    int64_t j = -1, s = -1;
    Py_BEGIN_ALLOW_THREADS
    node_bound(nd.c, &wk, nd.b[0].buf, nd.b[1].buf, nd.b[2].buf, nd.b[3].buf, NULL, NULL, NULL, &kept, &bound, &base,
               &holds);
    if (isfinite(bound) && bound < cut)
        node_split(nd.c, &wk, nd.b[0].buf, nd.b[1].buf, nd.b[2].buf, nd.b[3].buf, bound, 1, &j, &s);
    Py_END_ALLOW_THREADS
    work_free(&wk);
    node_release(&nd);
    PyObject *sp = split_value(j, s);
    if (!sp) return NULL;
    return Py_BuildValue("(ddiN)", bound, base, holds, sp);
}

/* ------------------------------------------------------------------ the search loop
 * boxsearch.solve's loop, here without a Python call per box: the queue of boxes ordered by (bound,
 * -depth, order queued), each box evaluated and its split found as it is queued (expand). run() goes
 * on until something needs the caller: the queue is empty, more than stop_at boxes were evaluated
 * (the caller's node limit, its cue to start another solver, or a look at the clock), a popped box
 * raises the lower bound (when told), or a popped box's cheapest point may be the answer (the caller
 * checks it on the model; if it is not valid, the next run() splits that box). */
#define SEARCH "core.solvers._boxsearch.search"

typedef struct SNode {
    double bound, base;
    int64_t negdepth, order, sj, ss;
    int holds;
    int32_t *leaves;             /* L-infinity: its leaves (leaves_full: lr[L], viol[L]) for its children, or NULL */
    int64_t box[];               /* lo[d], hi[d], p[d] */
} SNode;



typedef struct {
    PyObject *problem;           /* the problem's capsule, kept alive */
    const Prob *c;
    Work wk;
    SNode **heap;
    size_t n, cap;
    SNode *current;              /* the popped box the caller was told about */
    int stage;                   /* what the caller was last told of it: 0 nothing, 1 its bound, 2 its point */
    int64_t order, nodes;
    double cut, lb_told;
    size_t leaves_bytes;         /* the memory the queued boxes' leaves take */
    size_t leaves_budget;        /* the most they may take (beyond it, a box's children start from scratch) */
} Search;

static int snode_less(const SNode *a, const SNode *b) {
    if (a->bound != b->bound) return a->bound < b->bound;
    if (a->negdepth != b->negdepth) return a->negdepth < b->negdepth;
    return a->order < b->order;
}

static int heap_push(Search *S, SNode *x) {
    if (S->n == S->cap) {
        size_t cap = S->cap ? 2 * S->cap : 64;
        SNode **h = realloc(S->heap, sizeof(SNode *) * cap);
        if (!h) return -1;
        S->heap = h;
        S->cap = cap;
    }
    size_t i = S->n++;
    while (i > 0 && snode_less(x, S->heap[(i - 1) / 2])) { S->heap[i] = S->heap[(i - 1) / 2]; i = (i - 1) / 2; }
    S->heap[i] = x;
    return 0;
}

static SNode *heap_pop(Search *S) {
    SNode *top = S->heap[0], *x = S->heap[--S->n];
    size_t i = 0;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= S->n) break;
        if (k + 1 < S->n && snode_less(S->heap[k + 1], S->heap[k])) k++;
        if (!snode_less(S->heap[k], x)) break;
        S->heap[i] = S->heap[k];
        i = k;
    }
    if (S->n > 0) S->heap[i] = x;
    return top;
}

static void snode_free(Search *S, SNode *x) {
    if (x->leaves) {
        free(x->leaves);
        S->leaves_bytes -= sizeof(int32_t) * 2 * (size_t)S->c->L;
    }
    free(x);
}

/* evaluate the box [lo, hi] at depth (from its parent's leaves, when it has them) and queue it unless its
 * bound reaches cut; 0, or -1 out of memory */
static int search_push(Search *S, const int64_t *lo, const int64_t *hi, int64_t depth, const SNode *parent) {
    const Prob *c = S->c;
    Py_ssize_t d = c->d;
    size_t room = sizeof(int32_t) * 2 * (size_t)c->L;
    SNode *x = malloc(sizeof(SNode) + sizeof(int64_t) * 3 * (size_t)(d > 0 ? d : 1));
    if (!x) return -1;
    x->leaves = NULL;
    if (c->incremental && c->L > 0 && S->leaves_bytes + room <= S->leaves_budget) {
        x->leaves = malloc(room);
        if (x->leaves) S->leaves_bytes += room;
    }
    memcpy(x->box, lo, sizeof(int64_t) * (size_t)d);
    memcpy(x->box + d, hi, sizeof(int64_t) * (size_t)d);
    Parent from;
    int has_parent = parent && parent->leaves;
    if (has_parent) {
        from.lr = parent->leaves;
        from.viol = parent->leaves + c->L;
        from.j = parent->sj;
        from.pj = parent->box[2 * d + parent->sj];
    }
    int kept;
    node_bound(c, &S->wk, x->box, x->box + d, x->box + 2 * d, S->wk.e, has_parent ? &from : NULL,
               x->leaves, x->leaves ? x->leaves + c->L : NULL, &kept, &x->bound, &x->base, &x->holds);
    S->nodes++;
    if (!kept && x->leaves) {            /* (no leaves were found for it: its children start from scratch) */
        free(x->leaves);
        x->leaves = NULL;
        S->leaves_bytes -= room;
    }
    if (!(isfinite(x->bound) && x->bound < S->cut)) { snode_free(S, x); return 0; }
    node_split(c, &S->wk, x->box, x->box + d, x->box + 2 * d, S->wk.e, x->bound, 1, &x->sj, &x->ss);
    x->negdepth = -depth;
    x->order = S->order++;
    if (heap_push(S, x) < 0) { snode_free(S, x); return -1; }
    return 0;
}

static void search_free(PyObject *cap) {
    Search *S = PyCapsule_GetPointer(cap, SEARCH);
    if (!S) return;
    for (size_t i = 0; i < S->n; i++) snode_free(S, S->heap[i]);
    free(S->heap);
    if (S->current) snode_free(S, S->current);
    work_free(&S->wk);
    Py_XDECREF(S->problem);
    PyMem_Free(S);
}

/* search(problem, cut, budget) -> search: the root box evaluated and queued (when its bound is below cut);
 * budget: the bytes the queued boxes' leaves may take (L-infinity) */
static PyObject *py_search(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *problem;
    double cut;
    Py_ssize_t budget;
    if (!PyArg_ParseTuple(args, "Odn", &problem, &cut, &budget)) return NULL;
    if (budget < 0) { PyErr_SetString(PyExc_ValueError, "budget must be at least 0"); return NULL; }
    const Prob *c = PyCapsule_GetPointer(problem, CAPSULE);
    if (!c) return NULL;
    Search *S = PyMem_Calloc(1, sizeof(Search));
    if (!S) return PyErr_NoMemory();
    S->c = c;
    S->cut = cut;
    S->leaves_budget = (size_t)budget;
    S->lb_told = -INFINITY;
    S->problem = problem;
    Py_INCREF(problem);
    PyObject *cap = PyCapsule_New(S, SEARCH, search_free);
    if (!cap) { Py_DECREF(problem); PyMem_Free(S); return NULL; }
    int64_t *root = calloc((size_t)(2 * (c->d > 0 ? c->d : 1)), sizeof(int64_t));
    int err = !root || work_alloc(&S->wk, c) < 0;
    if (!err) {
        for (Py_ssize_t j = 0; j < c->d; j++) root[c->d + j] = c->size[j] - 1;
        err = search_push(S, root, root + c->d, 0, NULL) < 0;
    }
    free(root);
    if (err) { Py_DECREF(cap); return PyErr_NoMemory(); }
    return cap;
}

enum { EV_EMPTY, EV_LIMIT, EV_BOUND, EV_CANDIDATE, EV_NOMEM };

/* the loop until an event (see above); runs without the GIL */
static int search_run(Search *S, int64_t stop_at, int report, double *value) {
    const Prob *c = S->c;
    Py_ssize_t d = c->d;
    for (;;) {
        if (!S->current) {
            if (S->n == 0) return EV_EMPTY;
            if (S->nodes > stop_at) { *value = S->heap[0]->bound; return EV_LIMIT; }
            S->current = heap_pop(S);
            S->stage = 0;
        }
        SNode *x = S->current;
        if (S->stage == 0) {
            S->stage = 1;
            if (report && x->bound > S->lb_told) { S->lb_told = x->bound; *value = x->bound; return EV_BOUND; }
        }
        if (S->stage == 1) {
            S->stage = 2;
            if (x->holds && x->base >= x->bound * (1 - REL_TOL) - 1e-15) { *value = x->base; return EV_CANDIDATE; }
        }
        S->current = NULL;
        if (x->sj >= 0) {            /* (none: one leaf per tree and p invalid, the box holds no solution) */
            int64_t *lo = x->box, *hi = x->box + d, j = x->sj, sv = x->ss;
            int64_t keep_hi = hi[j], keep_lo = lo[j];
            hi[j] = sv - 1;          /* the side below the level, then the side from it */
            int err = search_push(S, lo, hi, 1 - x->negdepth, x) < 0;
            hi[j] = keep_hi;
            lo[j] = sv;
            err = err || search_push(S, lo, hi, 1 - x->negdepth, x) < 0;
            lo[j] = keep_lo;
            if (err) { snode_free(S, x); return EV_NOMEM; }
        }
        snode_free(S, x);
    }
}

/* run(search, stop_at, report, p) -> (event, boxes evaluated, value): ("empty", n, 0) | ("limit", n, the
 * smallest bound queued) | ("bound", n, the popped box's bound) | ("candidate", n, its cost), p receiving
 * the candidate's cells */
static PyObject *py_run(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *pobj;
    long long stop_at;
    int report;
    if (!PyArg_ParseTuple(args, "OLpO", &cap, &stop_at, &report, &pobj)) return NULL;
    Search *S = PyCapsule_GetPointer(cap, SEARCH);
    if (!S) return NULL;
    Py_buffer pb;
    if (take(&pb, pobj, 1, 'q', 3) < 0) return NULL;
    if (len_of(&pb) != S->c->d) {
        PyBuffer_Release(&pb);
        PyErr_SetString(PyExc_ValueError, "p needs one entry per feature");
        return NULL;
    }
    double value = 0.0;
    int ev;
    Py_BEGIN_ALLOW_THREADS
    ev = search_run(S, (int64_t)stop_at, report, &value);
    Py_END_ALLOW_THREADS
    if (ev == EV_CANDIDATE)
        memcpy(pb.buf, S->current->box + 2 * S->c->d, sizeof(int64_t) * (size_t)S->c->d);
    PyBuffer_Release(&pb);
    switch (ev) {
        case EV_EMPTY: return Py_BuildValue("(sLd)", "empty", (long long)S->nodes, 0.0);
        case EV_LIMIT: return Py_BuildValue("(sLd)", "limit", (long long)S->nodes, value);
        case EV_BOUND: return Py_BuildValue("(sLd)", "bound", (long long)S->nodes, value);
        case EV_CANDIDATE: return Py_BuildValue("(sLd)", "candidate", (long long)S->nodes, value);
        default: return PyErr_NoMemory();
    }
}

static PyMethodDef methods[] = {
    {"prepare", py_prepare, METH_VARARGS, "Check the box-search arrays once and keep them: the problem."},
    {"evaluate", py_evaluate, METH_VARARGS, "Bound, cheapest cells and per-leaf costs of a box."},
    {"split", py_split, METH_VARARGS, "The (feature, level) a box is split at, or None."},
    {"expand", py_expand, METH_VARARGS, "evaluate, then split when the bound is below cut."},
    {"search", py_search, METH_VARARGS, "A best-first search of the problem's boxes, its root queued."},
    {"run", py_run, METH_VARARGS, "Run the search until it needs the caller (an event)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_boxsearch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__boxsearch(void) { return PyModule_Create(&module); }
