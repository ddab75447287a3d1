/* mav_dynamics._kernels: compiled kernels of mav_dynamics (see mav_geometry.kernels).
 *
 * tracking_wrench: one whole TrackingController.update (controller.py); tree_evaluate: one
 * whole TreeModel.evaluate (model.py, aero.py), wings and body drag included;
 * wing_link_wrench: WingModel.wrench_link_frame; allocate_exact: ControlAllocator.allocate
 * when no limit is touched (the bounded solve stays in Python). Each is one call, and the numpy code it
 * replaces stays the reference it is tested against; the arithmetic follows the numpy code operation by
 * operation, so the two agree to round-off. Arguments are C-contiguous float64 buffers of
 * fixed sizes, matrices row-major; the last argument is a flag.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

/* Take C-contiguous float64 buffers args[0..count) of the given element counts; the last
 * `writable` of them are outputs (the caller has checked the argument count). Returns 0, or -1 with every buffer released and an error
 * set. */
static int take_buffers(PyObject *const *args, Py_buffer *buffers, const Py_ssize_t *sizes,
                        const char *const *names, int count, int writable,
                        const char *function) {
    for (int k = 0; k < count; ++k) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
        if (k >= count - writable) {
            flags |= PyBUF_WRITABLE;
        }
        int failed = PyObject_GetBuffer(args[k], &buffers[k], flags);
        if (!failed && (buffers[k].itemsize != 8 || strcmp(buffers[k].format, "d") != 0
                        || buffers[k].len != sizes[k] * 8)) {
            PyErr_Format(PyExc_ValueError, "%s: %s must be %zd float64 values", function,
                         names[k], sizes[k]);
            PyBuffer_Release(&buffers[k]);
            failed = 1;
        }
        if (failed) {
            for (int j = 0; j < k; ++j) {
                PyBuffer_Release(&buffers[j]);
            }
            return -1;
        }
    }
    return 0;
}

static void release_buffers(Py_buffer *buffers, int count) {
    for (int k = 0; k < count; ++k) {
        PyBuffer_Release(&buffers[k]);
    }
}

static void cross(const double *a, const double *b, double *out) {
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

static double dot3(const double *a, const double *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

static double norm3(const double *a) { return sqrt(dot3(a, a)); }

/* m (3x3) @ v */
static void apply(const double *m, const double *v, double *out) {
    for (int i = 0; i < 3; ++i) {
        out[i] = m[3 * i] * v[0] + m[3 * i + 1] * v[1] + m[3 * i + 2] * v[2];
    }
}

/* m^T (3x3) @ v */
static void apply_transposed(const double *m, const double *v, double *out) {
    for (int i = 0; i < 3; ++i) {
        out[i] = m[i] * v[0] + m[3 + i] * v[1] + m[6 + i] * v[2];
    }
}

/* Attitude putting the thrust axis along acceleration - g with the heading (x axis of the
 * reference attitude), and its body rate from the jerk: controller._thrust_attitude. */
static void thrust_attitude(const double *acceleration, const double *gravity,
                            const double *heading, const double *jerk, const double *align,
                            double *attitude, double *rate) {
    double thrust[3], b1[3], b2[3], b3[3], tilt_rate[3];
    for (int i = 0; i < 3; ++i) {
        thrust[i] = acceleration[i] - gravity[i];
    }
    double size = norm3(thrust);
    for (int i = 0; i < 3; ++i) {
        b3[i] = size > 1e-9 ? thrust[i] / size : (i == 2 ? 1.0 : 0.0);
    }
    cross(b3, heading, b2);
    if (norm3(b2) < 1e-6) { /* heading along the thrust: keep any perpendicular */
        double other[3] = {0.0, 0.0, 0.0};
        other[fabs(b3[0]) > 0.9 ? 1 : 0] = 1.0;
        cross(b3, other, b2);
    }
    double b2_norm = norm3(b2);
    for (int i = 0; i < 3; ++i) {
        b2[i] /= b2_norm;
    }
    cross(b2, b3, b1);
    double along = dot3(b3, jerk);
    double scale = size > 1e-9 ? size : 1e-9;
    for (int i = 0; i < 3; ++i) {
        tilt_rate[i] = (jerk[i] - b3[i] * along) / scale;
    }
    double body_rate[3] = {-dot3(tilt_rate, b2), dot3(tilt_rate, b1), 0.0};
    apply(align, body_rate, rate);
    /* [b1 b2 b3] @ align^T */
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
            attitude[3 * i + j] = b1[i] * align[3 * j] + b2[i] * align[3 * j + 1]
                                  + b3[i] * align[3 * j + 2];
        }
    }
}

enum {
    ROTATION, POSITION, TWIST, REF_POSITION, REF_VELOCITY, REF_ACCELERATION, REF_JERK,
    REF_ATTITUDE, REF_RATE, REF_ANGULAR_ACCELERATION, GAIN_P, GAIN_V, GAIN_R, GAIN_W, LOCKED,
    GRAVITY, ALIGN, OUT, TRACKING_BUFFERS
};

