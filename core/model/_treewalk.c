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
 * check_stacked(left, right, feature, threshold, counts, has_sets) -> k
 *     the first failing check of trees stacked one after the other (see py_check_stacked)
 * pack(order, left, feature, threshold, inner, missing_left, cat_node, nodes, pos)
 *     the records of the nodes in that order, and each node's place in them (see py_pack)
 * accumulate(..., seen) also sets seen[leaf] = 1 (uint8, one per node) for every leaf reached
 * cover(nodes, roots, bits, seen, codes, top, nan_ok, budget, kind, lo, hi) -> (rows, covered, dead, left, steps)
 *     rows that reach every leaf not seen, made one at a time (see py_cover)
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
#include <math.h>
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
    PyObject *oX, *onodes, *oroots, *obits, *oval = NULL, *oout, *oseen = Py_None;
    Py_ssize_t start, stop, n_out = 1, d;
    Py_buffer bufs[7];
    int nb = 0, ok = 1;
    if (mode == 0) {
        if (!PyArg_ParseTuple(args, "OOOOOnnn", &oX, &onodes, &oroots, &obits, &oout, &d, &start, &stop))
            return NULL;
    } else {
        if (!PyArg_ParseTuple(args, "OOOOOnOnnn|O", &oX, &onodes, &oroots, &obits, &oval, &n_out, &oout, &d,
                              &start, &stop, &oseen))
            return NULL;
    }
    int marks = oseen != Py_None;
    if (get_buffer(oX, &bufs[nb], "X", 'f', 8, 2, 0) == 0) nb++; else ok = 0;
    if (ok && get_buffer(onodes, &bufs[nb], "nodes", 0, (Py_ssize_t)sizeof(Node), 1, 0) == 0) nb++; else ok = 0;
    if (ok && get_buffer(oroots, &bufs[nb], "roots", 'i', 8, 1, 0) == 0) nb++; else ok = 0;
    if (ok && get_buffer(obits, &bufs[nb], "bits", 'u', 8, 1, 0) == 0) nb++; else ok = 0;
    if (ok && get_buffer(oout, &bufs[nb], "out", mode == 0 ? 'i' : 'f', 8, 2, 1) == 0) nb++; else ok = 0;
    if (ok && mode == 1 && get_buffer(oval, &bufs[nb], "value", 'f', 8, 0, 0) == 0) nb++; else ok = ok && mode == 0;
    if (ok && marks && get_buffer(oseen, &bufs[nb], "seen", 'u', 1, 1, 1) == 0) nb++; else ok = ok && !marks;
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
        else if (marks && bufs[6].shape[0] != n_nodes) why = "seen must hold one byte per node";
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
    uint8_t *seen = marks ? (uint8_t *)bufs[6].buf : NULL;
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
                        if (seen) seen[leaf[r]] = 1;
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

/* check_stacked(left, right, feature, threshold, counts, has_sets) -> k
 * Trees stacked one after the other (counts: int64, nodes each; left, right, feature: int32, threshold:
 * float64, one per node, each tree's children indexed within it), checked as core.model.tree.Tree
 * checks one: k = -1 when every tree holds; else the first failing tree's first failing check, of
 *   0 a node with exactly one child (left < 0 but not right, or the other way round);
 *   1 an inner node whose child's index is not larger than its own;
 *   2 an inner node whose child's index is not inside its tree;
 *   3 a node not reached exactly once from its tree's root (the root once, as no node's child);
 *   4 an inner node without a feature (feature < 0);
 *   5 an inner node with an infinite threshold;
 *   6 an inner node with no threshold (NaN) where no tree has category sets (has_sets false).
 * counts that do not add up to the nodes (or a count below 1) is a ValueError. */
