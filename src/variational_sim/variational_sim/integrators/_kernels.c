/* variational_sim.integrators._kernels: compiled kernels of variational_sim.integrators
 * (see mav_geometry.kernels).
 *
 * dqvi_step / dqvi_solve: one whole DQVI step (or its Newton solve) in one call. They
 * follow variational_sim/integrators/dqvi.py line by line - same guess, same stopping
 * rule, same chord reuse, same backtracking - and evaluate every expression in the same
 * order, so the results agree with that Python reference to round-off (only the 6x6
 * Jacobian product and its LU differ from numpy/LAPACK in summation order).
 * qvi_step: one whole left-rectangle or midpoint QVI step (qvi_left.py, qvi_midpoint.py,
 * Newton of qvi_common.newton) for coefficients packed by the caller at the scheme's time.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

/* ---- argument helpers ------------------------------------------------------------------ */

/* Copy n float64 values from a C-contiguous float64 buffer or from a sequence of numbers. */
static int read_doubles(PyObject *object, Py_ssize_t n, const char *name, double *out) {
    if (PyObject_CheckBuffer(object)) {
        Py_buffer view;
        if (PyObject_GetBuffer(object, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
            int exact = view.format != NULL && strcmp(view.format, "d") == 0
                        && view.len == n * (Py_ssize_t)sizeof(double);
            if (exact) memcpy(out, view.buf, (size_t)view.len);
            PyBuffer_Release(&view);
            if (exact) return 0;
        } else {
            PyErr_Clear();
        }
    }
    PyObject *sequence = PySequence_Fast(object, "");
    if (sequence == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of %zd numbers", name, n);
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(sequence) != n) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zd numbers, got %zd", name, n,
                     PySequence_Fast_GET_SIZE(sequence));
        Py_DECREF(sequence);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(sequence);
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyFloat_AsDouble(items[i]);
        if (out[i] == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s[%zd] is not a number", name, i);
            Py_DECREF(sequence);
            return -1;
        }
    }
    Py_DECREF(sequence);
    return 0;
}

/* A writable C-contiguous float64 buffer of exactly n values (released by the caller). */
static int get_output(PyObject *object, Py_ssize_t n, const char *name, Py_buffer *view) {
    if (PyObject_GetBuffer(object, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a writable C-contiguous float64 array", name);
        return -1;
    }
    if (view->format == NULL || strcmp(view->format, "d") != 0
        || view->len != n * (Py_ssize_t)sizeof(double)) {
        PyErr_Format(PyExc_ValueError, "%s must be a float64 array of %zd values", name, n);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* ---- small dense linear algebra ------------------------------------------------------- */

/* In-place LU with partial pivoting of a row-major n x n matrix (LAPACK dgetf2's algorithm:
 * first largest pivot, reciprocal scaling, rank-1 update). Returns LAPACK's info: 0, or
 * the 1-based column of the first exactly zero pivot. */
static int lu_factor(double *a, int n, int *pivots) {
    int info = 0;
    for (int j = 0; j < n; j++) {
        int p = j;
        double largest = fabs(a[j * n + j]);
        for (int i = j + 1; i < n; i++) {
            if (fabs(a[i * n + j]) > largest) {
                largest = fabs(a[i * n + j]);
                p = i;
            }
        }
        pivots[j] = p;
        if (a[p * n + j] != 0.0) {
            if (p != j) {
                for (int k = 0; k < n; k++) {
                    double t = a[j * n + k];
                    a[j * n + k] = a[p * n + k];
                    a[p * n + k] = t;
                }
            }
            double reciprocal = 1.0 / a[j * n + j];
            for (int i = j + 1; i < n; i++) a[i * n + j] *= reciprocal;
        } else if (info == 0) {
            info = j + 1;
        }
        for (int i = j + 1; i < n; i++) {
            double l = a[i * n + j];
            for (int k = j + 1; k < n; k++) a[i * n + k] -= l * a[j * n + k];
        }
    }
    return info;
}

/* Solve with the factors of lu_factor: b (n) becomes the solution. */
static void lu_solve(const double *lu, int n, const int *pivots, double *b) {
    for (int j = 0; j < n; j++) {
        if (pivots[j] != j) {
            double t = b[j];
            b[j] = b[pivots[j]];
            b[pivots[j]] = t;
        }
    }
    for (int i = 1; i < n; i++)
        for (int k = 0; k < i; k++) b[i] -= lu[i * n + k] * b[k];
    for (int i = n - 1; i >= 0; i--) {
        for (int k = i + 1; k < n; k++) b[i] -= lu[i * n + k] * b[k];
        b[i] /= lu[i * n + i];
    }
}

/* ---- quaternions (scalar-last), as mav_geometry.scalar --------------------------------- */

static void quaternion_multiply(const double *p, const double *q, double *out) {
    double px = p[0], py = p[1], pz = p[2], pw = p[3];
    double qx = q[0], qy = q[1], qz = q[2], qw = q[3];
    out[0] = pw * qx + px * qw + py * qz - pz * qy;
    out[1] = pw * qy - px * qz + py * qw + pz * qx;
    out[2] = pw * qz + px * qy - py * qx + pz * qw;
    out[3] = pw * qw - px * qx - py * qy - pz * qz;
}

/* R(q) v with the vector part (ux, uy, uz) and scalar w (v + w t + u x t, t = 2 u x v). */
static void rotate_parts(double ux, double uy, double uz, double w, const double *v, double *out) {
    double vx = v[0], vy = v[1], vz = v[2];
    double tx = 2.0 * (uy * vz - uz * vy);
    double ty = 2.0 * (uz * vx - ux * vz);
    double tz = 2.0 * (ux * vy - uy * vx);
    out[0] = vx + w * tx + uy * tz - uz * ty;
    out[1] = vy + w * ty + uz * tx - ux * tz;
    out[2] = vz + w * tz + ux * ty - uy * tx;
}

/* ---- DQVI ------------------------------------------------------------------------------ */

/* The body as DQVI._kernel_body packs it: M6 rows, M6^-1 rows, m g (world), CoM offset. */
typedef struct {
    double rows[36];
    double inverse[36];
    double weight[3];
    double com[3];
} DqviBody;
#define DQVI_BODY_SIZE 78
_Static_assert(sizeof(DqviBody) == DQVI_BODY_SIZE * sizeof(double), "DqviBody is read as doubles");

typedef struct {
    double tolerance, reuse_below, chord_contraction;
    long max_iterations;
} DqviSettings;

typedef struct {
    double s, beta[3], b0, mu[6];
} Parts;

enum { SOLVED = 0, ITERATION_LIMIT = 1, SINGULAR = 2, NO_DESCENT = 3 };

typedef struct {
    int code, info;
    long iterations, jacobians;
    double residual, target_norm, rate_step;
} SolveReport;

/* Body wrench about O at attitude q: gravity plus the held input (DQVI._wrench). */
static void dqvi_wrench(const DqviBody *body, const double *q, const double *held, double *out) {
    double force[3];
    rotate_parts(-q[0], -q[1], -q[2], q[3], body->weight, force);
    const double *c = body->com;
    out[0] = (c[1] * force[2] - c[2] * force[1]) + held[0];
    out[1] = (c[2] * force[0] - c[0] * force[2]) + held[1];
    out[2] = (c[0] * force[1] - c[1] * force[0]) + held[2];
    out[3] = force[0] + held[3];
    out[4] = force[1] + held[4];
    out[5] = force[2] + held[5];
}

/* DQVI._momenta */
static void dqvi_momenta(const DqviBody *body, const double *x, Parts *parts) {
    double p0 = x[0], p1 = x[1], p2 = x[2], r0 = x[3], r1 = x[4], r2 = x[5];
    double s = sqrt(1.0 - (p0 * p0 + p1 * p1 + p2 * p2));
    double e0 = 0.5 * (s * r0 + r1 * p2 - r2 * p1);
    double e1 = 0.5 * (s * r1 + r2 * p0 - r0 * p2);
    double e2 = 0.5 * (s * r2 + r0 * p1 - r1 * p0);
    parts->s = s;
    parts->b0 = -0.5 * (r0 * p0 + r1 * p1 + r2 * p2);
    parts->beta[0] = e0;
    parts->beta[1] = e1;
    parts->beta[2] = e2;
    for (int i = 0; i < 6; i++) {
        const double *m = body->rows + 6 * i;
        parts->mu[i] = m[0] * p0 + m[1] * p1 + m[2] * p2 + m[3] * e0 + m[4] * e1 + m[5] * e2;
    }
}

/* DQVI._g: G (sign +1) or Gbar (sign -1). */
static void dqvi_g(const double *x, const Parts *parts, double sign, double *out) {
    double p0 = x[0], p1 = x[1], p2 = x[2];
    double e0 = parts->beta[0], e1 = parts->beta[1], e2 = parts->beta[2];
    double s = parts->s, b0 = parts->b0;
    double a0 = parts->mu[0], a1 = parts->mu[1], a2 = parts->mu[2];
    double m0 = parts->mu[3], m1 = parts->mu[4], m2 = parts->mu[5];
    out[0] = s * a0 + sign * (p1 * a2 - p2 * a1) + b0 * m0 + sign * (e1 * m2 - e2 * m1);
    out[1] = s * a1 + sign * (p2 * a0 - p0 * a2) + b0 * m1 + sign * (e2 * m0 - e0 * m2);
    out[2] = s * a2 + sign * (p0 * a1 - p1 * a0) + b0 * m2 + sign * (e0 * m1 - e1 * m0);
    out[3] = s * m0 + sign * (p1 * m2 - p2 * m1);
    out[4] = s * m1 + sign * (p2 * m0 - p0 * m2);
    out[5] = s * m2 + sign * (p0 * m1 - p1 * m0);
}

/* DQVI._residual: r = G(x) - target, returns |r|. */
static double dqvi_residual(const double *x, const Parts *parts, const double *target, double *r) {
    double g[6];
    dqvi_g(x, parts, 1.0, g);
    for (int i = 0; i < 6; i++) r[i] = g[i] - target[i];
    return sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2] + r[3] * r[3] + r[4] * r[4] + r[5] * r[5]);
}

/* DQVI._jacobian: dG/dx = (K M6 + Z) Y + N0 (row-major 6x6 into out). */
static void dqvi_jacobian(const DqviBody *body, const double *x, const Parts *parts, double *out) {
    double p0 = x[0], p1 = x[1], p2 = x[2], r0 = x[3], r1 = x[4], r2 = x[5];
    double a0 = parts->mu[0], a1 = parts->mu[1], a2 = parts->mu[2];
    double m0 = parts->mu[3], m1 = parts->mu[4], m2 = parts->mu[5];
    double e0 = parts->beta[0], e1 = parts->beta[1], e2 = parts->beta[2];
    double s = parts->s, b0 = parts->b0;
    double inv_s = 1.0 / s;
    double hs = 0.5 * s, k = 0.5 * inv_s;
    double hr0 = 0.5 * r0, hr1 = 0.5 * r1, hr2 = 0.5 * r2;
    double hp0 = 0.5 * p0, hp1 = 0.5 * p1, hp2 = 0.5 * p2;
    double kr0 = k * r0, kr1 = k * r1, kr2 = k * r2;
    double ha0 = a0 * inv_s, ha1 = a1 * inv_s, ha2 = a2 * inv_s;
    double hm0 = m0 * inv_s, hm1 = m1 * inv_s, hm2 = m2 * inv_s;
    double n0 = 0.5 * m0, n1 = 0.5 * m1, n2 = 0.5 * m2;
    const double kz[6][12] = {
        {s, -p2, p1, b0, -e2, e1, 0.0, 0.0, 0.0, 0.0, m2, -m1},
        {p2, s, -p0, e2, b0, -e0, 0.0, 0.0, 0.0, -m2, 0.0, m0},
        {-p1, p0, s, -e1, e0, b0, 0.0, 0.0, 0.0, m1, -m0, 0.0},
        {0.0, 0.0, 0.0, s, -p2, p1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0},
        {0.0, 0.0, 0.0, p2, s, -p0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0},
        {0.0, 0.0, 0.0, -p1, p0, s, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0},
    };
    const double n0_block[6][6] = {
        {-ha0 * p0 - n0 * r0, -ha0 * p1 + a2 - n0 * r1, -ha0 * p2 - a1 - n0 * r2,
         -n0 * p0, -n0 * p1, -n0 * p2},
        {-ha1 * p0 - a2 - n1 * r0, -ha1 * p1 - n1 * r1, -ha1 * p2 + a0 - n1 * r2,
         -n1 * p0, -n1 * p1, -n1 * p2},
        {-ha2 * p0 + a1 - n2 * r0, -ha2 * p1 - a0 - n2 * r1, -ha2 * p2 - n2 * r2,
         -n2 * p0, -n2 * p1, -n2 * p2},
        {-hm0 * p0, -hm0 * p1 + m2, -hm0 * p2 - m1, 0.0, 0.0, 0.0},
        {-hm1 * p0 - m2, -hm1 * p1, -hm1 * p2 + m0, 0.0, 0.0, 0.0},
        {-hm2 * p0 + m1, -hm2 * p1 - m0, -hm2 * p2, 0.0, 0.0, 0.0},
    };
    const double y[6][6] = {
        {1.0, 0.0, 0.0, 0.0, 0.0, 0.0},
        {0.0, 1.0, 0.0, 0.0, 0.0, 0.0},
        {0.0, 0.0, 1.0, 0.0, 0.0, 0.0},
        {-kr0 * p0, -hr2 - kr0 * p1, hr1 - kr0 * p2, hs, hp2, -hp1},
        {hr2 - kr1 * p0, -kr1 * p1, -hr0 - kr1 * p2, -hp2, hs, hp0},
        {-hr1 - kr2 * p0, hr0 - kr2 * p1, -kr2 * p2, hp1, -hp0, hs},
    };
    double product[6][6];
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < 6; j++) {
            double sum = 0.0;
            for (int l = 0; l < 6; l++) sum += kz[i][l] * body->rows[6 * l + j];
            product[i][j] = sum + kz[i][6 + j];
        }
    }
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < 6; j++) {
            double sum = 0.0;
            for (int l = 0; l < 6; l++) sum += product[i][l] * y[l][j];
            out[6 * i + j] = sum + n0_block[i][j];
        }
    }
}

