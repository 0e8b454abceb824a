/* Compiled tree traversal for core.model (optional: a numpy fallback exists).
 *
 * nodes: packed records of all trees, {float64 threshold; int32 feature; int32 left},
 *   16 bytes each, laid out tree by tree in breadth-first order so that the two
 *   children of a node are adjacent: right = left + 1. feature == -1 marks a leaf.
 * roots: int64 index of each tree's root in nodes.
 * bits: uint64 words of the categorical splits' left sets, each set as its number of
 *   words followed by the words.
 * Rule: go left iff x[feature] <= threshold (x float64); a missing value (NaN) goes left
 *   unless the feature has the bit NAN_RIGHT (1 << 30) set, then right. A categorical split has
 *   feature = -(j + 2) for feature j and, as threshold, the offset of its set in
 *   bits: go left iff bit x[j] is set (x[j] an integer code; a code beyond the
 *   set's words is not in it).
 *
 * apply(X, nodes, roots, bits, out, d, start, stop)
 *     out[i, t] = index in nodes of the leaf reached by row i in tree t (int64, n x T)
 * accumulate(X, nodes, roots, bits, value, n_outputs, out, d, start, stop)
 *     out[i, k] += sum_t value[leaf(i, t), k]                         (float64, n x K)
 * breadth_first(left, right, inner, roots, order) -> (count, depth)
 *     the order of the nodes in those records (see py_breadth_first)
 * Rows are processed in blocks so that one tree's nodes and a block of rows stay
 * in cache together, and within a block eight rows walk a tree together (each row's walk
 * waits on every node it loads; eight independent walks overlap). Both release the GIL, so
 * Python threads can split the rows.
 *
 * What they are handed is checked, so that a wrong buffer is a ValueError, never a
 * wrong answer or a read or write outside memory (scikit-learn's typed memoryviews
 * do the same): X float64, 2-D, C-contiguous, d columns, 0 <= start <= stop <= rows;
 * nodes 1-D records of 16 bytes; roots int64 in range; bits uint64; value float64
 * with n_outputs values per node; out int64 (n, T) / float64 (n, n_outputs),
 * C-contiguous and writable. During the walk every step is bounds-checked (a child
 * after its parent and inside nodes, a feature below d, a category set inside
 * bits, a code that is a whole number >= 0), a bad node array stopping the walk
 * with a ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct { double thr; int32_t feat; int32_t left; } Node;

#define BLOCK 64
#define LANES 8         /* rows walked together through one tree */
#define NAN_RIGHT 0x40000000

/* The element kind of a buffer's struct-module format ('f' float, 'i' signed, 'u'
 * unsigned, 0 otherwise), its byte-order prefix checked (native little-endian only). */