static PyObject *py_check_stacked(PyObject *self, PyObject *args) {
    PyObject *o[5];
    Py_buffer b[5];
    int got = 0, has_sets = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOp", &o[0], &o[1], &o[2], &o[3], &o[4], &has_sets)) return NULL;
    static const char *names[5] = {"left", "right", "feature", "threshold", "counts"};
    static const char kinds[5] = {'i', 'i', 'i', 'f', 'i'};
    static const Py_ssize_t sizes[5] = {4, 4, 4, 8, 8};
    for (; got < 5; got++)
        if (get_buffer(o[got], &b[got], names[got], kinds[got], sizes[got], 1, 0) < 0) break;
    Py_ssize_t n = got == 5 ? b[0].shape[0] : 0, trees = got == 5 ? b[4].shape[0] : 0, biggest = 0, total = 0;
    int bad = got < 5, first = -1;
    if (!bad) {
        const int64_t *counts = b[4].buf;
        for (Py_ssize_t t = 0; t < trees && !bad; t++) {
            if (counts[t] < 1 || counts[t] > n - total) bad = 1;
            else { total += counts[t]; if (counts[t] > biggest) biggest = counts[t]; }
        }
        if (bad || total != n || b[1].shape[0] != n || b[2].shape[0] != n || b[3].shape[0] != n) {
            PyErr_SetString(PyExc_ValueError, "check_stacked: the counts must add up to the nodes, one entry per node");
            bad = 1;
        }
    }
    int32_t *reached = bad ? NULL : PyMem_Malloc(sizeof(int32_t) * (size_t)(biggest + 1));
    if (!bad && reached == NULL) {
        PyErr_NoMemory();
        bad = 1;
    }
    if (!bad) {
        const int32_t *left = b[0].buf, *right = b[1].buf, *feature = b[2].buf;
        const double *thr = b[3].buf;
        const int64_t *counts = b[4].buf;
        Py_ssize_t s = 0;
        for (Py_ssize_t t = 0; t < trees && first < 0; s += counts[t], t++) {
            int64_t m = counts[t];
            unsigned fail = 0;
            memset(reached, 0, sizeof(int32_t) * (size_t)m);
            reached[0] = 1;                                       /* the root */
            for (int64_t idx = 0; idx < m; idx++) {
                Py_ssize_t i = s + idx;
                int64_t l = left[i], r = right[i];
                if ((l < 0) != (r < 0)) fail |= 1u;
                if (l < 0) continue;
                if (l <= idx || r <= idx) fail |= 2u;
                if (l >= m || r >= m) fail |= 4u;
                if (l < m) reached[l]++;
                if (r >= 0 && r < m) reached[r]++;
                if (feature[i] < 0) fail |= 16u;
                if (isinf(thr[i])) fail |= 32u;
                if (isnan(thr[i]) && !has_sets) fail |= 64u;
            }
            for (int64_t idx = 0; idx < m && !(fail & 8u); idx++)
                if (reached[idx] != 1) fail |= 8u;
            if (fail)
                for (first = 0; !(fail & (1u << first)); first++) {}
        }
        PyMem_Free(reached);
    }
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    if (bad) return NULL;
    return PyLong_FromLong(first);
}

/* pack(order, left, feature, threshold, inner, missing_left, cat_node, nodes, pos)
 * The records of the nodes in order (int64, a permutation of the nodes: breadth_first's): pos[order[k]] =
 * k (int64, one per node), and nodes[k] (the records above) from node u = order[k]: its threshold (a
 * missing one 0, an infinite one the largest finite number, as numpy's nan_to_num), its feature (int32)
 * with the bit NAN_RIGHT at an inner node (bool) that is no categorical split (cat_node) and whose
 * missing values do not go left (missing_left), and at an inner node its left child's (left: int64 node
 * index) place pos[left[u]]; a leaf's 0. A categorical split's feature and threshold are left as they
 * are given (core.model.flatwalk._pack writes them). order not a permutation, or a child out of range,
 * is a ValueError. */