/* DQVI._line_search: 1 and the new point in x/parts/r/residual/size, or 0. */
static int dqvi_line_search(const DqviBody *body, double *x, const double *dx, double *residual,
                            const double *target, int armijo, Parts *parts, double *r,
                            double *size) {
    double scale = 1.0;
    for (int attempt = 0; attempt < 41; attempt++) {
        double trial[6];
        for (int i = 0; i < 6; i++) trial[i] = x[i] - scale * dx[i];
        if (trial[0] * trial[0] + trial[1] * trial[1] + trial[2] * trial[2] < 1.0) {
            Parts trial_parts;
            double trial_r[6];
            dqvi_momenta(body, trial, &trial_parts);
            double trial_residual = dqvi_residual(trial, &trial_parts, target, trial_r);
            if (!armijo || trial_residual <= (1.0 - 1e-4 * scale) * *residual) {
                double squares = 0.0;
                for (int i = 0; i < 6; i++) squares += dx[i] * dx[i];
                memcpy(x, trial, sizeof trial);
                memcpy(r, trial_r, sizeof trial_r);
                *parts = trial_parts;
                *residual = trial_residual;
                *size = scale * sqrt(squares);
                return 1;
            }
        }
        scale *= 0.5;
    }
    return 0;
}

/* DQVI._solve: Newton on G(x) = target from M6^-1 target; x and parts at the solution. */
static void dqvi_newton(const DqviBody *body, const DqviSettings *settings, const double *target,
                        double *x, Parts *parts, SolveReport *report) {
    double guess[6];
    for (int i = 0; i < 6; i++) {
        const double *m = body->inverse + 6 * i;
        guess[i] = m[0] * target[0] + m[1] * target[1] + m[2] * target[2] + m[3] * target[3]
                   + m[4] * target[4] + m[5] * target[5];
    }
    x[0] = guess[0];
    x[1] = guess[1];
    x[2] = guess[2];
    x[3] = 2.0 * guess[3];
    x[4] = 2.0 * guess[4];
    x[5] = 2.0 * guess[5];
    report->rate_step = 2.0 * sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
    if (x[0] * x[0] + x[1] * x[1] + x[2] * x[2] >= 1.0) x[0] = x[1] = x[2] = 0.0;
    double squares = 0.0;
    for (int i = 0; i < 6; i++) squares += target[i] * target[i];
    double target_norm = sqrt(squares);
    double threshold = settings->tolerance * target_norm;
    double reuse_below = settings->reuse_below * target_norm;
    double lu[36];
    int pivots[6];
    int have_factors = 0;
    long jacobians = 0, iteration = 0;
    double r[6];
    dqvi_momenta(body, x, parts);
    double residual = dqvi_residual(x, parts, target, r);
    double previous = INFINITY;
    report->target_norm = target_norm;
    report->info = 0;
    report->code = ITERATION_LIMIT;
    for (;;) {
        if (residual <= threshold) {
            report->code = SOLVED;
            break;
        }
        if (iteration == settings->max_iterations) break;
        double dx[6];
        memcpy(dx, r, sizeof r);
        if (have_factors && residual <= reuse_below
            && residual <= settings->chord_contraction * previous) {
            lu_solve(lu, 6, pivots, dx);  /* chord step on the last factors */
        } else {
            dqvi_jacobian(body, x, parts, lu);
            int info = lu_factor(lu, 6, pivots);
            have_factors = 1;
            jacobians += 1;
            if (info != 0) {
                report->code = SINGULAR;
                report->info = info;
                break;
            }
            lu_solve(lu, 6, pivots, dx);
        }
        iteration += 1;
        double size;
        double previous_residual = residual;
        if (!dqvi_line_search(body, x, dx, &residual, target, previous_residual > reuse_below,
                              parts, r, &size)) {
            report->code = NO_DESCENT;
            break;
        }
        previous = previous_residual;
        double x_squares = 0.0;
        for (int i = 0; i < 6; i++) x_squares += x[i] * x[i];
        double x_norm = sqrt(x_squares);
        if (size <= 1e-15 * (x_norm > 1.0 ? x_norm : 1.0)) {
            report->code = SOLVED;
            break;
        }
    }
    report->iterations = iteration;
    report->jacobians = jacobians;
    report->residual = residual;
}

