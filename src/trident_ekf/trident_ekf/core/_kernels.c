/* trident_ekf.core._kernels: the error-state filters' per-sample hot path in C
 * (see mav_geometry.kernels for how it is chosen over the numpy reference).
 *
 * One call per IMU sample propagates the nominal state and the covariance accumulators
 * (trident_propagate, conventional_propagate); one call per covariance step fills the
 * error dynamics F, propagates P with Phi = I + F T + (F T)^2 / 2 and the second-order
 * Q_d, and checks the result (trident_flush, conventional_flush); a measurement update is
 * innovation (gain, correction, NIS), the correction of the nominal state (trident_inject,
 * conventional_inject) and joseph_update. Every expression follows the Python reference term by term and in the
 * same order (built with -ffp-contract=off, no -ffast-math), so the nominal arithmetic
 * agrees bit for bit and the matrix products to round-off (numpy's BLAS sums in another
 * order).
 *
 * Accumulator layout (float64[ACC_SIZE], ErrorStateFilter._acc): rate integral (3, rad),
 * force integral (3, m/s), elapsed time T (s), sampling-noise variances (attitude, velocity).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

#define MAX_STATES 32 /* error states a covariance call takes (scratch on the stack) */
#define MAX_MEASUREMENT 6 /* measurement dimension joseph_update takes */
#define ACC_SIZE 9

static const double EARTH_RATE = 7.292115e-5;   /* rad/s (trident_ekf.core.earth) */
static const double GM = 3.986004418e14;        /* m^3/s^2 */
static const double SEMI_MAJOR_AXIS = 6378137.0; /* m */
static const double J2 = 1.082627e-3;
static const double SERIES_BELOW_RAD = 0.1; /* mav_geometry.scalar._SERIES_BELOW_RAD */

/* ----- argument handling ------------------------------------------------------------- */

/* A C-contiguous float64 buffer of exactly `count` elements (any number if count < 0;
 * writable if asked). */
static int get_doubles(PyObject *obj, Py_buffer *view, Py_ssize_t count, int writable,
                       const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) != 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a %sC-contiguous float64 array", name,
                     writable ? "writable " : "");
        return -1;
    }
    if (view->itemsize != 8 || view->format == NULL || strcmp(view->format, "d") != 0) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s must hold float64 values", name);
        return -1;
    }
    if (count >= 0 && view->len != count * 8) {
        Py_ssize_t got = view->len / 8;
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s must have %zd elements, got %zd", name, count, got);
        return -1;
    }
    return 0;
}

