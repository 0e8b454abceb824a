/* Node bound and split of the box search (optional: core/solvers/boxsearch.py has a numpy version
 * giving the same answers).
 *
 * The problem, in arrays built once by boxsearch.BoxSearch (checked by check()):
 *   off[d], size[d], hat[d]   per feature: offset of its intervals in the flat arrays, their number,
 *                             the query's interval;
 *   flat[F] (float64)         interval costs of every feature (inf: not allowed);
 *   prev[F], next[F]          per interval, the nearest allowed interval at or below / at or above it
 *                             (flat indices; off-1 / off+size when none);
 *   ptr[L+1], ef[nnz], elo[nnz], ehi[nnz]
 *                             per leaf (CSR) the features its box cuts and the allowed interval range;
 *   tree[L]                   per leaf its tree (global over blocks);
 *   nstart[K], nlen[K], nsoff[K], nval[K] (float64), scores[S] (float64)
 *                             per need: the block's leaves [nstart, nstart+nlen), their scores at
 *                             scores[nsoff..] and the sum the trees must reach.
 *   combine                   0: the features' costs add up, 1: the largest counts (L-infinity).
 *
 * evaluate(static..., lo, hi, p, e) -> (bound, base, holds): for the box [lo, hi], p[d] receives the
 * cheapest cells, e[L] the cost of the cheapest point of each leaf within the box (inf: unreachable),
 * base the cost of p, bound the per-tree radius bound (inf: no solution in the box) and holds whether
 * the leaves holding p meet every need (the caller confirms on the model).
 * split(static..., lo, hi, p, e, bound) -> (feature, level) or None.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REL_TOL 1e-9
#define N_STATIC 16

typedef struct {
    Py_buffer b[N_STATIC + 4];
    int n;
    Py_ssize_t d, F, L, nnz, K, S, T;
    const int64_t *off, *size, *hat, *prev, *next, *ptr, *ef, *elo, *ehi, *tree, *nstart, *nlen, *nsoff;
    const double *flat, *nval, *scores;
    int combine;
} Ctx;

static void release(Ctx *c) {
    for (int i = 0; i < c->n; i++) PyBuffer_Release(&c->b[i]);
    c->n = 0;
}

/* item size expected of each static buffer: 8 for int64 and float64 alike; 'd' marks float64 */
static const char kinds[N_STATIC] = {'q', 'q', 'q', 'q', 'q', 'd', 'q', 'q', 'q', 'q', 'q', 'q', 'q', 'q', 'd', 'd'};

static int take(Ctx *c, PyObject *o, int writable, char kind) {
    Py_buffer *b = &c->b[c->n];
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    c->n++;
    const char *fmt = b->format ? b->format : "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
    int ok = b->itemsize == 8 && (kind == 'd' ? strcmp(fmt, "d") == 0 : (strcmp(fmt, "q") == 0 || strcmp(fmt, "l") == 0));
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "buffer %d must be %s", c->n - 1, kind == 'd' ? "float64" : "int64");
        return -1;
    }
    return 0;
}

static Py_ssize_t len_of(Ctx *c, int i) { return c->b[i].len / 8; }