static int parse_settings(double tolerance, long max_iterations, double reuse_below,
                          double chord_contraction, DqviSettings *settings) {
    if (!(tolerance > 0.0) || max_iterations < 1) {
        PyErr_SetString(PyExc_ValueError, "tolerance must be > 0 and max_iterations >= 1");
        return -1;
    }
    settings->tolerance = tolerance;
    settings->max_iterations = max_iterations;
    settings->reuse_below = reuse_below;
    settings->chord_contraction = chord_contraction;
    return 0;
}

static PyObject *report_tuple(const SolveReport *report, double rho_squared) {
    return Py_BuildValue("(illdddid)", report->code, report->iterations, report->jacobians,
                         report->residual, report->target_norm, report->rate_step, report->info,
                         rho_squared);
}

static PyObject *dqvi_solve(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *body_object, *target_object, *out_object;
    double tolerance, reuse_below, chord_contraction;
    long max_iterations;
    if (!PyArg_ParseTuple(args, "OdlddOO", &body_object, &tolerance, &max_iterations,
                          &reuse_below, &chord_contraction, &target_object, &out_object))
        return NULL;
    DqviBody body;
    DqviSettings settings;
    double target[6];
    if (read_doubles(body_object, DQVI_BODY_SIZE, "body", (double *)&body) < 0
        || parse_settings(tolerance, max_iterations, reuse_below, chord_contraction, &settings) < 0
        || read_doubles(target_object, 6, "target", target) < 0)
        return NULL;
    Py_buffer out;
    if (get_output(out_object, 6, "out", &out) < 0) return NULL;
    double x[6];
    Parts parts;
    SolveReport report;
    dqvi_newton(&body, &settings, target, x, &parts, &report);
    memcpy(out.buf, x, sizeof x);
    PyBuffer_Release(&out);
    return report_tuple(&report, x[3] * x[3] + x[4] * x[4] + x[5] * x[5]);
}

static PyObject *dqvi_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *body_object, *pose_object, *momentum_object, *held_object, *pose_out_object,
        *momentum_out_object;
    double h, tolerance, reuse_below, chord_contraction;
    long max_iterations;
    if (!PyArg_ParseTuple(args, "OddlddOOOOO", &body_object, &h, &tolerance, &max_iterations,
                          &reuse_below, &chord_contraction, &pose_object, &momentum_object,
                          &held_object, &pose_out_object, &momentum_out_object))
        return NULL;
    DqviBody body;
    DqviSettings settings;
    double pose[8], momentum[6], held[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    if (!(h > 0.0 && isfinite(h))) {
        PyErr_SetString(PyExc_ValueError, "h must be a positive finite step (s)");
        return NULL;
    }
    if (read_doubles(body_object, DQVI_BODY_SIZE, "body", (double *)&body) < 0
        || parse_settings(tolerance, max_iterations, reuse_below, chord_contraction, &settings) < 0
        || read_doubles(pose_object, 8, "pose", pose) < 0
        || read_doubles(momentum_object, 6, "momentum", momentum) < 0)
        return NULL;
    if (held_object != Py_None) {
        if (read_doubles(held_object, 6, "inputs", held) < 0) return NULL;
        for (int i = 0; i < 6; i++) {
            if (!isfinite(held[i])) {
                PyErr_SetString(PyExc_ValueError,
                                "inputs must be a finite body wrench (tau_B, f_B) of 6");
                return NULL;
            }
        }
    }
    Py_buffer pose_out, momentum_out;
    if (get_output(pose_out_object, 8, "pose_out", &pose_out) < 0) return NULL;
    if (get_output(momentum_out_object, 6, "momentum_out", &momentum_out) < 0) {
        PyBuffer_Release(&pose_out);
        return NULL;
    }
    const double *q = pose, *d = pose + 4;
    double wrench[6], target[6];
    dqvi_wrench(&body, q, held, wrench);
    for (int i = 0; i < 6; i++) target[i] = 0.5 * h * momentum[i] + 0.25 * h * h * wrench[i];
    double x[6];
    Parts parts;
    SolveReport report;
    dqvi_newton(&body, &settings, target, x, &parts, &report);
    if (report.code == SOLVED) {
        /* f = a + eps 1/2 rho a (scalar-last); pose_{k+1} = pose_k f */
        double g_bar[6], a[4] = {x[0], x[1], x[2], parts.s};
        double half_rho[4] = {0.5 * x[3], 0.5 * x[4], 0.5 * x[5], 0.0};
        double f_dual[4], q_next[4], q_f[4], d_a[4], wrench_next[6];
        double *pose_next = pose_out.buf, *momentum_next = momentum_out.buf;
        dqvi_g(x, &parts, -1.0, g_bar);
        quaternion_multiply(half_rho, a, f_dual);
        quaternion_multiply(q, a, q_next);
        quaternion_multiply(q, f_dual, q_f);
        quaternion_multiply(d, a, d_a);
        dqvi_wrench(&body, q_next, held, wrench_next);
        for (int i = 0; i < 4; i++) {
            pose_next[i] = q_next[i];
            pose_next[4 + i] = q_f[i] + d_a[i];
        }
        for (int i = 0; i < 6; i++) momentum_next[i] = 2.0 / h * g_bar[i] + 0.5 * h * wrench_next[i];
    }
    PyBuffer_Release(&pose_out);
    PyBuffer_Release(&momentum_out);
    return report_tuple(&report, x[3] * x[3] + x[4] * x[4] + x[5] * x[5]);
}

/* ---- QVI (left-rectangle and midpoint) ------------------------------------------------- */

/* The coefficients of Eq. 1 as QuaternionVariationalIntegrator packs them. */
typedef struct {
    double a_xx, A_xw[9], a_x[3], A_ww[9], a_w[3];
} Coefficients;
#define COEFFICIENTS_SIZE 25
_Static_assert(sizeof(Coefficients) == COEFFICIENTS_SIZE * sizeof(double),
               "Coefficients is read as doubles");
#define QVI_OUT_SIZE 23 /* attitude 4, position 3, velocity 3, rate 3, interval attitude 4,
                           momentum 6 */

enum { LEFT_RECTANGLE = 0, MIDPOINT = 1 };
enum { QVI_SOLVED = 0, QVI_NO_CONVERGENCE = 1, QVI_SINGULAR = 2 };

static void cross3(const double *a, const double *b, double *out) {
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

static void matvec3(const double *m, const double *v, double *out) {
    for (int i = 0; i < 3; i++) out[i] = m[3 * i] * v[0] + m[3 * i + 1] * v[1] + m[3 * i + 2] * v[2];
}

static void matvec3_transposed(const double *m, const double *v, double *out) {
    for (int i = 0; i < 3; i++) out[i] = m[i] * v[0] + m[3 + i] * v[1] + m[6 + i] * v[2];
}

static void matmul3(const double *a, const double *b, double *out) {
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            out[3 * i + j] = a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j];
}

static void skew3(const double *v, double *out) {
    out[0] = 0.0;   out[1] = -v[2]; out[2] = v[1];
    out[3] = v[2];  out[4] = 0.0;   out[5] = -v[0];
    out[6] = -v[1]; out[7] = v[0];  out[8] = 0.0;
}