static PyObject *tracking_wrench(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const Py_ssize_t sizes[TRACKING_BUFFERS] = {9, 3, 6, 3, 3, 3, 3, 9, 3, 3, 3, 3, 3,
                                                       3, 36, 3, 9, 21};
    static const char *const names[TRACKING_BUFFERS] = {
        "rotation", "position", "twist", "reference position", "reference velocity",
        "reference acceleration", "reference jerk", "reference attitude",
        "reference angular velocity", "reference angular acceleration", "position gains",
        "velocity gains", "attitude gains", "angular rate gains", "locked inertia", "gravity",
        "align", "out"};
    if (nargs != TRACKING_BUFFERS + 1) {
        PyErr_Format(PyExc_TypeError, "tracking_wrench takes %d arguments (%zd given)",
                     TRACKING_BUFFERS + 1, nargs);
        return NULL;
    }
    int fully_actuated = PyObject_IsTrue(args[TRACKING_BUFFERS]);
    if (fully_actuated < 0) {
        return NULL;
    }
    Py_buffer b[TRACKING_BUFFERS];
    if (take_buffers(args, b, sizes, names, TRACKING_BUFFERS, 1,
                     "tracking_wrench") < 0) {
        return NULL;
    }
    const double *rotation = b[ROTATION].buf, *position = b[POSITION].buf;
    const double *twist = b[TWIST].buf, *locked = b[LOCKED].buf;
    const double *gravity = b[GRAVITY].buf;
    const double *ref_position = b[REF_POSITION].buf, *ref_velocity = b[REF_VELOCITY].buf;
    const double *ref_acceleration = b[REF_ACCELERATION].buf;
    const double *reference_attitude = b[REF_ATTITUDE].buf;
    double *out = b[OUT].buf;
    double *wrench = out, *desired = out + 6, *position_error = out + 15;
    double *attitude_error = out + 18;
    const double *kp = b[GAIN_P].buf, *kv = b[GAIN_V].buf, *kr = b[GAIN_R].buf;
    const double *kw = b[GAIN_W].buf;
    const double *omega = twist, *velocity = twist + 3;

    double world_velocity[3], velocity_error[3], acceleration[3];
    apply(rotation, velocity, world_velocity);
    for (int i = 0; i < 3; ++i) {
        position_error[i] = position[i] - ref_position[i];
        velocity_error[i] = world_velocity[i] - ref_velocity[i];
        acceleration[i] = ref_acceleration[i] - kp[i] * position_error[i]
                          - kv[i] * velocity_error[i];
    }
    double rate_reference[3], accel_reference[3] = {0.0, 0.0, 0.0};
    if (fully_actuated) {
        memcpy(desired, reference_attitude, 9 * sizeof(double));
        memcpy(rate_reference, b[REF_RATE].buf, 3 * sizeof(double));
        memcpy(accel_reference, b[REF_ANGULAR_ACCELERATION].buf, 3 * sizeof(double));
    } else {
        double heading[3] = {reference_attitude[0], reference_attitude[3],
                             reference_attitude[6]};
        thrust_attitude(acceleration, gravity, heading, b[REF_JERK].buf, b[ALIGN].buf, desired,
                        rate_reference);
    }
    double relative[9]; /* R^T R_d */
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
            relative[3 * i + j] = rotation[i] * desired[j] + rotation[3 + i] * desired[3 + j]
                                  + rotation[6 + i] * desired[6 + j];
        }
    }
    /* 0.5 vee(rel^T - rel), vee(M) = 0.5 (M21 - M12, M02 - M20, M10 - M01) */
    attitude_error[0] = 0.5 * (0.5 * ((relative[5] - relative[7]) - (relative[7] - relative[5])));
    attitude_error[1] = 0.5 * (0.5 * ((relative[6] - relative[2]) - (relative[2] - relative[6])));
    attitude_error[2] = 0.5 * (0.5 * ((relative[1] - relative[3]) - (relative[3] - relative[1])));
    double rate_desired[3], coriolis[3], accel_term[3], twist_dot[6];
    apply(relative, rate_reference, rate_desired);
    cross(omega, rate_desired, coriolis);
    apply(relative, accel_reference, accel_term);
    for (int i = 0; i < 3; ++i) {
        twist_dot[i] = -kr[i] * attitude_error[i] - kw[i] * (omega[i] - rate_desired[i])
                       - coriolis[i] + accel_term[i];
    }
    double body_acceleration[3], transport[3], body_gravity[3];
    apply_transposed(rotation, acceleration, body_acceleration);
    cross(omega, velocity, transport);
    apply_transposed(rotation, gravity, body_gravity);
    for (int i = 0; i < 3; ++i) {
        /* dV_des - Ad_{T^b_0} A_grv, gravity has no angular part */
        twist_dot[3 + i] = (body_acceleration[i] - transport[i]) - body_gravity[i];
    }
    double momentum[6], a[3], c[3], d[3];
    for (int i = 0; i < 6; ++i) {
        momentum[i] = 0.0;
        for (int j = 0; j < 6; ++j) {
            momentum[i] += locked[6 * i + j] * twist[j];
        }
    }
    cross(omega, momentum, a);
    cross(velocity, momentum + 3, c);
    cross(omega, momentum + 3, d);
    double velocity_product[6] = {-a[0] - c[0], -a[1] - c[1], -a[2] - c[2], -d[0], -d[1], -d[2]};
    for (int i = 0; i < 6; ++i) {
        double sum = 0.0;
        for (int j = 0; j < 6; ++j) {
            sum += locked[6 * i + j] * twist_dot[j];
        }
        wrench[i] = sum - velocity_product[i];
    }
    release_buffers(b, TRACKING_BUFFERS);
    Py_RETURN_NONE;
}