static PyObject *py_pack(PyObject *self, PyObject *args) {
    PyObject *o[9];
    Py_buffer b[9];
    int got = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8]))
        return NULL;
    static const char *names[9] = {"order", "left", "feature", "threshold", "inner", "missing_left", "cat_node",
                                   "nodes", "pos"};
    static const char kinds[9] = {'i', 'i', 'i', 'f', 'u', 'u', 'u', 0, 'i'};
    static const Py_ssize_t sizes[9] = {8, 8, 4, 8, 1, 1, 1, (Py_ssize_t)sizeof(Node), 8};
    for (; got < 9; got++)
        if (get_buffer(o[got], &b[got], names[got], kinds[got], sizes[got], 1, got >= 7) < 0) break;
    Py_ssize_t n = got == 9 ? b[0].shape[0] : 0;
    int bad = got < 9;
    for (int k = 1; k < got && !bad; k++)
        if (b[k].shape[0] != n) {
            PyErr_SetString(PyExc_ValueError, "pack: every array must have one entry per node");
            bad = 1;
        }
    if (!bad) {
        const int64_t *order = b[0].buf, *left = b[1].buf;
        const int32_t *feature = b[2].buf;
        const double *thr = b[3].buf;
        const uint8_t *inner = b[4].buf, *miss = b[5].buf, *cat = b[6].buf;
        Node *nodes = b[7].buf;
        int64_t *pos = b[8].buf;
        for (Py_ssize_t k = 0; k < n; k++) pos[k] = -1;
        for (Py_ssize_t k = 0; k < n && !bad; k++) {
            int64_t u = order[k];
            if (u < 0 || u >= n || pos[u] >= 0) bad = 1;
            else pos[u] = k;
        }
        for (Py_ssize_t k = 0; k < n && !bad; k++) {
            int64_t u = order[k];
            double t = thr[u];
            nodes[k].thr = isnan(t) ? 0.0 : isinf(t) ? (t > 0 ? 1.7976931348623157e308 : -1.7976931348623157e308) : t;
            int32_t f = feature[u];
            nodes[k].left = 0;
            if (inner[u]) {
                if (left[u] < 0 || left[u] >= n || pos[left[u]] > INT32_MAX) { bad = 1; break; }
                nodes[k].left = (int32_t)pos[left[u]];
                if (!cat[u] && !miss[u]) f |= NAN_RIGHT;
            }
            nodes[k].feat = f;
        }
        if (bad) PyErr_SetString(PyExc_ValueError, "pack: order is not a permutation of the nodes, or a child is out "
                                                   "of range");
    }
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    if (bad) return NULL;
    Py_RETURN_NONE;
}

/* cover(nodes, roots, bits, seen, codes, top, nan_ok, budget, kind, lo, hi) -> (rows, covered, dead, left, steps)
 * Rows that reach the leaves no row has reached yet (seen: uint8 per node, 1 = reached), made one at
 * a time: a row starts free and, tree by tree, descends depth first to a leaf still missed whose box
 * meets the row's, its box then narrowed to that path; a row is made while leaves are missed, fewer
 * than cap (= kind.shape[0]) rows are and fewer than budget steps (narrowings tried) were taken.
 * Backing out of a subtree, a descent tries a missing value where it tried a number; as a few such
 * splits could double its work again and again, it gives up on its tree past twice the tree's nodes in
 * steps, and the search of a path's box (dead or not) past eight steps a split. Each step of a descent
 * keeps the row inside one side of a split:
 *   a numerical feature (codes[j] == -1): a number x with lo < x <= hi and x <= top, or a missing
 *     value (NaN) where the feature is still free, nan_ok (the model takes them) and NaN goes that way;
 *   a categorical feature (codes[j] >= 0: the codes 0..codes[j]-1 a row may take): the codes left by
 *     its splits' sets and thresholds, the first of them taken.
 * A leaf is dead when its own path's box is empty (no row reaches it); it is not looked for. Those
 * judged past the budget are taken as alive (and left, as no row is made then).
 * The rows come out in kind, lo, hi (cap x d each): per row and feature, kind 0 (free: no leaf asks
 * anything of it), 1 (a number in (lo, hi]), 2 (NaN) or 3 (the code lo). rows: the rows made; covered:
 * the leaves they reach on purpose; dead; left: leaves missed still (the rows or the budget having run
 * out, or a descent given up); steps: the narrowings tried.
 * Nodes as in apply; a damaged array is a ValueError. */
enum { FREE = 0, NUMBER = 1, MISSING = 2, CODE = 3 };

typedef struct {                    /* a descent's change to the row, undone when it backs out */
    int64_t j; int8_t kind; double lo, hi;
} Undo;

typedef struct {
    const Node *nodes; const uint64_t *bits; Py_ssize_t n_bits; const int64_t *codes; Py_ssize_t d;
    double top; int nan_ok;
    int8_t *rk; double *rlo, *rhi;  /* the row being made, per feature */
    uint64_t *mask; Py_ssize_t W;   /* the codes a categorical feature may still take, W words each */
    Undo *undo; uint64_t *saved; Py_ssize_t n_undo;
    int64_t steps;                  /* narrowings tried */
} Row;