/* Rotation matrix of a unit quaternion (mav_geometry.quaternion.to_matrix). */
static void to_matrix(const double *q, double *m) {
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

/* Unit quaternion exp(phi / 2) of a rotation vector (quaternion.from_rotation_vector). */
static void from_rotation_vector(const double *phi, double *q) {
    double x = 0.5 * phi[0], y = 0.5 * phi[1], z = 0.5 * phi[2];
    double angle = sqrt(x * x + y * y + z * z);
    double factor = angle > 0.0 ? sin(angle) / angle : 1.0;
    q[0] = x * factor;
    q[1] = y * factor;
    q[2] = z * factor;
    q[3] = cos(angle);
}

/* (t - sin t)/t^3 as mav_geometry._series: its Taylor series below 2 rad. */
static double theta_minus_sin_over_cube(double t) {
    if (t >= 2.0) return (t - sin(t)) / (t * t * t);
    double coefficients[14], factorial = 6.0; /* 3! */
    for (int k = 0; k < 14; k++) {
        coefficients[k] = (k % 2 ? -1.0 : 1.0) / factorial;
        factorial *= (double)(2 * k + 4) * (double)(2 * k + 5);
    }
    double t_sq = t * t, result = coefficients[13];
    for (int k = 12; k >= 0; k--) result = result * t_sq + coefficients[k];
    return result;
}

/* Right Jacobian of SO(3) at phi: I - a [phi] + b [phi]^2 (the left one at -phi). */
static void right_jacobian(const double *phi, double *out) {
    double minus[3] = {-phi[0], -phi[1], -phi[2]}, hat[9], hat_sq[9];
    double angle = sqrt(minus[0] * minus[0] + minus[1] * minus[1] + minus[2] * minus[2]);
    double half_sinc = angle > 0.0 ? sin(0.5 * angle) / (0.5 * angle) : 1.0;
    double first = 0.5 * half_sinc * half_sinc, second = theta_minus_sin_over_cube(angle);
    skew3(minus, hat);
    matmul3(hat, hat, hat_sq);
    for (int i = 0; i < 9; i++) out[i] = (i % 4 == 0 ? 1.0 : 0.0) + first * hat[i] + second * hat_sq[i];
}

/* Everything one QVI step needs besides z = (v, w). */
typedef struct {
    int scheme;
    double h, k;
    const Coefficients *c;
    double base[9];      /* R(q_k) */
    double target[6];    /* left: (target_x, target_w); midpoint: p + h impulse */
} QviProblem;

/* d1 = 2 a_xx v + A_xw w + a_x and d2 = 2 A_ww w + A_xw^T v + a_w (Eq. 15). */
static void qvi_d(const Coefficients *c, const double *v, const double *w, double *d1, double *d2) {
    double a[3], b[3];
    matvec3(c->A_xw, w, a);
    for (int i = 0; i < 3; i++) d1[i] = 2.0 * c->a_xx * v[i] + a[i] + c->a_x[i];
    matvec3(c->A_ww, w, a);
    matvec3_transposed(c->A_xw, v, b);
    for (int i = 0; i < 3; i++) d2[i] = 2.0 * a[i] + b[i] + c->a_w[i];
}

/* The midpoint rotation R(q_k) exp(h w / 2). */
static void midpoint_rotation(const QviProblem *problem, const double *w, double *rotation) {
    double phi[3] = {0.5 * problem->h * w[0], 0.5 * problem->h * w[1], 0.5 * problem->h * w[2]};
    double q[4], turn[9];
    from_rotation_vector(phi, q);
    to_matrix(q, turn);
    matmul3(problem->base, turn, rotation);
}

static void qvi_residual(const QviProblem *problem, const double *z, double *r) {
    const double *v = z, *w = z + 3;
    double h = problem->h, d1[3], d2[3], a[3], b[3];
    qvi_d(problem->c, v, w, d1, d2);
    if (problem->scheme == LEFT_RECTANGLE) {
        matvec3(problem->base, d1, a);
        for (int i = 0; i < 3; i++) r[i] = a[i] - problem->target[i];
        cross3(w, d2, a);
        cross3(v, d1, b);
        for (int i = 0; i < 3; i++)
            r[3 + i] = d2[i] + 0.5 * h * a[i] + h * b[i] - problem->target[3 + i];
    } else {
        double rotation[9], u2[3];
        cross3(v, d1, a);
        for (int i = 0; i < 3; i++) u2[i] = d2[i] + problem->k * h * a[i];
        midpoint_rotation(problem, w, rotation);
        matvec3(rotation, u2, a);
        matvec3(rotation, d1, b);
        for (int i = 0; i < 3; i++) {
            r[i] = a[i] - problem->target[i];
            r[3 + i] = b[i] - problem->target[3 + i];
        }
    }
}

/* Place 3x3 block m at (row, column) of the row-major 6x6 matrix j. */
static void put_block(double *j, int row, int column, const double *m) {
    for (int i = 0; i < 3; i++)
        for (int l = 0; l < 3; l++) j[6 * (row + i) + column + l] = m[3 * i + l];
}

static void qvi_jacobian(const QviProblem *problem, const double *z, double *j) {
    const Coefficients *c = problem->c;
    const double *v = z, *w = z + 3;
    double h = problem->h, k = problem->k, d1[3], d2[3];
    double block[9], m1[9], m2[9], m3[9], skew[9];
    qvi_d(c, v, w, d1, d2);
    if (problem->scheme == LEFT_RECTANGLE) {
        const double *rotation = problem->base;
        for (int i = 0; i < 9; i++) block[i] = 2.0 * c->a_xx * rotation[i];
        put_block(j, 0, 0, block);
        matmul3(rotation, c->A_xw, block);
        put_block(j, 0, 3, block);
        /* (I + h/2 [w]x) A_xw^T - h [A_xw w + a_x]x */
        double transposed[9], a[3];
        for (int i = 0; i < 3; i++)
            for (int l = 0; l < 3; l++) transposed[3 * i + l] = c->A_xw[3 * l + i];
        skew3(w, skew);
        for (int i = 0; i < 9; i++) m1[i] = (i % 4 == 0 ? 1.0 : 0.0) + 0.5 * h * skew[i];
        matmul3(m1, transposed, m2);
        matvec3(c->A_xw, w, a);
        for (int i = 0; i < 3; i++) a[i] += c->a_x[i];
        skew3(a, skew);
        for (int i = 0; i < 9; i++) block[i] = m2[i] - h * skew[i];
        put_block(j, 3, 0, block);
        /* (2 I + h [w]x) A_ww + h [v]x A_xw - h/2 [d2]x */
        skew3(w, skew);
        for (int i = 0; i < 9; i++) m1[i] = (i % 4 == 0 ? 2.0 : 0.0) + h * skew[i];
        matmul3(m1, c->A_ww, m2);
        skew3(v, skew);
        for (int i = 0; i < 9; i++) skew[i] *= h;
        matmul3(skew, c->A_xw, m3);
        skew3(d2, skew);
        for (int i = 0; i < 9; i++) block[i] = m2[i] + m3[i] - 0.5 * h * skew[i];
        put_block(j, 3, 3, block);
    } else {
        double rotation[9], turn[9], u2[3], a[3], phi[3] = {0.5 * h * w[0], 0.5 * h * w[1],
                                                             0.5 * h * w[2]};
        cross3(v, d1, a);
        for (int i = 0; i < 3; i++) u2[i] = d2[i] + k * h * a[i];
        midpoint_rotation(problem, w, rotation);
        right_jacobian(phi, turn);
        for (int i = 0; i < 9; i++) turn[i] *= 0.5 * h;
        /* R (A_xw^T + k h (2 a_xx [v]x - [d1]x)) */
        double sv[9], sd1[9], su2[9];
        skew3(v, sv);
        skew3(d1, sd1);
        skew3(u2, su2);
        for (int i = 0; i < 3; i++)
            for (int l = 0; l < 3; l++)
                m1[3 * i + l] = c->A_xw[3 * l + i]
                                + k * h * (2.0 * c->a_xx * sv[3 * i + l] - sd1[3 * i + l]);
        matmul3(rotation, m1, block);
        put_block(j, 0, 0, block);
        /* R (2 A_ww + k h [v]x A_xw - [u2]x turn) */
        matmul3(sv, c->A_xw, m2);
        matmul3(su2, turn, m3);
        for (int i = 0; i < 9; i++) m1[i] = 2.0 * c->A_ww[i] + k * h * m2[i] - m3[i];
        matmul3(rotation, m1, block);
        put_block(j, 0, 3, block);
        /* R 2 a_xx I */
        for (int i = 0; i < 9; i++) block[i] = rotation[i] * (2.0 * c->a_xx);
        put_block(j, 3, 0, block);
        /* R (A_xw - [d1]x turn) */
        matmul3(sd1, turn, m3);
        for (int i = 0; i < 9; i++) m1[i] = c->A_xw[i] - m3[i];
        matmul3(rotation, m1, block);
        put_block(j, 3, 3, block);
    }
}

static double norm6(const double *x) {
    double squares = 0.0;
    for (int i = 0; i < 6; i++) squares += x[i] * x[i];
    return sqrt(squares);
}

/* z - J(z)^-1 r into z (and the correction into correction); 0, or QVI_SINGULAR. */
static int qvi_newton_step(const QviProblem *problem, double *z, const double *r,
                           double *correction) {
    double j[36];
    int pivots[6];
    qvi_jacobian(problem, z, j);
    if (lu_factor(j, 6, pivots) != 0) return QVI_SINGULAR;
    memcpy(correction, r, 6 * sizeof(double));
    lu_solve(j, 6, pivots, correction);
    for (int i = 0; i < 6; i++) z[i] -= correction[i];
    return QVI_SOLVED;
}

/* qvi_common.newton: Newton from z; once converged, one more iteration. */
static int qvi_newton(const QviProblem *problem, double *z, double scale, double tolerance,
                      long max_iterations, long *iterations) {
    double r[6], correction[6];
    double threshold = tolerance * scale;
    qvi_residual(problem, z, r);
    for (long iteration = 1; iteration <= max_iterations; iteration++) {
        if (qvi_newton_step(problem, z, r, correction) != QVI_SOLVED) return QVI_SINGULAR;
        qvi_residual(problem, z, r);
        int finite = 1;
        for (int i = 0; i < 6; i++) finite &= isfinite(r[i]) != 0;
        if (!finite) break;
        if (norm6(r) <= threshold || norm6(correction) <= 1e-15 * norm6(z)) {
            *iterations = iteration + 1;
            return qvi_newton_step(problem, z, r, correction);
        }
    }
    return QVI_NO_CONVERGENCE;
}

static PyObject *qvi_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *coefficients_object, *attitude_object, *position_object, *velocity_object,
        *rate_object, *momentum_object, *inputs_object, *out_object;
    int scheme;
    double h, k, tolerance;
    long max_iterations;
    if (!PyArg_ParseTuple(args, "iOdddlOOOOOOO", &scheme, &coefficients_object, &h, &k,
                          &tolerance, &max_iterations, &attitude_object, &position_object,
                          &velocity_object, &rate_object, &momentum_object, &inputs_object,
                          &out_object))
        return NULL;
    if (scheme != LEFT_RECTANGLE && scheme != MIDPOINT) {
        PyErr_SetString(PyExc_ValueError, "scheme must be 0 (left rectangle) or 1 (midpoint)");
        return NULL;
    }
    if (!(h > 0.0 && isfinite(h)) || !(tolerance > 0.0) || max_iterations < 1) {
        PyErr_SetString(PyExc_ValueError,
                        "h must be a positive finite step (s), tolerance > 0, max_iterations >= 1");
        return NULL;
    }
    Coefficients c;
    double q[4], position[3], z[6], momentum[6], inputs[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    if (read_doubles(coefficients_object, COEFFICIENTS_SIZE, "coefficients", (double *)&c) < 0
        || read_doubles(attitude_object, 4, "attitude", q) < 0
        || read_doubles(position_object, 3, "position", position) < 0
        || read_doubles(velocity_object, 3, "velocity", z) < 0
        || read_doubles(rate_object, 3, "rate", z + 3) < 0
        || read_doubles(momentum_object, 6, "momentum", momentum) < 0)
        return NULL;
    if (inputs_object != Py_None) {
        if (read_doubles(inputs_object, 6, "inputs", inputs) < 0) return NULL;
        for (int i = 0; i < 6; i++) {
            if (!isfinite(inputs[i])) {
                PyErr_SetString(PyExc_ValueError,
                                "inputs must be a finite body wrench (tau_B, F_B) of 6");
                return NULL;
            }
        }
    }
    Py_buffer out;
    if (get_output(out_object, QVI_OUT_SIZE, "out", &out) < 0) return NULL;
    QviProblem problem = {.scheme = scheme, .h = h, .k = k, .c = &c};
    to_matrix(q, problem.base);
    /* world impulse of the held body wrench: h (R tau_B, R F_B) */
    double impulse[6];
    rotate_parts(q[0], q[1], q[2], q[3], inputs, impulse);
    rotate_parts(q[0], q[1], q[2], q[3], inputs + 3, impulse + 3);
    if (scheme == LEFT_RECTANGLE) {
        double angular[3];
        for (int i = 0; i < 3; i++) {
            problem.target[i] = momentum[3 + i] + h * impulse[3 + i];
            angular[i] = momentum[i] + h * impulse[i];
        }
        matvec3_transposed(problem.base, angular, problem.target + 3);
    } else {
        for (int i = 0; i < 6; i++) problem.target[i] = momentum[i] + h * impulse[i];
    }
    long iterations = 0;
    int code = qvi_newton(&problem, z, norm6(momentum), tolerance, max_iterations, &iterations);
    if (code == QVI_SOLVED) {
        double *result = out.buf, d1[3], d2[3], a[3], b[3], turn[4], phi[3];
        const double *v = z, *w = z + 3;
        double *attitude = result, *next_position = result + 4, *interval = result + 13;
        double *next_momentum = result + 17;
        qvi_d(&c, v, w, d1, d2);
        for (int i = 0; i < 3; i++) phi[i] = h * w[i];
        from_rotation_vector(phi, turn);
        quaternion_multiply(q, turn, attitude);
        if (scheme == LEFT_RECTANGLE) {
            memcpy(interval, q, sizeof q);
            cross3(w, d2, a);
            for (int i = 0; i < 3; i++) b[i] = d2[i] - 0.5 * h * a[i];
            rotate_parts(attitude[0], attitude[1], attitude[2], attitude[3], b, next_momentum);
        } else {
            for (int i = 0; i < 3; i++) phi[i] = 0.5 * h * w[i];
            from_rotation_vector(phi, turn);
            quaternion_multiply(q, turn, interval);
            cross3(v, d1, a);
            for (int i = 0; i < 3; i++) b[i] = d2[i] - k * h * a[i];
            rotate_parts(interval[0], interval[1], interval[2], interval[3], b, next_momentum);
        }
        /* linear momentum and displacement are resolved at q_k (left) or the midpoint */
        const double *frame = scheme == LEFT_RECTANGLE ? q : interval;
        rotate_parts(frame[0], frame[1], frame[2], frame[3], d1, next_momentum + 3);
        rotate_parts(frame[0], frame[1], frame[2], frame[3], v, a);
        for (int i = 0; i < 3; i++) next_position[i] = position[i] + h * a[i];
        memcpy(result + 7, z, sizeof z);
    }
    PyBuffer_Release(&out);
    return Py_BuildValue("(il)", code, iterations);
}

/* ---- vehicle_sim plant: the per-step wrench and bookkeeping (vehicle_sim/plant.py) ------ */
/* plant_wrench and plant_advance follow MultirotorPlant.applied_wrench (rotors and drag)
 * and MultirotorPlant.step (after the integrator) expression by expression; only the
 * allocation and inverse-inertia products sum in another order than numpy's. */

#define PLANT_MAX_ROTORS 64
#define PLANT_CONSTANTS_SIZE 41 /* M6^-1 (rows), weight m g (N), CoM offset (m), offset flag */

/* Rows of a 3x3 matrix given as three sequences of three numbers. */
static int read_rows(PyObject *object, const char *name, double out[9]) {
    PyObject *rows = PySequence_Fast(object, "");
    if (rows == NULL || PySequence_Fast_GET_SIZE(rows) != 3) {
        PyErr_Clear();
        Py_XDECREF(rows);
        PyErr_Format(PyExc_TypeError, "%s must be 3 rows of 3 numbers", name);
        return -1;
    }
    int status = 0;
    for (int i = 0; i < 3 && status == 0; i++)
        status = read_doubles(PySequence_Fast_GET_ITEM(rows, i), 3, name, out + 3 * i);
    Py_DECREF(rows);
    return status;
}

/* A list of n Python floats, or a tuple when as_tuple. */
static PyObject *float_sequence(const double *values, int n, int as_tuple) {
    PyObject *result = as_tuple ? PyTuple_New(n) : PyList_New(n);
    if (result == NULL) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *item = PyFloat_FromDouble(values[i]);
        if (item == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        if (as_tuple) PyTuple_SET_ITEM(result, i, item);
        else PyList_SET_ITEM(result, i, item);
    }
    return result;
}

/* MultirotorPlant._world_wrench: applied wrench plus gravity about the world origin. */
static void plant_world_wrench(const double *constants, const double r[9], const double t[3],
                               const double held[6], double out[6]) {
    double weight = constants[36];
    const double *com = constants + 37;
    double f0 = held[3], f1 = held[4], f2 = held[5];
    double force[3] = {r[0] * f0 + r[1] * f1 + r[2] * f2, r[3] * f0 + r[4] * f1 + r[5] * f2,
                       r[6] * f0 + r[7] * f1 + r[8] * f2 - weight};
    double c0 = t[1] * force[2] - t[2] * force[1];
    double c1 = t[2] * force[0] - t[0] * force[2];
    double c2 = t[0] * force[1] - t[1] * force[0];
    c0 += r[0] * held[0] + r[1] * held[1] + r[2] * held[2];
    c1 += r[3] * held[0] + r[4] * held[1] + r[5] * held[2];
    c2 += r[6] * held[0] + r[7] * held[1] + r[8] * held[2];
    if (constants[40] != 0.0) {
        double x = r[0] * com[0] + r[1] * com[1] + r[2] * com[2];
        double y = r[3] * com[0] + r[4] * com[1] + r[5] * com[2];
        c0 -= y * weight;
        c1 += x * weight;
    }
    out[0] = c0, out[1] = c1, out[2] = c2;
    out[3] = force[0], out[4] = force[1], out[5] = force[2];
}

static PyObject *plant_wrench(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *speeds_object, *twist_object, *drag_object, *rows_object, *wind_object;
    Py_buffer allocation;
    if (!PyArg_ParseTuple(args, "y*OOOOO", &allocation, &speeds_object, &twist_object,
                          &drag_object, &rows_object, &wind_object))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t count = PySequence_Check(speeds_object) ? PySequence_Size(speeds_object) : -1;
    double speeds[PLANT_MAX_ROTORS], drag[12], twist[6], rows[9], wind[3];
    if (count < 0 || count > PLANT_MAX_ROTORS) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "rotor_speeds must be a sequence of at most %d numbers",
                     PLANT_MAX_ROTORS);
        goto done;
    }
    if (allocation.len != 6 * count * (Py_ssize_t)sizeof(double)) {
        PyErr_Format(PyExc_ValueError,
                     "allocation must be a C-contiguous float64 %zd x 6 matrix (K^T: one "
                     "wrench per rotor speed)", count);
        goto done;
    }
    if (read_doubles(speeds_object, count, "rotor_speeds", speeds) < 0) goto done;
    const double *k = allocation.buf;
    double wrench[6];
    for (int i = 0; i < 6; i++) {
        double sum = 0.0;
        for (Py_ssize_t j = 0; j < count; j++) sum += k[j * 6 + i] * (speeds[j] * fabs(speeds[j]));
        wrench[i] = sum;
    }
    if (drag_object != Py_None) {
        if (read_doubles(drag_object, 12, "drag", drag) < 0
            || read_doubles(twist_object, 6, "twist", twist) < 0)
            goto done;
        if (wind_object != Py_None) {
            /* MultirotorPlant.air_twist: (omega, v - R^T w) */
            if (read_rows(rows_object, "rows", rows) < 0
                || read_doubles(wind_object, 3, "wind", wind) < 0)
                goto done;
            for (int i = 0; i < 3; i++)
                twist[3 + i] = twist[3 + i] - (rows[i] * wind[0] + rows[3 + i] * wind[1]
                                               + rows[6 + i] * wind[2]);
        }
        for (int i = 0; i < 6; i++)
            wrench[i] = wrench[i] - drag[i] * twist[i] - drag[6 + i] * fabs(twist[i]) * twist[i];
    }
    result = float_sequence(wrench, 6, 0);