/* ---- TreeModel.evaluate (model.py) and WingModel.wrench_link_frame (aero.py) ---------- */

/* Per-body constants, one row of BODY_STRIDE doubles per body (TreeModel.packed_bodies). */
enum {
    B_PARENT = 0, B_ADJ_ZERO_INV = 1, B_AD_SCREW = 37, B_AD_SCREW_SQ = 73,
    B_SCREW_PARENT = 109, B_SCREW_CHILD = 115, B_AD_SCREW_CHILD = 121, B_INERTIA = 157,
    B_ROTOR_COLUMN = 193, BODY_STRIDE = 199
};
/* One wing (WingModel.packed): convention, pressure area, table size m, link_to_aero (36),
 * moment scale (6), sideslip slopes (6), alpha grid (m), table (m x 6). */
enum {
    W_CONVENTION = 0, W_PRESSURE_AREA = 1, W_SIZE = 2, W_LINK_TO_AERO = 3, W_SCALE = 39,
    W_SLOPES = 45, W_GRID = 51
};
#define MIN_AIRSPEED 1e-6 /* m/s, aero.MIN_AIRSPEED */
#define MAX_BODIES 64

/* out = a (6x6) @ b (6x6) */
static void mat6_mul(const double *a, const double *b, double *out) {
    for (int i = 0; i < 6; ++i) {
        for (int j = 0; j < 6; ++j) {
            double sum = 0.0;
            for (int k = 0; k < 6; ++k) {
                sum += a[6 * i + k] * b[6 * k + j];
            }
            out[6 * i + j] = sum;
        }
    }
}

/* out = a (6x6) @ v */
static void mat6_apply(const double *a, const double *v, double *out) {
    for (int i = 0; i < 6; ++i) {
        double sum = 0.0;
        for (int k = 0; k < 6; ++k) {
            sum += a[6 * i + k] * v[k];
        }
        out[i] = sum;
    }
}

/* out = a^T (6x6) @ v */
static void mat6_apply_transposed(const double *a, const double *v, double *out) {
    for (int i = 0; i < 6; ++i) {
        double sum = 0.0;
        for (int k = 0; k < 6; ++k) {
            sum += a[6 * k + i] * v[k];
        }
        out[i] = sum;
    }
}

/* Wrench on one wing in its link frame from the link-frame air twist: aero.py (47)-(57). */
static void wing_wrench(const double *wing, const double *air_twist_link, double *out) {
    const double *link_to_aero = wing + W_LINK_TO_AERO, *scale = wing + W_SCALE;
    const double *slopes = wing + W_SLOPES, *grid = wing + W_GRID;
    int size = (int)wing[W_SIZE];
    const double *table = grid + size;
    double aero_twist[6], wrench[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    mat6_apply(link_to_aero, air_twist_link, aero_twist);
    const double *v = aero_twist + 3;
    double speed_sq = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
    if (speed_sq >= MIN_AIRSPEED * MIN_AIRSPEED) {
        double speed = sqrt(speed_sq);
        double alpha = atan2(-v[2], v[0]);
        double sine_beta = -v[1] / speed;
        double beta = asin(sine_beta < -1.0 ? -1.0 : (sine_beta > 1.0 ? 1.0 : sine_beta));
        /* linear interpolation in alpha, clamped at the table ends (searchsorted, left) */
        int upper = 0;
        while (upper < size && grid[upper] < alpha) {
            ++upper;
        }
        upper = upper < 1 ? 1 : (upper > size - 1 ? size - 1 : upper);
        double weight = (alpha - grid[upper - 1]) / (grid[upper] - grid[upper - 1]);
        weight = weight < 0.0 ? 0.0 : (weight > 1.0 ? 1.0 : weight);
        double normalised[6];
        for (int i = 0; i < 6; ++i) {
            double low = table[6 * (upper - 1) + i], high = table[6 * upper + i];
            normalised[i] = (low + weight * (high - low) + slopes[i] * beta) * scale[i];
        }
        if (wing[W_CONVENTION] != 0.0) { /* wind axes: (-CD, CC, CL), rotated by (53) */
            normalised[3] = -normalised[3];
            double ca = cos(alpha), sa = sin(alpha), cb = cos(beta), sb = sin(beta);
            double rotation[9] = {ca * cb, ca * sb, sa, -sb, cb, 0.0, -sa * cb, -sa * sb, ca};
            double moment[3], force[3];
            apply(rotation, normalised, moment);
            apply(rotation, normalised + 3, force);
            memcpy(normalised, moment, sizeof(moment));
            memcpy(normalised + 3, force, sizeof(force));
        }
        double dynamic = wing[W_PRESSURE_AREA] * (speed * speed);
        for (int i = 0; i < 6; ++i) {
            wrench[i] = dynamic * normalised[i];
        }
    }
    mat6_apply_transposed(link_to_aero, wrench, out);
}

static int all_finite(const double *values, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; ++i) {
        if (!isfinite(values[i])) {
            return 0;
        }
    }
    return 1;
}

