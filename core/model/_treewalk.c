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
 * accumulate(..., seen) also sets seen[leaf] = 1 (uint8, one per node) for every leaf reached
 * cover(nodes, roots, bits, seen, codes, top, nan_ok, kind, lo, hi) -> (rows, covered, dead, left)
 *     rows that reach every leaf not seen, packed first fit (see py_cover)
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

/* cover(nodes, roots, bits, seen, codes, top, nan_ok, kind, lo, hi) -> (rows, covered, dead, left)
 * Rows that reach the leaves no row has reached yet (seen: uint8 per node, 1 = reached), packed first
 * fit: tree by tree, each such leaf joins the first row whose box meets its own and that holds no leaf
 * of its tree yet, or a new row while fewer than cap (= kind.shape[0]) are used. A leaf's box is read
 * off its path, per feature j:
 *   numerical (codes[j] == -1): a number x with lo < x <= hi and x <= top, or else a missing value
 *     (NaN) when nan_ok (the model takes them) and every split of the path on j sends NaN its way;
 *   categorical (codes[j] >= 0: the codes 0..codes[j]-1 a row may take): a code its splits admit,
 *     the first one when the row has none yet.
 * The rows come out in kind, lo, hi (cap x d each): per row and feature, kind 0 (free: no leaf asks
 * anything of it), 1 (a number in (lo, hi]), 2 (NaN) or 3 (the code lo). rows: the rows used; covered:
 * the leaves placed; dead: leaves with an empty box (no row reaches them); left: leaves not placed
 * because cap rows were used. Nodes as in apply; a damaged array is a ValueError. */
enum { FREE = 0, NUMBER = 1, MISSING = 2, CODE = 3, DEAD = 4 };

typedef struct {
    const Node *nodes; const uint64_t *bits; Py_ssize_t n_bits; const int64_t *codes; Py_ssize_t d;
    const int64_t *pnode; const uint8_t *pdir; Py_ssize_t len;        /* the leaf's path */
    double *flo, *fhi;                                               /* its box, per feature */
} Leaf;

/* Is the code c on the path's side of every split of that path on feature j? -1: a damaged set. */
static int admits(const Leaf *L, Py_ssize_t j, int64_t c) {
    double v = (double)c;
    if (!(L->flo[j] < v && v <= L->fhi[j])) return 0;
    for (Py_ssize_t k = 0; k < L->len; k++) {
        const Node *nd = L->nodes + L->pnode[k];
        if (nd->feat >= -1 || -(int64_t)nd->feat - 2 != j) continue;
        double off = nd->thr;
        if (!(off >= 0.0) || off >= (double)L->n_bits) return -1;
        int64_t o = (int64_t)off, w = c >> 6;
        uint64_t count = L->bits[o];
        if (count > (uint64_t)(L->n_bits - o - 1)) return -1;
        int held = (uint64_t)w < count && ((L->bits[o + 1 + w] >> (c & 63)) & 1u);
        if (held == L->pdir[k]) return 0;                /* dir 0 (left) needs the code held */
    }
    return 1;
}

/* The first code of feature j the leaf admits; -1: none, -2: a damaged set. */
static int64_t first_code(const Leaf *L, Py_ssize_t j) {
    for (int64_t c = 0; c < L->codes[j]; c++) {
        int a = admits(L, j, c);
        if (a != 0) return a < 0 ? -2 : c;
    }
    return -1;
}

