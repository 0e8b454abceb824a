/* Compiled tree traversal for core.model (optional: a numpy fallback exists).
 *
 * nodes: packed records of all trees, {float64 threshold; int32 feature; int32 left},
 *   16 bytes each, laid out tree by tree in breadth-first order so that the two
 *   children of a node are adjacent: right = left + 1. feature == -1 marks a leaf.
 * roots: int64 index of each tree's root in nodes.
 * bits: uint64 words of the categorical splits' left sets.
 * Rule: go left iff x[feature] <= threshold (x float64). A categorical split has
 *   feature = -(j + 2) for feature j and, as threshold, the offset of its words in
 *   bits: go left iff bit x[j] is set (x[j] an integer code, checked by the caller).
 *
 * apply(X, nodes, roots, bits, out, d, start, stop)
 *     out[i, t] = index in nodes of the leaf reached by row i in tree t (int64, n x T)
 * accumulate(X, nodes, roots, bits, value, n_outputs, out, d, start, stop)
 *     out[i, k] += sum_t value[leaf(i, t), k]                         (float64, n x K)
 * Rows are processed in blocks so that one tree's nodes and a block of rows stay
 * in cache together. Both release the GIL, so Python threads can split the rows.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct { double thr; int32_t feat; int32_t left; } Node;

#define BLOCK 64

static inline int64_t walk(const double *x, const Node *nodes, const uint64_t *bits, int64_t node) {
    const Node *nd = nodes + node;
    while (nd->feat != -1) {
        if (nd->feat >= 0) {
            node = nd->left + (x[nd->feat] > nd->thr);
        } else {
            int64_t code = (int64_t)x[-nd->feat - 2];
            const uint64_t *w = bits + (int64_t)nd->thr;
            node = nd->left + !((w[code >> 6] >> (code & 63)) & 1u);
        }
        nd = nodes + node;
    }
    return node;
}

static PyObject *run(PyObject *args, int mode) {
    PyObject *oX, *onodes, *oroots, *obits, *oval = NULL, *oout;
    Py_ssize_t start, stop, n_out = 0, d;
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
    PyObject *objs[6] = {oX, onodes, oroots, oout, obits, oval};
    int n_objs = mode == 0 ? 5 : 6;
    for (int k = 0; k < n_objs; k++) {
        if (PyObject_GetBuffer(objs[k], &bufs[k], PyBUF_C_CONTIGUOUS | (k == 3 ? PyBUF_WRITABLE : 0))) { ok = 0; break; }
        nb++;
    }
    if (ok && (bufs[1].len % (Py_ssize_t)sizeof(Node) != 0)) {
        PyErr_SetString(PyExc_ValueError, "nodes buffer is not a whole number of 16-byte records");
        ok = 0;
    }
    if (!ok) { for (int k = 0; k < nb; k++) PyBuffer_Release(&bufs[k]); return NULL; }
    const double *x = (const double *)bufs[0].buf;
    const Node *nodes = (const Node *)bufs[1].buf;
    const int64_t *roots = (const int64_t *)bufs[2].buf;
    const uint64_t *bits = (const uint64_t *)bufs[4].buf;
    Py_ssize_t n_trees = bufs[2].len / (Py_ssize_t)sizeof(int64_t);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b0 = start; b0 < stop; b0 += BLOCK) {
        Py_ssize_t b1 = b0 + BLOCK < stop ? b0 + BLOCK : stop;
        for (Py_ssize_t t = 0; t < n_trees; t++) {
            int64_t root = roots[t];
            if (mode == 0) {
                int64_t *out = (int64_t *)bufs[3].buf;
                for (Py_ssize_t i = b0; i < b1; i++) out[i * n_trees + t] = walk(x + i * d, nodes, bits, root);
            } else {
                double *out = (double *)bufs[3].buf;
                const double *val = (const double *)bufs[5].buf;
                if (n_out == 1) {
                    for (Py_ssize_t i = b0; i < b1; i++) out[i] += val[walk(x + i * d, nodes, bits, root)];
                } else {
                    for (Py_ssize_t i = b0; i < b1; i++) {
                        const double *v = val + walk(x + i * d, nodes, bits, root) * n_out;
                        double *oi = out + i * n_out;
                        for (Py_ssize_t k = 0; k < n_out; k++) oi[k] += v[k];
                    }
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    for (int k = 0; k < nb; k++) PyBuffer_Release(&bufs[k]);
    Py_RETURN_NONE;
}

static PyObject *py_apply(PyObject *self, PyObject *args) { (void)self; return run(args, 0); }
static PyObject *py_accumulate(PyObject *self, PyObject *args) { (void)self; return run(args, 1); }

static PyMethodDef methods[] = {
    {"apply", py_apply, METH_VARARGS, "Packed leaf index per row and tree."},
    {"accumulate", py_accumulate, METH_VARARGS, "Add the reached leaf values of all trees."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_treewalk", "Compiled tree traversal.", -1, methods};

PyMODINIT_FUNC PyInit__treewalk(void) { return PyModule_Create(&module); }