/* Solve a x = b (6x6) by Gaussian elimination with partial pivoting; 0, or -1 if singular. */
static int solve6(const double *matrix, const double *rhs, double *x) {
    double a[6][7];
    for (int i = 0; i < 6; ++i) {
        memcpy(a[i], matrix + 6 * i, 6 * sizeof(double));
        a[i][6] = rhs[i];
    }
    for (int c = 0; c < 6; ++c) {
        int pivot = c;
        for (int r = c + 1; r < 6; ++r) {
            if (fabs(a[r][c]) > fabs(a[pivot][c])) {
                pivot = r;
            }
        }
        if (a[pivot][c] == 0.0) {
            return -1;
        }
        if (pivot != c) {
            double row[7];
            memcpy(row, a[c], sizeof(row));
            memcpy(a[c], a[pivot], sizeof(row));
            memcpy(a[pivot], row, sizeof(row));
        }
        for (int r = c + 1; r < 6; ++r) {
            double factor = a[r][c] / a[c][c];
            for (int j = c; j < 7; ++j) {
                a[r][j] -= factor * a[c][j];
            }
        }
    }
    for (int i = 5; i >= 0; --i) {
        double sum = a[i][6];
        for (int j = i + 1; j < 6; ++j) {
            sum -= a[i][j] * x[j];
        }
        x[i] = sum / a[i][i];
    }
    return 0;
}

/* Size check of a packed wing list [count, (body, wing)...]; -1 with an error if malformed. */
static int check_wings(const double *wings, Py_ssize_t length, Py_ssize_t bodies) {
    /* every double is range-checked before a cast (casting NaN or a huge value is undefined) */
    if (length < 1 || !(wings[0] >= 0.0 && wings[0] <= (double)bodies)) {
        PyErr_SetString(PyExc_ValueError, "tree_evaluate: malformed packed wings");
        return -1;
    }
    Py_ssize_t offset = 1;
    for (int w = 0; w < (int)wings[0]; ++w) {
        if (offset + 1 + W_GRID > length) {
            break;
        }
        double body = wings[offset], size = wings[offset + 1 + W_SIZE];
        if (!(body >= 1.0 && body < (double)bodies && size >= 2.0 && size < 1e6)) {
            break;
        }
        offset += 1 + W_GRID + 7 * (Py_ssize_t)size;
        if (w == (int)wings[0] - 1 && offset == length) {
            return 0;
        }
    }
    if ((int)wings[0] == 0 && length == 1) {
        return 0;
    }
    PyErr_SetString(PyExc_ValueError, "tree_evaluate: malformed packed wings");
    return -1;
}

enum {
    E_BODIES, E_WINGS, E_DRAG, E_ROTATION, E_TWIST, E_Q, E_DQ, E_DDQ, E_WIND, E_GRAVITY,
    E_ACCELERATION, E_LOCKED, E_ROTOR_WRENCH, E_TWISTS, E_ADJOINTS, E_BODY_ACCELERATIONS,
    E_TORQUES, E_RESIDUAL, EVALUATE_BUFFERS
};