static char kind_of(const char *fmt) {
    if (fmt == NULL) return 'u';                      /* no format requested: bytes */
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

/* Get a C-contiguous buffer and check its element kind and size and its ndim (0: any). */
static int get_buffer(PyObject *o, Py_buffer *b, const char *name, char kind, Py_ssize_t itemsize, int ndim,
                      int writable) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be a C-contiguous%s array", name, writable ? ", writable" : "");
        return -1;
    }
    int ok = b->itemsize == itemsize && (ndim == 0 || b->ndim == ndim);
    if (ok && kind != 0) ok = kind_of(b->format) == kind;      /* kind 0: records, their size alone */
    if (!ok) {
        if (kind == 0)
            PyErr_Format(PyExc_ValueError, "%s must be a %d-D array of %zd-byte records (got %d-D, %zd bytes each)",
                         name, ndim, itemsize, b->ndim, b->itemsize);
        else
            PyErr_Format(PyExc_ValueError, "%s must be a %d-D array of %s%d (got %d-D, format '%s', %zd bytes each)",
                         name, ndim, kind == 'f' ? "float" : kind == 'i' ? "int" : "uint", (int)(8 * itemsize),
                         b->ndim, b->format ? b->format : "B", b->itemsize);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* One step from an internal node: the child a row x goes to; -1 on a bad node, code or word. */
static inline int64_t step(const double *x, const Node *nodes, Py_ssize_t n_nodes, const uint64_t *bits,
                           Py_ssize_t n_bits, Py_ssize_t d, int64_t node) {
    const Node *nd = nodes + node;
    int64_t next;
    if (nd->feat >= 0) {
        int32_t j = nd->feat & ~NAN_RIGHT;
        if (j >= d) return -1;
        double v = x[j];
        next = (int64_t)nd->left + ((nd->feat & NAN_RIGHT) ? !(v <= nd->thr) : (v > nd->thr));
    } else {
        int64_t j = -(int64_t)nd->feat - 2;
        if (j >= d) return -1;
        double v = x[j], off = nd->thr;
        if (!(v >= 0.0 && v < 9.0e18) || v != (double)(int64_t)v || !(off >= 0.0) || off >= (double)n_bits)
            return -1;
        int64_t code = (int64_t)v, o = (int64_t)off;
        uint64_t count = bits[o];                          /* the split's words follow their count */
        if (count > (uint64_t)(n_bits - o - 1)) return -1;
        int64_t w = code >> 6;
        int held = (uint64_t)w < count && ((bits[o + 1 + w] >> (code & 63)) & 1u);
        next = (int64_t)nd->left + !held;
    }
    if (nd->left <= node || (int64_t)nd->left + 1 >= n_nodes) return -1;   /* children after parents */
    return next;
}

/* Walk the m rows x, x + d, .. (m <= LANES) from root together: their steps depend on nothing of
 * each other's, so the processor overlaps them (one row's walk waits on each node it loads). out[k]
 * is the leaf row k reaches; 0, or -1 on a bad node, code or word. */
static inline int walk_lanes(const double *x, Py_ssize_t m, const Node *nodes, Py_ssize_t n_nodes,
                             const uint64_t *bits, Py_ssize_t n_bits, Py_ssize_t d, int64_t root, int64_t *out) {
    int moving = 1;
    for (Py_ssize_t k = 0; k < m; k++) out[k] = root;
    while (moving) {
        moving = 0;
        for (Py_ssize_t k = 0; k < m; k++) {
            if (nodes[out[k]].feat == -1) continue;
            out[k] = step(x + k * d, nodes, n_nodes, bits, n_bits, d, out[k]);
            if (out[k] < 0) return -1;
            moving = 1;
        }
    }
    return 0;
}

static PyObject *run(PyObject *args, int mode) {
    PyObject *oX, *onodes, *oroots, *obits, *oval = NULL, *oout;
    Py_ssize_t start, stop, n_out = 1, d;
    Py_buffer bufs[6];
    int nb = 0, ok = 1;
    if (mode == 0) {
        if (!PyArg_ParseTuple(args, "OOOOOnnn", &oX, &onodes, &oroots, &obits, &oout, &d, &start, &stop))
            return NULL;
    } else {
        if (!PyArg_ParseTuple(args, "OOOOOnOnnn", &oX, &onodes, &oroots, &obits, &oval, &n_out, &oout, &d,
                              &start, &stop))
            return NULL;
    }
    if (get_buffer(oX, &bufs[nb], "X", 'f', 8, 2, 0) == 0) nb++; else ok = 0;
    if (ok && get_buffer(onodes, &bufs[nb], "nodes", 0, (Py_ssize_t)sizeof(Node), 1, 0) == 0) nb++; else ok = 0;
    if (ok && get_buffer(oroots, &bufs[nb], "roots", 'i', 8, 1, 0) == 0) nb++; else ok = 0;
    if (ok && get_buffer(obits, &bufs[nb], "bits", 'u', 8, 1, 0) == 0) nb++; else ok = 0;
    if (ok && get_buffer(oout, &bufs[nb], "out", mode == 0 ? 'i' : 'f', 8, 2, 1) == 0) nb++; else ok = 0;
    if (ok && mode == 1 && get_buffer(oval, &bufs[nb], "value", 'f', 8, 0, 0) == 0) nb++; else ok = ok && mode == 0;
    Py_ssize_t n_rows = 0, n_nodes = 0, n_trees = 0, n_bits = 0;
    if (ok) {
        n_rows = bufs[0].shape[0];
        n_nodes = bufs[1].shape[0];
        n_trees = bufs[2].shape[0];
        n_bits = bufs[3].shape[0];
        const char *why = NULL;
        if (d < 0 || bufs[0].shape[1] != d) why = "X does not have d columns";
        else if (start < 0 || start > stop || stop > n_rows) why = "the rows start..stop are not inside X";
        else if (n_out < 1) why = "n_outputs must be at least 1";
        else if (bufs[4].shape[0] != n_rows || bufs[4].shape[1] != (mode == 0 ? n_trees : n_out))
            why = mode == 0 ? "out must have the shape (rows of X, trees)" : "out must have the shape (rows of X, n_outputs)";
        else if (mode == 1 && bufs[5].len / 8 != n_nodes * n_out) why = "value must hold n_outputs values per node";
        if (why == NULL) {
            const int64_t *roots = (const int64_t *)bufs[2].buf;
            for (Py_ssize_t t = 0; t < n_trees; t++)
                if (roots[t] < 0 || roots[t] >= n_nodes) { why = "a root is outside the nodes"; break; }
        }
        if (why != NULL) { PyErr_SetString(PyExc_ValueError, why); ok = 0; }
    }
    if (!ok) { for (int k = 0; k < nb; k++) PyBuffer_Release(&bufs[k]); return NULL; }
    const double *x = (const double *)bufs[0].buf;
    const Node *nodes = (const Node *)bufs[1].buf;
    const int64_t *roots = (const int64_t *)bufs[2].buf;
    const uint64_t *bits = (const uint64_t *)bufs[3].buf;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b0 = start; b0 < stop && !bad; b0 += BLOCK) {
        Py_ssize_t b1 = b0 + BLOCK < stop ? b0 + BLOCK : stop;
        for (Py_ssize_t t = 0; t < n_trees && !bad; t++) {
            int64_t root = roots[t], leaf[LANES];
            for (Py_ssize_t i0 = b0; i0 < b1 && !bad; i0 += LANES) {
                Py_ssize_t m = b1 - i0 < LANES ? b1 - i0 : LANES;
                if (walk_lanes(x + i0 * d, m, nodes, n_nodes, bits, n_bits, d, root, leaf) < 0) { bad = 1; break; }
                for (Py_ssize_t r = 0; r < m; r++) {
                    Py_ssize_t i = i0 + r;
                    if (mode == 0) {
                        ((int64_t *)bufs[4].buf)[i * n_trees + t] = leaf[r];
                    } else {
                        const double *v = (const double *)bufs[5].buf + leaf[r] * n_out;
                        double *oi = (double *)bufs[4].buf + i * n_out;
                        for (Py_ssize_t k = 0; k < n_out; k++) oi[k] += v[k];
                    }
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    for (int k = 0; k < nb; k++) PyBuffer_Release(&bufs[k]);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "the node array is damaged (a child, feature or category word out of range) "
                                          "or a categorical code is not a whole number >= 0");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *py_apply(PyObject *self, PyObject *args) { (void)self; return run(args, 0); }
static PyObject *py_accumulate(PyObject *self, PyObject *args) { (void)self; return run(args, 1); }

/* breadth_first(left, right, inner, roots, order) -> (count, depth)
 * Every tree from its root (roots, int64), one after the other, each breadth first with a node's two
 * children side by side (left, right: int64 node indices, followed at inner nodes, bool): the nodes
 * in that order into order (int64, one per node); count: how many were reached, depth: the deepest
 * tree's. A child out of range, or more nodes reached than there are, is a ValueError. */
static PyObject *py_breadth_first(PyObject *self, PyObject *args) {
    PyObject *o[5];
    Py_buffer b[5];
    int got = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    static const char *names[5] = {"left", "right", "inner", "roots", "order"};
    static const char kinds[5] = {'i', 'i', 'u', 'i', 'i'};
    static const Py_ssize_t sizes[5] = {8, 8, 1, 8, 8};
    for (; got < 5; got++)
        if (get_buffer(o[got], &b[got], names[got], kinds[got], sizes[got], 1, got == 4) < 0) break;
    Py_ssize_t n = got == 5 ? b[0].shape[0] : 0, trees = got == 5 ? b[3].shape[0] : 0, count = 0, depth = 0;
    int bad = got < 5 || b[1].shape[0] != n || b[2].shape[0] != n || b[4].shape[0] != n;
    if (got == 5 && bad) PyErr_SetString(PyExc_ValueError, "left, right, inner and order must have one entry per node");
    int64_t *level = bad ? NULL : PyMem_Malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!bad && level == NULL) {
        PyErr_NoMemory();
        bad = 1;
    }
    if (!bad) {
        const int64_t *left = b[0].buf, *right = b[1].buf, *roots = b[3].buf;
        const uint8_t *inner = b[2].buf;
        int64_t *order = b[4].buf;
        for (Py_ssize_t t = 0; t < trees && !bad; t++) {
            Py_ssize_t head = count;
            if (roots[t] < 0 || roots[t] >= n || count >= n) {
                bad = 1;
                break;
            }
            level[count] = 0;
            order[count++] = roots[t];
            for (; head < count; head++) {                 /* a queue: the tree's nodes as reached */
                int64_t u = order[head];
                if (!inner[u]) continue;
                if (left[u] < 0 || left[u] >= n || right[u] < 0 || right[u] >= n || count + 2 > n) {
                    bad = 1;
                    break;
                }
                level[count] = level[count + 1] = level[head] + 1;
                if (level[head] + 1 > depth) depth = level[head] + 1;
                order[count++] = left[u];
                order[count++] = right[u];
            }
        }
        if (bad) PyErr_SetString(PyExc_ValueError, "breadth_first: a child out of range, or a node reached twice");
        PyMem_Free(level);
    }
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    if (bad) return NULL;
    return Py_BuildValue("nn", count, depth);
}

static PyMethodDef methods[] = {
    {"apply", py_apply, METH_VARARGS, "Packed leaf index per row and tree."},
    {"breadth_first", py_breadth_first, METH_VARARGS, "Every tree's nodes breadth first: (count, depth)."},
    {"accumulate", py_accumulate, METH_VARARGS, "Add the reached leaf values of all trees."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_treewalk", "Compiled tree traversal.", -1, methods};

PyMODINIT_FUNC PyInit__treewalk(void) { return PyModule_Create(&module); }