/* `count` floats from a tuple or list (ints accepted, as Python arithmetic would). */
static int get_floats(PyObject *obj, double *out, Py_ssize_t count, const char *name) {
    PyObject *seq = PySequence_Fast(obj, "");
    if (seq == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of %zd floats", name, count);
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(seq) != count) {
        Py_ssize_t got = PySequence_Fast_GET_SIZE(seq);
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s must have %zd elements, got %zd", name, count, got);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < count; i++) {
        out[i] = PyFloat_AsDouble(items[i]);
        if (out[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s must hold floats (element %zd is not)", name, i);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

static int get_float(PyObject *obj, double *out, const char *name) {
    *out = PyFloat_AsDouble(obj);
    if (*out == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a float", name);
        return -1;
    }
    return 0;
}

static int check_nargs(Py_ssize_t nargs, Py_ssize_t expected, const char *function) {
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments, got %zd", function, expected,
                     nargs);
        return -1;
    }
    return 0;
}

static PyObject *tuple_of(const double *values, Py_ssize_t count) {
    PyObject *tuple = PyTuple_New(count);
    if (tuple == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyFloat_FromDouble(values[i]);
        if (item == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, i, item);
    }
    return tuple;
}

/* ----- mav_geometry.scalar and trident_ekf.core.earth, term by term ------------------- */

static void multiply(const double p[4], const double q[4], double out[4]) {
    double px = p[0], py = p[1], pz = p[2], pw = p[3];
    double qx = q[0], qy = q[1], qz = q[2], qw = q[3];
    out[0] = pw * qx + px * qw + py * qz - pz * qy;
    out[1] = pw * qy - px * qz + py * qw + pz * qx;
    out[2] = pw * qz + px * qy - py * qx + pz * qw;
    out[3] = pw * qw - px * qx - py * qy - pz * qz;
}

static void multiply_pure(const double q[4], const double u[3], double out[4]) {
    double qx = q[0], qy = q[1], qz = q[2], qw = q[3];
    double ux = u[0], uy = u[1], uz = u[2];
    out[0] = qw * ux + qy * uz - qz * uy;
    out[1] = qw * uy + qz * ux - qx * uz;
    out[2] = qw * uz + qx * uy - qy * ux;
    out[3] = -(qx * ux + qy * uy + qz * uz);
}

static void pure_multiply(const double u[3], const double q[4], double out[4]) {
    double ux = u[0], uy = u[1], uz = u[2];
    double qx = q[0], qy = q[1], qz = q[2], qw = q[3];
    out[0] = ux * qw + uy * qz - uz * qy;
    out[1] = -ux * qz + uy * qw + uz * qx;
    out[2] = ux * qy - uy * qx + uz * qw;
    out[3] = -(ux * qx + uy * qy + uz * qz);
}

static void rotate(const double q[4], const double v[3], double out[3]) {
    double ux = q[0], uy = q[1], uz = q[2], w = q[3];
    double vx = v[0], vy = v[1], vz = v[2];
    double tx = 2.0 * (uy * vz - uz * vy);
    double ty = 2.0 * (uz * vx - ux * vz);
    double tz = 2.0 * (ux * vy - uy * vx);
    out[0] = vx + w * tx + uy * tz - uz * ty;
    out[1] = vy + w * ty + uz * tx - ux * tz;
    out[2] = vz + w * tz + ux * ty - uy * tx;
}

static void to_matrix(const double q[4], double C[3][3]) {
    double x = q[0], y = q[1], z = q[2], w = q[3];
    C[0][0] = 1.0 - 2.0 * (y * y + z * z);
    C[0][1] = 2.0 * (x * y - z * w);
    C[0][2] = 2.0 * (x * z + y * w);
    C[1][0] = 2.0 * (x * y + z * w);
    C[1][1] = 1.0 - 2.0 * (x * x + z * z);
    C[1][2] = 2.0 * (y * z - x * w);
    C[2][0] = 2.0 * (x * z - y * w);
    C[2][1] = 2.0 * (y * z + x * w);
    C[2][2] = 1.0 - 2.0 * (x * x + y * y);
}

static void unpack_translation(const double d[4], const double q[4], double out[3]) {
    double dx = d[0], dy = d[1], dz = d[2], dw = d[3];
    double qx = q[0], qy = q[1], qz = q[2], qw = q[3];
    out[0] = 2.0 * (-dw * qx + dx * qw - dy * qz + dz * qy);
    out[1] = 2.0 * (-dw * qy + dx * qz + dy * qw - dz * qx);
    out[2] = 2.0 * (-dw * qz - dx * qy + dy * qx + dz * qw);
}

/* exp(phi/2) and the left-Jacobian coefficients a, b. */
static void exp_with_jacobian(const double phi[3], double q[4], double *a, double *b) {
    double px = phi[0], py = phi[1], pz = phi[2];
    double angle_sq = px * px + py * py + pz * pz;
    double angle = sqrt(angle_sq);
    double half = 0.5 * angle;
    double sin_half = sin(half);
    double half_sinc = half > 0.0 ? sin_half / half : 1.0;
    double scale = 0.5 * half_sinc;
    *a = 0.5 * half_sinc * half_sinc;
    if (angle < SERIES_BELOW_RAD) {
        double nested = 1.0 - angle_sq / 110.0;
        nested = 1.0 - angle_sq / 72.0 * nested;
        nested = 1.0 - angle_sq / 42.0 * nested;
        *b = (1.0 - angle_sq / 20.0 * nested) / 6.0;
    } else {
        *b = (angle - sin(angle)) / (angle_sq * angle);
    }
    q[0] = scale * px;
    q[1] = scale * py;
    q[2] = scale * pz;
    q[3] = cos(half);
}

static void cross(const double a[3], const double b[3], double out[3]) {
    double c0 = a[1] * b[2] - a[2] * b[1];
    double c1 = a[2] * b[0] - a[0] * b[2];
    double c2 = a[0] * b[1] - a[1] * b[0];
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
}

static void left_jacobian_apply(const double phi[3], double a, double b, const double x[3],
                                double out[3]) {
    double c[3], d[3];
    cross(phi, x, c);
    cross(phi, c, d);
    out[0] = x[0] + a * c[0] + b * d[0];
    out[1] = x[1] + a * c[1] + b * d[1];
    out[2] = x[2] + a * c[2] + b * d[2];
}

static void gravity_xyz(const double p[3], double out[3]) {
    double x = p[0], y = p[1], z = p[2];
    double j2_factor = 1.5 * J2 * (SEMI_MAJOR_AXIS * SEMI_MAJOR_AXIS);
    double omega_squared = EARTH_RATE * EARTH_RATE;
    double r2 = x * x + y * y + z * z;
    double r = sqrt(r2);
    double k = -GM / (r2 * r);
    double j = j2_factor / r2;
    double s = 5.0 * z * z / r2;
    double horizontal = k * (1.0 + j * (1.0 - s));
    out[0] = horizontal * x + omega_squared * x;
    out[1] = horizontal * y + omega_squared * y;
    out[2] = k * (1.0 + j * (3.0 - s)) * z;
}

/* ----- trident_ekf.core.mechanization ----------------------------------------------- */

/* Midpoint velocity vm, position pm and gravity g of one interval. */
static void midpoint(const double v[3], const double p[3], const double cf[3], double dt,
                     double vm[3], double pm[3], double g[3]) {
    double h = 0.5 * dt;
    pm[0] = p[0] + h * v[0];
    pm[1] = p[1] + h * v[1];
    pm[2] = p[2] + h * v[2];
    gravity_xyz(pm, g);
    double two_w = 2.0 * EARTH_RATE;
    vm[0] = v[0] + h * (cf[0] + g[0] + two_w * v[1]);
    vm[1] = v[1] + h * (cf[1] + g[1] - two_w * v[0]);
    vm[2] = v[2] + h * (cf[2] + g[2]);
}

/* exp(-Omega dt / 2) and the coefficients a1, a2 of J_l(-Omega dt) (_EarthIncrement). */
static void earth_increment(double dt, double q[4], double *a1, double *a2) {
    double alpha = -EARTH_RATE * dt;
    double phi[3] = {0.0, 0.0, alpha}, a, b;
    exp_with_jacobian(phi, q, &a, &b);
    *a1 = a * alpha;
    *a2 = b * alpha * alpha;
}

static void z_rotation_times(double s, double c, const double b[4], double out[4]) {
    double bx = b[0], by = b[1], bz = b[2], bw = b[3];
    out[0] = c * bx - s * by;
    out[1] = c * by + s * bx;
    out[2] = c * bz + s * bw;
    out[3] = c * bw - s * bz;
}

static void normalize_trident(const double P[4], const double D1[4], const double D2[4],
                              double out[12]) {
    double n2 = P[0] * P[0] + P[1] * P[1] + P[2] * P[2] + P[3] * P[3];
    double inv = 1.0 / sqrt(n2);
    double k1 = (P[0] * D1[0] + P[1] * D1[1] + P[2] * D1[2] + P[3] * D1[3]) / n2;
    double k2 = (P[0] * D2[0] + P[1] * D2[1] + P[2] * D2[2] + P[3] * D2[3]) / n2;
    for (int i = 0; i < 4; i++) {
        out[i] = P[i] * inv;
        out[4 + i] = (D1[i] - k1 * P[i]) * inv;
        out[8 + i] = (D2[i] - k2 * P[i]) * inv;
    }
}

/* TridentIntegrator.step. */
static void trident_step(const double x[12], const double omega[3], const double force[3],
                         double dt, double out[12]) {
    const double *P = x, *D1 = x + 4, *D2 = x + 8;
    double v[3], p[3], cf[3], vm[3], pm[3], g[3];
    unpack_translation(D1, P, v);
    unpack_translation(D2, P, p);
    rotate(P, force, cf);
    midpoint(v, p, cf, dt, vm, pm, g);

    double theta[3] = {omega[0] * dt, omega[1] * dt, omega[2] * dt};
    double qb[4], a, b, u[3];
    exp_with_jacobian(theta, qb, &a, &b);
    double hdt = 0.5 * dt;
    double half_force[3] = {force[0] * hdt, force[1] * hdt, force[2] * hdt};
    left_jacobian_apply(theta, a, b, half_force, u);

    double qe[4], a1, a2;
    earth_increment(dt, qe, &a1, &a2);
    double w = EARTH_RATE;
    double x0 = (g[0] + w * vm[1]) * hdt, x1 = (g[1] - w * vm[0]) * hdt;
    double ae[3] = {x0 - a1 * x1 - a2 * x0, x1 + a1 * x0 - a2 * x1, g[2] * hdt};
    x0 = (vm[0] - w * pm[1]) * hdt;
    x1 = (vm[1] + w * pm[0]) * hdt;
    double be[3] = {x0 - a1 * x1 - a2 * x0, x1 + a1 * x0 - a2 * x1, vm[2] * hdt};
    double s = qe[2], c = qe[3];

    double t1[4], yp[4], y1[4], y2[4], sum[4];
    multiply_pure(P, u, t1);
    multiply(P, qb, yp);
    for (int i = 0; i < 4; i++) {
        sum[i] = t1[i] + D1[i];
    }
    multiply(sum, qb, y1);
    multiply(D2, qb, y2);
    double zp[4], z1a[4], z1b[4], z2a[4], z2b[4], z1[4], z2[4];
    z_rotation_times(s, c, yp, zp);
    z_rotation_times(s, c, y1, z1a);
    pure_multiply(ae, zp, z1b);
    z_rotation_times(s, c, y2, z2a);
    pure_multiply(be, zp, z2b);
    for (int i = 0; i < 4; i++) {
        z1[i] = z1a[i] + z1b[i];
        z2[i] = z2a[i] + z2b[i];
    }
    normalize_trident(zp, z1, z2, out);
}

/* ConventionalIntegrator.step: out = q (4), v (3), p (3). */
static void conventional_step(const double q[4], const double v[3], const double p[3],
                              const double omega[3], const double force[3], double dt,
                              double out[10]) {
    double cf0[3], vm[3], pm[3], g[3];
    rotate(q, force, cf0);
    midpoint(v, p, cf0, dt, vm, pm, g);
    double theta[3] = {omega[0] * dt, omega[1] * dt, omega[2] * dt};
    double qb[4], a, b, qe[4], a1, a2, qqb[4], q1[4];
    exp_with_jacobian(theta, qb, &a, &b);
    earth_increment(dt, qe, &a1, &a2);
    multiply(q, qb, qqb);
    multiply(qe, qqb, q1);
    double n = 1.0 / sqrt(q1[0] * q1[0] + q1[1] * q1[1] + q1[2] * q1[2] + q1[3] * q1[3]);
    for (int i = 0; i < 4; i++) {
        q1[i] = q1[i] * n;
    }
    double cf1[3];
    rotate(q1, force, cf1);
    double two_w = 2.0 * EARTH_RATE;
    double h = 0.5 * dt;
    double v1[3] = {
        v[0] + h * (cf0[0] + cf1[0]) + dt * (g[0] + two_w * vm[1]),
        v[1] + h * (cf0[1] + cf1[1]) + dt * (g[1] - two_w * vm[0]),
        v[2] + h * (cf0[2] + cf1[2]) + dt * g[2],
    };
    memcpy(out, q1, sizeof q1);
    memcpy(out + 4, v1, sizeof v1);
    for (int i = 0; i < 3; i++) {
        out[7 + i] = p[i] + h * (v[i] + v1[i]);
    }
}

/* ErrorStateFilter._propagate's accumulators. */
static void accumulate(double *acc, const double omega[3], const double force[3], double dt,
                       const double rates[2]) {
    for (int i = 0; i < 3; i++) {
        acc[i] += omega[i] * dt;
        acc[3 + i] += force[i] * dt;
    }
    acc[6] += dt;
    if (rates[0] != 0.0 || rates[1] != 0.0) {
        acc[7] = acc[7] + rates[0] * dt;
        acc[8] = acc[8] + rates[1] * dt;
    }
}

/* TridentEKF._inject: x <- x make(exp(dsigma/2), dsigma', dsigma''), normalized. */
static void trident_inject(const double x[12], const double dx[9], double out[12]) {
    double dq[4], a, b;
    exp_with_jacobian(dx, dq, &a, &b);
    double half1[3] = {0.5 * dx[3], 0.5 * dx[4], 0.5 * dx[5]};
    double half2[3] = {0.5 * dx[6], 0.5 * dx[7], 0.5 * dx[8]};
    double d1[4], d2[4], a1[4], b1[4], a2[4], b2[4], p[4], s1[4], s2[4];
    pure_multiply(half1, dq, d1);
    pure_multiply(half2, dq, d2);
    multiply(x, d1, a1);
    multiply(x + 4, dq, b1);
    multiply(x, d2, a2);
    multiply(x + 8, dq, b2);
    multiply(x, dq, p);
    for (int i = 0; i < 4; i++) {
        s1[i] = a1[i] + b1[i];
        s2[i] = a2[i] + b2[i];
    }
    normalize_trident(p, s1, s2, out);
}

/* BaselineESKF._inject: q <- q exp(phi/2) normalized, v <- v - dv, p <- p - dp; out = q,
 * v, p (10). */
static void conventional_inject(const double q[4], const double v[3], const double p[3],
                                const double dx[9], double out[10]) {
    double dq[4], a, b, q1[4];
    exp_with_jacobian(dx, dq, &a, &b);
    multiply(q, dq, q1);
    double n = pow(q1[0] * q1[0] + q1[1] * q1[1] + q1[2] * q1[2] + q1[3] * q1[3], -0.5);
    for (int i = 0; i < 4; i++) {
        out[i] = q1[i] * n;
    }
    for (int i = 0; i < 3; i++) {
        out[4 + i] = v[i] - dx[3 + i];
        out[7 + i] = p[i] - dx[6 + i];
    }
}

/* ----- error dynamics (the navigation entries; the constant blocks are the filter's) -- */

/* The six off-diagonal entries of [a x] into the 3x3 block at (row, col). */
static void set_skew(double *F, Py_ssize_t n, int row, int col, double x, double y, double z) {
    double *r0 = F + row * n + col, *r1 = r0 + n, *r2 = r1 + n;
    r0[1] = -z;
    r0[2] = y;
    r1[0] = z;
    r1[2] = -x;
    r2[0] = -y;
    r2[1] = x;
}

/* TridentEKF._fill_error_dynamics. */
static void trident_fill(double *F, Py_ssize_t n, const double x[12], const double w[3],
                         const double f[3]) {
    const double *P = x;
    double C[3][3], p[3];
    to_matrix(P, C);
    double e[3] = {C[2][0] * EARTH_RATE, C[2][1] * EARTH_RATE, C[2][2] * EARTH_RATE};
    unpack_translation(x + 8, P, p);
    double r2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
    double k = -GM / (r2 * sqrt(r2));
    double scale = 1.0 / sqrt(r2);
    double conj[4] = {-P[0], -P[1], -P[2], P[3]};
    double unit[3] = {p[0] * scale, p[1] * scale, p[2] * scale}, u[3];
    rotate(conj, unit, u);
    double w2e = EARTH_RATE * EARTH_RATE;
    set_skew(F, n, 0, 0, -w[0], -w[1], -w[2]);
    set_skew(F, n, 3, 0, -f[0], -f[1], -f[2]);
    set_skew(F, n, 3, 3, -w[0] - e[0], -w[1] - e[1], -w[2] - e[2]);
    set_skew(F, n, 6, 6, e[0] - w[0], e[1] - w[1], e[2] - w[2]);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            F[(3 + i) * n + 6 + j] = (k + w2e) * (double)(i == j) - 3.0 * k * u[i] * u[j]
                                     - w2e * C[2][i] * C[2][j];
        }
    }
}

