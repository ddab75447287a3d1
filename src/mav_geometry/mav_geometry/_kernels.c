/* mav_geometry._kernels: compiled kernels of mav_geometry (see mav_geometry.kernels).
 *
 * Element-wise quaternion operations over C-contiguous float64 buffers holding n
 * elements each (quaternions [x, y, z, w], vectors, 3x3 matrices row-major). Every
 * function writes into a caller-allocated output; the arithmetic follows the numpy
 * reference in mav_geometry/quaternion.py operation by operation, so the two agree to
 * round-off (exactly, up to the libm sin/cos/atan2 against numpy's). One call handles one
 * element or a whole batch: the per-call cost is what single elements pay.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

/* Inputs and the output of one call, all released by release_all. */
typedef struct {
    Py_buffer in[2];
    Py_buffer out;
    int inputs;
} Buffers;

static void release_all(Buffers *b) {
    for (int k = 0; k < b->inputs; ++k) {
        PyBuffer_Release(&b->in[k]);
    }
    PyBuffer_Release(&b->out);
}

/* Element count of a buffer holding `width` doubles per element, or -1 (error set). */
static Py_ssize_t element_count(const Py_buffer *buffer, Py_ssize_t width, const char *name) {
    if (buffer->itemsize != (Py_ssize_t)sizeof(double) || buffer->len % (width * 8) != 0) {
        PyErr_Format(PyExc_ValueError, "%s: expected float64 data in groups of %zd, got %zd bytes",
                     name, width, buffer->len);
        return -1;
    }
    return buffer->len / (width * 8);
}

/* Parse (inputs..., out), check widths and equal counts; return the count or -1. */
static Py_ssize_t parse(PyObject *args, Buffers *b, int inputs, const Py_ssize_t *widths,
                        Py_ssize_t out_width, const char *name) {
    b->inputs = 0;
    memset(&b->out, 0, sizeof(Py_buffer));
    int ok = inputs == 1 ? PyArg_ParseTuple(args, "y*w*", &b->in[0], &b->out)
                         : PyArg_ParseTuple(args, "y*y*w*", &b->in[0], &b->in[1], &b->out);
    if (!ok) {
        return -1;
    }
    b->inputs = inputs;
    Py_ssize_t count = element_count(&b->out, out_width, name);
    for (int k = 0; k < inputs && count >= 0; ++k) {
        Py_ssize_t n = element_count(&b->in[k], widths[k], name);
        if (n >= 0 && n != count) {
            PyErr_Format(PyExc_ValueError, "%s: input %d holds %zd elements, output %zd", name,
                         k, n, count);
            n = -1;
        }
        if (n < 0) {
            count = -1;
        }
    }
    if (count < 0) {
        release_all(b);
    }
    return count;
}

static PyObject *finish(Buffers *b) {
    release_all(b);
    Py_RETURN_NONE;
}

static PyObject *multiply(PyObject *self, PyObject *args) {
    (void)self;
    Buffers b;
    static const Py_ssize_t widths[2] = {4, 4};
    Py_ssize_t n = parse(args, &b, 2, widths, 4, "multiply");
    if (n < 0) {
        return NULL;
    }
    const double *p = b.in[0].buf, *q = b.in[1].buf;
    double *r = b.out.buf;
    for (Py_ssize_t i = 0; i < n; ++i, p += 4, q += 4, r += 4) {
        double px = p[0], py = p[1], pz = p[2], pw = p[3];
        double qx = q[0], qy = q[1], qz = q[2], qw = q[3];
        r[0] = pw * qx + px * qw + py * qz - pz * qy;
        r[1] = pw * qy - px * qz + py * qw + pz * qx;
        r[2] = pw * qz + px * qy - py * qx + pz * qw;
        r[3] = pw * qw - px * qx - py * qy - pz * qz;
    }
    return finish(&b);
}

static PyObject *from_rotation_vector(PyObject *self, PyObject *args) {
    (void)self;
    Buffers b;
    static const Py_ssize_t widths[1] = {3};
    Py_ssize_t n = parse(args, &b, 1, widths, 4, "from_rotation_vector");
    if (n < 0) {
        return NULL;
    }
    const double *phi = b.in[0].buf;
    double *r = b.out.buf;
    for (Py_ssize_t i = 0; i < n; ++i, phi += 3, r += 4) {
        double x = 0.5 * phi[0], y = 0.5 * phi[1], z = 0.5 * phi[2];
        double angle = sqrt(x * x + y * y + z * z);
        double factor = angle > 0.0 ? sin(angle) / angle : 1.0;
        r[0] = x * factor;
        r[1] = y * factor;
        r[2] = z * factor;
        r[3] = cos(angle);
    }
    return finish(&b);
}

static PyObject *to_rotation_vector(PyObject *self, PyObject *args) {
    (void)self;
    Buffers b;
    static const Py_ssize_t widths[1] = {4};
    Py_ssize_t n = parse(args, &b, 1, widths, 3, "to_rotation_vector");
    if (n < 0) {
        return NULL;
    }
    const double *q = b.in[0].buf;
    double *r = b.out.buf;
    for (Py_ssize_t i = 0; i < n; ++i, q += 4, r += 3) {
        /* canonical: q and -q are the same rotation; take the one with w >= 0 */
        double sign = q[3] < 0.0 ? -1.0 : 1.0;
        double x = sign * q[0], y = sign * q[1], z = sign * q[2], w = sign * q[3];
        double vector_norm = sqrt(x * x + y * y + z * z);
        double factor;
        if (vector_norm == 0.0) {
            factor = w != 0.0 ? 1.0 / w : 1.0;
        } else {
            factor = atan2(vector_norm, w) / vector_norm;
        }
        r[0] = 2.0 * (factor * x);
        r[1] = 2.0 * (factor * y);
        r[2] = 2.0 * (factor * z);
    }
    return finish(&b);
}