/* read the static buffers from the argument tuple's first items; check their lengths */
static int open_static(Ctx *c, PyObject *args) {
    c->n = 0;
    if (PyTuple_GET_SIZE(args) < N_STATIC + 1) {
        PyErr_SetString(PyExc_TypeError, "too few arguments");
        return -1;
    }
    for (int i = 0; i < N_STATIC; i++)
        if (take(c, PyTuple_GET_ITEM(args, i), 0, kinds[i]) < 0) return -1;
    PyObject *cb = PyTuple_GET_ITEM(args, N_STATIC);
    long comb = PyLong_AsLong(cb);
    if (comb == -1 && PyErr_Occurred()) return -1;
    c->combine = comb == 1;
    c->off = c->b[0].buf; c->size = c->b[1].buf; c->hat = c->b[2].buf;
    c->prev = c->b[3].buf; c->next = c->b[4].buf; c->flat = c->b[5].buf;
    c->ptr = c->b[6].buf; c->ef = c->b[7].buf; c->elo = c->b[8].buf; c->ehi = c->b[9].buf;
    c->tree = c->b[10].buf; c->nstart = c->b[11].buf; c->nlen = c->b[12].buf; c->nsoff = c->b[13].buf;
    c->nval = c->b[14].buf; c->scores = c->b[15].buf;
    c->d = len_of(c, 0); c->F = len_of(c, 5); c->L = len_of(c, 10); c->nnz = len_of(c, 7);
    c->K = len_of(c, 11); c->S = len_of(c, 15);
    if (len_of(c, 1) != c->d || len_of(c, 2) != c->d || len_of(c, 3) != c->F || len_of(c, 4) != c->F ||
        len_of(c, 6) != c->L + 1 || len_of(c, 8) != c->nnz || len_of(c, 9) != c->nnz ||
        len_of(c, 12) != c->K || len_of(c, 13) != c->K || len_of(c, 14) != c->K) {
        PyErr_SetString(PyExc_ValueError, "inconsistent array lengths");
        return -1;
    }
    c->T = 0;
    for (Py_ssize_t l = 0; l < c->L; l++)
        if (c->tree[l] + 1 > c->T) c->T = c->tree[l] + 1;
    return 0;
}