/* BaselineESKF._fill_error_dynamics (gravity_gradient for block (3, 6)). */
static void conventional_fill(double *F, Py_ssize_t n, const double q[4], const double p[3],
                              const double w[3], const double f[3]) {
    double C[3][3];
    to_matrix(q, C);
    set_skew(F, n, 0, 0, -w[0], -w[1], -w[2]);
    double x = p[0], y = p[1], z = p[2];
    double r2 = x * x + y * y + z * z;
    double k = -GM / (r2 * sqrt(r2));
    double m = -3.0 * k / r2;
    double omega_squared = EARTH_RATE * EARTH_RATE;
    double G[3][3] = {
        {k + m * x * x + omega_squared, m * x * y, m * x * z},
        {m * x * y, k + m * y * y + omega_squared, m * y * z},
        {m * x * z, m * y * z, k + m * z * z},
    };
    for (int i = 0; i < 3; i++) {
        const double *row = C[i];
        double *out = F + (3 + i) * n;
        out[0] = row[1] * f[2] - row[2] * f[1];
        out[1] = row[2] * f[0] - row[0] * f[2];
        out[2] = row[0] * f[1] - row[1] * f[0];
        for (int j = 0; j < 3; j++) {
            out[6 + j] = G[i][j];
            out[12 + j] = C[i][j];
        }
    }
}

/* ----- covariance ------------------------------------------------------------------- */

/* P <- Phi P Phi^T + Q_d in place (ErrorStateFilter.flush), Phi = I + A + A^2/2 with
 * A = F T, Q_d = diag(q) + (A Q + Q A^T)/2, q = q_error T (+ the sampling variances on the
 * attitude and velocity errors); the result is exactly symmetric (upper triangle mirrored). */