static PyObject *rotate(PyObject *self, PyObject *args) {
    (void)self;
    Buffers b;
    static const Py_ssize_t widths[2] = {4, 3};
    Py_ssize_t n = parse(args, &b, 2, widths, 3, "rotate");
    if (n < 0) {
        return NULL;
    }
    const double *q = b.in[0].buf, *v = b.in[1].buf;
    double *r = b.out.buf;
    for (Py_ssize_t i = 0; i < n; ++i, q += 4, v += 3, r += 3) {
        double ux = q[0], uy = q[1], uz = q[2], w = q[3];
        double vx = v[0], vy = v[1], vz = v[2];
        double tx = 2.0 * (uy * vz - uz * vy);
        double ty = 2.0 * (uz * vx - ux * vz);
        double tz = 2.0 * (ux * vy - uy * vx);
        r[0] = vx + w * tx + uy * tz - uz * ty;
        r[1] = vy + w * ty + uz * tx - ux * tz;
        r[2] = vz + w * tz + ux * ty - uy * tx;
    }
    return finish(&b);
}

static void matrix_of(const double *q, double *m) {
    double x = q[0], y = q[1], z = q[2], w = q[3];
    m[0] = 1.0 - 2.0 * (y * y + z * z);
    m[1] = 2.0 * (x * y - z * w);
    m[2] = 2.0 * (x * z + y * w);
    m[3] = 2.0 * (x * y + z * w);
    m[4] = 1.0 - 2.0 * (x * x + z * z);
    m[5] = 2.0 * (y * z - x * w);
    m[6] = 2.0 * (x * z - y * w);
    m[7] = 2.0 * (y * z + x * w);
    m[8] = 1.0 - 2.0 * (x * x + y * y);
}

static PyObject *to_matrix(PyObject *self, PyObject *args) {
    (void)self;
    Buffers b;
    static const Py_ssize_t widths[1] = {4};
    Py_ssize_t n = parse(args, &b, 1, widths, 9, "to_matrix");
    if (n < 0) {
        return NULL;
    }
    const double *q = b.in[0].buf;
    double *r = b.out.buf;
    for (Py_ssize_t i = 0; i < n; ++i, q += 4, r += 9) {
        matrix_of(q, r);
    }
    return finish(&b);
}

static PyObject *from_matrix(PyObject *self, PyObject *args) {
    (void)self;
    Buffers b;
    static const Py_ssize_t widths[1] = {9};
    Py_ssize_t n = parse(args, &b, 1, widths, 4, "from_matrix");
    if (n < 0) {
        return NULL;
    }
    const double *m = b.in[0].buf;
    double *r = b.out.buf;
    for (Py_ssize_t i = 0; i < n; ++i, m += 9, r += 4) {
        double trace = m[0] + m[4] + m[8];
        double xy = m[1] + m[3], xz = m[2] + m[6], yz = m[5] + m[7];
        double wx = m[7] - m[5], wy = m[2] - m[6], wz = m[3] - m[1];
        /* Shepperd: row k is q scaled by 4 q_k; pivot on the largest diagonal term (the
           first on ties, as numpy's argmax) */
        double rows[4][4] = {
            {1.0 + 2.0 * m[0] - trace, xy, xz, wx},
            {xy, 1.0 + 2.0 * m[4] - trace, yz, wy},
            {xz, yz, 1.0 + 2.0 * m[8] - trace, wz},
            {wx, wy, wz, 1.0 + trace},
        };
        double pivots[4] = {m[0], m[4], m[8], trace};
        int choice = 0;
        for (int k = 1; k < 4; ++k) {
            if (pivots[k] > pivots[choice]) {
                choice = k;
            }
        }
        const double *c = rows[choice];
        double size = sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2] + c[3] * c[3]);
        if (!(size > 0.0) || !isfinite(size)) {
            release_all(&b);
            PyErr_SetString(PyExc_ValueError, "cannot normalize a zero or non-finite quaternion");
            return NULL;
        }
        for (int k = 0; k < 4; ++k) {
            r[k] = c[k] / size;
        }
        if (r[3] < 0.0) {
            for (int k = 0; k < 4; ++k) {
                r[k] = -r[k];
            }
        }
    }
    return finish(&b);
}

static PyMethodDef methods[] = {
    {"multiply", multiply, METH_VARARGS, "multiply(p, q, out): Hamilton products p * q."},
    {"from_rotation_vector", from_rotation_vector, METH_VARARGS,
     "from_rotation_vector(phi, out): unit quaternions exp(phi / 2)."},
    {"to_rotation_vector", to_rotation_vector, METH_VARARGS,
     "to_rotation_vector(q, out): rotation vectors of unit quaternions."},
    {"rotate", rotate, METH_VARARGS, "rotate(q, v, out): vectors rotated by unit quaternions."},
    {"to_matrix", to_matrix, METH_VARARGS, "to_matrix(q, out): rotation matrices (row-major)."},
    {"from_matrix", from_matrix, METH_VARARGS,
     "from_matrix(m, out): unit quaternions (w >= 0) of rotation matrices (Shepperd)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "mav_geometry._kernels", NULL, -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
