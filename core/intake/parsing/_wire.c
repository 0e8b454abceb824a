/* Compiled reading of an ONNX tree ensemble (optional: the numpy reading gives the same more
 * slowly): protobuf's wire runs of its node attributes for core.intake.parsing.onnx_graph, and
 * the walk of its trees for core.intake.parsing.onnx_trees.
 *
 * A tree ensemble's node attributes are repeated fields of tens of thousands of values, written
 * by every serializer as a run of unpacked fields: a key byte, then the value (a varint for
 * ints, four little-endian bytes for floats, a length byte and the bytes for strings). Reading
 * them as protobuf's Python lists costs a converted Python object per value; numpy decodes them
 * in a few dozen array steps; these walk the run once.
 *
 * int_run(buf, start, key, out) -> (count, end)
 *     The run of fields from buf[start]: key byte ``key``, then a varint (protobuf's: low groups
 *     of seven bits first, truncated to 64 bits, stored as int64). Stops at the first byte that
 *     is not ``key`` or at a varint cut by the end of buf (not read); a varint of more than 10
 *     bytes is a ValueError. out: int64, 1-D, C-contiguous, writable, at least (len - start) / 2
 *     long (every field takes two bytes or more).
 * float_run(buf, start, key, out) -> (count, end)
 *     The run of fields from buf[start]: key byte ``key``, then four bytes of a little-endian
 *     float32. Stops at the first field that is not ``key`` or is cut. out: float32, 1-D,
 *     C-contiguous, writable, at least (len - start) / 5 long.
 * string_run(buf, start, key) -> (block, width, count, end) or None
 *     The run of fields from buf[start]: key byte ``key``, a length byte below 0x80, the bytes.
 *     block: a bytearray of count * width bytes, each string NUL-padded to width (the longest,
 *     at least 1), as a numpy "S<width>" array reads it. None when a string is 128 bytes or
 *     longer (a block of the longest times the count could be huge), ends in a NUL byte (numpy's
 *     bytes would drop it) or is cut by the end of buf: the caller reads protobuf's list then.
 *
 * name_codes(block, width, names, out)
 *     The index in ``names`` (a tuple of bytes) of each of the NUL-padded strings of ``width``
 *     bytes in ``block`` (a numpy "S<width>" array's bytes), -1 for none, into out (int64, one
 *     per string): a tree ensemble's node modes, matched without a numpy step per name.
 * preorder(leaf, left, right, roots, owner, pos, counts, bad)
 *     The trees of an operator's node graph (core/intake/parsing/onnx_trees.py): from each
 *     root (roots[t], -1: none), depth first, the left child's subtree before the right's. A
 *     node reached is given its tree (owner, int64, every node, -1: none) and its place in its
 *     tree's preorder (pos, int64); counts[t] (int64) is tree t's number of nodes. bad[t]
 *     (bool, set here) says tree t is no plain tree: no root, a split without two children in
 *     range, or a node reached twice (a cycle, two parents, two trees; the tree reaching it later
 *     is bad, and its walk stops there). leaf: bool per node; left, right: int64 per node.
 * scatter(owner, pos, start, leaf, left, right, feature, bound, miss, value, k,
 *         children_left, children_right, out_feature, threshold, missing_left, out_value)
 *     The stacked arrays of the good trees from preorder's walk: node u of tree owner[u] goes to
 *     start[owner[u]] + pos[u] (start: int64 per tree, -1 for a tree left out); a split gets its
 *     children's places (pos of left[u], right[u]), its feature (int64 in, int32 out), its bound
 *     (float64) and where a missing value goes (miss, bool); a leaf its k values (value: float64,
 *     k per node, flat). Every place is checked inside the output arrays.
 * plain_bounds(mode, feature, threshold, leaf, num, through, feat_of, tree_f32, plain_modes, plain, bound, feat)
 *     Each node's plain-split flag, bound and ensemble feature, as onnx_trees._plain_bounds
 *     computes them (see the function below).
 *
 * Every index is checked against the buffer's length; a wrong buffer is a ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The varint at b[i..n): 1 and its value and the index after it, 0 when cut by n, -1 when longer
 * than 10 bytes. */