static void covariance_step(double *P, const double *F, const double *q_error, Py_ssize_t n,
                            double T, double sampling_attitude, double sampling_velocity) {
    double A[MAX_STATES * MAX_STATES], phi[MAX_STATES * MAX_STATES];
    double M[MAX_STATES * MAX_STATES], q[MAX_STATES];
    Py_ssize_t nn = n * n;
    for (Py_ssize_t i = 0; i < nn; i++) {
        A[i] = F[i] * T;
    }
    memset(phi, 0, (size_t)nn * sizeof(double));
    for (Py_ssize_t i = 0; i < n; i++) { /* A @ A, skipping A's zeros (F is sparse) */
        for (Py_ssize_t k = 0; k < n; k++) {
            double a = A[i * n + k];
            if (a == 0.0) {
                continue;
            }
            for (Py_ssize_t j = 0; j < n; j++) {
                phi[i * n + j] += a * A[k * n + j];
            }
        }
    }
    for (Py_ssize_t i = 0; i < nn; i++) {
        phi[i] = phi[i] * 0.5 + A[i];
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        phi[i * n + i] += 1.0;
        q[i] = q_error[i] * T;
    }
    if (sampling_attitude != 0.0 || sampling_velocity != 0.0) {
        for (int i = 0; i < 3; i++) {
            q[i] += sampling_attitude;
            q[3 + i] += sampling_velocity;
        }
    }
    memset(M, 0, (size_t)nn * sizeof(double));
    for (Py_ssize_t i = 0; i < n; i++) { /* M = Phi P */
        for (Py_ssize_t k = 0; k < n; k++) {
            double a = phi[i * n + k];
            if (a == 0.0) {
                continue;
            }
            for (Py_ssize_t j = 0; j < n; j++) {
                M[i * n + j] += a * P[k * n + j];
            }
        }
    }
    /* The nonzeros of each row of Phi (most of the bias rows are the identity's). */
    Py_ssize_t nonzero[MAX_STATES * MAX_STATES], count[MAX_STATES];
    for (Py_ssize_t j = 0; j < n; j++) {
        count[j] = 0;
        for (Py_ssize_t k = 0; k < n; k++) {
            if (phi[j * n + k] != 0.0) {
                nonzero[j * n + count[j]++] = k;
            }
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* (M Phi^T)_ij for j >= i, plus Q_d */
        for (Py_ssize_t j = i; j < n; j++) {
            double sum = 0.0;
            for (Py_ssize_t c = 0; c < count[j]; c++) {
                Py_ssize_t k = nonzero[j * n + c];
                sum += M[i * n + k] * phi[j * n + k];
            }
            double value = sum + A[i * n + j] * q[j] * 0.5;
            value += A[j * n + i] * q[i] * 0.5;
            if (i == j) {
                value += q[i];
            }
            P[i * n + j] = value;
            P[j * n + i] = value;
        }
    }
}

/* ErrorStateFilter._check_covariance: 1 when healthy (no negative or non-finite diagonal,
 * position variances at most `position_limit`). */
static int covariance_healthy(const double *P, Py_ssize_t n, double position_limit) {
    double lowest = INFINITY, total = 0.0, position = -INFINITY;
    for (Py_ssize_t i = 0; i < n; i++) {
        double d = P[i * n + i];
        if (!(d >= lowest)) {
            lowest = d;
        }
        total += d;
        if (i >= 6 && i < 9 && d > position) {
            position = d;
        }
    }
    return lowest >= 0.0 && isfinite(total) && !(position > position_limit);
}


/* ----- measurement update (ErrorStateFilter._update) ------------------------------- */

/* The inverse of the m x m matrix S by Gauss-Jordan elimination with partial pivoting (LU,
 * as numpy's inv); 0 when S is singular. */
static int invert(const double *S, Py_ssize_t m, double *inverse) {
    double a[MAX_MEASUREMENT * MAX_MEASUREMENT];
    memcpy(a, S, (size_t)(m * m) * sizeof(double));
    for (Py_ssize_t i = 0; i < m * m; i++) {
        inverse[i] = 0.0;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        inverse[i * m + i] = 1.0;
    }
    for (Py_ssize_t col = 0; col < m; col++) {
        Py_ssize_t pivot = col;
        for (Py_ssize_t r = col + 1; r < m; r++) {
            if (fabs(a[r * m + col]) > fabs(a[pivot * m + col])) {
                pivot = r;
            }
        }
        if (a[pivot * m + col] == 0.0) {
            return 0;
        }
        if (pivot != col) {
            for (Py_ssize_t j = 0; j < m; j++) {
                double t = a[col * m + j];
                a[col * m + j] = a[pivot * m + j];
                a[pivot * m + j] = t;
                t = inverse[col * m + j];
                inverse[col * m + j] = inverse[pivot * m + j];
                inverse[pivot * m + j] = t;
            }
        }
        double scale = 1.0 / a[col * m + col];
        for (Py_ssize_t j = 0; j < m; j++) {
            a[col * m + j] *= scale;
            inverse[col * m + j] *= scale;
        }
        for (Py_ssize_t r = 0; r < m; r++) {
            double factor = a[r * m + col];
            if (r == col || factor == 0.0) {
                continue;
            }
            for (Py_ssize_t j = 0; j < m; j++) {
                a[r * m + j] -= factor * a[col * m + j];
                inverse[r * m + j] -= factor * inverse[col * m + j];
            }
        }
    }
    return 1;
}

/* out (r x c) = a (r x k) b (k x c), all row-major; skips a's zeros (H, I - K H, the turn
 * are sparse). out must not alias a or b. */
static void product(const double *a, const double *b, Py_ssize_t r, Py_ssize_t k, Py_ssize_t c,
                    double *out) {
    memset(out, 0, (size_t)(r * c) * sizeof(double));
    for (Py_ssize_t i = 0; i < r; i++) {
        for (Py_ssize_t l = 0; l < k; l++) {
            double x = a[i * k + l];
            if (x == 0.0) {
                continue;
            }
            for (Py_ssize_t j = 0; j < c; j++) {
                out[i * c + j] += x * b[l * c + j];
            }
        }
    }
}

/* out (r x c) = a (r x k) b^T, b being c x k. */
static void product_transposed(const double *a, const double *b, Py_ssize_t r, Py_ssize_t k,
                               Py_ssize_t c, double *out) {
    for (Py_ssize_t i = 0; i < r; i++) {
        for (Py_ssize_t j = 0; j < c; j++) {
            double sum = 0.0;
            for (Py_ssize_t l = 0; l < k; l++) {
                sum += a[i * k + l] * b[j * k + l];
            }
            out[i * c + j] = sum;
        }
    }
}

/* S = H P H^T + R, its inverse, the gain K = P H^T S^-1, the correction dx = K z; returns
 * the NIS z^T S^-1 z, or -1 when S is singular. */
static double innovation(const double *P, const double *H, const double *R, const double *z,
                         Py_ssize_t n, Py_ssize_t m, double *K, double *dx, double *S_inv) {
    double PHt[MAX_STATES * MAX_MEASUREMENT], S[MAX_MEASUREMENT * MAX_MEASUREMENT];
    product_transposed(P, H, n, n, m, PHt);
    product(H, PHt, m, n, m, S);
    for (Py_ssize_t i = 0; i < m * m; i++) {
        S[i] += R[i];
    }
    if (!invert(S, m, S_inv)) {
        return -1.0;
    }
    double nis = 0.0;
    for (Py_ssize_t i = 0; i < m; i++) {
        double row = 0.0;
        for (Py_ssize_t j = 0; j < m; j++) {
            row += S_inv[i * m + j] * z[j];
        }
        nis += z[i] * row;
    }
    product(PHt, S_inv, n, m, m, K);
    for (Py_ssize_t i = 0; i < n; i++) {
        double sum = 0.0;
        for (Py_ssize_t j = 0; j < m; j++) {
            sum += K[i * m + j] * z[j];
        }
        dx[i] = sum;
    }
    return nis;
}

/* U <- M U M^T for M = blkdiag(I, rotation, rotation, I, ...): the rotation (3 x 3) turns
 * the velocity and position error blocks (states 3-5 and 6-8). Only those rows and
 * columns change; each entry sums the same nonzero terms in the same order as the full
 * product with M. */
static void turn_blocks(double *U, const double *rotation, Py_ssize_t n) {
    double rows[6 * MAX_STATES];
    for (Py_ssize_t block = 0; block < 2; block++) {
        for (Py_ssize_t i = 0; i < 3; i++) {
            for (Py_ssize_t j = 0; j < n; j++) {
                double sum = 0.0;
                for (Py_ssize_t k = 0; k < 3; k++) {
                    sum += rotation[i * 3 + k] * U[(3 + 3 * block + k) * n + j];
                }
                rows[(3 * block + i) * n + j] = sum;
            }
        }
    }
    memcpy(U + 3 * n, rows, (size_t)(6 * n) * sizeof(double));
    for (Py_ssize_t r = 0; r < n; r++) {
        double *row = U + r * n;
        double turned[6];
        for (Py_ssize_t block = 0; block < 2; block++) {
            for (Py_ssize_t i = 0; i < 3; i++) {
                double sum = 0.0;
                for (Py_ssize_t k = 0; k < 3; k++) {
                    sum += row[3 + 3 * block + k] * rotation[i * 3 + k];
                }
                turned[3 * block + i] = sum;
            }
        }
        memcpy(row + 3, turned, sizeof turned);
    }
}

/* P <- M [(I - K H) P (I - K H)^T + K R K^T] M^T, symmetrised, in place; M turns the
 * velocity and position error blocks by `rotation` (turn_blocks), or is the identity when
 * rotation is NULL. */
static void joseph_update(double *P, const double *H, const double *R, const double *K,
                          const double *rotation, Py_ssize_t n, Py_ssize_t m) {
    double IKH[MAX_STATES * MAX_STATES], T[MAX_STATES * MAX_STATES];
    double U[MAX_STATES * MAX_STATES], KR[MAX_STATES * MAX_MEASUREMENT];
    product(K, H, n, m, n, IKH);
    for (Py_ssize_t i = 0; i < n * n; i++) {
        IKH[i] = -IKH[i];
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        IKH[i * n + i] += 1.0;
    }
    product(IKH, P, n, n, n, T);
    product_transposed(T, IKH, n, n, n, U);
    product(K, R, n, m, m, KR);
    product_transposed(KR, K, n, m, n, T);
    for (Py_ssize_t i = 0; i < n * n; i++) {
        U[i] += T[i];
    }
    if (rotation != NULL) {
        turn_blocks(U, rotation, n);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        for (Py_ssize_t j = i; j < n; j++) {
            double value = 0.5 * (U[i * n + j] + U[j * n + i]);
            P[i * n + j] = value;
            P[j * n + i] = value;
        }
    }
}

/* ----- Python functions ------------------------------------------------------------- */

static void release_all(Py_buffer *views, int count) {
    for (int i = 0; i < count; i++) {
        PyBuffer_Release(&views[i]);
    }
}

/* The covariance buffers of a flush: q_error (n, 9 <= n <= MAX_STATES) gives n; P and F
 * (n x n) and acc (ACC_SIZE) must be writable. views: q_error, P, F, acc. */
static int covariance_buffers(PyObject *P, PyObject *F, PyObject *q_error, PyObject *acc,
                              Py_buffer views[4], Py_ssize_t *n) {
    if (get_doubles(q_error, &views[0], -1, 0, "q_error") != 0) {
        return -1;
    }
    *n = views[0].len / 8;
    if (*n < 9 || *n > MAX_STATES) {
        release_all(views, 1);
        PyErr_Format(PyExc_ValueError, "q_error must have 9 to %d elements, got %zd",
                     MAX_STATES, *n);
        return -1;
    }
    if (get_doubles(P, &views[1], *n * *n, 1, "P") != 0) {
        release_all(views, 1);
        return -1;
    }
    if (get_doubles(F, &views[2], *n * *n, 1, "F") != 0) {
        release_all(views, 2);
        return -1;
    }
    if (acc == NULL) {
        return 0;
    }
    if (get_doubles(acc, &views[3], ACC_SIZE, 1, "acc") != 0) {
        release_all(views, 3);
        return -1;
    }
    return 0;
}

static int update_accumulators(PyObject *acc_obj, const double omega[3], const double force[3],
                               double dt, const double rates[2]) {
    Py_buffer acc;
    if (get_doubles(acc_obj, &acc, ACC_SIZE, 1, "acc") != 0) {
        return -1;
    }
    accumulate((double *)acc.buf, omega, force, dt, rates);
    PyBuffer_Release(&acc);
    return 0;
}

PyDoc_STRVAR(trident_propagate_doc,
"trident_propagate(x, omega, force, dt, rates, acc) -> tuple\n\n"
"One IMU interval of TridentEKF: the next unit trident (12 floats) from x for the body\n"
"rate omega (rad/s) and force (m/s^2) over dt (s); adds the interval to the accumulators\n"
"acc (float64[9], in place) with the sampling-noise variance rates (2 floats).");

static PyObject *py_trident_propagate(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    double x[12], omega[3], force[3], dt, rates[2], out[12];
    if (check_nargs(nargs, 6, "trident_propagate") != 0 || get_floats(args[0], x, 12, "x") != 0
        || get_floats(args[1], omega, 3, "omega") != 0
        || get_floats(args[2], force, 3, "force") != 0 || get_float(args[3], &dt, "dt") != 0
        || get_floats(args[4], rates, 2, "rates") != 0) {
        return NULL;
    }
    if (update_accumulators(args[5], omega, force, dt, rates) != 0) {
        return NULL;
    }
    trident_step(x, omega, force, dt, out);
    return tuple_of(out, 12);
}

PyDoc_STRVAR(conventional_propagate_doc,
"conventional_propagate(q, v, p, omega, force, dt, rates, acc) -> (q, v, p)\n\n"
"One IMU interval of BaselineESKF: attitude q (4), ECEF velocity v (3, m/s) and position\n"
"p (3, m) after dt (s); accumulators as trident_propagate.");

static PyObject *py_conventional_propagate(PyObject *self, PyObject *const *args,
                                           Py_ssize_t nargs) {
    (void)self;
    double q[4], v[3], p[3], omega[3], force[3], dt, rates[2], out[10];
    if (check_nargs(nargs, 8, "conventional_propagate") != 0
        || get_floats(args[0], q, 4, "q") != 0 || get_floats(args[1], v, 3, "v") != 0
        || get_floats(args[2], p, 3, "p") != 0 || get_floats(args[3], omega, 3, "omega") != 0
        || get_floats(args[4], force, 3, "force") != 0 || get_float(args[5], &dt, "dt") != 0
        || get_floats(args[6], rates, 2, "rates") != 0) {
        return NULL;
    }
    if (update_accumulators(args[7], omega, force, dt, rates) != 0) {
        return NULL;
    }
    conventional_step(q, v, p, omega, force, dt, out);
    PyObject *qt = tuple_of(out, 4), *vt = tuple_of(out + 4, 3), *pt = tuple_of(out + 7, 3);
    if (qt == NULL || vt == NULL || pt == NULL) {
        Py_XDECREF(qt);
        Py_XDECREF(vt);
        Py_XDECREF(pt);
        return NULL;
    }
    return Py_BuildValue("(NNN)", qt, vt, pt);
}

/* The shared part of the two flushes: mean rate and force over the accumulated time, the
 * filter's F filled by `fill`, the covariance step, the accumulators zeroed. */
typedef void (*FillFunction)(double *F, Py_ssize_t n, const double *nominal, const double w[3],
                             const double f[3]);

static void fill_trident(double *F, Py_ssize_t n, const double *nominal, const double w[3],
                         const double f[3]) {
    trident_fill(F, n, nominal, w, f);
}

static void fill_conventional(double *F, Py_ssize_t n, const double *nominal, const double w[3],
                              const double f[3]) {
    conventional_fill(F, n, nominal, nominal + 4, w, f);
}

static PyObject *flush(PyObject *const *args, const double *nominal, double position_limit,
                       FillFunction fill) {
    Py_buffer views[4];
    Py_ssize_t n;
    if (covariance_buffers(args[0], args[1], args[2], args[3], views, &n) != 0) {
        return NULL;
    }
    double *P = views[1].buf, *F = views[2].buf, *acc = views[3].buf;
    double T = acc[6];
    if (!(T > 0.0)) {
        release_all(views, 4);
        PyErr_SetString(PyExc_ValueError, "acc holds no elapsed time (acc[6] must be > 0)");
        return NULL;
    }
    double w[3] = {acc[0] / T, acc[1] / T, acc[2] / T};
    double f[3] = {acc[3] / T, acc[4] / T, acc[5] / T};
    fill(F, n, nominal, w, f);
    covariance_step(P, F, views[0].buf, n, T, acc[7], acc[8]);
    memset(acc, 0, ACC_SIZE * sizeof(double));
    int healthy = covariance_healthy(P, n, position_limit);
    release_all(views, 4);
    return PyBool_FromLong(healthy);
}

PyDoc_STRVAR(trident_flush_doc,
"trident_flush(P, F, q_error, acc, x, position_limit) -> bool\n\n"
"TridentEKF's covariance step over the accumulated interval: fills the navigation entries\n"
"of F (n x n, the constant ones as the filter set them) for the trident x (12 floats),\n"
"P <- Phi P Phi^T + Q_d in place (q_error: the n continuous noise densities), zeroes acc.\n"
"True when the covariance is healthy (non-negative finite diagonal, position variances at\n"
"most position_limit, m^2).");

static PyObject *py_trident_flush(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    double x[12], limit;
    if (check_nargs(nargs, 6, "trident_flush") != 0 || get_floats(args[4], x, 12, "x") != 0
        || get_float(args[5], &limit, "position_limit") != 0) {
        return NULL;
    }
    return flush(args, x, limit, fill_trident);
}

PyDoc_STRVAR(conventional_flush_doc,
"conventional_flush(P, F, q_error, acc, q, p, position_limit) -> bool\n\n"
"BaselineESKF's covariance step, as trident_flush, for attitude q (4) and ECEF position p\n"
"(3, m).");

static PyObject *py_conventional_flush(PyObject *self, PyObject *const *args,
                                       Py_ssize_t nargs) {
    (void)self;
    double nominal[7], limit;
    if (check_nargs(nargs, 7, "conventional_flush") != 0
        || get_floats(args[4], nominal, 4, "q") != 0
        || get_floats(args[5], nominal + 4, 3, "p") != 0
        || get_float(args[6], &limit, "position_limit") != 0) {
        return NULL;
    }
    return flush(args, nominal, limit, fill_conventional);
}

PyDoc_STRVAR(covariance_step_doc,
"covariance_step(P, F, q_error, T, sampling_attitude, sampling_velocity) -> None\n\n"
"P <- Phi P Phi^T + Q_d in place for a given F (n x n) over T (s): the covariance step of\n"
"the flushes alone (the compiled floor the benchmark compares against).");

static PyObject *py_covariance_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    double T, sampling_attitude, sampling_velocity;
    if (check_nargs(nargs, 6, "covariance_step") != 0 || get_float(args[3], &T, "T") != 0
        || get_float(args[4], &sampling_attitude, "sampling_attitude") != 0
        || get_float(args[5], &sampling_velocity, "sampling_velocity") != 0) {
        return NULL;
    }
    Py_buffer views[4];
    Py_ssize_t n;
    if (covariance_buffers(args[0], args[1], args[2], NULL, views, &n) != 0) {
        return NULL;
    }
    covariance_step(views[1].buf, views[2].buf, views[0].buf, n, T, sampling_attitude,
                    sampling_velocity);
    release_all(views, 3);
    Py_RETURN_NONE;
}