/* every index the kernels follow stays inside its array (run once per problem) */
static PyObject *py_check(PyObject *self, PyObject *args) {
    (void)self;
    Ctx c;
    if (open_static(&c, args) < 0) { release(&c); return NULL; }
    const char *bad = NULL;
    for (Py_ssize_t j = 0; j < c.d && !bad; j++) {
        if (c.size[j] < 1 || c.off[j] < 0 || c.off[j] + c.size[j] > c.F || c.hat[j] < 0 || c.hat[j] >= c.size[j])
            bad = "feature offsets";
        for (int64_t i = 0; i < c.size[j] && !bad; i++) {
            int64_t k = c.off[j] + i;
            if (c.prev[k] < c.off[j] - 1 || c.prev[k] > k || c.next[k] < k || c.next[k] > c.off[j] + c.size[j])
                bad = "nearest allowed intervals";
        }
    }
    if (!bad && (c.L > 0 && c.ptr[0] != 0)) bad = "leaf pointers";
    for (Py_ssize_t l = 0; l < c.L && !bad; l++) {
        if (c.ptr[l + 1] < c.ptr[l] || c.ptr[l + 1] > c.nnz) bad = "leaf pointers";
        if (c.tree[l] < 0) bad = "trees";
        if (l > 0 && c.tree[l] < c.tree[l - 1]) bad = "trees (leaves must be grouped by tree)";
    }
    if (!bad && c.L > 0 && c.ptr[c.L] != c.nnz) bad = "leaf pointers";
    for (Py_ssize_t k = 0; k < c.nnz && !bad; k++) {
        int64_t f = c.ef[k];
        if (f < 0 || f >= c.d || c.elo[k] < 0 || c.ehi[k] >= c.size[f]) bad = "leaf bounds";
    }
    for (Py_ssize_t q = 0; q < c.K && !bad; q++)
        if (c.nstart[q] < 0 || c.nlen[q] < 0 || c.nstart[q] + c.nlen[q] > c.L || c.nsoff[q] < 0 ||
            c.nsoff[q] + c.nlen[q] > c.S)
            bad = "needs";
    release(&c);
    if (bad) {
        PyErr_Format(PyExc_ValueError, "invalid box-search arrays: %s", bad);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* cheapest allowed interval of feature f within [a, b] (feature-local), its cost in *cost (inf: none) */
static int64_t range_min(const Ctx *c, int64_t f, int64_t a, int64_t b, double *cost) {
    int64_t o = c->off[f], h = c->hat[f], best;
    if (a > b) { *cost = INFINITY; return -1; }
    if (b < h) best = c->prev[o + b];
    else if (a > h) best = c->next[o + a];
    else best = o + h;
    if (best < o + a || best > o + b) { *cost = INFINITY; return -1; }
    *cost = c->flat[best];
    return best - o;
}

typedef struct { double e; int64_t i; } Item;

static int by_e(const void *x, const void *y) {
    const Item *a = x, *b = y;
    if (a->e < b->e) return -1;
    if (a->e > b->e) return 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* smallest r such that every tree of the need's block has a leaf within r and the best scores within r
 * add up to the need (the per-tree radius); items: the finite leaves sorted by e */
static double radius(const Ctx *c, int q, const Item *items, Py_ssize_t n_items, double *tmax,
                     unsigned char *seen) {
    int64_t a = c->nstart[q], n = c->nlen[q];
    if (n == 0) return INFINITY;
    int64_t t0 = c->tree[a], t1 = c->tree[a + n - 1];
    int64_t ntb = 0;
    for (int64_t t = t0; t <= t1; t++) seen[t] = 0;
    for (int64_t l = a; l < a + n; l++)
        if (!seen[c->tree[l]]) { seen[c->tree[l]] = 1; ntb++; }
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

static int open_node(Ctx *c, PyObject *args, int n_extra, const int64_t **lo, const int64_t **hi) {
    if (open_static(c, args) < 0) return -1;
    if (PyTuple_GET_SIZE(args) < N_STATIC + 1 + n_extra) {
        PyErr_SetString(PyExc_TypeError, "too few arguments");
        return -1;
    }
    if (take(c, PyTuple_GET_ITEM(args, N_STATIC + 1), 0, 'q') < 0 ||
        take(c, PyTuple_GET_ITEM(args, N_STATIC + 2), 0, 'q') < 0)
        return -1;
    if (len_of(c, N_STATIC) != c->d || len_of(c, N_STATIC + 1) != c->d) {
        PyErr_SetString(PyExc_ValueError, "lo and hi need one entry per feature");
        return -1;
    }
    *lo = c->b[N_STATIC].buf;
    *hi = c->b[N_STATIC + 1].buf;
    for (Py_ssize_t j = 0; j < c->d; j++)
        if ((*lo)[j] < 0 || (*hi)[j] >= c->size[j]) {
            PyErr_SetString(PyExc_ValueError, "box outside the grid");
            return -1;
        }
    return 0;
}

static PyObject *py_evaluate(PyObject *self, PyObject *args) {
    (void)self;
    Ctx c;
    const int64_t *lo, *hi;
    if (PyTuple_GET_SIZE(args) != N_STATIC + 5) {
        PyErr_SetString(PyExc_TypeError, "evaluate takes the static arrays, combine, lo, hi, p, e");
        return NULL;
    }
    if (open_node(&c, args, 4, &lo, &hi) < 0 || take(&c, PyTuple_GET_ITEM(args, N_STATIC + 3), 1, 'q') < 0 ||
        take(&c, PyTuple_GET_ITEM(args, N_STATIC + 4), 1, 'd') < 0) { release(&c); return NULL; }
    if (len_of(&c, N_STATIC + 2) != c.d || len_of(&c, N_STATIC + 3) != c.L) {
        release(&c);
        PyErr_SetString(PyExc_ValueError, "p needs one entry per feature and e one per leaf");
        return NULL;
    }
    int64_t *p = c.b[N_STATIC + 2].buf;
    double *e = c.b[N_STATIC + 3].buf;
    double base = 0.0, bound = 0.0;
    int nomem = 0, holds = 0;
    Py_BEGIN_ALLOW_THREADS
    double *m = malloc(sizeof(double) * (size_t)(c.d > 0 ? c.d : 1));
    Item *items = malloc(sizeof(Item) * (size_t)(c.L > 0 ? c.L : 1));
    double *tmax = malloc(sizeof(double) * (size_t)(c.T > 0 ? c.T : 1));
    unsigned char *seen = calloc((size_t)(c.T > 0 ? c.T : 1), 1);
    if (!m || !items || !tmax || !seen) nomem = 1;
    for (Py_ssize_t j = 0; j < c.d && !nomem; j++) {
        int64_t k = range_min(&c, j, lo[j], hi[j], &m[j]);
        p[j] = k < 0 ? c.hat[j] : k;
        if (c.combine) base = fmax(base, m[j]);
        else base += m[j];
    }
    if (!nomem && !isfinite(base)) bound = INFINITY;
    else if (!nomem) {
        Py_ssize_t n_items = 0;
        for (Py_ssize_t l = 0; l < c.L; l++) {
            double v = c.combine ? base : 0.0;
            for (int64_t k = c.ptr[l]; k < c.ptr[l + 1]; k++) {
                int64_t f = c.ef[k];
                int64_t a = c.elo[k] > lo[f] ? c.elo[k] : lo[f];
                int64_t b = c.ehi[k] < hi[f] ? c.ehi[k] : hi[f];
                double cost;
                range_min(&c, f, a, b, &cost);
                if (c.combine) v = fmax(v, cost);
                else v += cost - m[f];
            }
            e[l] = c.combine ? v : base + v;
            if (isfinite(e[l])) { items[n_items].e = e[l]; items[n_items].i = l; n_items++; }
        }
        qsort(items, (size_t)n_items, sizeof(Item), by_e);
        bound = base;
        for (int q = 0; q < c.K && isfinite(bound); q++) {
            double r = radius(&c, q, items, n_items, tmax, seen);
            if (r > bound) bound = r;
        }
        holds = 1;
        for (int q = 0; q < c.K && holds; q++) {     /* the scores of the leaves holding p */
            const double *sc = c.scores + c.nsoff[q];
            double total = 0.0, need = c.nval[q];
            for (int64_t l = c.nstart[q]; l < c.nstart[q] + c.nlen[q]; l++) {
                int in = 1;
                for (int64_t k = c.ptr[l]; k < c.ptr[l + 1] && in; k++)
                    if (p[c.ef[k]] < c.elo[k] || p[c.ef[k]] > c.ehi[k]) in = 0;
                if (in) total += sc[l - c.nstart[q]];
            }
            if (!(total >= need - 1e-12 * fmax(1.0, fabs(need)))) holds = 0;
        }
    }
    free(m); free(items); free(tmax); free(seen);
    Py_END_ALLOW_THREADS
    release(&c);
    if (nomem) return PyErr_NoMemory();
    return Py_BuildValue("(ddi)", bound, base, holds);
}

static PyObject *py_split(PyObject *self, PyObject *args) {
    (void)self;
    Ctx c;
    const int64_t *lo, *hi;
    if (PyTuple_GET_SIZE(args) != N_STATIC + 6) {
        PyErr_SetString(PyExc_TypeError, "split takes the static arrays, combine, lo, hi, p, e, bound");
        return NULL;
    }
    if (open_node(&c, args, 5, &lo, &hi) < 0 || take(&c, PyTuple_GET_ITEM(args, N_STATIC + 3), 0, 'q') < 0 ||
        take(&c, PyTuple_GET_ITEM(args, N_STATIC + 4), 0, 'd') < 0) { release(&c); return NULL; }
    double bound = PyFloat_AsDouble(PyTuple_GET_ITEM(args, N_STATIC + 5));
    if (bound == -1.0 && PyErr_Occurred()) { release(&c); return NULL; }
    if (len_of(&c, N_STATIC + 2) != c.d || len_of(&c, N_STATIC + 3) != c.L) {
        release(&c);
        PyErr_SetString(PyExc_ValueError, "p needs one entry per feature and e one per leaf");
        return NULL;
    }
    const int64_t *p = c.b[N_STATIC + 2].buf;
    const double *e = c.b[N_STATIC + 3].buf;
    for (Py_ssize_t j = 0; j < c.d; j++)
        if (p[j] < 0 || p[j] >= c.size[j]) {
            release(&c);
            PyErr_SetString(PyExc_ValueError, "p outside the grid");
            return NULL;
        }
    int64_t out_j = -1, out_s = -1;
    int nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    unsigned char *at_p = malloc((size_t)(c.L > 0 ? c.L : 1));
    int64_t *best = malloc(sizeof(int64_t) * (size_t)(c.T > 0 ? c.T : 1));
    int64_t *pleaf = malloc(sizeof(int64_t) * (size_t)(c.T > 0 ? c.T : 1));
    double *w = calloc((size_t)(2 * (c.d > 0 ? c.d : 1)), sizeof(double));
    int64_t *near = malloc(sizeof(int64_t) * (size_t)(2 * (c.d > 0 ? c.d : 1)));
    if (!at_p || !best || !pleaf || !w || !near) nomem = 1;
    for (Py_ssize_t k = 0; k < 2 * c.d && !nomem; k++) near[k] = -1;
    double lim = bound * (1 + REL_TOL) + 1e-15;
    for (Py_ssize_t l = 0; l < c.L && !nomem; l++) {
        at_p[l] = 1;
        for (int64_t k = c.ptr[l]; k < c.ptr[l + 1]; k++) {
            int64_t v = p[c.ef[k]];
            if (v < c.elo[k] || v > c.ehi[k]) { at_p[l] = 0; break; }
        }
    }
    int any = 0;
    for (int q = 0; q < c.K && !nomem; q++) {
        int64_t a = c.nstart[q], n = c.nlen[q];
        if (n == 0) continue;
        const double *sc = c.scores + c.nsoff[q];
        int64_t t0 = c.tree[a], t1 = c.tree[a + n - 1];
        for (int64_t t = t0; t <= t1; t++) { best[t] = -1; pleaf[t] = -1; }
        for (int64_t l = a; l < a + n; l++) {
            int64_t t = c.tree[l];
            if (at_p[l] && pleaf[t] < 0) pleaf[t] = l;
            if (isfinite(e[l]) && e[l] <= lim && (best[t] < 0 || sc[l - a] > sc[best[t] - a])) best[t] = l;
        }
        for (int64_t t = t0; t <= t1; t++) {
            int64_t l = best[t], pl = pleaf[t];
            if (l < 0 || l == pl) continue;
            double gain = sc[l - a] - (pl >= 0 ? sc[pl - a] : 0.0);
            if (!(gain > 0)) continue;
            for (int64_t k = c.ptr[l]; k < c.ptr[l + 1]; k++) {
                int64_t j = c.ef[k], s, side;
                if (p[j] < c.elo[k]) { s = c.elo[k] > lo[j] ? c.elo[k] : lo[j]; side = 1; }
                else if (p[j] > c.ehi[k]) { s = (c.ehi[k] < hi[j] ? c.ehi[k] : hi[j]) + 1; side = 0; }
                else continue;
                if (!(lo[j] < s && s <= hi[j])) continue;
                int64_t slot = 2 * j + side;
                if (near[slot] < 0 || (side == 1 ? s < near[slot] : s > near[slot])) near[slot] = s;
                w[slot] += gain;
                any = 1;
            }
        }
    }
    if (!nomem && any) {
        Py_ssize_t top = -1;
        for (Py_ssize_t k = 0; k < 2 * c.d; k++)
            if (w[k] > 0 && (top < 0 || w[k] > w[top])) top = k;
        if (top >= 0) { out_j = top / 2; out_s = near[top]; }
    }
    if (!nomem && out_j < 0) {      /* a tie at p: split at any leaf bound inside the box */
        for (Py_ssize_t k = 0; k < c.nnz && out_j < 0; k++) {
            int64_t f = c.ef[k];
            if (c.elo[k] > lo[f] && c.elo[k] <= hi[f]) { out_j = f; out_s = c.elo[k]; }
        }
        for (Py_ssize_t k = 0; k < c.nnz && out_j < 0; k++) {
            int64_t f = c.ef[k];
            if (c.ehi[k] >= lo[f] && c.ehi[k] < hi[f]) { out_j = f; out_s = c.ehi[k] + 1; }
        }
    }
    free(at_p); free(best); free(pleaf); free(w); free(near);
    Py_END_ALLOW_THREADS
    release(&c);
    if (nomem) return PyErr_NoMemory();
    if (out_j < 0) Py_RETURN_NONE;
    return Py_BuildValue("(LL)", (long long)out_j, (long long)out_s);
}

static PyMethodDef methods[] = {
    {"check", py_check, METH_VARARGS, "Check the box-search arrays once per problem."},
    {"evaluate", py_evaluate, METH_VARARGS, "Bound, cheapest cells and per-leaf costs of a box."},
    {"split", py_split, METH_VARARGS, "The (feature, level) a box is split at, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_boxsearch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__boxsearch(void) { return PyModule_Create(&module); }