static int varint(const uint8_t *b, Py_ssize_t i, Py_ssize_t n, uint64_t *v, Py_ssize_t *next) {
    uint64_t x = 0;
    for (int k = 0; k < 10; k++) {
        if (i + k >= n) return 0;
        uint8_t c = b[i + k];
        x |= (uint64_t)(c & 0x7F) << (7 * k);
        if (c < 0x80) {
            *v = x;
            *next = i + k + 1;
            return 1;
        }
    }
    for (Py_ssize_t j = i + 10; j < n; j++)             /* longer than 10 bytes, or cut by n */
        if (b[j] < 0x80) return -1;
    return 0;
}

/* A 1-D C-contiguous buffer of ``n`` elements (-1: any) of ``itemsize`` bytes and a format among ``fmts``. */
static int get_array(PyObject *o, Py_buffer *b, Py_ssize_t n, Py_ssize_t itemsize, const char *fmts, int writable) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (b->ndim != 1 || b->itemsize != itemsize || f[0] == '\0' || !strchr(fmts, f[0]) || f[1] != '\0' ||
        (n >= 0 && b->shape[0] != n)) {
        PyErr_SetString(PyExc_ValueError, "an array of another type, shape or length than expected");
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* The bytes to read (any format) and the output array (1-D, C-contiguous, writable, of elements
 * of ``itemsize`` bytes and a struct format among ``fmts``). */
static int get_buffers(PyObject *obuf, Py_buffer *in, PyObject *oout, Py_buffer *out, Py_ssize_t itemsize,
                       const char *fmts) {
    if (PyObject_GetBuffer(obuf, in, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (get_array(oout, out, -1, itemsize, fmts, 1) < 0) {
        PyBuffer_Release(in);
        return -1;
    }
    return 0;
}

static int check_start(Py_ssize_t start, Py_ssize_t n, long key) {
    if (start < 0 || start > n || key < 0 || key > 255) {
        PyErr_SetString(PyExc_ValueError, "start outside the buffer or a key that is no byte");
        return -1;
    }
    return 0;
}

static PyObject *int_run(PyObject *self, PyObject *args) {
    PyObject *obuf, *oout;
    Py_ssize_t start;
    long key;
    Py_buffer in, out;
    if (!PyArg_ParseTuple(args, "OnlO", &obuf, &start, &key, &oout)) return NULL;
    if (get_buffers(obuf, &in, oout, &out, 8, "lq") < 0) return NULL;
    const uint8_t *b = (const uint8_t *)in.buf;
    Py_ssize_t n = in.len, cap = out.len / 8, count = 0, i = start;
    int64_t *o = (int64_t *)out.buf;
    int bad = check_start(start, n, key);
    while (!bad && i < n && b[i] == (uint8_t)key) {
        uint64_t v;
        Py_ssize_t next;
        int got = varint(b, i + 1, n, &v, &next);
        if (got == 0) break;
        if (got < 0 || count >= cap) {
            PyErr_SetString(PyExc_ValueError, got < 0 ? "a varint of more than 10 bytes" : "out is too short");
            bad = 1;
            break;
        }
        o[count++] = (int64_t)v;
        i = next;
    }
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    return bad ? NULL : Py_BuildValue("nn", count, i);
}

static PyObject *float_run(PyObject *self, PyObject *args) {
    PyObject *obuf, *oout;
    Py_ssize_t start;
    long key;
    Py_buffer in, out;
    if (!PyArg_ParseTuple(args, "OnlO", &obuf, &start, &key, &oout)) return NULL;
    if (get_buffers(obuf, &in, oout, &out, 4, "f") < 0) return NULL;
    const uint8_t *b = (const uint8_t *)in.buf;
    Py_ssize_t n = in.len, cap = out.len / 4, count = 0, i = start;
    float *o = (float *)out.buf;
    int bad = check_start(start, n, key);
    while (!bad && i + 5 <= n && b[i] == (uint8_t)key) {
        if (count >= cap) {
            PyErr_SetString(PyExc_ValueError, "out is too short");
            bad = 1;
            break;
        }
        uint32_t w = (uint32_t)b[i + 1] | (uint32_t)b[i + 2] << 8 | (uint32_t)b[i + 3] << 16 | (uint32_t)b[i + 4] << 24;
        memcpy(&o[count++], &w, 4);
        i += 5;
    }
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    return bad ? NULL : Py_BuildValue("nn", count, i);
}

static PyObject *string_run(PyObject *self, PyObject *args) {
    PyObject *obuf, *block = NULL;
    Py_ssize_t start;
    long key;
    Py_buffer in;
    if (!PyArg_ParseTuple(args, "Onl", &obuf, &start, &key)) return NULL;
    if (PyObject_GetBuffer(obuf, &in, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    const uint8_t *b = (const uint8_t *)in.buf;
    Py_ssize_t n = in.len, count = 0, width = 1, i = start;
    if (check_start(start, n, key) < 0) {
        PyBuffer_Release(&in);
        return NULL;
    }
    while (i < n && b[i] == (uint8_t)key) {              /* the run's count and widest string */
        if (i + 1 >= n || b[i + 1] >= 0x80 || i + 2 + b[i + 1] > n || (b[i + 1] && b[i + 1 + b[i + 1]] == 0)) {
            PyBuffer_Release(&in);
            Py_RETURN_NONE;
        }
        if (b[i + 1] > width) width = b[i + 1];
        i += 2 + b[i + 1];
        count++;
    }
    Py_ssize_t end = i;
    block = PyByteArray_FromStringAndSize(NULL, count * width);
    if (block == NULL) {
        PyBuffer_Release(&in);
        return NULL;
    }
    char *o = PyByteArray_AS_STRING(block);
    memset(o, 0, (size_t)(count * width));
    i = start;
    for (Py_ssize_t k = 0; k < count; k++) {
        memcpy(o + k * width, b + i + 2, b[i + 1]);
        i += 2 + b[i + 1];
    }
    PyBuffer_Release(&in);
    PyObject *res = Py_BuildValue("Onnn", block, width, count, end);
    Py_DECREF(block);
    return res;
}

static PyObject *name_codes(PyObject *self, PyObject *args) {
    PyObject *oblock, *names, *oout;
    Py_ssize_t width;
    Py_buffer in, out;
    if (!PyArg_ParseTuple(args, "OnO!O", &oblock, &width, &PyTuple_Type, &names, &oout)) return NULL;
    if (get_buffers(oblock, &in, oout, &out, 8, "lq") < 0) return NULL;
    Py_ssize_t k = PyTuple_GET_SIZE(names), count = width > 0 ? in.len / width : 0;
    int bad = width <= 0 || in.len % width != 0 || out.len / 8 != count;
    if (bad) PyErr_SetString(PyExc_ValueError, "name_codes: a block of whole strings and one code each expected");
    const char *name[16];
    Py_ssize_t size[16];
    for (Py_ssize_t j = 0; !bad && j < k; j++) {
        PyObject *o = PyTuple_GET_ITEM(names, j);
        if (k > 16 || !PyBytes_Check(o)) {
            PyErr_SetString(PyExc_ValueError, "name_codes: at most 16 names, as bytes");
            bad = 1;
            break;
        }
        name[j] = PyBytes_AS_STRING(o);
        size[j] = PyBytes_GET_SIZE(o);
    }
    const char *b = in.buf;
    int64_t *o = out.buf;
    for (Py_ssize_t i = 0; !bad && i < count; i++) {
        const char *str = b + i * width;
        Py_ssize_t len = width;
        while (len > 0 && str[len - 1] == '\0') len--;        /* numpy's bytes: trailing NULs dropped */
        o[i] = -1;
        for (Py_ssize_t j = 0; j < k; j++)
            if (size[j] == len && memcmp(name[j], str, (size_t)len) == 0) {
                o[i] = j;
                break;
            }
    }
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    if (bad) return NULL;
    Py_RETURN_NONE;
}

static PyObject *preorder(PyObject *self, PyObject *args) {
    PyObject *o[8];
    Py_buffer b[8];
    int got = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7])) return NULL;
    /* leaf, left, right, roots, owner, pos, counts, bad */
    static const Py_ssize_t sizes[8] = {1, 8, 8, 8, 8, 8, 8, 1};
    static const char *fmts[8] = {"?", "lq", "lq", "lq", "lq", "lq", "lq", "?"};
    Py_ssize_t n = -1, trees = -1;
    for (; got < 8; got++) {
        Py_ssize_t want = got == 3 || got >= 6 ? trees : n;
        if (get_array(o[got], &b[got], want, sizes[got], fmts[got], got >= 4) < 0) break;
        if (got == 0) n = b[0].shape[0];
        if (got == 3) trees = b[3].shape[0];
    }
    Py_ssize_t *stack = NULL;
    if (got == 8) {
        stack = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(2 * n + 2));
        if (stack == NULL) PyErr_NoMemory();
    }
    if (stack != NULL) {
        const uint8_t *leaf = b[0].buf;
        const int64_t *left = b[1].buf, *right = b[2].buf, *roots = b[3].buf;
        int64_t *owner = b[4].buf, *pos = b[5].buf, *counts = b[6].buf;
        uint8_t *bad = b[7].buf;
        for (Py_ssize_t i = 0; i < n; i++) owner[i] = -1;
        for (Py_ssize_t t = 0; t < trees; t++) {
            Py_ssize_t top = 0, p = 0;
            bad[t] = roots[t] < 0 || roots[t] >= n;
            if (!bad[t]) stack[top++] = (Py_ssize_t)roots[t];
            while (top > 0) {
                Py_ssize_t u = stack[--top];
                if (owner[u] >= 0) {                     /* reached before: by this tree or another */
                    bad[t] = 1;
                    break;
                }
                owner[u] = t;
                pos[u] = p++;
                if (leaf[u]) continue;
                if (left[u] < 0 || left[u] >= n || right[u] < 0 || right[u] >= n) {
                    bad[t] = 1;
                    break;
                }
                stack[top++] = (Py_ssize_t)right[u];     /* the left subtree first */
                stack[top++] = (Py_ssize_t)left[u];
            }
            counts[t] = p;
        }
        PyMem_Free(stack);
    }
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    if (got < 8 || stack == NULL) return NULL;
    Py_RETURN_NONE;
}

static PyObject *scatter(PyObject *self, PyObject *args) {
    enum { OWNER, POS, START, LEAF, LEFT, RIGHT, FEAT, BOUND, MISS, VALUE, CL, CR, FT, TH, ML, VAL, NB };
    PyObject *o[NB];
    Py_buffer b[NB];
    Py_ssize_t k;
    int got = 0, bad = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOnOOOOOO", &o[OWNER], &o[POS], &o[START], &o[LEAF], &o[LEFT], &o[RIGHT],
                          &o[FEAT], &o[BOUND], &o[MISS], &o[VALUE], &k, &o[CL], &o[CR], &o[FT], &o[TH], &o[ML],
                          &o[VAL]))
        return NULL;
    static const Py_ssize_t size[NB] = {8, 8, 8, 1, 8, 8, 8, 8, 1, 8, 4, 4, 4, 8, 1, 8};
    static const char *fmt[NB] = {"lq", "lq", "lq", "?", "lq", "lq", "lq", "d", "?", "d", "i", "i", "i", "d", "?", "d"};
    for (; got < NB; got++)
        if (get_array(o[got], &b[got], -1, size[got], fmt[got], got >= CL) < 0) break;
    Py_ssize_t n = got == NB ? b[OWNER].shape[0] : 0, m = got == NB ? b[CL].shape[0] : 0;
    Py_ssize_t trees = got == NB ? b[START].shape[0] : 0;
    if (got == NB) {
        for (int j = OWNER; j <= MISS; j++)
            if (j != START && b[j].shape[0] != n) bad = 1;
        for (int j = CL; j <= ML; j++)
            if (b[j].shape[0] != m) bad = 1;
        if (k < 0 || b[VALUE].shape[0] != n * k || b[VAL].shape[0] != m * k) bad = 1;
        if (bad) PyErr_SetString(PyExc_ValueError, "scatter: arrays of other lengths than the nodes and places");
    }
    if (got == NB && !bad) {
        const int64_t *owner = b[OWNER].buf, *pos = b[POS].buf, *start = b[START].buf, *left = b[LEFT].buf;
        const int64_t *right = b[RIGHT].buf, *feat = b[FEAT].buf;
        const uint8_t *leaf = b[LEAF].buf, *miss = b[MISS].buf;
        const double *bound = b[BOUND].buf, *value = b[VALUE].buf;
        int32_t *cl = b[CL].buf, *cr = b[CR].buf, *ft = b[FT].buf;
        double *th = b[TH].buf, *val = b[VAL].buf;
        uint8_t *ml = b[ML].buf;
        for (Py_ssize_t u = 0; u < n && !bad; u++) {
            int64_t t = owner[u];
            if (t < 0) continue;
            if (t >= trees) { bad = 1; break; }
            if (start[t] < 0) continue;                          /* a tree left out */
            int64_t at = start[t] + pos[u];
            if (pos[u] < 0 || at >= m) { bad = 1; break; }
            if (leaf[u]) {
                memcpy(val + at * k, value + u * k, sizeof(double) * (size_t)k);
                continue;
            }
            if (left[u] < 0 || left[u] >= n || right[u] < 0 || right[u] >= n || feat[u] < INT32_MIN ||
                feat[u] > INT32_MAX || pos[left[u]] > INT32_MAX || pos[right[u]] > INT32_MAX) {
                bad = 1;
                break;
            }
            cl[at] = (int32_t)pos[left[u]];
            cr[at] = (int32_t)pos[right[u]];
            ft[at] = (int32_t)feat[u];
            th[at] = bound[u];
            ml[at] = miss[u];
        }
        if (bad) PyErr_SetString(PyExc_ValueError, "scatter: a node's tree, place or child out of range");
    }
    for (int j = 0; j < got; j++) PyBuffer_Release(&b[j]);
    if (got < NB || bad) return NULL;
    Py_RETURN_NONE;
}