/* n from P (n x n, 9 <= n <= MAX_STATES) and m from z (1 <= m <= MAX_MEASUREMENT), as
 * ErrorStateFilter passes them. */
static int update_sizes(PyObject *P, PyObject *z, Py_ssize_t *n, Py_ssize_t *m) {
    Py_buffer view;
    if (get_doubles(P, &view, -1, 0, "P") != 0) {
        return -1;
    }
    Py_ssize_t count = view.len / 8;
    PyBuffer_Release(&view);
    *n = (Py_ssize_t)(sqrt((double)count) + 0.5);
    if (*n * *n != count || *n < 9 || *n > MAX_STATES) {
        PyErr_Format(PyExc_ValueError, "P must be n x n with 9 <= n <= %d, got %zd elements",
                     MAX_STATES, count);
        return -1;
    }
    if (get_doubles(z, &view, -1, 0, "z") != 0) {
        return -1;
    }
    *m = view.len / 8;
    PyBuffer_Release(&view);
    if (*m < 1 || *m > MAX_MEASUREMENT) {
        PyErr_Format(PyExc_ValueError, "z must have 1 to %d elements, got %zd",
                     MAX_MEASUREMENT, *m);
        return -1;
    }
    return 0;
}

/* Each buffer of `specs` in turn (releasing the ones taken on an error). */
typedef struct {
    PyObject *obj;
    Py_ssize_t count;
    int writable;
    const char *name;
} BufferSpec;

static int get_buffers(const BufferSpec *specs, int count, Py_buffer *views) {
    for (int i = 0; i < count; i++) {
        if (get_doubles(specs[i].obj, &views[i], specs[i].count, specs[i].writable,
                        specs[i].name) != 0) {
            release_all(views, i);
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(innovation_doc,
"innovation(P, H, R, z, K, dx, S_inv) -> float\n\n"
"The update's innovation for the residual z (m): S = H P H^T + R, writes S^-1 (m x m),\n"
"the gain K = P H^T S^-1 (n x m) and the correction dx = K z (n); returns the NIS\n"
"z^T S^-1 z. P is n x n, H m x n, R m x m (m <= 6). ValueError if S is singular.");

static PyObject *py_innovation(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Py_ssize_t n, m;
    if (check_nargs(nargs, 7, "innovation") != 0 || update_sizes(args[0], args[3], &n, &m) != 0) {
        return NULL;
    }
    BufferSpec specs[7] = {
        {args[0], n * n, 0, "P"}, {args[1], m * n, 0, "H"}, {args[2], m * m, 0, "R"},
        {args[3], m, 0, "z"}, {args[4], n * m, 1, "K"}, {args[5], n, 1, "dx"},
        {args[6], m * m, 1, "S_inv"},
    };
    Py_buffer views[7];
    if (get_buffers(specs, 7, views) != 0) {
        return NULL;
    }
    double nis = innovation(views[0].buf, views[1].buf, views[2].buf, views[3].buf, n, m,
                            views[4].buf, views[5].buf, views[6].buf);
    release_all(views, 7);
    if (nis < 0.0) {
        PyErr_SetString(PyExc_ValueError, "the innovation covariance S is singular");
        return NULL;
    }
    return PyFloat_FromDouble(nis);
}

PyDoc_STRVAR(joseph_update_doc,
"joseph_update(P, H, R, K, rotation) -> None\n\n"
"P <- M [(I - K H) P (I - K H)^T + K R K^T] M^T, symmetrised, in place: the Joseph-form\n"
"covariance update with the gain K from innovation, then the re-expression M of the error\n"
"after the correction: M = blkdiag(I3, rotation, rotation, I) turns the velocity and\n"
"position error blocks (states 3-8) by the 3 x 3 rotation; None for the identity.");

static PyObject *py_joseph_update(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Py_ssize_t n, m;
    if (check_nargs(nargs, 5, "joseph_update") != 0) {
        return NULL;
    }
    Py_buffer view;
    if (get_doubles(args[2], &view, -1, 0, "R") != 0) {
        return NULL;
    }
    m = (Py_ssize_t)(sqrt((double)(view.len / 8)) + 0.5);
    PyBuffer_Release(&view);
    if (m < 1 || m > MAX_MEASUREMENT) {
        PyErr_Format(PyExc_ValueError, "R must be m x m with 1 <= m <= %d", MAX_MEASUREMENT);
        return NULL;
    }
    if (get_doubles(args[0], &view, -1, 1, "P") != 0) {
        return NULL;
    }
    Py_ssize_t count = view.len / 8;
    PyBuffer_Release(&view);
    n = (Py_ssize_t)(sqrt((double)count) + 0.5);
    if (n * n != count || n < 9 || n > MAX_STATES) {
        PyErr_Format(PyExc_ValueError, "P must be n x n with 9 <= n <= %d, got %zd elements",
                     MAX_STATES, count);
        return NULL;
    }
    int with_turn = args[4] != Py_None;
    BufferSpec specs[5] = {
        {args[0], n * n, 1, "P"}, {args[1], m * n, 0, "H"}, {args[2], m * m, 0, "R"},
        {args[3], n * m, 0, "K"}, {args[4], 9, 0, "rotation"},
    };
    Py_buffer views[5];
    if (get_buffers(specs, 4 + with_turn, views) != 0) {
        return NULL;
    }
    joseph_update(views[0].buf, views[1].buf, views[2].buf, views[3].buf,
                  with_turn ? views[4].buf : NULL, n, m);
    release_all(views, 4 + with_turn);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(trident_inject_doc,
"trident_inject(x, dx) -> tuple\n\n"
"TridentEKF's correction: the unit trident x (12 floats) times make(exp(dsigma/2),\n"
"dsigma', dsigma'') for the navigation error dx (9 floats), normalized.");

static PyObject *py_trident_inject(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    double x[12], dx[9], out[12];
    if (check_nargs(nargs, 2, "trident_inject") != 0 || get_floats(args[0], x, 12, "x") != 0
        || get_floats(args[1], dx, 9, "dx") != 0) {
        return NULL;
    }
    trident_inject(x, dx, out);
    return tuple_of(out, 12);
}

PyDoc_STRVAR(conventional_inject_doc,
"conventional_inject(q, v, p, dx) -> (q, v, p)\n\n"
"BaselineESKF's correction for the navigation error dx (9 floats): q exp(phi/2)\n"
"normalized, v - dv, p - dp.");

static PyObject *py_conventional_inject(PyObject *self, PyObject *const *args,
                                        Py_ssize_t nargs) {
    (void)self;
    double q[4], v[3], p[3], dx[9], out[10];
    if (check_nargs(nargs, 4, "conventional_inject") != 0 || get_floats(args[0], q, 4, "q") != 0
        || get_floats(args[1], v, 3, "v") != 0 || get_floats(args[2], p, 3, "p") != 0
        || get_floats(args[3], dx, 9, "dx") != 0) {
        return NULL;
    }
    conventional_inject(q, v, p, dx, out);
    PyObject *qt = tuple_of(out, 4), *vt = tuple_of(out + 4, 3), *pt = tuple_of(out + 7, 3);
    if (qt == NULL || vt == NULL || pt == NULL) {
        Py_XDECREF(qt);
        Py_XDECREF(vt);
        Py_XDECREF(pt);
        return NULL;
    }
    return Py_BuildValue("(NNN)", qt, vt, pt);
}

/* ----- trident_ekf.core.measurements.gnss and trident_ekf.core.divergence ------------ */

static void set_skew3(double out[3][3], const double a[3]) {
    out[0][0] = 0.0;
    out[0][1] = -a[2];
    out[0][2] = a[1];
    out[1][0] = a[2];
    out[1][1] = 0.0;
    out[1][2] = -a[0];
    out[2][0] = -a[1];
    out[2][1] = a[0];
    out[2][2] = 0.0;
}

static void product3(const double a[3][3], const double b[3][3], double out[3][3]) {
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            out[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j];
        }
    }
}

/* gnss.antenna_terms, antenna_velocity and both GNSS models' Jacobian blocks, as 5 x 3 x 3:
 * C (body->ECEF), C [l x] (position, on the attitude), C [(w x l) x] - C [l x] [e x]
 * (velocity, on the attitude), -C [l x] (velocity, on the gyro bias), then the rows
 * omega_eb = w - e, p + C l, v + C (omega_eb x l); e = C^T Omega_ie, l the lever arm. */
static void gnss_antenna(const double q[4], const double v[3], const double p[3],
                         const double w[3], const double lever[3], double out[45]) {
    double C[3][3], L[3][3], CL[3][3], A[3][3], CA[3][3], E[3][3], CLE[3][3];
    double e[3], omega[3], arm[3];
    to_matrix(q, C);
    for (int i = 0; i < 3; i++) {
        e[i] = C[2][i] * EARTH_RATE;
        omega[i] = w[i] - e[i];
    }
    cross(omega, lever, arm);
    set_skew3(L, lever);
    set_skew3(A, arm);
    set_skew3(E, e);
    product3(C, L, CL);
    product3(C, A, CA);
    product3(CL, E, CLE);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            out[i * 3 + j] = C[i][j];
            out[9 + i * 3 + j] = CL[i][j];
            out[18 + i * 3 + j] = CA[i][j] - CLE[i][j];
            out[27 + i * 3 + j] = -CL[i][j];
        }
        out[36 + i] = omega[i];
        out[39 + i] = p[i] + (C[i][0] * lever[0] + C[i][1] * lever[1] + C[i][2] * lever[2]);
        out[42 + i] = v[i] + (C[i][0] * arm[0] + C[i][1] * arm[1] + C[i][2] * arm[2]);
    }
}

