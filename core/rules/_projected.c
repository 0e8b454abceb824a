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
 *
 * What it is handed is checked, so that a wrong buffer is a ValueError, never a
 * wrong answer or a read or write outside memory: dtypes (int32 cl, cr, feat;
 * float64 thr, x, X, weights; int64 roots, cnt, pos; uint8 free, ybool; uint64
 * leftbits, valid, ybits), C-contiguity, shapes (free (M, d), X (n, d), cnt and
 * pos (M, T), leftbits n_nodes * W words, W * 64 >= n), writability of the
 * outputs, roots inside the nodes, children after their parent inside the nodes
 * and each node reached once (so every walk ends and its stack holds), features
 * below d, valid without a bit past row n; every allocation is checked.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The element kind of a buffer's struct-module format ('f' float, 'i' signed, 'u'
 * unsigned, 0 otherwise), its byte-order prefix checked (native little-endian only). */
static char kind_of(const char *fmt) {
    if (fmt == NULL) return 'u';
    if (*fmt == '@' || *fmt == '=' || *fmt == '<') fmt++;
    else if (*fmt == '>' || *fmt == '!') return 0;
    if (fmt[0] == '\0' || fmt[1] != '\0') return 0;
    switch (fmt[0]) {
        case 'd': case 'f': case 'e': return 'f';
        case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': return 'i';
        case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': case '?': return 'u';
        default: return 0;
    }
}

/* A C-contiguous buffer of the given element kind and size, ndim (0: any) and
 * number of elements (-1: any), writable when asked. */
