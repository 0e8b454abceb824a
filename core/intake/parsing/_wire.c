/* Compiled reading of protobuf's wire runs for core.intake.parsing.onnx_graph (optional: the
 * numpy reading there gives the same values more slowly).
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
 * Every index is checked against the buffer's length; a wrong buffer is a ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
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

/* The bytes to read (any format) and the output array (1-D, C-contiguous, writable, of elements
 * of ``itemsize`` bytes and a struct format among ``fmts``). */
static int get_buffers(PyObject *obuf, Py_buffer *in, PyObject *oout, Py_buffer *out, Py_ssize_t itemsize,
                       const char *fmts) {
    if (PyObject_GetBuffer(obuf, in, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (PyObject_GetBuffer(oout, out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(in);
        return -1;
    }
    const char *f = out->format ? out->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (out->ndim != 1 || out->itemsize != itemsize || f[0] == '\0' || !strchr(fmts, f[0]) || f[1] != '\0') {
        PyErr_SetString(PyExc_ValueError, "out: a 1-D array of the run's type expected");
        PyBuffer_Release(in);
        PyBuffer_Release(out);
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

static PyMethodDef methods[] = {
    {"int_run", int_run, METH_VARARGS, "Decode a run of unpacked varint fields into out: (count, end)."},
    {"float_run", float_run, METH_VARARGS, "Decode a run of unpacked float32 fields into out: (count, end)."},
    {"string_run", string_run, METH_VARARGS, "A run of short string fields: (block, width, count, end) or None."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wire", "Compiled protobuf wire runs.", -1, methods};

PyMODINIT_FUNC PyInit__wire(void) { return PyModule_Create(&module); }