PyDoc_STRVAR(gnss_antenna_doc,
"gnss_antenna(q, v, p, omega, lever, out) -> None\n\n"
"The GNSS antenna terms at the nominal state q (body->ECEF, scalar last), v (m/s), p (m)\n"
"(float64 arrays) with the bias-corrected body rate omega (rad/s) and the lever arm\n"
"(body, m) (3 floats each): writes out (5 x 3 x 3) = C, C [l x], C [(w x l) x] -\n"
"C [l x] [e x], -C [l x], then the rows omega_eb = omega - C^T Omega_ie, the antenna\n"
"position p + C l and velocity v + C (omega_eb x l) (trident_ekf.core.measurements.gnss).");

static PyObject *py_gnss_antenna(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    double omega[3], lever[3];
    if (check_nargs(nargs, 6, "gnss_antenna") != 0
        || get_floats(args[3], omega, 3, "omega") != 0
        || get_floats(args[4], lever, 3, "lever") != 0) {
        return NULL;
    }
    BufferSpec specs[4] = {
        {args[0], 4, 0, "q"}, {args[1], 3, 0, "v"}, {args[2], 3, 0, "p"},
        {args[5], 45, 1, "out"},
    };
    Py_buffer views[4];
    if (get_buffers(specs, 4, views) != 0) {
        return NULL;
    }
    gnss_antenna(views[0].buf, views[1].buf, views[2].buf, omega, lever, views[3].buf);
    release_all(views, 4);
    Py_RETURN_NONE;
}

/* A filter covariance: n x n float64 with 15 <= n <= MAX_STATES; its size in *n. */
static int get_covariance(PyObject *obj, Py_buffer *view, Py_ssize_t *n) {
    if (get_doubles(obj, view, -1, 0, "P") != 0) {
        return -1;
    }
    Py_ssize_t size = view->len / 8;
    *n = 0;
    while ((*n + 1) * (*n + 1) <= size) {
        (*n)++;
    }
    if (*n * *n != size || *n < 15 || *n > MAX_STATES) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "P must be n x n with 15 <= n <= %d, got %zd elements",
                     MAX_STATES, size);
        return -1;
    }
    return 0;
}

/* Conventional-covariance rows and columns fix_drift needs: velocity, then attitude and
 * accelerometer bias (divergence._VEL, _ATT_AND_ACCEL_BIAS). */
static const int DRIFT_INDEX[9] = {3, 4, 5, 0, 1, 2, 12, 13, 14};

/* divergence.fix_record's drift blocks. The conventional covariance J P J^T on DRIFT_INDEX
 * (9 x 9), with J = blkdiag(I, N, N, I, ...) (the filter's navigation_error_block N);
 * U = [[f x] C, C] (f = -gravity at p); vv = Pc_vv, va = Pc_v,a U^T, aa = U Pc_a,a U^T;
 * drift holds vv, va, aa (3 x 3 each, row-major). */
static void fix_drift(const double *P, Py_ssize_t n, const double N[9], const double C[9],
                      const double p[3], double drift[27]) {
    double Pc[9][9];
    for (int a = 0; a < 9; a++) {
        for (int b = 0; b < 9; b++) {
            Pc[a][b] = P[DRIFT_INDEX[a] * n + DRIFT_INDEX[b]];
        }
    }
    /* Velocity rows, then columns: N P and P N^T. */
    double rows[3][9];
    for (int i = 0; i < 3; i++) {
        for (int b = 0; b < 9; b++) {
            rows[i][b] = N[i * 3] * Pc[0][b] + N[i * 3 + 1] * Pc[1][b] + N[i * 3 + 2] * Pc[2][b];
        }
    }
    for (int i = 0; i < 3; i++) {
        for (int b = 0; b < 9; b++) {
            Pc[i][b] = rows[i][b];
        }
    }
    for (int a = 0; a < 9; a++) {
        double x = Pc[a][0], y = Pc[a][1], z = Pc[a][2];
        for (int j = 0; j < 3; j++) {
            Pc[a][j] = x * N[j * 3] + y * N[j * 3 + 1] + z * N[j * 3 + 2];
        }
    }
    double g[3], U[3][6], UA[3][6], S[3][3];
    gravity_xyz(p, g);
    double force[3] = {-g[0], -g[1], -g[2]};
    set_skew3(S, force);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            U[i][j] = S[i][0] * C[j] + S[i][1] * C[3 + j] + S[i][2] * C[6 + j];
            U[i][j + 3] = C[i * 3 + j];
        }
    }
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 6; j++) {
            double sum = 0.0;
            for (int k = 0; k < 6; k++) {
                sum += U[i][k] * Pc[3 + k][3 + j];
            }
            UA[i][j] = sum;
        }
    }
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            double va = 0.0, aa = 0.0;
            for (int k = 0; k < 6; k++) {
                va += Pc[i][3 + k] * U[j][k];
                aa += UA[i][k] * U[j][k];
            }
            drift[i * 3 + j] = Pc[i][j];
            drift[9 + i * 3 + j] = va;
            drift[18 + i * 3 + j] = aa;
        }
    }
}

PyDoc_STRVAR(fix_drift_doc,
"fix_drift(P, N, C, p, drift) -> None\n\n"
"The drift blocks of a GNSS fix record (trident_ekf.core.divergence.fix_record) from the\n"
"filter's covariance P (n x n, 15 <= n <= MAX_STATES) with its conventional Jacobian\n"
"blkdiag(I, N, N, I, ...) (N: navigation_error_block, 3 x 3), the rotation C body->ECEF\n"
"(3 x 3) and the hover specific force -gravity(p) at the ECEF position p (m): writes\n"
"drift (3 x 3 x 3) = (A_vv, A_va, A_aa).");

static PyObject *py_fix_drift(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 5, "fix_drift") != 0) {
        return NULL;
    }
    Py_buffer P_view;
    Py_ssize_t n;
    if (get_covariance(args[0], &P_view, &n) != 0) {
        return NULL;
    }
    BufferSpec specs[4] = {
        {args[1], 9, 0, "N"}, {args[2], 9, 0, "C"}, {args[3], 3, 0, "p"},
        {args[4], 27, 1, "drift"},
    };
    Py_buffer views[4];
    if (get_buffers(specs, 4, views) != 0) {
        PyBuffer_Release(&P_view);
        return NULL;
    }
    fix_drift(P_view.buf, n, views[0].buf, views[1].buf, views[2].buf, views[3].buf);
    PyBuffer_Release(&P_view);
    release_all(views, 4);
    Py_RETURN_NONE;
}

/* ----- trident_ekf.core.measurements.magnetometer ------------------------------------ */

/* Inclination (rad, positive down) of a field in ENU axes (magnetometer._inclination). */
static double inclination(const double f[3]) { return atan2(-f[2], hypot(f[0], f[1])); }

/* The magnetometer's check and heading model in the local level frame: with A = axes
 * (ENU -> ECEF), the sample s turned to ENU m = A^T C s and the model field e = A^T F,
 * returns the heading residual (wrapped to [-pi, pi)), writes the inclinations of m and e
 * (out) and the heading row (on the attitude error) of magnetometer.linearize. */