static PyObject *tree_evaluate(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != EVALUATE_BUFFERS + 1) {
        PyErr_Format(PyExc_TypeError, "tree_evaluate takes %d arguments (%zd given)",
                     EVALUATE_BUFFERS + 1, nargs);
        return NULL;
    }
    int torques = PyObject_IsTrue(args[EVALUATE_BUFFERS]);
    if (torques < 0) {
        return NULL;
    }
    /* the body count comes from the joint vector q; every other size follows from it */
    Py_buffer probe;
    if (PyObject_GetBuffer(args[E_Q], &probe, PyBUF_C_CONTIGUOUS) < 0) {
        return NULL;
    }
    Py_ssize_t n = probe.len / 8;
    PyBuffer_Release(&probe);
    if (n < 1 || n > MAX_BODIES) {
        PyErr_Format(PyExc_ValueError, "tree_evaluate: 1 to %d bodies, got %zd", MAX_BODIES, n);
        return NULL;
    }
    Py_ssize_t wings_length = 0;
    if (PyObject_GetBuffer(args[E_WINGS], &probe, PyBUF_C_CONTIGUOUS) < 0) {
        return NULL;
    }
    wings_length = probe.len / 8;
    PyBuffer_Release(&probe);
    const Py_ssize_t sizes[EVALUATE_BUFFERS] = {
        n * BODY_STRIDE, wings_length, 12, 9, 6, n, n, n, 3, 3, 6, 36, 6, n * 6, n * 36, n * 6,
        n, 6};
    static const char *const names[EVALUATE_BUFFERS] = {
        "bodies", "wings", "drag", "rotation", "twist", "q", "dq", "ddq", "wind", "gravity",
        "acceleration", "locked", "rotor_wrench", "twists", "adjoints", "body_accelerations",
        "torques", "residual"};
    Py_buffer b[EVALUATE_BUFFERS];
    if (take_buffers(args, b, sizes, names, EVALUATE_BUFFERS, 8, "tree_evaluate") < 0) {
        return NULL;
    }
    const double *bodies = b[E_BODIES].buf, *wings = b[E_WINGS].buf, *drag = b[E_DRAG].buf;
    const double *rotation = b[E_ROTATION].buf, *base_twist = b[E_TWIST].buf;
    const double *q = b[E_Q].buf, *dq = b[E_DQ].buf, *ddq = b[E_DDQ].buf;
    const double *wind = b[E_WIND].buf, *gravity = b[E_GRAVITY].buf;
    double *acceleration = b[E_ACCELERATION].buf, *locked = b[E_LOCKED].buf;
    double *rotor_wrench = b[E_ROTOR_WRENCH].buf, *twists = b[E_TWISTS].buf;
    double *ad_kb = b[E_ADJOINTS].buf, *body_accelerations = b[E_BODY_ACCELERATIONS].buf;
    double *joint_torques = b[E_TORQUES].buf, *residual = b[E_RESIDUAL].buf;
    for (Py_ssize_t k = 1; k < n; ++k) {
        double parent = bodies[k * BODY_STRIDE + B_PARENT];
        if (!(parent >= 0.0 && parent < (double)k)) {
            release_buffers(b, EVALUATE_BUFFERS);
            PyErr_SetString(PyExc_ValueError, "tree_evaluate: bodies must follow their parents");
            return NULL;
        }
    }
    if (check_wings(wings, wings_length, n) < 0) {
        release_buffers(b, EVALUATE_BUFFERS);
        return NULL;
    }
    /* the messages of model.py's own checks, which the compiled path skips */
    const char *not_finite = !all_finite(rotation, 9)  ? "rotation must be finite"
                             : !all_finite(base_twist, 6) ? "twist must be finite"
                             : !(all_finite(q, n) && all_finite(dq, n) && all_finite(ddq, n))
                                 ? "joint inputs (rotor and tilt arrays) must be finite"
                             : !all_finite(wind, 3) ? "wind must be finite"
                                                    : NULL;
    if (not_finite != NULL) {
        release_buffers(b, EVALUATE_BUFFERS);
        PyErr_SetString(PyExc_ValueError, not_finite);
        return NULL;
    }

    double ad_kp[MAX_BODIES][36], bias[MAX_BODIES][6], bias_wrench[MAX_BODIES][6];
    double aero[MAX_BODIES][6];
    /* forward pass, parents first: Ad_{T^k_p}, twists and bias accelerations */
    memset(ad_kb, 0, 36 * sizeof(double));
    for (int i = 0; i < 6; ++i) {
        ad_kb[7 * i] = 1.0;
        twists[i] = base_twist[i];
        bias[0][i] = 0.0;
    }
    for (Py_ssize_t k = 1; k < n; ++k) {
        const double *row = bodies + k * BODY_STRIDE;
        int p = (int)row[B_PARENT];
        double sine = sin(q[k]), versine = 1.0 - cos(q[k]), joint[36], moved[6], swept[6];
        for (int i = 0; i < 36; ++i) {
            double identity = i % 7 == 0 ? 1.0 : 0.0;
            joint[i] = identity - sine * row[B_AD_SCREW + i] + versine * row[B_AD_SCREW_SQ + i];
        }
        mat6_mul(row + B_ADJ_ZERO_INV, joint, ad_kp[k]);
        mat6_mul(ad_kp[k], ad_kb + 36 * p, ad_kb + 36 * k);
        for (int i = 0; i < 6; ++i) {
            moved[i] = twists[6 * p + i] + row[B_SCREW_PARENT + i] * dq[k];
        }
        mat6_apply(ad_kp[k], moved, twists + 6 * k);
        mat6_apply(ad_kp[k], bias[p], moved);
        mat6_apply(row + B_AD_SCREW_CHILD, twists + 6 * k, swept);
        for (int i = 0; i < 6; ++i) {
            bias[k][i] = moved[i] - swept[i] * dq[k] + row[B_SCREW_CHILD + i] * ddq[k];
        }
    }
    /* external wrenches: rotors K S dq^2, body drag, wings */
    double gravity_body[3], wind_body[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    apply_transposed(rotation, gravity, gravity_body);
    apply_transposed(rotation, wind, wind_body + 3);
    for (Py_ssize_t k = 0; k < n; ++k) {
        for (int i = 0; i < 6; ++i) {
            aero[k][i] = bodies[k * BODY_STRIDE + B_ROTOR_COLUMN + i] * (dq[k] * dq[k]);
        }
    }
    int has_drag = 0;
    for (int i = 0; i < 12; ++i) {
        has_drag |= drag[i] != 0.0;
    }
    if (has_drag) {
        for (int i = 0; i < 6; ++i) {
            double air = twists[i] - wind_body[i];
            aero[0][i] = -drag[i] * air - drag[6 + i] * fabs(air) * air;
        }
    }
    Py_ssize_t offset = 1;
    for (int w = 0; w < (int)wings[0]; ++w) {
        int k = (int)wings[offset];
        const double *wing = wings + offset + 1;
        double carried[6], air[6];
        mat6_apply(ad_kb + 36 * k, wind_body, carried);
        for (int i = 0; i < 6; ++i) {
            air[i] = twists[6 * k + i] - carried[i];
        }
        wing_wrench(wing, air, aero[k]);
        offset += 1 + W_GRID + 7 * (Py_ssize_t)wing[W_SIZE];
    }
    /* bias wrenches ad^T G V + W_ext + G (Ad A_grv - a_k); locked inertia; base acceleration */
    double right_hand[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    memset(locked, 0, 36 * sizeof(double));
    memset(rotor_wrench, 0, 6 * sizeof(double));
    for (Py_ssize_t k = 0; k < n; ++k) {
        const double *inertia = bodies + k * BODY_STRIDE + B_INERTIA, *adj = ad_kb + 36 * k;
        const double *v = twists + 6 * k;
        double momentum[6], a[3], c[3], d[3], gravity_k[6], relative[6], inertial[6];
        mat6_apply(inertia, v, momentum);
        cross(v, momentum, a);
        cross(v + 3, momentum + 3, c);
        cross(v, momentum + 3, d);
        for (int i = 0; i < 6; ++i) {
            gravity_k[i] = adj[6 * i + 3] * gravity_body[0] + adj[6 * i + 4] * gravity_body[1]
                           + adj[6 * i + 5] * gravity_body[2];
            relative[i] = gravity_k[i] - bias[k][i];
        }
        mat6_apply(inertia, relative, inertial);
        for (int i = 0; i < 3; ++i) {
            bias_wrench[k][i] = (-a[i] - c[i]) + aero[k][i] + inertial[i];
            bias_wrench[k][3 + i] = -d[i] + aero[k][3 + i] + inertial[3 + i];
        }
        double pulled[6], rotor[6], product[36];
        mat6_apply_transposed(adj, bias_wrench[k], pulled);
        const double *column = bodies + k * BODY_STRIDE + B_ROTOR_COLUMN;
        for (int i = 0; i < 6; ++i) {
            right_hand[i] += pulled[i];
            rotor[i] = column[i] * (dq[k] * dq[k]);
        }
        mat6_apply_transposed(adj, rotor, pulled);
        for (int i = 0; i < 6; ++i) {
            rotor_wrench[i] += pulled[i];
        }
        mat6_mul(inertia, adj, product);     /* G Ad, then Ad^T (G Ad) */
        for (int i = 0; i < 6; ++i) {
            for (int j = 0; j < 6; ++j) {
                double sum = 0.0;
                for (int m = 0; m < 6; ++m) {
                    sum += adj[6 * m + i] * product[6 * m + j];
                }
                locked[6 * i + j] += sum;
            }
        }
    }
    if (solve6(locked, right_hand, acceleration) < 0) {
        release_buffers(b, EVALUATE_BUFFERS);
        PyErr_SetString(PyExc_ValueError, "tree_evaluate: the locked inertia is singular");
        return NULL;
    }
    /* backward pass, children first: W_k = G_k Ad dV - bias wrench + children's; tau = S^T W */
    if (torques) {
        double wrench[MAX_BODIES][6];
        for (Py_ssize_t k = 0; k < n; ++k) {
            double from_base[6], inertial[6];
            mat6_apply(ad_kb + 36 * k, acceleration, from_base);
            mat6_apply(bodies + k * BODY_STRIDE + B_INERTIA, from_base, inertial);
            for (int i = 0; i < 6; ++i) {
                body_accelerations[6 * k + i] = from_base[i] + bias[k][i];
                wrench[k][i] = inertial[i] - bias_wrench[k][i];
            }
        }
        joint_torques[0] = 0.0;
        for (Py_ssize_t k = n - 1; k >= 1; --k) {
            const double *row = bodies + k * BODY_STRIDE;
            int p = (int)row[B_PARENT];
            double sum = 0.0, pulled[6];
            for (int i = 0; i < 6; ++i) {
                sum += row[B_SCREW_CHILD + i] * wrench[k][i];
            }
            joint_torques[k] = sum;
            mat6_apply_transposed(ad_kp[k], wrench[k], pulled);
            for (int i = 0; i < 6; ++i) {
                wrench[p][i] += pulled[i];
            }
        }
        memcpy(residual, wrench[0], 6 * sizeof(double));
    } else {
        for (Py_ssize_t k = 0; k < n; ++k) {
            joint_torques[k] = NAN;
            for (int i = 0; i < 6; ++i) {
                body_accelerations[6 * k + i] = NAN;
            }
        }
        for (int i = 0; i < 6; ++i) {
            residual[i] = NAN;
        }
    }
    release_buffers(b, EVALUATE_BUFFERS);
    Py_RETURN_NONE;
}

static PyObject *wing_link_wrench(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "wing_link_wrench takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_buffer probe;
    if (PyObject_GetBuffer(args[0], &probe, PyBUF_C_CONTIGUOUS) < 0) {
        return NULL;
    }
    Py_ssize_t length = probe.len / 8;
    const double *head = probe.buf;
    int valid = length > W_GRID && head[W_SIZE] >= 2.0 && head[W_SIZE] < 1e6
                && W_GRID + 7 * (Py_ssize_t)head[W_SIZE] == length;
    PyBuffer_Release(&probe);
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "wing_link_wrench: malformed packed wing");
        return NULL;
    }
    const Py_ssize_t sizes[3] = {length, 6, 6};
    static const char *const names[3] = {"wing", "air_twist", "out"};
    Py_buffer b[3];
    if (take_buffers(args, b, sizes, names, 3, 1, "wing_link_wrench") < 0) {
        return NULL;
    }
    wing_wrench(b[0].buf, b[1].buf, b[2].buf);
    release_buffers(b, 3);
    Py_RETURN_NONE;
}