/* The largest float32 <= t (as core.model.tree.float32_floor), and the largest float64 T with
 * float32(x) <= f  <=>  x <= T for a float32 f (core.model.tree.float32_le_bound); NaN stays NaN. */
static float float32_floor(double t) {
    float f = (float)t;                                    /* IEEE rounding: beyond the range, infinite */
    return (double)f > t ? nextafterf(f, -INFINITY) : f;
}

static double float32_le_bound(float f) {
    double a = (double)f, nxt = (double)nextafterf(f, INFINITY), mid = (a + nxt) / 2.0;   /* exact */
    if (isinf(a) && a > 0) return INFINITY;
    return (float)mid <= f ? mid : nextafter(mid, -INFINITY);
}

/* plain_bounds(mode, feature, threshold, leaf, num, through, feat_of, tree_f32, plain_modes, plain, bound, feat)
 * Per node (mode, feature: int64, threshold: float64, leaf: bool), as onnx_trees._plain_bounds: its column
 * c (feature when 0 <= feature < the columns, else the last entry of num, through and feat_of, one per column
 * and one more) and feat[i] = feat_of[c]; at a split, its bound T (x <= T iff the comparison holds: the
 * threshold a, read as float32 when tree_f32, a step below it for LT and GTE (modes 1, 2), then the float32
 * bound when tree_f32 or through[c]); at a leaf NaN; and whether the split is plain (mode < plain_modes, a
 * number column, a and T finite). */