done:
    PyBuffer_Release(&allocation);
    return result;
}

static PyObject *plant_advance(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *constants_object, *held_object, *twist_object, *rows_object, *position_object,
        *pose_object, *momentum_object, *impulse_object;
    double h, work;
    if (!PyArg_ParseTuple(args, "OdOOOOOOdO", &constants_object, &h, &held_object,
                          &twist_object, &rows_object, &position_object, &pose_object,
                          &momentum_object, &work, &impulse_object))
        return NULL;
    double constants[PLANT_CONSTANTS_SIZE], held[6], twist[6], rows[9], position[3], pose[8],
        momentum[6], impulse[6];
    if (read_doubles(constants_object, PLANT_CONSTANTS_SIZE, "constants", constants) < 0
        || read_doubles(held_object, 6, "held", held) < 0
        || read_doubles(twist_object, 6, "twist", twist) < 0
        || read_rows(rows_object, "rows", rows) < 0
        || read_doubles(position_object, 3, "position", position) < 0
        || read_doubles(pose_object, 8, "pose", pose) < 0
        || read_doubles(momentum_object, 6, "momentum", momentum) < 0
        || read_doubles(impulse_object, 6, "impulse", impulse) < 0)
        return NULL;
    double new_twist[6], power = 0.0;
    for (int i = 0; i < 6; i++) {
        double sum = 0.0;
        for (int j = 0; j < 6; j++) sum += constants[6 * i + j] * momentum[j];
        new_twist[i] = sum;
    }
    for (int i = 0; i < 6; i++) power += held[i] * (twist[i] + new_twist[i]);
    work += 0.5 * h * power;
    double start[6], end[6], new_rows[9], new_position[3];
    plant_world_wrench(constants, rows, position, held, start);
    /* to_matrix and unpack_translation of mav_geometry.scalar */
    double x = pose[0], y = pose[1], z = pose[2], w = pose[3];
    double dx = pose[4], dy = pose[5], dz = pose[6], dw = pose[7];
    double matrix[9] = {
        1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - z * w), 2.0 * (x * z + y * w),
        2.0 * (x * y + z * w), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - x * w),
        2.0 * (x * z - y * w), 2.0 * (y * z + x * w), 1.0 - 2.0 * (x * x + y * y)};
    memcpy(new_rows, matrix, sizeof matrix);
    new_position[0] = 2.0 * (-dw * x + dx * w - dy * z + dz * y);
    new_position[1] = 2.0 * (-dw * y + dx * z + dy * w - dz * x);
    new_position[2] = 2.0 * (-dw * z - dx * y + dy * x + dz * w);
    plant_world_wrench(constants, new_rows, new_position, held, end);
    for (int i = 0; i < 6; i++) impulse[i] = impulse[i] + 0.5 * h * (start[i] + end[i]);
    PyObject *row0 = float_sequence(new_rows, 3, 1), *row1 = float_sequence(new_rows + 3, 3, 1),
             *row2 = float_sequence(new_rows + 6, 3, 1);
    PyObject *t = float_sequence(new_position, 3, 1), *twist_list = float_sequence(new_twist, 6, 0);
    PyObject *impulse_list = float_sequence(impulse, 6, 0);
    PyObject *result = NULL;
    if (row0 && row1 && row2 && t && twist_list && impulse_list)
        result = Py_BuildValue("(N((OOO)O)dN)", twist_list, row0, row1, row2, t, work,
                               impulse_list);
    else {
        Py_XDECREF(twist_list);
        Py_XDECREF(impulse_list);
    }
    Py_XDECREF(row0);
    Py_XDECREF(row1);
    Py_XDECREF(row2);
    Py_XDECREF(t);
    return result;
}