/* ---- ControlAllocator.allocate, the unconstrained path (allocation.py) ----------------- */

enum {
    A_PSEUDO_INVERSE, A_MATRIX, A_PROJECTOR, A_SLOTS, A_U_MIN, A_U_MAX, A_TILT_MIN, A_TILT_MAX,
    A_LOW, A_HIGH, A_WRENCH, A_SPEEDS, A_TILTS, A_ACHIEVED, A_UNALLOCATED, A_SATURATED_ROTORS,
    A_SATURATED_TILTS, ALLOCATE_BUFFERS
};

static PyObject *allocate_exact(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != ALLOCATE_BUFFERS + 1) {
        PyErr_Format(PyExc_TypeError, "allocate_exact takes %d arguments (%zd given)",
                     ALLOCATE_BUFFERS + 1, nargs);
        return NULL;
    }
    double tolerance = PyFloat_AsDouble(args[ALLOCATE_BUFFERS]);
    if (tolerance == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer probe;
    Py_ssize_t counts[2];
    for (int k = 0; k < 2; ++k) { /* rotors from u_min, tilts from tilt_min */
        if (PyObject_GetBuffer(args[k == 0 ? A_U_MIN : A_TILT_MIN], &probe, PyBUF_C_CONTIGUOUS)
            < 0) {
            return NULL;
        }
        counts[k] = probe.len / 8;
        PyBuffer_Release(&probe);
    }
    Py_ssize_t nr = counts[0], nt = counts[1], nx = nr + nt;
    if (nr < 1 || nt > nr || nr > MAX_BODIES) {
        PyErr_SetString(PyExc_ValueError, "allocate_exact: 1 to 64 rotors, at most one tilt each");
        return NULL;
    }
    const Py_ssize_t sizes[ALLOCATE_BUFFERS] = {nx * 6, 6 * nx, 36, nr, nr, nr, nt, nt, nt, nt,
                                                6, nr, nt, 6, 6, nr, nt};
    static const char *const names[ALLOCATE_BUFFERS] = {
        "pseudo_inverse", "matrix", "projector", "slots", "u_min", "u_max", "tilt_min",
        "tilt_max", "low", "high", "wrench", "speeds", "tilts", "achieved", "unallocated",
        "saturated_rotors", "saturated_tilts"};
    Py_buffer b[ALLOCATE_BUFFERS];
    if (take_buffers(args, b, sizes, names, ALLOCATE_BUFFERS, 6, "allocate_exact") < 0) {
        return NULL;
    }
    const double *pinv = b[A_PSEUDO_INVERSE].buf, *matrix = b[A_MATRIX].buf;
    const double *projector = b[A_PROJECTOR].buf, *slots = b[A_SLOTS].buf;
    const double *u_min = b[A_U_MIN].buf, *u_max = b[A_U_MAX].buf;
    const double *tilt_min = b[A_TILT_MIN].buf, *tilt_max = b[A_TILT_MAX].buf;
    const double *low = b[A_LOW].buf, *high = b[A_HIGH].buf, *wrench = b[A_WRENCH].buf;
    double *speeds = b[A_SPEEDS].buf, *tilts = b[A_TILTS].buf, *achieved = b[A_ACHIEVED].buf;
    double *unallocated = b[A_UNALLOCATED].buf, *rotor_flags = b[A_SATURATED_ROTORS].buf;
    double *tilt_flags = b[A_SATURATED_TILTS].buf;
    Py_ssize_t n_fixed = nr - nt;
    double x[2 * MAX_BODIES], u[MAX_BODIES];
    for (Py_ssize_t i = 0; i < nx; ++i) {
        double sum = 0.0;
        for (int j = 0; j < 6; ++j) {
            sum += pinv[6 * i + j] * wrench[j];
        }
        x[i] = sum;
    }
    /* slot >= 0: the rotor's u is x[slot]; -(j + 1): tilting rotor j, (u cos, u sin) */
    int inside = 1, bad_slot = 0;
    for (Py_ssize_t r = 0; r < nr; ++r) {
        if (!(slots[r] >= -(double)nt && slots[r] < (double)n_fixed)) { /* NaN included */
            bad_slot = 1;
            break;
        }
        Py_ssize_t slot = (Py_ssize_t)slots[r];
        if (slot >= 0) {
            u[r] = x[slot];
        } else {
            Py_ssize_t j = -slot - 1;
            double cosine = x[n_fixed + j], sine = x[n_fixed + nt + j];
            u[r] = hypot(cosine, sine);
            tilts[j] = atan2(sine, cosine);
        }
        inside &= u[r] >= u_min[r] && u[r] <= u_max[r];
    }
    if (bad_slot) {
        release_buffers(b, ALLOCATE_BUFFERS);
        PyErr_SetString(PyExc_ValueError, "allocate_exact: malformed rotor slots");
        return NULL;
    }
    for (Py_ssize_t j = 0; j < nt; ++j) {
        inside &= tilts[j] >= low[j] && tilts[j] <= high[j];
    }
    if (!inside) { /* a limit is touched: the caller runs the bounded solve */
        release_buffers(b, ALLOCATE_BUFFERS);
        return PyLong_FromLong(-1);
    }
    int saturated = 0;
    for (Py_ssize_t r = 0; r < nr; ++r) {
        double span = u_max[r] - u_min[r];
        speeds[r] = sqrt(u[r]);
        rotor_flags[r] = (u[r] - u_min[r] <= tolerance * span)
                         || (u_max[r] - u[r] <= tolerance * span);
        saturated |= rotor_flags[r] != 0.0;
    }
    for (Py_ssize_t j = 0; j < nt; ++j) {
        tilt_flags[j] = (tilts[j] - tilt_min[j] <= 1e-9) || (tilt_max[j] - tilts[j] <= 1e-9);
        saturated |= tilt_flags[j] != 0.0;
    }
    double scale = 1e-9, largest = 0.0;
    for (int i = 0; i < 6; ++i) {
        double sum = 0.0;
        for (Py_ssize_t k = 0; k < nx; ++k) {
            sum += matrix[nx * i + k] * x[k];
        }
        achieved[i] = sum;
        unallocated[i] = wrench[i] - sum;
        scale = fabs(wrench[i]) > scale ? fabs(wrench[i]) : scale;
    }
    for (int i = 0; i < 6; ++i) {
        double controllable = 0.0;
        for (int k = 0; k < 6; ++k) {
            controllable += projector[6 * i + k] * unallocated[k];
        }
        largest = fabs(controllable) > largest ? fabs(controllable) : largest;
    }
    saturated |= largest > 1e-6 * scale;
    release_buffers(b, ALLOCATE_BUFFERS);
    return PyLong_FromLong(saturated);
}