static PyObject *py_cover(PyObject *self, PyObject *args) {
    PyObject *o[8];
    Py_buffer b[8];
    double top;
    int nan_ok, got = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOdpOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &top, &nan_ok, &o[5], &o[6], &o[7]))
        return NULL;
    static const char *names[8] = {"nodes", "roots", "bits", "seen", "codes", "kind", "lo", "hi"};
    static const char kinds[8] = {0, 'i', 'u', 'u', 'i', 'i', 'f', 'f'};
    static const Py_ssize_t sizes[8] = {(Py_ssize_t)sizeof(Node), 8, 8, 1, 8, 1, 8, 8};
    static const int dims[8] = {1, 1, 1, 1, 1, 2, 2, 2};
    for (; got < 8; got++)
        if (get_buffer(o[got], &b[got], names[got], kinds[got], sizes[got], dims[got], got >= 5) < 0) break;
    const char *why = NULL;
    Py_ssize_t n = 0, T = 0, d = 0, cap = 0;
    if (got == 8) {
        n = b[0].shape[0]; T = b[1].shape[0]; d = b[4].shape[0]; cap = b[5].shape[0];
        if (b[3].shape[0] != n) why = "seen must hold one byte per node";
        else for (int k = 5; k < 8 && !why; k++)
            if (b[k].shape[0] != cap || b[k].shape[1] != d) why = "kind, lo and hi must have the shape (rows, d)";
    }
    const Node *nodes = got == 8 ? b[0].buf : NULL;
    const int64_t *roots = got == 8 ? b[1].buf : NULL, *codes = got == 8 ? b[4].buf : NULL;
    for (Py_ssize_t t = 0; got == 8 && !why && t < T; t++)
        if (roots[t] < 0 || roots[t] >= n || (t + 1 < T && roots[t + 1] <= roots[t])) why = "roots must rise inside the nodes";
    int64_t *parent = NULL, *pnode = NULL, *row_tree = NULL, *touched = NULL;
    uint8_t *pdir = NULL, *want = NULL;
    double *flo = NULL, *fhi = NULL;
    Py_ssize_t rows = 0, covered = 0, dead = 0, left = 0;
    Py_ssize_t most = 0;                                  /* the largest tree's nodes */
    for (Py_ssize_t t = 0; got == 8 && !why && t < T; t++) {
        Py_ssize_t size = (t + 1 < T ? roots[t + 1] : n) - roots[t];
        if (size > most) most = size;
    }
    if (got == 8 && !why) {
        parent = PyMem_Malloc(sizeof(int64_t) * (size_t)(most + 1));   /* per tree, indexed from its root */
        pnode = PyMem_Malloc(sizeof(int64_t) * (size_t)(most + 1));
        pdir = PyMem_Malloc((size_t)(most + 1));
        row_tree = PyMem_Malloc(sizeof(int64_t) * (size_t)(cap + 1));
        touched = PyMem_Malloc(sizeof(int64_t) * (size_t)(d + 1));
        want = PyMem_Calloc((size_t)(d + 1), 1);
        flo = PyMem_Malloc(sizeof(double) * (size_t)(d + 1));
        fhi = PyMem_Malloc(sizeof(double) * (size_t)(d + 1));
        if (!parent || !pnode || !pdir || !row_tree || !touched || !want || !flo || !fhi) {
            PyErr_NoMemory();
            why = "";
        }
    }
    if (got == 8 && !why) {
        const uint64_t *bits = b[2].buf;
        const uint8_t *seen = b[3].buf;
        int8_t *kind = b[5].buf;
        double *lo = b[6].buf, *hi = b[7].buf;
        Leaf L = {nodes, bits, b[2].shape[0], codes, d, pnode, pdir, 0, flo, fhi};
        for (Py_ssize_t t = 0; t < T && !why; t++) {
            int64_t root = roots[t], end = t + 1 < T ? roots[t + 1] : n, missed = 0;
            for (int64_t i = root; i < end && !missed; i++) missed = nodes[i].feat == -1 && !seen[i];
            if (!missed) continue;
            for (int64_t i = root; i < end; i++) parent[i - root] = -1;
            for (int64_t i = root; i < end && !why; i++) {          /* each node's parent, in its tree */
                int32_t f = nodes[i].feat;
                if (f == -1) continue;
                int64_t j = f >= 0 ? (int64_t)(f & ~NAN_RIGHT) : -(int64_t)f - 2;
                if (nodes[i].left <= i || (int64_t)nodes[i].left + 1 >= end || j >= d) why = "the node array is damaged";
                else parent[nodes[i].left - root] = parent[nodes[i].left + 1 - root] = i;
            }
            for (int64_t leaf = root; leaf < end && !why; leaf++) {
                if (nodes[leaf].feat != -1 || seen[leaf]) continue;
                Py_ssize_t len = 0, m = 0;
                for (int64_t c = leaf; c != root; c = parent[c - root]) {      /* the path, leaf to root */
                    int64_t p = parent[c - root];
                    if (p < root || p >= c) { why = "the node array is damaged (a node off its tree)"; break; }
                    pnode[len] = p;
                    pdir[len++] = c != nodes[p].left;
                }
                if (why) break;
                L.len = len;
                for (Py_ssize_t k = 0; k < len; k++) {                 /* the box, per feature */
                    const Node *nd = nodes + pnode[k];
                    int64_t j = nd->feat >= 0 ? (int64_t)(nd->feat & ~NAN_RIGHT) : -(int64_t)nd->feat - 2;
                    if (!want[j]) {
                        want[j] = 1;
                        touched[m++] = j;
                        flo[j] = -INFINITY; fhi[j] = top;
                    }
                    if (nd->feat < 0) {                                  /* a category set: see admits */
                        if (codes[j] < 0) want[j] |= 16;                 /* on a feature of numbers: no box */
                        continue;
                    }
                    int nan_right = (nd->feat & NAN_RIGHT) != 0;
                    if (pdir[k] == 0) { if (nd->thr < fhi[j]) fhi[j] = nd->thr; }
                    else if (nd->thr > flo[j]) flo[j] = nd->thr;
                    if (pdir[k] != nan_right) want[j] |= 8;              /* NaN goes the other way */
                }
                int is_dead = 0;
                for (Py_ssize_t k = 0; k < m; k++) {        /* what the leaf asks of j; 8: NaN reaches it */
                    int64_t j = touched[k];
                    int nan_reaches = nan_ok && !(want[j] & 8) && codes[j] < 0;
                    if (want[j] & 16) want[j] = DEAD;
                    else if (codes[j] >= 0) {
                        int64_t c = first_code(&L, j);
                        if (c == -2) why = "the node array is damaged (a category set out of range)";
                        want[j] = c >= 0 ? CODE : DEAD;
                    } else if (flo[j] < fhi[j] && fhi[j] >= -top) want[j] = NUMBER | (nan_reaches ? 8 : 0);
                    else want[j] = nan_reaches ? MISSING : DEAD;
                    if (want[j] == DEAD) is_dead = 1;
                }
                Py_ssize_t r = rows;
                if (!is_dead && !why) {
                    for (r = 0; r < rows; r++) {                             /* first fit */
                        if (row_tree[r] == t) continue;
                        int fits = 1;
                        for (Py_ssize_t k = 0; k < m && fits; k++) {
                            int64_t j = touched[k];
                            Py_ssize_t at = r * d + j;
                            int8_t rk = kind[at];
                            if (rk == FREE) continue;
                            if ((want[j] & 7) == NUMBER) {                /* NaN in the row: if it reaches */
                                if (rk == MISSING) fits = (want[j] & 8) != 0;
                                else fits = (flo[j] > lo[at] ? flo[j] : lo[at]) < (fhi[j] < hi[at] ? fhi[j] : hi[at]);
                            } else if (want[j] == MISSING) fits = rk == MISSING;
                            else { int a = admits(&L, j, (int64_t)lo[at]); fits = a == 1; }
                        }
                        if (fits) break;
                    }
                    if (r == rows && rows < cap) {
                        memset(kind + rows * d, FREE, (size_t)d);
                        rows++;
                    }
                }
                if (is_dead) dead++;
                else if (!why && r == rows) left++;
                else if (!why) {
                    row_tree[r] = t;
                    covered++;
                    for (Py_ssize_t k = 0; k < m; k++) {
                        int64_t j = touched[k];
                        Py_ssize_t at = r * d + j;
                        if (kind[at] == FREE) {
                            kind[at] = (int8_t)(want[j] & 7);
                            lo[at] = want[j] == CODE ? (double)first_code(&L, j) : flo[j];   /* the first fits */
                            hi[at] = fhi[j];
                        } else if (kind[at] == NUMBER) {
                            if (flo[j] > lo[at]) lo[at] = flo[j];
                            if (fhi[j] < hi[at]) hi[at] = fhi[j];
                        }
                    }
                }
                for (Py_ssize_t k = 0; k < m; k++) want[touched[k]] = 0;
            }
        }
    }
    PyMem_Free(parent); PyMem_Free(pnode); PyMem_Free(pdir); PyMem_Free(row_tree); PyMem_Free(touched);
    PyMem_Free(want); PyMem_Free(flo); PyMem_Free(fhi);
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    if (got < 8) return NULL;
    if (why) {
        if (*why) PyErr_SetString(PyExc_ValueError, why);
        return NULL;
    }
    return Py_BuildValue("nnnn", rows, covered, dead, left);
}

static PyMethodDef methods[] = {
    {"apply", py_apply, METH_VARARGS, "Packed leaf index per row and tree."},
    {"breadth_first", py_breadth_first, METH_VARARGS, "Every tree's nodes breadth first: (count, depth)."},
    {"accumulate", py_accumulate, METH_VARARGS, "Add the reached leaf values of all trees."},
    {"cover", py_cover, METH_VARARGS, "Rows that reach every leaf not seen: (rows, covered, dead, left)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_treewalk", "Compiled tree traversal.", -1, methods};

PyMODINIT_FUNC PyInit__treewalk(void) { return PyModule_Create(&module); }