/* The words of the category set at node p (its count first); NULL on a damaged set. */
static const uint64_t *set_words(const Row *R, const Node *nd, uint64_t *count) {
    double off = nd->thr;
    if (!(off >= 0.0) || off >= (double)R->n_bits) return NULL;
    int64_t o = (int64_t)off;
    *count = R->bits[o];
    if (*count > (uint64_t)(R->n_bits - o - 1)) return NULL;
    return R->bits + o + 1;
}

/* Word w of the codes that go left at a split on a categorical feature: its set's words s (count of
 * them; s NULL: a threshold on the codes, c <= thr). */
static inline uint64_t left_word(const Node *nd, const uint64_t *s, uint64_t count, Py_ssize_t w) {
    if (s != NULL) return (uint64_t)w < count ? s[w] : 0;
    double t = nd->thr - (double)(w * 64);
    return t < 0 ? 0 : t >= 63 ? ~(uint64_t)0 : ((uint64_t)2 << (int)t) - 1;
}

/* Keep the row on side `right` of node p's split (use_nan: by a missing value); 1 done, 0 not
 * possible, -1 a damaged node. The change is recorded to be undone. */
static int narrow(Row *R, const Node *nd, int right, int use_nan) {
    R->steps++;
    int64_t j = nd->feat >= 0 ? (int64_t)(nd->feat & ~NAN_RIGHT) : -(int64_t)nd->feat - 2;
    if (j >= R->d) return -1;
    Undo *u = R->undo + R->n_undo;
    u->j = j; u->kind = R->rk[j]; u->lo = R->rlo[j]; u->hi = R->rhi[j];
    if (R->codes[j] >= 0) {                                   /* a categorical feature: its codes left */
        if (use_nan) return 0;
        uint64_t *m = R->mask + j * R->W, *keep = R->saved + R->n_undo * R->W, count = 0;
        const uint64_t *s = NULL;
        if (nd->feat < -1 && (s = set_words(R, nd, &count)) == NULL) return -1;
        int any = 0;
        for (Py_ssize_t w = 0; w < R->W; w++) {             /* the codes kept, into keep */
            uint64_t side = left_word(nd, s, count, w);
            keep[w] = m[w] & (right ? ~side : side);
            any |= keep[w] != 0;
        }
        if (!any) return 0;
        for (Py_ssize_t w = 0; w < R->W; w++) {             /* swapped: the mask holds them, keep the old */
            uint64_t old = m[w];
            m[w] = keep[w];
            keep[w] = old;
        }
        R->rk[j] = CODE;
        R->n_undo++;
        return 1;
    }
    if (nd->feat < -1) return 0;                              /* a category set on numbers: no side */
    int nan_right = (nd->feat & NAN_RIGHT) != 0;
    double t = nd->thr;
    if (R->rk[j] == FREE) {
        if (use_nan) {
            if (!R->nan_ok || right != nan_right) return 0;
            R->rk[j] = MISSING;
        } else {
            double a = right ? t : -INFINITY, b = right ? R->top : (t < R->top ? t : R->top);
            if (!(a < b && b >= -R->top)) return 0;
            R->rk[j] = NUMBER; R->rlo[j] = a; R->rhi[j] = b;
        }
    } else if (use_nan) {
        return 0;                                             /* NaN only where the feature is free */
    } else if (R->rk[j] == NUMBER) {
        double a = right && t > R->rlo[j] ? t : R->rlo[j], b = !right && t < R->rhi[j] ? t : R->rhi[j];
        if (!(a < b)) return 0;
        R->rlo[j] = a; R->rhi[j] = b;
    } else if (right != nan_right) {
        return 0;                                             /* NaN in the row goes the other way */
    }
    R->n_undo++;
    return 1;
}

/* Could a missing value keep the row on side `right` of the split at nd? (Else it is not tried, nor
 * counted as a step: only a free numerical feature of a model that takes NaN, where NaN goes there.) */
static int nan_may(const Row *R, const Node *nd, int right) {
    if (!R->nan_ok || nd->feat < 0) return 0;
    int64_t j = (int64_t)(nd->feat & ~NAN_RIGHT);
    return j < R->d && R->codes[j] < 0 && R->rk[j] == FREE && right == ((nd->feat & NAN_RIGHT) != 0);
}

static void undo_to(Row *R, Py_ssize_t height) {
    while (R->n_undo > height) {
        Undo *u = R->undo + --R->n_undo;
        R->rk[u->j] = u->kind; R->rlo[u->j] = u->lo; R->rhi[u->j] = u->hi;
        if (R->codes[u->j] >= 0)
            memcpy(R->mask + u->j * R->W, R->saved + R->n_undo * R->W, sizeof(uint64_t) * (size_t)R->W);
    }
}