static int get(PyObject *o, Py_buffer *b, const char *name, char kind, Py_ssize_t itemsize, int ndim,
               Py_ssize_t count, int writable) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be a C-contiguous%s array", name, writable ? ", writable" : "");
        return -1;
    }
    if (b->itemsize != itemsize || kind_of(b->format) != kind || (ndim && b->ndim != ndim)) {
        PyErr_Format(PyExc_ValueError, "%s must be a %s array of %s%d (got %d-D, format '%s', %zd bytes each)",
                     name, ndim == 2 ? "2-D" : ndim == 1 ? "1-D" : "C-contiguous",
                     kind == 'f' ? "float" : kind == 'i' ? "int" : "uint", (int)(8 * itemsize), b->ndim,
                     b->format ? b->format : "B", b->itemsize);
        PyBuffer_Release(b);
        return -1;
    }
    if (count >= 0 && b->len / itemsize != count) {
        PyErr_Format(PyExc_ValueError, "%s has %zd elements, expected %zd", name, b->len / itemsize, count);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static PyObject *py_counts(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[15];
    Py_ssize_t d, W;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOnn", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &d, &W))
        return NULL;
    if (d < 1 || W < 1) {
        PyErr_SetString(PyExc_ValueError, "d and W must be at least 1");
        return NULL;
    }
    Py_buffer b[15];
    int nb = 0;
    int has_w = o[14] != Py_None;
    Py_ssize_t n_nodes = -1, T = -1, M = -1, n = -1;
#define GET(k, name, kind, size, ndim, count, wr) \
    if (get(o[k], &b[k], name, kind, size, ndim, count, wr) < 0) goto fail; \
    nb = k + 1;
    GET(0, "cl", 'i', 4, 1, -1, 0)
    n_nodes = b[0].shape[0];
    GET(1, "cr", 'i', 4, 1, n_nodes, 0)
    GET(2, "feat", 'i', 4, 1, n_nodes, 0)
    GET(3, "thr", 'f', 8, 1, n_nodes, 0)
    GET(4, "roots", 'i', 8, 1, -1, 0)
    T = b[4].shape[0];
    GET(5, "x", 'f', 8, 1, d, 0)
    GET(6, "free", 'u', 1, 2, -1, 0)
    M = b[6].shape[0];
    GET(7, "X", 'f', 8, 2, -1, 0)
    n = b[7].shape[0];
    GET(8, "ybool", 'u', 1, 1, n, 0)
    GET(9, "leftbits", 'u', 8, 0, n_nodes * W, 0)
    GET(10, "valid", 'u', 8, 1, W, 0)
    GET(11, "ybits", 'u', 8, 1, W, 0)
    GET(12, "cnt", 'i', 8, 2, M * T, 1)
    GET(13, "pos", 'i', 8, 2, M * T, 1)
    if (has_w) { GET(14, "weights", 'f', 8, 1, n, 1) }
#undef GET
    {
        const char *why = NULL;
        if (b[6].shape[1] != d) why = "free must have d columns";
        else if (b[7].shape[1] != d) why = "X must have d columns";
        else if (b[12].shape[0] != M || b[12].shape[1] != T || b[13].shape[0] != M || b[13].shape[1] != T)
            why = "cnt and pos must have the shape (subsets, trees)";
        else if (W * 64 < n) why = "W words do not hold a bit per row";
        const int32_t *cl = b[0].buf, *cr = b[1].buf, *feat = b[2].buf;
        const int64_t *roots = b[4].buf;
        const uint64_t *valid = b[10].buf;
        for (Py_ssize_t t = 0; why == NULL && t < T; t++)
            if (roots[t] < 0 || roots[t] >= n_nodes) why = "a root is outside the nodes";
        uint8_t *reached = why == NULL ? calloc((size_t)n_nodes + 1, 1) : NULL;
        if (why == NULL && reached == NULL) { PyErr_NoMemory(); goto fail; }
        for (Py_ssize_t v = 0; why == NULL && v < n_nodes; v++) {   /* trees: children after parents, once */
            if (feat[v] < 0) continue;
            if (feat[v] >= d) why = "a split's feature is not below d";
            else if (cl[v] <= v || cl[v] >= n_nodes || cr[v] <= v || cr[v] >= n_nodes)
                why = "a child is not after its parent inside the nodes";
            else if (reached[cl[v]]++ || reached[cr[v]]++ || cl[v] == cr[v]) why = "a node is reached twice";
        }
        free(reached);
        for (Py_ssize_t k = n / 64; why == NULL && k < W; k++) {       /* no row past n */
            uint64_t past = (k == n / 64 && n % 64) ? ~((UINT64_C(1) << (n % 64)) - 1) : ~UINT64_C(0);
            if (valid[k] & past) why = "valid marks a row past the rows of X";
        }
        if (why != NULL) { PyErr_SetString(PyExc_ValueError, why); goto fail; }
    }
    {
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
        int bad = 0, no_memory = 0;
        Py_BEGIN_ALLOW_THREADS
        uint64_t *acc = malloc(sizeof(uint64_t) * (size_t)W);
        int64_t *list = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
        int64_t *stack = malloc(sizeof(int64_t) * (size_t)(n_nodes + 1));
        if (acc == NULL || list == NULL || stack == NULL) no_memory = 1;
        for (Py_ssize_t m = 0; m < M && !no_memory && !bad; m++) {
            const uint8_t *fr = freem + m * d;
            for (Py_ssize_t t = 0; t < T && !bad; t++) {
                memcpy(acc, valid, sizeof(uint64_t) * W);
                int64_t count = n, len = -1;     /* len < 0: bitset mode */
                int64_t sp = 0;
                stack[sp++] = roots[t];
                while (sp > 0 && count > 0) {
                    int64_t v = stack[--sp];
                    int32_t f = feat[v];
                    if (f < 0) continue;
                    int left = x[f] <= thr[v];
                    if (fr[f]) {
                        if (sp + 2 > n_nodes + 1) { bad = 1; break; }
                        stack[sp++] = cl[v]; stack[sp++] = cr[v];
                        continue;
                    }
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
                                    list[len++] = (int64_t)k * 64 + bit;   /* acc within valid: < n rows */
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
                if (count > 0 && !bad) {
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
        if (no_memory) { PyErr_NoMemory(); goto fail; }
        if (bad) {
            PyErr_SetString(PyExc_ValueError, "the walk outgrew its stack (the node arrays are not trees)");
            goto fail;
        }
    }
    for (int i = 0; i < nb; i++) PyBuffer_Release(&b[i]);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < nb; i++) PyBuffer_Release(&b[i]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"counts", py_counts, METH_VARARGS, "Projected-forest cell sizes (and target counts) per subset and tree."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_projected", NULL, -1, methods};

PyMODINIT_FUNC PyInit__projected(void) { return PyModule_Create(&module); }