static double magnetometer_level(const double q[4], const double axes[9], const double F[3],
                                 const double s[3], double row[3], double out[2]) {
    double C[3][3], AC[3][3], m[3], e[3];
    to_matrix(q, C);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            AC[i][j] = axes[i] * C[0][j] + axes[3 + i] * C[1][j] + axes[6 + i] * C[2][j];
        }
    }
    for (int i = 0; i < 3; i++) {
        m[i] = AC[i][0] * s[0] + AC[i][1] * s[1] + AC[i][2] * s[2];
        e[i] = axes[i] * F[0] + axes[3 + i] * F[1] + axes[6 + i] * F[2];
    }
    double angle = atan2(e[1], e[0]) - atan2(m[1], m[0]);
    double residual = fmod(angle + Py_MATH_PI, 2.0 * Py_MATH_PI);
    if (residual < 0.0) {
        residual += 2.0 * Py_MATH_PI; /* Python's % takes the divisor's sign */
    }
    residual -= Py_MATH_PI;
    double h2 = e[0] * e[0] + e[1] * e[1];
    double u[3] = {-e[2] * e[0] / h2, -e[2] * e[1] / h2, 1.0};
    for (int j = 0; j < 3; j++) {
        row[j] = u[0] * AC[0][j] + u[1] * AC[1][j] + u[2] * AC[2][j];
    }
    out[0] = inclination(m);
    out[1] = inclination(e);
    return residual;
}

PyDoc_STRVAR(magnetometer_level_doc,
"magnetometer_level(q, axes, field, sample, row) -> (residual, measured, model)\n\n"
"The magnetometer's disturbance check and heading model (trident_ekf.core.measurements.\n"
"magnetometer) at the attitude q (body->ECEF, scalar last) with the local ENU->ECEF axes\n"
"(3 x 3), the Earth field (ECEF, T) and the sample (body, T; hard-iron corrected): the\n"
"heading residual (rad, in [-pi, pi)) and the inclinations (rad) of\n"
"the levelled sample and of the field; writes the heading row on the attitude error (3).");

static PyObject *py_magnetometer_level(PyObject *self, PyObject *const *args,
                                       Py_ssize_t nargs) {
    (void)self;
    if (check_nargs(nargs, 5, "magnetometer_level") != 0) {
        return NULL;
    }
    BufferSpec specs[5] = {
        {args[0], 4, 0, "q"}, {args[1], 9, 0, "axes"}, {args[2], 3, 0, "field"},
        {args[3], 3, 0, "sample"}, {args[4], 3, 1, "row"},
    };
    Py_buffer views[5];
    if (get_buffers(specs, 5, views) != 0) {
        return NULL;
    }
    double out[2];
    double residual = magnetometer_level(views[0].buf, views[1].buf, views[2].buf,
                                         views[3].buf, views[4].buf, out);
    release_all(views, 5);
    return Py_BuildValue("(ddd)", residual, out[0], out[1]);
}

/* ----- trident_ekf.core.session.EstimationSession.estimate --------------------------- */

/* Layout of estimate_outputs' `out`: position, velocity (ENU), attitude q body->ENU,
 * linear_body, angular_body, then position_cov, velocity_cov, attitude_cov (3 x 3 each),
 * pose_cov and twist_cov (6 x 6 each), bias_sigma (6). */
#define ESTIMATE_SIZE 121

/* out = A P[row.., col..] B^T for 3 x 3 blocks of the n x n P. */
static void block_congruence(const double *P, Py_ssize_t n, int row, int col,
                             const double A[3][3], const double B[3][3], double out[3][3]) {
    double ap[3][3];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            ap[i][j] = A[i][0] * P[(row + 0) * n + col + j] + A[i][1] * P[(row + 1) * n + col + j]
                       + A[i][2] * P[(row + 2) * n + col + j];
        }
    }
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            out[i][j] = ap[i][0] * B[j][0] + ap[i][1] * B[j][1] + ap[i][2] * B[j][2];
        }
    }
}

static void put_block(double *out, int stride, int row, int col, const double b[3][3],
                      double sign) {
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            out[(row + i) * stride + col + j] = sign * b[i][j];
        }
    }
}

/* The session's estimate: the conventional error [phi^b, v_hat - v, p_hat - p, biases]
 * (the trident filter's velocity and position errors are body axes, J = -C; the baseline's
 * are ECEF) turned to ENU block by block, as the reference's one congruence M P M^T. */
static void estimate_outputs(const double *P, Py_ssize_t n, const double q[4],
                             const double v[3], const double p[3], const double R[9],
                             const double origin[3], const double to_enu[4],
                             const double omega[3], double rate_variance, int body_errors,
                             double *out) {
    double C[3][3], Cnb[3][3], nav[3][3];
    to_matrix(q, C);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            Cnb[i][j] = R[0 * 3 + i] * C[0][j] + R[1 * 3 + i] * C[1][j] + R[2 * 3 + i] * C[2][j];
            nav[i][j] = body_errors ? -Cnb[i][j] : R[j * 3 + i];
        }
    }
    for (int i = 0; i < 3; i++) {
        out[i] = R[0 * 3 + i] * (p[0] - origin[0]) + R[1 * 3 + i] * (p[1] - origin[1])
                 + R[2 * 3 + i] * (p[2] - origin[2]);
        out[3 + i] = R[0 * 3 + i] * v[0] + R[1 * 3 + i] * v[1] + R[2 * 3 + i] * v[2];
        out[10 + i] = C[0][i] * v[0] + C[1][i] * v[1] + C[2][i] * v[2];
        out[13 + i] = omega[i] - C[2][i] * EARTH_RATE;
    }
    multiply(to_enu, q, out + 6);
    if (out[9] < 0.0) {
        for (int k = 6; k < 10; k++) {
            out[k] = -out[k];
        }
    }
    double pp[3][3], vv[3][3], aa[3][3], pa[3][3], ap[3][3];
    block_congruence(P, n, 6, 6, nav, nav, pp);
    block_congruence(P, n, 3, 3, nav, nav, vv);
    block_congruence(P, n, 0, 0, Cnb, Cnb, aa);
    block_congruence(P, n, 6, 0, nav, Cnb, pa);
    block_congruence(P, n, 0, 6, Cnb, nav, ap);
    put_block(out + 16, 3, 0, 0, pp, 1.0);
    put_block(out + 25, 3, 0, 0, vv, 1.0);
    put_block(out + 34, 3, 0, 0, aa, 1.0);
    /* pose (x, y, z, rot): truth minus estimate flips the position error's sign */
    double *pose = out + 43;
    put_block(pose, 6, 0, 0, pp, 1.0);
    put_block(pose, 6, 0, 3, pa, -1.0);
    put_block(pose, 6, 3, 0, ap, -1.0);
    put_block(pose, 6, 3, 3, aa, 1.0);
    /* twist: body velocity C_nb^T S_vv C_nb; the rate is a reading plus the bias estimate */
    double *twist = out + 79;
    for (int k = 0; k < 36; k++) {
        twist[k] = 0.0;
    }
    double linear[3][3], Cbn[3][3];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            Cbn[i][j] = Cnb[j][i];
        }
    }
    double tmp[3][3];
    product3(Cbn, vv, tmp);
    product3(tmp, Cnb, linear);
    put_block(twist, 6, 0, 0, linear, 1.0);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            twist[(3 + i) * 6 + 3 + j] = P[(9 + i) * n + 9 + j];
        }
        twist[(3 + i) * 6 + 3 + i] += rate_variance;
    }
    for (int k = 0; k < 6; k++) {
        out[115 + k] = sqrt(P[(9 + k) * n + 9 + k]);
    }
}

PyDoc_STRVAR(estimate_outputs_doc,
"estimate_outputs(P, q, v, p, R, origin, to_enu, omega, rate_variance, body_errors, out)\n\n"
"EstimationSession.estimate in one call: from the filter covariance P (n x n, n >= 15),\n"
"the nominal q body->ECEF, v, p (ECEF, float64 arrays), the datum's ENU->ECEF rotation R\n"
"(3 x 3) and origin (m), its quaternion ECEF->ENU to_enu and the body rate omega (rad/s)\n"
"(4 and 3 floats), the rate's white-noise variance and whether the velocity and position\n"
"errors are in body axes (the trident filter), writes out (ESTIMATE_SIZE).");

static PyObject *py_estimate_outputs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    double to_enu[4], omega[3], rate_variance;
    if (check_nargs(nargs, 11, "estimate_outputs") != 0
        || get_floats(args[6], to_enu, 4, "to_enu") != 0
        || get_floats(args[7], omega, 3, "omega") != 0
        || get_float(args[8], &rate_variance, "rate_variance") != 0) {
        return NULL;
    }
    int body_errors = PyObject_IsTrue(args[9]);
    if (body_errors < 0) {
        return NULL;
    }
    Py_buffer P_view;
    Py_ssize_t n;
    if (get_covariance(args[0], &P_view, &n) != 0) {
        return NULL;
    }
    BufferSpec specs[6] = {
        {args[1], 4, 0, "q"}, {args[2], 3, 0, "v"}, {args[3], 3, 0, "p"},
        {args[4], 9, 0, "R"}, {args[5], 3, 0, "origin"}, {args[10], ESTIMATE_SIZE, 1, "out"},
    };
    Py_buffer views[6];
    if (get_buffers(specs, 6, views) != 0) {
        PyBuffer_Release(&P_view);
        return NULL;
    }
    estimate_outputs(P_view.buf, n, views[0].buf, views[1].buf, views[2].buf, views[3].buf,
                     views[4].buf, to_enu, omega, rate_variance, body_errors, views[5].buf);
    PyBuffer_Release(&P_view);
    release_all(views, 6);
    Py_RETURN_NONE;
}

/* ----- trident_ekf.core.yaw_estimator.YawEstimator._advance -------------------------- */

#define MAX_HYPOTHESES 64 /* YawEstimatorConfig.models */
static const double MAX_GYRO_BIAS = 0.05;     /* rad/s (yaw_estimator.MAX_GYRO_BIAS) */
static const double SMALL_TURN_SHARE = 0.02;  /* yaw_estimator.SMALL_TURN_SHARE */