typedef struct { int64_t node; int tried; Py_ssize_t height; } Frame;

/* Is the box of the path leaf .. root (parent links) empty? 1 dead, 0 not, -1 damaged. The row R
 * (free, its undo stack empty) serves as scratch: the path is walked root to leaf, narrowing it, a
 * number tried first at each split and a missing value then, backing out as a descent would
 * (numbers may empty a feature's interval a few splits down where a missing value gets through). */
static int path_dead(Row *R, const int64_t *parent, int64_t root, int64_t leaf, int64_t *path, Frame *steps) {
    Py_ssize_t len = 0, i = 0;
    for (int64_t c = leaf; c != root; c = parent[c]) {
        if (parent[c] < root || parent[c] >= c) return -1;
        path[len++] = c;
    }
    int64_t limit = R->steps + 8 * (int64_t)(len + 1);
    if (len > 0) steps[0] = (Frame){0, 0, R->n_undo};
    while (i >= 0 && i < len) {
        if (R->steps > limit) { undo_to(R, 0); return 0; }      /* not known dead: looked for */
        Frame *F = steps + i;
        int64_t c = path[len - 1 - i], p = parent[c];
        int right = c != (int64_t)R->nodes[p].left, ok = 0;
        while (F->tried < 2 && !ok) {
            if (F->tried == 1 && !nan_may(R, R->nodes + p, right)) { F->tried++; break; }
            int got = narrow(R, R->nodes + p, right, F->tried++);
            if (got < 0) { undo_to(R, 0); return -1; }
            ok = got;
        }
        if (ok) {
            if (++i < len) steps[i] = (Frame){0, 0, R->n_undo};
        } else if (--i >= 0) {
            undo_to(R, steps[i].height);                    /* that step's next way */
        }
    }
    undo_to(R, 0);
    return i < 0;
}


