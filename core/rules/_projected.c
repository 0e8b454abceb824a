/* Projected-forest cells for core.rules (optional: rules.py has a numpy version).
 *
 * counts(cl, cr, feat, thr, roots, x, free, X, ybool, leftbits, valid, ybits,
 *        cnt, pos, weights, d, W)
 *
 * Trees as parallel node arrays concatenated over trees (children are global
 * indices, feat < 0 marks a leaf), roots[t] the root of tree t. For subset m
 * (free[m, j] = 1 when feature j is free) and tree t, x is dropped down the
 * tree: at a split on a free feature both children are explored, otherwise
 * only x's side, and the training rows that go the other way are removed from
 * the cell (left iff value <= threshold). The cell is the rows agreeing with x
 * at every explored split on a fixed feature (the Projected Forest).
 *   cnt[m, t] = rows in the cell; pos[m, t] = rows in the cell with ybool = 1.
 * weights (float64, n, or None): when given (one subset), weights[i] += 1/cnt
 * for every row of every non-empty cell.
 * The cell starts as a bitset over the rows (leftbits[node] has bit i set when
 * row i goes left at node; valid marks the n real rows) and becomes a list of
 * row indices once small, filtered with X (n x d, row-major) from then on.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int get(PyObject *o, Py_buffer *b, int writable) {
    return PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0));
}

static PyObject *py_counts(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[15];
    Py_ssize_t d, W;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOnn", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &d, &W))
        return NULL;
    Py_buffer b[15];
    int nb = 0, ok = 1;
    int has_w = o[14] != Py_None;
    int n_buf = has_w ? 15 : 14;
    for (; nb < n_buf; nb++) {
        if (get(o[nb], &b[nb], nb >= 12) < 0) { ok = 0; break; }
    }
    if (ok) {
        const int32_t *cl = b[0].buf, *cr = b[1].buf, *feat = b[2].buf;
        const double *thr = b[3].buf;
        const int64_t *roots = b[4].buf;
        const double *x = b[5].buf;
        const uint8_t *freem = b[6].buf;
        const double *X = b[7].buf;
        const uint8_t *ybool = b[8].buf;
        const uint64_t *leftbits = b[9].buf, *valid = b[10].buf, *ybits = b[11].buf;
        int64_t *cnt = b[12].buf, *pos = b[13].buf;
        double *w = has_w ? b[14].buf : NULL;
        Py_ssize_t T = b[4].len / (Py_ssize_t)sizeof(int64_t);
        Py_ssize_t M = d > 0 ? b[6].len / d : 0;
        Py_ssize_t n_nodes = b[0].len / (Py_ssize_t)sizeof(int32_t);
        Py_ssize_t n = b[8].len;
        Py_BEGIN_ALLOW_THREADS
        uint64_t *acc = malloc(sizeof(uint64_t) * (W > 0 ? W : 1));
        int64_t *list = malloc(sizeof(int64_t) * (n > 0 ? n : 1));
        int64_t *stack = malloc(sizeof(int64_t) * (n_nodes + 1));
        for (Py_ssize_t m = 0; m < M; m++) {
            const uint8_t *fr = freem + m * d;
            for (Py_ssize_t t = 0; t < T; t++) {
                memcpy(acc, valid, sizeof(uint64_t) * W);
                int64_t count = n, len = -1;     /* len < 0: bitset mode */
                int64_t sp = 0;
                stack[sp++] = roots[t];
                while (sp > 0 && count > 0) {
                    int64_t v = stack[--sp];
                    int32_t f = feat[v];
                    if (f < 0) continue;
                    int left = x[f] <= thr[v];
                    if (fr[f]) { stack[sp++] = cl[v]; stack[sp++] = cr[v]; continue; }
                    if (len < 0) {
                        const uint64_t *lb = leftbits + (Py_ssize_t)v * W;
                        int64_t c = 0;
                        if (left) for (Py_ssize_t k = 0; k < W; k++) { acc[k] &= lb[k]; c += __builtin_popcountll(acc[k]); }
                        else for (Py_ssize_t k = 0; k < W; k++) { acc[k] &= ~lb[k]; c += __builtin_popcountll(acc[k]); }
                        count = c;
                        if (count > 0 && count * 2 <= W) {   /* switch to a list of rows */
                            len = 0;
                            for (Py_ssize_t k = 0; k < W; k++) {
                                uint64_t word = acc[k];
                                while (word) {
                                    int bit = __builtin_ctzll(word);
                                    list[len++] = (int64_t)k * 64 + bit;
                                    word &= word - 1;
                                }
                            }
                        }
                    } else {
                        int64_t k2 = 0;
                        double th = thr[v];
                        for (int64_t k = 0; k < len; k++) {
                            int64_t i = list[k];
                            if ((X[i * d + f] <= th) == left) list[k2++] = i;
                        }
                        len = k2;
                        count = len;
                    }
                    stack[sp++] = left ? cl[v] : cr[v];
                }
                int64_t p = 0;
                if (count > 0) {
                    if (len < 0) {
                        for (Py_ssize_t k = 0; k < W; k++) p += __builtin_popcountll(acc[k] & ybits[k]);
                        if (w) {
                            double inc = 1.0 / (double)count;
                            for (Py_ssize_t k = 0; k < W; k++) {
                                uint64_t word = acc[k];
                                while (word) { w[k * 64 + __builtin_ctzll(word)] += inc; word &= word - 1; }
                            }
                        }
                    } else {
                        for (int64_t k = 0; k < len; k++) p += ybool[list[k]];
                        if (w) { double inc = 1.0 / (double)count; for (int64_t k = 0; k < len; k++) w[list[k]] += inc; }
                    }
                }
                cnt[m * T + t] = count;
                pos[m * T + t] = p;
            }
        }
        free(acc); free(list); free(stack);
        Py_END_ALLOW_THREADS
    }
    for (int i = 0; i < nb; i++) PyBuffer_Release(&b[i]);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"counts", py_counts, METH_VARARGS, "Projected-forest cell sizes (and target counts) per subset and tree."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_projected", NULL, -1, methods};

PyMODINIT_FUNC PyInit__projected(void) { return PyModule_Create(&module); }