/* Hypothesis i's tilt-correction turn (body axes at the window's start), as
 * _tilt_correction: the turn moving the specific force its attitude R expects (`expected`,
 * ENU unit vector) towards the measured `direction`, by `share` of the error, plus the
 * gyro-bias estimate over the window; the bias integrates the error (`bias_gain` per rad,
 * 0: not yet). */
static void tilt_turn(const double R[3][3], double bias[3], const double expected[3],
                      const double direction[3], double share, double duration,
                      double bias_gain, double turn[3][3]) {
    double predicted[3], axis[3];
    for (int j = 0; j < 3; j++) {
        predicted[j] = expected[0] * R[0][j] + expected[1] * R[1][j] + expected[2] * R[2][j];
    }
    double x = direction[0], y = direction[1], z = direction[2];
    axis[0] = predicted[1] * -z + predicted[2] * y;
    axis[1] = predicted[0] * z + predicted[2] * -x;
    axis[2] = predicted[0] * -y + predicted[1] * x;
    double sine = sqrt(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]);
    double cosine = predicted[0] * x + predicted[1] * y + predicted[2] * z;
    double scale = atan2(sine, cosine) / (sine > 1e-12 ? sine : 1e-12);
    double phi[3];
    for (int j = 0; j < 3; j++) {
        double error = axis[j] * scale;
        phi[j] = share * error + bias[j] * duration;
        if (bias_gain > 0.0) {
            double b = bias[j] + bias_gain * error;
            bias[j] = b < -MAX_GYRO_BIAS ? -MAX_GYRO_BIAS : (b > MAX_GYRO_BIAS ? MAX_GYRO_BIAS : b);
        }
    }
    double K[3][3], KK[3][3];
    set_skew3(K, phi);
    product3(K, K, KK);
    double a = 1.0, b = 0.5;
    if (share >= SMALL_TURN_SHARE) { /* Rodrigues; below, exp to second order */
        double angle = sqrt(phi[0] * phi[0] + phi[1] * phi[1] + phi[2] * phi[2]);
        double safe = angle > 1e-12 ? angle : 1e-12;
        a = sin(angle) / safe;
        b = (1.0 - cos(angle)) / (safe * safe);
    }
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            turn[i][j] = (i == j ? 1.0 : 0.0) + a * K[i][j] + b * KK[i][j];
        }
    }
}

PyDoc_STRVAR(yaw_bank_advance_doc,
"yaw_bank_advance(rotation, gyro_bias, velocity, covariance, dv_enu, window_q, dv,\n"
"                 duration, expected, direction, share, bias_gain, yaw_noise, mode)\n\n"
"YawEstimator._advance over one IMU window for n hypotheses: rotation (n x 3 x 3, body\n"
"FLU -> ENU), gyro_bias (n x 3, rad/s), velocity (n x 2, m/s) and covariance (n x 3 x 3)\n"
"in place; dv_enu (n x 3) gets each hypothesis's ENU velocity change. window_q is the\n"
"window's quaternion [x, y, z, w] and dv its specific-force integral (m/s, body axes at\n"
"its start), duration s; expected (3) the unit specific force expected in ENU and\n"
"direction (3) the measured one (body axes at the window's start), share and\n"
"bias_gain (duration times gyro_bias_gain, 0 while aligning) the tilt correction's, and\n"
"yaw_noise the rad^2 added to each yaw variance. mode: 1 tilt correction, 2 EKF\n"
"prediction (bits).");

static PyObject *py_yaw_bank_advance(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    double q[4], dv[3], expected[3], direction[3], duration, share, bias_gain, yaw_noise;
    if (check_nargs(nargs, 14, "yaw_bank_advance") != 0
        || get_floats(args[5], q, 4, "window_q") != 0
        || get_floats(args[6], dv, 3, "dv") != 0
        || get_float(args[7], &duration, "duration") != 0
        || get_floats(args[8], expected, 3, "expected") != 0
        || get_floats(args[9], direction, 3, "direction") != 0
        || get_float(args[10], &share, "share") != 0
        || get_float(args[11], &bias_gain, "bias_gain") != 0
        || get_float(args[12], &yaw_noise, "yaw_noise") != 0) {
        return NULL;
    }
    long mode = PyLong_AsLong(args[13]);
    if (mode == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "mode must be an integer");
        return NULL;
    }
    Py_buffer rotation_view;
    if (get_doubles(args[0], &rotation_view, -1, 1, "rotation") != 0) {
        return NULL;
    }
    Py_ssize_t n = rotation_view.len / 72;
    if (rotation_view.len != n * 72 || n < 1 || n > MAX_HYPOTHESES) {
        PyBuffer_Release(&rotation_view);
        PyErr_Format(PyExc_ValueError, "rotation must be n x 3 x 3 with 1 <= n <= %d",
                     MAX_HYPOTHESES);
        return NULL;
    }
    BufferSpec specs[4] = {
        {args[1], 3 * n, 1, "gyro_bias"}, {args[2], 2 * n, 1, "velocity"},
        {args[3], 9 * n, 1, "covariance"}, {args[4], 3 * n, 1, "dv_enu"},
    };
    Py_buffer views[4];
    if (get_buffers(specs, 4, views) != 0) {
        PyBuffer_Release(&rotation_view);
        return NULL;
    }
    double (*R)[3][3] = rotation_view.buf;
    double (*bias)[3] = views[0].buf, (*velocity)[2] = views[1].buf;
    double (*P)[3][3] = views[2].buf, (*dv_enu)[3] = views[3].buf;
    double W[3][3];
    to_matrix(q, W);
    for (Py_ssize_t i = 0; i < n; i++) {
        double window[3][3], turn[3][3];
        if (mode & 1) {
            tilt_turn(R[i], bias[i], expected, direction, share, duration, bias_gain, turn);
            product3(turn, W, window);
        } else {
            memcpy(window, W, sizeof window);
        }
        if (mode & 2) { /* prediction with the attitude before this window */
            for (int j = 0; j < 3; j++) {
                dv_enu[i][j] = R[i][j][0] * dv[0] + R[i][j][1] * dv[1] + R[i][j][2] * dv[2];
            }
            double east = dv_enu[i][0], north = dv_enu[i][1];
            velocity[i][0] += east;
            velocity[i][1] += north;
            /* J = I with J[0][2] = -north, J[1][2] = east: J P J^T term by term */
            double (*p)[3] = P[i];
            double jp[3][3];
            for (int k = 0; k < 3; k++) {
                jp[0][k] = p[0][k] + -north * p[2][k];
                jp[1][k] = p[1][k] + east * p[2][k];
                jp[2][k] = p[2][k];
            }
            for (int r = 0; r < 3; r++) {
                p[r][0] = jp[r][0] + jp[r][2] * -north;
                p[r][1] = jp[r][1] + jp[r][2] * east;
                p[r][2] = jp[r][2];
            }
            p[2][2] += yaw_noise;
        }
        double turned[3][3];
        product3(R[i], window, turned);
        memcpy(R[i], turned, sizeof turned);
    }
    PyBuffer_Release(&rotation_view);
    release_all(views, 4);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"trident_propagate", (PyCFunction)(void (*)(void))py_trident_propagate, METH_FASTCALL,
     trident_propagate_doc},
    {"conventional_propagate", (PyCFunction)(void (*)(void))py_conventional_propagate,
     METH_FASTCALL, conventional_propagate_doc},
    {"trident_flush", (PyCFunction)(void (*)(void))py_trident_flush, METH_FASTCALL,
     trident_flush_doc},
    {"conventional_flush", (PyCFunction)(void (*)(void))py_conventional_flush, METH_FASTCALL,
     conventional_flush_doc},
    {"covariance_step", (PyCFunction)(void (*)(void))py_covariance_step, METH_FASTCALL,
     covariance_step_doc},
    {"trident_inject", (PyCFunction)(void (*)(void))py_trident_inject, METH_FASTCALL,
     trident_inject_doc},
    {"conventional_inject", (PyCFunction)(void (*)(void))py_conventional_inject, METH_FASTCALL,
     conventional_inject_doc},
    {"innovation", (PyCFunction)(void (*)(void))py_innovation, METH_FASTCALL, innovation_doc},
    {"joseph_update", (PyCFunction)(void (*)(void))py_joseph_update, METH_FASTCALL,
     joseph_update_doc},
    {"gnss_antenna", (PyCFunction)(void (*)(void))py_gnss_antenna, METH_FASTCALL,
     gnss_antenna_doc},
    {"fix_drift", (PyCFunction)(void (*)(void))py_fix_drift, METH_FASTCALL, fix_drift_doc},
    {"magnetometer_level", (PyCFunction)(void (*)(void))py_magnetometer_level, METH_FASTCALL,
     magnetometer_level_doc},
    {"estimate_outputs", (PyCFunction)(void (*)(void))py_estimate_outputs, METH_FASTCALL,
     estimate_outputs_doc},
    {"yaw_bank_advance", (PyCFunction)(void (*)(void))py_yaw_bank_advance, METH_FASTCALL,
     yaw_bank_advance_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "trident_ekf.core._kernels",
    "The error-state filters' per-sample hot path in C (numpy reference: trident_ekf.core).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "MAX_STATES", MAX_STATES) != 0
        || PyModule_AddIntConstant(m, "ACC_SIZE", ACC_SIZE) != 0
        || PyModule_AddIntConstant(m, "MAX_MEASUREMENT", MAX_MEASUREMENT) != 0
        || PyModule_AddIntConstant(m, "ESTIMATE_SIZE", ESTIMATE_SIZE) != 0
        || PyModule_AddIntConstant(m, "MAX_HYPOTHESES", MAX_HYPOTHESES) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