static PyObject *py_cover(PyObject *self, PyObject *args) {
    PyObject *o[8];
    Py_buffer b[8];
    double top;
    int nan_ok, got = 0;
    (void)self;
    Py_ssize_t budget;
    if (!PyArg_ParseTuple(args, "OOOOOdpnOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &top, &nan_ok, &budget, &o[5], &o[6],
                          &o[7]))
        return NULL;
    static const char *names[8] = {"nodes", "roots", "bits", "seen", "codes", "kind", "lo", "hi"};
    static const char kinds[8] = {0, 'i', 'u', 'u', 'i', 'i', 'f', 'f'};
    static const Py_ssize_t sizes[8] = {(Py_ssize_t)sizeof(Node), 8, 8, 1, 8, 1, 8, 8};
    static const int dims[8] = {1, 1, 1, 1, 1, 2, 2, 2};
    for (; got < 8; got++)
        if (get_buffer(o[got], &b[got], names[got], kinds[got], sizes[got], dims[got], got >= 5) < 0) break;
    const char *why = NULL;
    Py_ssize_t n = 0, T = 0, d = 0, cap = 0, W = 0, deepest = 0;
    if (got == 8) {
        n = b[0].shape[0]; T = b[1].shape[0]; d = b[4].shape[0]; cap = b[5].shape[0];
        if (b[3].shape[0] != n) why = "seen must hold one byte per node";
        else for (int k = 5; k < 8 && !why; k++)
            if (b[k].shape[0] != cap || b[k].shape[1] != d) why = "kind, lo and hi must have the shape (rows, d)";
    }
    const Node *nodes = got == 8 ? b[0].buf : NULL;
    const int64_t *roots = got == 8 ? b[1].buf : NULL, *codes = got == 8 ? b[4].buf : NULL;
    for (Py_ssize_t t = 0; got == 8 && !why && t < T; t++) {
        if (roots[t] < 0 || roots[t] >= n || (t + 1 < T && roots[t + 1] <= roots[t])) why = "roots must rise inside the nodes";
    }
    for (Py_ssize_t j = 0; got == 8 && !why && j < d; j++) {
        if (codes[j] > ((int64_t)1 << 24)) why = "codes must be below 2^24";
        else if (codes[j] >= 0 && (codes[j] + 63) / 64 > W) W = (codes[j] + 63) / 64;
    }
    int64_t *parent = NULL, *rem = NULL, *path = NULL, *active = NULL;
    Frame *frames = NULL;
    Row R = {0};
    Py_ssize_t rows = 0, covered = 0, dead = 0, left = 0;
    if (got == 8 && !why) {
        parent = PyMem_Malloc(sizeof(int64_t) * (size_t)(n + 1));
        rem = PyMem_Malloc(sizeof(int64_t) * (size_t)(n + 1));
        active = PyMem_Malloc(sizeof(int64_t) * (size_t)(T + 1));
        R.rk = PyMem_Malloc((size_t)(d + 1));
        R.rlo = PyMem_Malloc(sizeof(double) * (size_t)(d + 1));
        R.rhi = PyMem_Malloc(sizeof(double) * (size_t)(d + 1));
        R.mask = PyMem_Calloc((size_t)(d * W + 1), sizeof(uint64_t));
        if (!parent || !rem || !active || !R.rk || !R.rlo || !R.rhi || !R.mask) {
            PyErr_NoMemory();
            why = "";
        }
    }
    for (Py_ssize_t i = 0; got == 8 && !why && i < n; i++) parent[i] = -1;
    for (Py_ssize_t t = 0; got == 8 && !why && t < T; t++) {   /* each node's parent and depth, in its tree */
        int64_t end = t + 1 < T ? roots[t + 1] : n;
        rem[roots[t]] = 0;
        for (int64_t i = roots[t]; i < end && !why; i++) {
            if (nodes[i].feat == -1) continue;
            if (nodes[i].left <= i || (int64_t)nodes[i].left + 1 >= end) { why = "the node array is damaged"; break; }
            parent[nodes[i].left] = parent[nodes[i].left + 1] = i;
            rem[nodes[i].left] = rem[nodes[i].left + 1] = rem[i] + 1;
            if (rem[i] + 1 > deepest) deepest = rem[i] + 1;
        }
    }
    if (got == 8 && !why) {                                   /* what a path's length bounds */
        path = PyMem_Malloc(sizeof(int64_t) * (size_t)(deepest + 2));
        frames = PyMem_Malloc(sizeof(Frame) * (size_t)(deepest + 2));
        R.undo = PyMem_Malloc(sizeof(Undo) * (size_t)(deepest + 2));
        R.saved = PyMem_Calloc((size_t)((deepest + 2) * W + 1), sizeof(uint64_t));
        if (!path || !frames || !R.undo || !R.saved) {
            PyErr_NoMemory();
            why = "";
        }
    }
    if (got == 8 && !why) {
        const uint8_t *seen = b[3].buf;
        int8_t *kind = b[5].buf;
        double *lo = b[6].buf, *hi = b[7].buf;
        R.nodes = nodes; R.bits = b[2].buf; R.n_bits = b[2].shape[0]; R.codes = codes; R.d = d; R.top = top;
        R.nan_ok = nan_ok; R.W = W;
#define RESET_ROW() do { \
            for (Py_ssize_t j = 0; j < d; j++) { \
                R.rk[j] = FREE; R.rlo[j] = -INFINITY; R.rhi[j] = top; \
                for (Py_ssize_t w = 0; codes[j] >= 0 && w < W; w++) { \
                    int64_t k = codes[j] - w * 64; \
                    R.mask[j * W + w] = k <= 0 ? 0 : k >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << k) - 1); \
                } \
            } } while (0)
        RESET_ROW();
        int64_t total = 0;
        for (Py_ssize_t t = 0; t < T && !why; t++) {                /* the leaves looked for, per subtree */
            int64_t root = roots[t], end = t + 1 < T ? roots[t + 1] : n;
            for (int64_t i = end - 1; i >= root && !why; i--) {
                if (nodes[i].feat != -1) { rem[i] = rem[nodes[i].left] + rem[nodes[i].left + 1]; continue; }
                rem[i] = 0;
                if (seen[i]) continue;
                if (R.steps >= budget) { rem[i] = 1; continue; }    /* past the budget: looked for, not judged */
                int is_dead = path_dead(&R, parent, root, i, path, frames);
                if (is_dead < 0) why = "the node array is damaged";
                else if (is_dead) dead++;
                else rem[i] = 1;
            }
            total += why ? 0 : rem[root];
        }
        Py_ssize_t n_active = 0;                                     /* the trees with a leaf to look for */
        for (Py_ssize_t t = 0; t < T && !why; t++)
            if (rem[roots[t]] > 0) active[n_active++] = t;
        while (!why && total > 0 && rows < cap && R.steps < budget) {       /* a row at a time */
            RESET_ROW();
            Py_ssize_t found_here = 0, still = 0;
            for (Py_ssize_t a = 0; a < n_active && !why; a++) {
                int64_t root = roots[active[a]], t = active[a];
                int64_t limit = R.steps + 2 * ((t + 1 < T ? roots[t + 1] : n) - root);
                Py_ssize_t sp = 0;
                int found = 0;
                frames[sp++] = (Frame){root, 0, R.n_undo};
                while (sp > 0 && !why) {                            /* depth first, to a leaf still missed */
                    if (R.steps > limit) {                          /* given up: the row as it was */
                        undo_to(&R, frames[0].height);
                        sp = 0;
                        break;
                    }
                    Frame *F = frames + sp - 1;
                    const Node *nd = nodes + F->node;
                    if (nd->feat == -1) { found = 1; break; }
                    int moved = 0;
                    while (F->tried < 4 && !moved) {
                        int k = F->tried++;
                        int64_t c = (int64_t)nd->left + (k >> 1);
                        if (rem[c] == 0 || ((k & 1) && !nan_may(&R, nd, k >> 1))) continue;
                        Py_ssize_t height = R.n_undo;
                        int step = narrow(&R, nd, k >> 1, k & 1);
                        if (step < 0) why = "the node array is damaged";
                        else if (step > 0) {
                            if (sp > deepest) { why = "the node array is damaged"; break; }
                            frames[sp++] = (Frame){c, 0, height};
                            moved = 1;
                        }
                    }
                    if (!moved && !why) {
                        undo_to(&R, F->height);
                        sp--;
                    }
                }
                if (found) {
                    for (Py_ssize_t s = 0; s < sp; s++) rem[frames[s].node]--;
                    covered++; found_here++; total--;
                }
                R.n_undo = 0;                                       /* kept: the row is inside that leaf */
                if (rem[root] > 0) active[still++] = active[a];
            }
            n_active = still;
            if (found_here == 0 || why) break;
            for (Py_ssize_t j = 0; j < d; j++) {
                Py_ssize_t at = rows * d + j;
                kind[at] = R.rk[j]; lo[at] = R.rlo[j]; hi[at] = R.rhi[j];
                if (R.rk[j] == CODE) {                               /* the first code left */
                    int64_t c = -1;
                    for (Py_ssize_t w = 0; w < W && c < 0; w++) {
                        uint64_t m = R.mask[j * W + w];
                        if (m) c = w * 64 + __builtin_ctzll(m);
                    }
                    lo[at] = (double)c;
                }
            }
            rows++;
        }
        left = total;