static PyObject *lag_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *values_object, *targets_object, *decay_object;
    if (!PyArg_ParseTuple(args, "OOO", &values_object, &targets_object, &decay_object))
        return NULL;
    Py_ssize_t count = PySequence_Check(values_object) ? PySequence_Size(values_object) : -1;
    double values[PLANT_MAX_ROTORS], targets[PLANT_MAX_ROTORS], decay[PLANT_MAX_ROTORS];
    if (count < 0 || count > PLANT_MAX_ROTORS) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "values must be a sequence of at most %d numbers",
                     PLANT_MAX_ROTORS);
        return NULL;
    }
    if (read_doubles(values_object, count, "values", values) < 0
        || read_doubles(targets_object, count, "targets", targets) < 0
        || read_doubles(decay_object, count, "decay", decay) < 0)
        return NULL;
    /* RotorMotors.step: the exact first-order lag c + (s - c) a */
    for (Py_ssize_t i = 0; i < count; i++)
        values[i] = targets[i] + (values[i] - targets[i]) * decay[i];
    return float_sequence(values, (int)count, 0);
}

static PyObject *plant_accelerations(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *constants_object, *rows_object, *held_object, *twist_object, *momentum_object;
    if (!PyArg_ParseTuple(args, "OOOOO", &constants_object, &rows_object, &held_object,
                          &twist_object, &momentum_object))
        return NULL;
    double constants[PLANT_CONSTANTS_SIZE], rows[9], held[6], twist[6], momentum[6];
    if (read_doubles(constants_object, PLANT_CONSTANTS_SIZE, "constants", constants) < 0
        || read_rows(rows_object, "rows", rows) < 0
        || read_doubles(held_object, 6, "held", held) < 0
        || read_doubles(twist_object, 6, "twist", twist) < 0
        || read_doubles(momentum_object, 6, "momentum", momentum) < 0)
        return NULL;
    /* MultirotorPlant.accelerations: Euler-Poincare rate, M6^-1, then R (dv/dt + w x v) */
    double weight = constants[36];
    const double *omega = twist, *velocity = twist + 3, *angular = momentum,
                 *linear = momentum + 3;
    double gravity[3] = {-weight * rows[6], -weight * rows[7], -weight * rows[8]};
    double gravity_torque[3], a1[3], a2[3], l1[3], transport[3], rate[6], twist_rate[6];
    cross3(constants + 37, gravity, gravity_torque);
    cross3(angular, omega, a1);
    cross3(linear, velocity, a2);
    cross3(linear, omega, l1);
    for (int i = 0; i < 3; i++) {
        rate[i] = a1[i] + a2[i] + gravity_torque[i] + held[i];
        rate[3 + i] = l1[i] + gravity[i] + held[3 + i];
    }
    for (int i = 0; i < 6; i++) {
        double sum = 0.0;
        for (int j = 0; j < 6; j++) sum += constants[6 * i + j] * rate[j];
        twist_rate[i] = sum;
    }
    cross3(omega, velocity, transport);
    double body[3], world[3];
    for (int i = 0; i < 3; i++) body[i] = twist_rate[3 + i] + transport[i];
    for (int i = 0; i < 3; i++)
        world[i] = rows[3 * i] * body[0] + rows[3 * i + 1] * body[1] + rows[3 * i + 2] * body[2];
    return Py_BuildValue("((ddd)(ddd))", twist_rate[0], twist_rate[1], twist_rate[2], world[0],
                         world[1], world[2]);
}