static PyObject *plain_bounds(PyObject *self, PyObject *args) {
    enum { MODE, FEAT, THR, LEAF, NUM, THROUGH, FEAT_OF, PLAIN, BOUND, OUT, NB };
    PyObject *o[NB];
    Py_buffer b[NB];
    int got = 0, tree_f32 = 0, bad = 0;
    long long plain_modes = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOpLOOO", &o[MODE], &o[FEAT], &o[THR], &o[LEAF], &o[NUM], &o[THROUGH],
                          &o[FEAT_OF], &tree_f32, &plain_modes, &o[PLAIN], &o[BOUND], &o[OUT]))
        return NULL;
    static const Py_ssize_t size[NB] = {8, 8, 8, 1, 1, 1, 8, 1, 8, 8};
    static const char *fmt[NB] = {"lq", "lq", "d", "?", "?", "?", "lq", "?", "d", "lq"};
    for (; got < NB; got++)
        if (get_array(o[got], &b[got], -1, size[got], fmt[got], got >= PLAIN) < 0) break;
    Py_ssize_t n = got == NB ? b[MODE].shape[0] : 0, cols = got == NB ? b[NUM].shape[0] - 1 : 0;
    if (got == NB) {
        for (int j = MODE; j < NB; j++)
            if ((j == NUM || j == THROUGH || j == FEAT_OF) ? b[j].shape[0] != cols + 1 : b[j].shape[0] != n) bad = 1;
        if (cols < 0) bad = 1;
        if (bad) PyErr_SetString(PyExc_ValueError, "plain_bounds: arrays of other lengths than the nodes and columns");
    }
    if (got == NB && !bad) {
        const int64_t *mode = b[MODE].buf, *feature = b[FEAT].buf, *feat_of = b[FEAT_OF].buf;
        const double *thr = b[THR].buf;
        const uint8_t *leaf = b[LEAF].buf, *num = b[NUM].buf, *through = b[THROUGH].buf;
        uint8_t *plain = b[PLAIN].buf;
        double *bound = b[BOUND].buf;
        int64_t *out = b[OUT].buf;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t c = feature[i] >= 0 && feature[i] < cols ? feature[i] : cols;
            out[i] = feat_of[c];
            plain[i] = 0;
            if (leaf[i]) {
                bound[i] = NAN;
                continue;
            }
            double a = tree_f32 ? (double)(float)thr[i] : thr[i];
            double below = mode[i] == 1 || mode[i] == 2 ? nextafter(a, -INFINITY) : a;     /* LT, GTE: x < a */
            double t = tree_f32 || through[c] ? float32_le_bound(float32_floor(below)) : below;
            bound[i] = t;
            plain[i] = mode[i] < plain_modes && num[c] && isfinite(a) && isfinite(t);
        }
    }
    for (int j = 0; j < got; j++) PyBuffer_Release(&b[j]);
    if (got < NB || bad) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"int_run", int_run, METH_VARARGS, "Decode a run of unpacked varint fields into out: (count, end)."},
    {"float_run", float_run, METH_VARARGS, "Decode a run of unpacked float32 fields into out: (count, end)."},
    {"string_run", string_run, METH_VARARGS, "A run of short string fields: (block, width, count, end) or None."},
    {"name_codes", name_codes, METH_VARARGS, "Each padded string's index among names (-1: none), into out."},
    {"plain_bounds", plain_bounds, METH_VARARGS, "Each node's plain-split flag, bound and ensemble feature."},
    {"scatter", scatter, METH_VARARGS, "The good trees' stacked arrays from preorder's places."},
    {"preorder", preorder, METH_VARARGS, "Each tree's nodes depth first: their tree, place and count; bad trees."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wire", "Compiled protobuf wire runs.", -1, methods};

PyMODINIT_FUNC PyInit__wire(void) { return PyModule_Create(&module); }