static PyMethodDef methods[] = {
    {"tracking_wrench", (PyCFunction)(void (*)(void))tracking_wrench, METH_FASTCALL,
     "tracking_wrench(rotation, position, twist, ref_position, ref_velocity, ref_acceleration,"
     " ref_jerk, ref_attitude, ref_angular_velocity, ref_angular_acceleration, gain_position,"
     " gain_velocity, gain_attitude, gain_angular_rate, locked_inertia (36), gravity, align (9),"
     " out (21), fully_actuated): "
     "TrackingController.update into out = (wrench 6, desired attitude 9, position error 3,"
     " attitude error 3)."},
    {"tree_evaluate", (PyCFunction)(void (*)(void))tree_evaluate, METH_FASTCALL,
     "tree_evaluate(bodies, wings, drag, rotation, twist, q, dq, ddq, wind, gravity,"
     " acceleration, locked, rotor_wrench, twists, adjoints, body_accelerations, torques,"
     " residual, torques_wanted): one TreeModel.evaluate; outputs written in place."},
    {"allocate_exact", (PyCFunction)(void (*)(void))allocate_exact, METH_FASTCALL,
     "allocate_exact(pseudo_inverse, matrix, projector, slots, u_min, u_max, tilt_min, tilt_max,"
     " low, high, wrench, speeds, tilts, achieved, unallocated, saturated_rotors,"
     " saturated_tilts, tolerance): ControlAllocator.allocate's unconstrained solution and"
     " status; returns -1 if it touches a limit (outputs then undefined), else saturated."},
    {"wing_link_wrench", (PyCFunction)(void (*)(void))wing_link_wrench, METH_FASTCALL,
     "wing_link_wrench(wing, air_twist, out): WingModel.wrench_link_frame."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "mav_dynamics._kernels", NULL, -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) {
    PyObject *result = PyModule_Create(&module);
    /* the largest tree (bodies) and rotor count the kernels take: larger ones run the
       reference */
    if (result != NULL && PyModule_AddIntConstant(result, "MAX_BODIES", MAX_BODIES) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}