/* ---- sensors: ENU to WGS-84 geodetic (variational_sim/sensors/gnss.py) ------------------ */
/* pymap3d.enu2geodetic (enu2ecef, then You (2000) ecef2geodetic without iterations) for one
 * point, expression by expression; libm's trigonometry may round differently from numpy's. */
static PyObject *enu_to_geodetic(PyObject *self, PyObject *args) {
    (void)self;
    double east, north, up, lat0, lon0, h0, a, b;
    if (!PyArg_ParseTuple(args, "dddddddd", &east, &north, &up, &lat0, &lon0, &h0, &a, &b))
        return NULL;
    if (!(a > 0.0 && b > 0.0 && b <= a)) {
        PyErr_SetString(PyExc_ValueError, "the ellipsoid axes must satisfy 0 < b <= a (m)");
        return NULL;
    }
    const double pi = 3.141592653589793;
    double lat = lat0 * (pi / 180.0), lon = lon0 * (pi / 180.0);
    /* geodetic2ecef of the datum */
    double n_radius = a * a / hypot(a * cos(lat), b * sin(lat));
    double x0 = (n_radius + h0) * cos(lat) * cos(lon);
    double y0 = (n_radius + h0) * cos(lat) * sin(lon);
    double z0 = (n_radius * ((b / a) * (b / a)) + h0) * sin(lat);
    /* enu2uvw */
    double t = cos(lat) * up - sin(lat) * north;
    double w = sin(lat) * up + cos(lat) * north;
    double u_axis = cos(lon) * t - sin(lon) * east;
    double v_axis = sin(lon) * t + cos(lon) * east;
    double x = x0 + u_axis, y = y0 + v_axis, z = z0 + w;
    /* ecef2geodetic */
    double r = sqrt(x * x + y * y + z * z);
    double e = sqrt(a * a - b * b);
    double u = sqrt(0.5 * (r * r - e * e) + 0.5 * hypot(r * r - e * e, 2.0 * e * z));
    double hxy = hypot(x, y), hue = hypot(u, e);
    double beta;
    if (fabs(u) <= 1e-8 || fabs(hxy) <= 1e-8) { /* numpy.isclose(., 0) */
        beta = fabs(z) <= 1e-8 ? 0.0 : (z > 0.0 ? pi / 2.0 : -pi / 2.0);
    } else {
        beta = atan(hue / u * z / hxy);
        beta += ((b * u - a * hue + e * e) * sin(beta))
                / (a * hue * 1.0 / cos(beta) - e * e * cos(beta));
    }
    double limit = pi / 2.0 - 2.220446049250313e-16;
    double latitude = atan(a / b * tan(beta));
    double cos_beta = cos(beta);
    if (beta >= limit) latitude = pi / 2.0, cos_beta = 0.0;
    if (beta <= -limit) latitude = -pi / 2.0, cos_beta = 0.0;
    double longitude = atan2(y, x);
    double height = hypot(z - b * sin(beta), hxy - a * cos_beta);
    if (x * x / (a * a) + y * y / (a * a) + z * z / (b * b) < 1.0) height = -height;
    return Py_BuildValue("(ddd)", latitude * (180.0 / pi), longitude * (180.0 / pi), height);
}

/* ---- sensors: the IMU reading (variational_sim/sensors/imu.py, ImuModel.sample) --------- */
#define IMU_CONSTANTS_SIZE 17 /* w_ie (ENU), lever arm, mount rows, white gyro and accel */

/* M^T v for a 3x3 matrix m given by its rows (imu.py _transpose_apply). */
static void transpose_apply3(const double m[9], const double v[3], double out[3]) {
    out[0] = m[0] * v[0] + m[3] * v[1] + m[6] * v[2];
    out[1] = m[1] * v[0] + m[4] * v[1] + m[7] * v[2];
    out[2] = m[2] * v[0] + m[5] * v[1] + m[8] * v[2];
}

/* imu.py _clip: clipped to [-limit, limit] like min(max(x, -limit), limit); 1 if any was. */
static int clip3(double v[3], double limit) {
    int clipped = 0;
    for (int i = 0; i < 3; i++) {
        if (-limit <= v[i] && v[i] <= limit) continue;
        clipped = 1;
    }
    if (!clipped) return 0;
    for (int i = 0; i < 3; i++) {
        double x = v[i];
        if (-limit > x) x = -limit;
        if (limit < x) x = limit;
        v[i] = x;
    }
    return 1;
}

static PyObject *imu_reading(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *constants_object, *rows_object, *omega_object, *alpha_object,
        *acceleration_object, *gravity_object, *velocity_object, *normals_object,
        *gyro_bias_object, *accel_bias_object, *spike_object;
    double gyro_range, accel_range;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOdd", &constants_object, &rows_object,
                          &omega_object, &alpha_object, &acceleration_object, &gravity_object,
                          &velocity_object, &normals_object, &gyro_bias_object,
                          &accel_bias_object, &spike_object, &gyro_range, &accel_range))
        return NULL;
    double constants[IMU_CONSTANTS_SIZE], rows[9], omega[3], alpha[3], acceleration[3],
        gravity[3], velocity[3], normals[6], gyro_bias[3], accel_bias[3], spike[6];
    if (read_doubles(constants_object, IMU_CONSTANTS_SIZE, "constants", constants) < 0
        || read_rows(rows_object, "rotation", rows) < 0
        || read_doubles(omega_object, 3, "angular_velocity_body", omega) < 0
        || read_doubles(alpha_object, 3, "angular_acceleration_body", alpha) < 0
        || read_doubles(acceleration_object, 3, "acceleration_enu", acceleration) < 0
        || read_doubles(gravity_object, 3, "gravity_enu", gravity) < 0
        || (velocity_object != Py_None
            && read_doubles(velocity_object, 3, "velocity_enu", velocity) < 0)
        || read_doubles(normals_object, 6, "normals", normals) < 0
        || read_doubles(gyro_bias_object, 3, "gyro_bias", gyro_bias) < 0
        || read_doubles(accel_bias_object, 3, "accel_bias", accel_bias) < 0
        || (spike_object != Py_None && read_doubles(spike_object, 6, "spike", spike) < 0))
        return NULL;
    const double *earth = constants, *lever = constants + 3, *mount = constants + 6;
    double gyro_white = constants[15], accel_white = constants[16];
    double force_enu[3] = {acceleration[0] - gravity[0], acceleration[1] - gravity[1],
                           acceleration[2] - gravity[2]}; /* gravitation is not felt */
    if (velocity_object != Py_None) {
        double coriolis[3];
        cross3(earth, velocity, coriolis);
        for (int i = 0; i < 3; i++) force_enu[i] = force_enu[i] + 2.0 * coriolis[i];
    }
    double force[3], tangential[3], inner[3], centripetal[3], earth_body[3], rate[3], total[3];
    double gyro[3], accel[3];
    transpose_apply3(rows, force_enu, force);
    cross3(alpha, lever, tangential);
    cross3(omega, lever, inner);
    cross3(omega, inner, centripetal);
    transpose_apply3(rows, earth, earth_body);
    for (int i = 0; i < 3; i++) {
        rate[i] = omega[i] + earth_body[i];
        total[i] = force[i] + tangential[i] + centripetal[i];
    }
    transpose_apply3(mount, rate, gyro);
    transpose_apply3(mount, total, accel);
    for (int i = 0; i < 3; i++) {
        gyro[i] = gyro[i] - gyro_bias[i] + gyro_white * normals[i];
        accel[i] = accel[i] - accel_bias[i] + accel_white * normals[3 + i];
    }
    if (spike_object != Py_None) {
        for (int i = 0; i < 3; i++) {
            gyro[i] = gyro[i] + spike[i];
            accel[i] = accel[i] + spike[3 + i];
        }
    }
    int gyro_clipped = clip3(gyro, gyro_range), accel_clipped = clip3(accel, accel_range);
    return Py_BuildValue("((ddd)(ddd)O)", gyro[0], gyro[1], gyro[2], accel[0], accel[1],
                         accel[2], (gyro_clipped || accel_clipped) ? Py_True : Py_False);
}