#undef RESET_ROW
    }
    PyMem_Free(parent); PyMem_Free(rem); PyMem_Free(active); PyMem_Free(path); PyMem_Free(frames); PyMem_Free(R.rk);
    PyMem_Free(R.rlo); PyMem_Free(R.rhi); PyMem_Free(R.mask); PyMem_Free(R.undo); PyMem_Free(R.saved);
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    if (got < 8) return NULL;
    if (why) {
        if (*why) PyErr_SetString(PyExc_ValueError, why);
        return NULL;
    }
    return Py_BuildValue("nnnnL", rows, covered, dead, left, (long long)R.steps);
}


static PyMethodDef methods[] = {
    {"apply", py_apply, METH_VARARGS, "Packed leaf index per row and tree."},
    {"breadth_first", py_breadth_first, METH_VARARGS, "Every tree's nodes breadth first: (count, depth)."},
    {"check_stacked", py_check_stacked, METH_VARARGS, "The first failing check of stacked trees, -1 if none."},
    {"pack", py_pack, METH_VARARGS, "The packed records of the nodes in a given order, and each node's place."},
    {"accumulate", py_accumulate, METH_VARARGS, "Add the reached leaf values of all trees."},
    {"cover", py_cover, METH_VARARGS, "Rows that reach every leaf not seen: (rows, covered, dead, left, steps)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_treewalk", "Compiled tree traversal.", -1, methods};

PyMODINIT_FUNC PyInit__treewalk(void) { return PyModule_Create(&module); }