/* Buffer of count 6x6 matrices (C order) and the count; released by the caller. */
static int get_adjoints(PyObject *object, Py_buffer *view, Py_ssize_t *count) {
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError,
                        "adjoints must be a C-contiguous float64 array of 6 x 6 matrices");
        return -1;
    }
    Py_ssize_t size = (Py_ssize_t)(36 * sizeof(double));
    if (view->format == NULL || strcmp(view->format, "d") != 0 || view->len % size != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError,
                        "adjoints must be a C-contiguous float64 array of 6 x 6 matrices");
        return -1;
    }
    *count = view->len / size;
    return 0;
}

/* MultirotorPlant wings: each link's twist Ad_k V (out: count x 6) from the body's V. */
static PyObject *adjoints_apply(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *adjoints_object, *twist_object, *out_object;
    if (!PyArg_ParseTuple(args, "OOO", &adjoints_object, &twist_object, &out_object))
        return NULL;
    double twist[6];
    Py_buffer adjoints, out;
    Py_ssize_t count;
    if (read_doubles(twist_object, 6, "twist", twist) < 0
        || get_adjoints(adjoints_object, &adjoints, &count) < 0)
        return NULL;
    if (get_output(out_object, 6 * count, "out", &out) < 0) {
        PyBuffer_Release(&adjoints);
        return NULL;
    }
    const double *a = adjoints.buf;
    double *result = out.buf;
    for (Py_ssize_t k = 0; k < count; k++, a += 36) {
        for (int i = 0; i < 6; i++) {
            double sum = 0.0;
            for (int j = 0; j < 6; j++) sum += a[6 * i + j] * twist[j];
            result[6 * k + i] = sum;
        }
    }
    PyBuffer_Release(&adjoints);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

/* MultirotorPlant wings: sum over links of Ad_k^T W_k (the link wrenches moved to O). */
static PyObject *adjoints_transpose_sum(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *adjoints_object, *wrenches_object;
    if (!PyArg_ParseTuple(args, "OO", &adjoints_object, &wrenches_object)) return NULL;
    Py_buffer adjoints, wrenches;
    Py_ssize_t count;
    if (get_adjoints(adjoints_object, &adjoints, &count) < 0) return NULL;
    if (PyObject_GetBuffer(wrenches_object, &wrenches, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&adjoints);
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "wrenches must be a C-contiguous float64 array");
        return NULL;
    }
    if (wrenches.format == NULL || strcmp(wrenches.format, "d") != 0
        || wrenches.len != 6 * count * (Py_ssize_t)sizeof(double)) {
        PyBuffer_Release(&adjoints);
        PyBuffer_Release(&wrenches);
        PyErr_Format(PyExc_ValueError,
                     "wrenches must be a C-contiguous float64 %zd x 6 array (one per adjoint)",
                     count);
        return NULL;
    }
    const double *a = adjoints.buf, *w = wrenches.buf;
    double total[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (Py_ssize_t k = 0; k < count; k++, a += 36, w += 6) {
        for (int i = 0; i < 6; i++) {
            double sum = 0.0;
            for (int j = 0; j < 6; j++) sum += a[6 * j + i] * w[j];
            total[i] += sum;
        }
    }
    PyBuffer_Release(&adjoints);
    PyBuffer_Release(&wrenches);
    return float_sequence(total, 6, 0);
}

#define DQVI_RESULT_DOC \
    "Returns (code, iterations, jacobians, residual, target_norm, rate_step, lapack_info, " \
    "rho_squared); code 0 solved, 1 iteration limit, 2 singular Jacobian, 3 no descent."

static PyMethodDef methods[] = {
    {"dqvi_step", dqvi_step, METH_VARARGS,
     "dqvi_step(body, h, tolerance, max_iterations, reuse_below, chord_contraction, pose, "
     "momentum, inputs, pose_out, momentum_out): one DQVI step (variational_sim.integrators.dqvi)."
     " " DQVI_RESULT_DOC},
    {"dqvi_solve", dqvi_solve, METH_VARARGS,
     "dqvi_solve(body, tolerance, max_iterations, reuse_below, chord_contraction, target, out): "
     "the Newton solve of G(x) = target into out. " DQVI_RESULT_DOC},
    {"qvi_step", qvi_step, METH_VARARGS,
     "qvi_step(scheme, coefficients, h, coupling_factor, tolerance, max_iterations, attitude, "
     "position, velocity, rate, momentum, inputs, out): one QVI step (scheme 0 left rectangle, "
     "1 midpoint; variational_sim.integrators.qvi_*) into out = (attitude 4, position 3, "
     "velocity 3, rate 3, interval attitude 4, momentum 6). Returns (code, "
     "iterations): code 0 solved, 1 no convergence, 2 singular Jacobian."},
    {"plant_wrench", plant_wrench, METH_VARARGS,
     "plant_wrench(allocation, rotor_speeds, twist, drag, rows, wind): rotor and drag body "
     "wrench (m, f) of variational_sim.vehicle_sim.plant.MultirotorPlant as a list of 6 "
     "(allocation: K^T, rotors x 6); drag "
     "None or (linear 6, quadratic 6), wind None or 3 (ENU, with the rotation rows)."},
    {"plant_advance", plant_advance, METH_VARARGS,
     "plant_advance(constants, h, held, twist, rows, position, pose, momentum, work, impulse): "
     "the plant's bookkeeping after an integrator step (MultirotorPlant.step). Returns "
     "(twist, (rows, position), work, impulse) at the new node."},
    {"plant_accelerations", plant_accelerations, METH_VARARGS,
     "plant_accelerations(constants, rows, held, twist, momentum): body angular acceleration "
     "and ENU acceleration of O in flight (MultirotorPlant.accelerations), two 3-tuples."},
    {"enu_to_geodetic", enu_to_geodetic, METH_VARARGS,
     "enu_to_geodetic(east, north, up, latitude0, longitude0, height0, a, b): (latitude deg, "
     "longitude deg, height m) of an ENU point (m) about a datum (deg, deg, m) on the "
     "ellipsoid of axes a >= b (m), as pymap3d.enu2geodetic (variational_sim.sensors.gnss)."},
    {"imu_reading", imu_reading, METH_VARARGS,
     "imu_reading(constants, rotation, angular_velocity_body, angular_acceleration_body, "
     "acceleration_enu, gravity_enu, velocity_enu, normals, gyro_bias, accel_bias, spike, "
     "gyro_range, accel_range): the IMU reading of variational_sim.sensors.imu.ImuModel.sample "
     "(constants: w_ie, lever, mount rows, white gyro and accel sigmas; normals: white gyro "
     "and accel; velocity_enu and spike may be None) as (gyro, accel, clipped)."},
    {"adjoints_apply", adjoints_apply, METH_VARARGS,
     "adjoints_apply(adjoints, twist, out): out[k] = adjoints[k] @ twist for a C-contiguous "
     "(count, 6, 6) float64 array (MultirotorPlant's wing links)."},
    {"adjoints_transpose_sum", adjoints_transpose_sum, METH_VARARGS,
     "adjoints_transpose_sum(adjoints, wrenches): the sum over k of adjoints[k].T @ "
     "wrenches[k] as a list of 6 (MultirotorPlant's wing wrenches moved to O)."},
    {"lag_step", lag_step, METH_VARARGS,
     "lag_step(values, targets, decay): one exact first-order lag step c + (s - c) a per "
     "element (variational_sim.vehicle_sim.motors.RotorMotors.step), as a list."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "variational_sim.integrators._kernels",
    "Compiled DQVI and QVI steps (variational_sim.integrators); the Python code is the reference.",
    -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
