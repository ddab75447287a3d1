/* variational_sim.multibody._kernels: one whole maximal-coordinate step in one call.
 *
 * step() follows multibody/integrator.py (contact-free Newton on the KKT system) and
 * multibody/contact.py + interior_point.py (Mehrotra interior point with the contact
 * unknowns eliminated per contact) line by line: same guess, same stopping rules, same
 * warm start and recentring. The Python/numpy code stays the reference; the results
 * agree with it to round-off (summation orders and the pivoting of the linear solve
 * differ).
 *
 * Structure: the constraint Jacobians are kept per row (12 coefficients: the two bodies'
 * angular and linear columns), so assembly and products cost O(rows). The KKT matrix is
 * stored as a band under a symmetric permutation chosen in Python (multibody/compiled.py,
 * reverse Cuthill-McKee), and factorised by band LU with partial pivoting, so a chain
 * costs O(bodies) per factorisation instead of the dense O(bodies^3).
 *
 * Buffers: the model (packed once by compiled.py; layout in model_view), a workspace of
 * workspace_size(model) doubles and the state/outputs, all C-contiguous float64.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

#define HEADER 13
#define ROW_SIZE 12
#define BODY_SIZE 19
#define ACTUATOR_SIZE 10
#define CONTACT_SIZE 6
#define PAIRS 5
#define UNKNOWNS 7
#define SMALL_ANGLE 1e-3
#define KAPPA_START 1e-6
#define KAPPA_FINAL 1e-13
#define COMPLEMENTARITY_TOLERANCE (10.0 * KAPPA_FINAL)
#define WARM_START_FLOOR 1e-7
#define RECENTRE_FLOOR 1e-4
#define BLOCKED_STEP 0.1
#define PATH_REDUCTION 0.1
#define FRACTION_TO_BOUNDARY 0.995

enum { OK = 0, NEWTON_FAILED = 1, INTERIOR_POINT_FAILED = 2, SINGULAR = 3, OUTSIDE_BAND = 4 };
enum { PREDICTOR_CORRECTOR = 1, WARM_START = 2, FREE_STEP_FIRST = 4, HAVE_PAIRS = 8 };

typedef struct {
    int n, rows, m, c, size, kl, ku, width, max_iterations, motor;
    double h, tolerance, gravity[3];
    const double *body;     /* n * (mass, J (9), J^-1 (9)) */
    const double *row;      /* rows * (kind, a, b, v1, v2, v3): point (p_a, p_b, d), dot (u, n, -) */
    const double *actuator; /* m * (a, b, axis, child axis, peak, gain) */
    const double *contact;  /* c * (body, point, radius, friction) */
    const double *order;    /* size: band position of each KKT unknown */
} Model;

typedef struct {
    double *rotation;                       /* 9 (n + 1): body attitudes, then the world */
    double *v, *w, *jv;                     /* relative rotation: 3n, n, J v 3n */
    double *start, *end, *actuation, *target; /* 6n each */
    double *torque, *scale;                 /* m each: torques, (h/2) slope */
    double *couple_rows;                    /* m * 6: speed Jacobian rows at a, b */
    double *jacobian_k, *jacobian_1;        /* rows * 12 */
    double *residual, *rhs, *scratch, *band, *pivots; /* size (3), size * width, size */
    double *columns;                        /* width: int scratch of band_factor */
    double *centres0, *centres1, *contact_jacobian0, *contact_jacobian1; /* 3c, 3c, 18c, 18c */
    double *unknowns, *slacks, *step_u, *step_s, *affine_u, *affine_s; /* 7c 5c 7c 5c 7c 5c */
    double *eliminated, *coupling, *equalities, *free, *pair_residual; /* 49c 42c 7c 7c 5c */
} Work;

static Py_ssize_t model_size(int n, int rows, int m, int c) {
    return HEADER + (Py_ssize_t)BODY_SIZE * n + (Py_ssize_t)ROW_SIZE * rows
           + (Py_ssize_t)ACTUATOR_SIZE * m + (Py_ssize_t)CONTACT_SIZE * c + 6 * n + rows;
}

static Py_ssize_t work_size(const Model *M) {
    Py_ssize_t n = M->n, c = M->c, s = M->size;
    return 9 * (n + 1) + 7 * n + 24 * n + 8 * M->m + 24 * M->rows + s * (4 + M->width) + M->width
           + c * (3 + 3 + 18 + 18 + 7 + 5 + 7 + 5 + 7 + 5 + 49 + 42 + 7 + 7 + 5);
}

/* Read the model header and section pointers; -1 with an exception if inconsistent. */
static int model_view(const Py_buffer *buffer, Model *M) {
    const double *d = buffer->buf;
    Py_ssize_t count = buffer->len / (Py_ssize_t)sizeof(double);
    if (count < HEADER) {
        PyErr_SetString(PyExc_ValueError, "model: too short for its header");
        return -1;
    }
    M->n = (int)d[0]; M->rows = (int)d[1]; M->m = (int)d[2]; M->c = (int)d[3];
    M->h = d[4]; M->tolerance = d[5]; M->max_iterations = (int)d[6]; M->motor = d[7] != 0.0;
    M->kl = (int)d[8]; M->ku = (int)d[9];
    M->gravity[0] = d[10]; M->gravity[1] = d[11]; M->gravity[2] = d[12];
    if (M->n < 1 || M->rows < 0 || M->m < 0 || M->c < 0 || M->kl < 0 || M->ku < 0
        || !(M->h > 0.0) || M->max_iterations < 0
        || count != model_size(M->n, M->rows, M->m, M->c)) {
        PyErr_SetString(PyExc_ValueError, "model: header does not match its size (pack it "
                                          "with multibody.compiled)");
        return -1;
    }
    M->size = 6 * M->n + M->rows;
    M->width = 2 * M->kl + M->ku + 1;
    M->body = d + HEADER;
    M->row = M->body + BODY_SIZE * M->n;
    M->actuator = M->row + ROW_SIZE * M->rows;
    M->contact = M->actuator + ACTUATOR_SIZE * M->m;
    M->order = M->contact + CONTACT_SIZE * M->c;
    int bad = 0;
    for (int i = 0; i < M->size; i++) bad |= !(M->order[i] >= 0.0 && M->order[i] < M->size);
    for (int r = 0; r < M->rows; r++) {
        const double *row = M->row + ROW_SIZE * r;
        bad |= !(row[1] >= 0.0 && row[1] <= M->n && row[2] >= 0.0 && row[2] < M->n);
    }
    for (int j = 0; j < M->m; j++) {
        const double *actuator = M->actuator + ACTUATOR_SIZE * j;
        bad |= !(actuator[0] >= -1.0 && actuator[0] < M->n && actuator[1] >= 0.0 && actuator[1] < M->n);
    }
    for (int i = 0; i < M->c; i++) {
        double body = M->contact[CONTACT_SIZE * i];
        bad |= !(body >= 0.0 && body < M->n);
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "model: a body index or the band order is out of range");
        return -1;
    }
    return 0;
}

static void work_view(const Model *M, double *p, Work *W) {
    int n = M->n, c = M->c;
#define TAKE(field, count) (W->field = p, p += (count))
    TAKE(rotation, 9 * (n + 1)); TAKE(v, 3 * n); TAKE(w, n); TAKE(jv, 3 * n);
    TAKE(start, 6 * n); TAKE(end, 6 * n); TAKE(actuation, 6 * n); TAKE(target, 6 * n);
    TAKE(torque, M->m); TAKE(scale, M->m); TAKE(couple_rows, 6 * M->m);
    TAKE(jacobian_k, ROW_SIZE * M->rows); TAKE(jacobian_1, ROW_SIZE * M->rows);
    TAKE(residual, M->size); TAKE(rhs, M->size); TAKE(scratch, M->size); TAKE(band, (Py_ssize_t)M->size * M->width);
    TAKE(pivots, M->size); TAKE(columns, M->width);
    TAKE(centres0, 3 * c); TAKE(centres1, 3 * c);
    TAKE(contact_jacobian0, 18 * c); TAKE(contact_jacobian1, 18 * c);
    TAKE(unknowns, UNKNOWNS * c); TAKE(slacks, PAIRS * c); TAKE(step_u, UNKNOWNS * c);
    TAKE(step_s, PAIRS * c); TAKE(affine_u, UNKNOWNS * c); TAKE(affine_s, PAIRS * c);
    TAKE(eliminated, 49 * c); TAKE(coupling, 42 * c); TAKE(equalities, UNKNOWNS * c);
    TAKE(free, UNKNOWNS * c); TAKE(pair_residual, PAIRS * c);
#undef TAKE
}

/* ---- 3-vectors, 3x3 matrices (row-major) and quaternions (x, y, z, w) -------------------- */

static void cross(const double *a, const double *b, double *out) {
    double x = a[1] * b[2] - a[2] * b[1], y = a[2] * b[0] - a[0] * b[2];
    double z = a[0] * b[1] - a[1] * b[0];
    out[0] = x; out[1] = y; out[2] = z;
}

static double dot(const double *a, const double *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

static void apply(const double *R, const double *v, double *out) {
    double x = R[0] * v[0] + R[1] * v[1] + R[2] * v[2];
    double y = R[3] * v[0] + R[4] * v[1] + R[5] * v[2];
    double z = R[6] * v[0] + R[7] * v[1] + R[8] * v[2];
    out[0] = x; out[1] = y; out[2] = z;
}

static void apply_transposed(const double *R, const double *v, double *out) {
    double x = R[0] * v[0] + R[3] * v[1] + R[6] * v[2];
    double y = R[1] * v[0] + R[4] * v[1] + R[7] * v[2];
    double z = R[2] * v[0] + R[5] * v[1] + R[8] * v[2];
    out[0] = x; out[1] = y; out[2] = z;
}

static void multiply3(const double *A, const double *B, double *out) {
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            out[3 * i + j] = A[3 * i] * B[j] + A[3 * i + 1] * B[3 + j] + A[3 * i + 2] * B[6 + j];
}

static void skew(const double *v, double *out) {
    out[0] = 0.0; out[1] = -v[2]; out[2] = v[1];
    out[3] = v[2]; out[4] = 0.0; out[5] = -v[0];
    out[6] = -v[1]; out[7] = v[0]; out[8] = 0.0;
}

static void rotation_matrix(const double *q, double *R) {
    double x = q[0], y = q[1], z = q[2], w = q[3];
    R[0] = w * w + x * x - y * y - z * z; R[1] = 2 * x * y - 2 * z * w; R[2] = 2 * x * z + 2 * y * w;
    R[3] = 2 * x * y + 2 * z * w; R[4] = w * w - x * x + y * y - z * z; R[5] = 2 * y * z - 2 * x * w;
    R[6] = 2 * x * z - 2 * y * w; R[7] = 2 * y * z + 2 * x * w; R[8] = w * w - x * x - y * y + z * z;
}

static void quaternion_multiply(const double *p, const double *q, double *out) {
    double x = p[3] * q[0] + p[0] * q[3] + p[1] * q[2] - p[2] * q[1];
    double y = p[3] * q[1] - p[0] * q[2] + p[1] * q[3] + p[2] * q[0];
    double z = p[3] * q[2] + p[0] * q[1] - p[1] * q[0] + p[2] * q[3];
    double w = p[3] * q[3] - p[0] * q[0] - p[1] * q[1] - p[2] * q[2];
    out[0] = x; out[1] = y; out[2] = z; out[3] = w;
}

/* exp(phi/2) of a rotation vector (rad), by its series below SMALL_ANGLE (batched.py). */
static void from_rotation_vector(const double *phi, double *out) {
    double angle = sqrt(dot(phi, phi));
    double factor = angle < SMALL_ANGLE ? 0.5 - angle * angle / 48.0 : sin(0.5 * angle) / angle;
    out[0] = phi[0] * factor; out[1] = phi[1] * factor; out[2] = phi[2] * factor;
    out[3] = cos(0.5 * angle);
}

/* q <- q exp(phi/2) */
static void turn(double *q, const double *phi) {
    double e[4];
    from_rotation_vector(phi, e);
    quaternion_multiply(q, e, q);
}

static double max_abs(const double *a, int count) {
    double result = 0.0;
    for (int i = 0; i < count; i++) result = fmax(result, fabs(a[i]));
    return result;
}

/* ---- band matrix (row-major band rows of the permuted KKT matrix) ---------------------- */

typedef struct {
    double *a;
    const double *order;
    int *columns; /* kl + ku + 1 column offsets: scratch of band_factor */
    int size, kl, ku, width, outside;
} Band;

static Band band_view(const Model *M, Work *W) {
    Band B = {W->band, M->order, (int *)W->columns, M->size, M->kl, M->ku, M->width, 0};
    memset(B.a, 0, sizeof(double) * (size_t)B.size * (size_t)B.width);
    return B;
}

#define BAND_AT(B, i, j) ((B)->a[(Py_ssize_t)(i) * (B)->width + (j) - (i) + (B)->kl])

/* Add v at (row i, column j) of the unpermuted KKT matrix. */
static void band_add(Band *B, int i, int j, double v) {
    if (v == 0.0) return; /* a structural zero may lie outside the band */
    int pi = (int)B->order[i], pj = (int)B->order[j];
    if (pj - pi > B->ku || pi - pj > B->kl) {
        B->outside = 1;
        return;
    }
    BAND_AT(B, pi, pj) += v;
}

/* LU with partial pivoting inside the band (fill up to kl + ku above the diagonal). */
static int band_factor(Band *B, double *pivots) {
    int size = B->size, kl = B->kl, ku = B->ku;
    for (int k = 0; k < size; k++) {
        int last_row = k + kl < size - 1 ? k + kl : size - 1;
        int last_column = k + kl + ku < size - 1 ? k + kl + ku : size - 1;
        int p = k;
        double best = fabs(BAND_AT(B, k, k));
        for (int i = k + 1; i <= last_row; i++) {
            double value = fabs(BAND_AT(B, i, k));
            if (value > best) { best = value; p = i; }
        }
        pivots[k] = p;
        if (best == 0.0) return -1;
        if (p != k) {
            for (int j = k; j <= last_column; j++) {
                double t = BAND_AT(B, k, j);
                BAND_AT(B, k, j) = BAND_AT(B, p, j);
                BAND_AT(B, p, j) = t;
            }
        }
        /* the pivot row's nonzero columns: the Newton matrix stays sparse inside its band */
        double diagonal = BAND_AT(B, k, k);
        const double *source = &BAND_AT(B, k, k + 1);
        int count = 0;
        for (int j = 0; j < last_column - k; j++)
            if (source[j] != 0.0) B->columns[count++] = j;
        for (int i = k + 1; i <= last_row; i++) {
            double factor = BAND_AT(B, i, k) / diagonal;
            BAND_AT(B, i, k) = factor;
            if (factor == 0.0) continue;
            double *target = &BAND_AT(B, i, k + 1);
            for (int c = 0; c < count; c++) target[B->columns[c]] -= factor * source[B->columns[c]];
        }
    }
    return 0;
}

/* Solve in place for b (unpermuted order); scratch of size entries. */
static void band_solve(const Band *B, const double *pivots, double *b, double *scratch) {
    int size = B->size, kl = B->kl, ku = B->ku;
    for (int i = 0; i < size; i++) scratch[(int)B->order[i]] = b[i];
    for (int k = 0; k < size; k++) {
        int p = (int)pivots[k];
        if (p != k) { double t = scratch[k]; scratch[k] = scratch[p]; scratch[p] = t; }
        int last_row = k + kl < size - 1 ? k + kl : size - 1;
        for (int i = k + 1; i <= last_row; i++) scratch[i] -= BAND_AT(B, i, k) * scratch[k];
    }
    for (int k = size - 1; k >= 0; k--) {
        int last_column = k + kl + ku < size - 1 ? k + kl + ku : size - 1;
        double sum = scratch[k];
        for (int j = k + 1; j <= last_column; j++) sum -= BAND_AT(B, k, j) * scratch[j];
        scratch[k] = sum / BAND_AT(B, k, k);
    }
    for (int i = 0; i < size; i++) b[i] = scratch[(int)B->order[i]];
}

/* ---- joint constraints (constraints.py) ----------------------------------------------- */

static void attitudes(const Model *M, const double *q, double *rotation) {
    for (int i = 0; i < M->n; i++) rotation_matrix(q + 4 * i, rotation + 9 * i);
    double *world = rotation + 9 * M->n;
    memset(world, 0, 9 * sizeof(double));
    world[0] = world[4] = world[8] = 1.0;
}

/* Values c (rows) and, if jacobian is not NULL, per row the 12 tangent coefficients
 * (angular, linear of the parent; angular, linear of the child). */
static void constraints(const Model *M, const double *x, const double *q, double *rotation,
                        double *values, double *jacobian) {
    static const double origin[3] = {0.0, 0.0, 0.0};
    attitudes(M, q, rotation);
    for (int r = 0; r < M->rows; r++) {
        const double *row = M->row + ROW_SIZE * r;
        int a = (int)row[1], b = (int)row[2];
        const double *Ra = rotation + 9 * a, *Rb = rotation + 9 * b;
        const double *xa = a < M->n ? x + 3 * a : origin, *xb = x + 3 * b;
        double *J = jacobian != NULL ? jacobian + ROW_SIZE * r : NULL;
        if (row[0] == 0.0) {
            const double *pa = row + 3, *pb = row + 6, *d = row + 9;
            double arm_a[3], arm_b[3], gap[3], local[3], world_d[3], back_d[3], lever[3];
            apply(Ra, pa, arm_a);
            apply(Rb, pb, arm_b);
            for (int k = 0; k < 3; k++) gap[k] = xa[k] - xb[k] + arm_a[k] - arm_b[k];
            apply_transposed(Ra, gap, local);
            values[r] = dot(d, local);
            if (J == NULL) continue;
            apply(Ra, d, world_d);
            apply_transposed(Rb, world_d, back_d);
            for (int k = 0; k < 3; k++) lever[k] = local[k] - pa[k];
            cross(d, lever, J);
            cross(pb, back_d, J + 6);
            for (int k = 0; k < 3; k++) {
                J[3 + k] = world_d[k];
                J[6 + k] = -J[6 + k];
                J[9 + k] = -world_d[k];
            }
        } else {
            const double *u = row + 3, *normal = row + 6;
            double world_n[3], relative[3], world_u[3], back_u[3];
            apply(Rb, normal, world_n);
            apply_transposed(Ra, world_n, relative);
            values[r] = dot(u, relative);
            if (J == NULL) continue;
            apply(Ra, u, world_u);
            apply_transposed(Rb, world_u, back_u);
            cross(u, relative, J);
            cross(normal, back_u, J + 6);
            J[3] = J[4] = J[5] = J[9] = J[10] = J[11] = 0.0;
        }
    }
}

/* out (6n) += scale * C^T lambda */
static void add_transposed_product(const Model *M, const double *J, const double *lambda,
                                   double scale, double *out) {
    for (int r = 0; r < M->rows; r++) {
        const double *row = M->row + ROW_SIZE * r;
        int a = (int)row[1], b = (int)row[2];
        double weight = scale * lambda[r];
        if (a < M->n)
            for (int k = 0; k < 6; k++) out[6 * a + k] += J[ROW_SIZE * r + k] * weight;
        for (int k = 0; k < 6; k++) out[6 * b + k] += J[ROW_SIZE * r + 6 + k] * weight;
    }
}

/* ---- per-body discrete dynamics and actuation (discrete.py, forces.py) ----------------- */

static void turn_matrix(double w, const double *v, double *B) {
    skew(v, B);
    B[0] += w; B[4] += w; B[8] += w;
}

/* Relative rotations, momenta p^+ and p^- and the actuation over the step to (x1, q1). */
static void terms(const Model *M, Work *W, const double *x0, const double *q0,
                  const double *x1, const double *q1, const double *commands) {
    double h = M->h;
    for (int i = 0; i < M->n; i++) {
        const double *body = M->body + BODY_SIZE * i;
        double conjugate[4] = {-q0[4 * i], -q0[4 * i + 1], -q0[4 * i + 2], q0[4 * i + 3]}, f[4];
        double *v = W->v + 3 * i, *jv = W->jv + 3 * i, spin[3];
        quaternion_multiply(conjugate, q1 + 4 * i, f);
        v[0] = f[0]; v[1] = f[1]; v[2] = f[2]; W->w[i] = f[3];
        apply(body + 1, v, jv);
        cross(v, jv, spin);
        for (int k = 0; k < 3; k++) {
            W->start[6 * i + k] = (2.0 / h) * (W->w[i] * jv[k] + spin[k]);
            W->end[6 * i + k] = (2.0 / h) * (W->w[i] * jv[k] - spin[k]);
            double linear = body[0] * (x1[3 * i + k] - x0[3 * i + k]) / h;
            W->start[6 * i + 3 + k] = W->end[6 * i + 3 + k] = linear;
        }
    }
    memset(W->actuation, 0, sizeof(double) * 6 * (size_t)M->n);
    for (int j = 0; j < M->m; j++) {
        const double *actuator = M->actuator + ACTUATOR_SIZE * j;
        int a = (int)actuator[0], b = (int)actuator[1];
        const double *axis = actuator + 2, *child_axis = actuator + 5;
        double torque = commands[j], slope = 0.0;
        if (M->motor) {
            double peak = actuator[8], gain = actuator[9], rate_b[3], rate_a[3] = {0.0, 0.0, 0.0};
            for (int k = 0; k < 3; k++) rate_b[k] = 2.0 * W->v[3 * b + k] / h;
            if (a >= 0) for (int k = 0; k < 3; k++) rate_a[k] = 2.0 * W->v[3 * a + k] / h;
            double speed = dot(child_axis, rate_b) - dot(axis, rate_a);
            int passive = isnan(commands[j]);
            double line = peak * (passive ? 0.0 : commands[j]) - gain * speed;
            torque = passive ? 0.0 : fmin(fmax(line, -peak), peak);
            slope = !passive && fabs(line) < peak ? -gain : 0.0;
            /* speed Jacobian rows: axis^T (w I + [v]x) / h at each end of the joint */
            double B[9], *rows = W->couple_rows + 6 * j;
            turn_matrix(W->w[b], W->v + 3 * b, B);
            apply_transposed(B, child_axis, rows + 3);
            for (int k = 0; k < 3; k++) rows[3 + k] /= h;
            if (a >= 0) {
                turn_matrix(W->w[a], W->v + 3 * a, B);
                apply_transposed(B, axis, rows);
                for (int k = 0; k < 3; k++) rows[k] = -rows[k] / h;
            }
        }
        W->torque[j] = torque;
        W->scale[j] = 0.5 * h * slope;
        for (int k = 0; k < 3; k++) {
            W->actuation[6 * b + k] += 0.5 * h * child_axis[k] * torque;
            if (a >= 0) W->actuation[6 * a + k] -= 0.5 * h * axis[k] * torque;
        }
    }
}

/* The smooth part of the Newton matrix: dp^+/dq_{k+1} - d(actuation)/dq_{k+1},
 * -h C_k^T and C_{k+1}. */
static void assemble(const Model *M, const Work *W, Band *B) {
    double h = M->h;
    int tangent = 6 * M->n;
    for (int i = 0; i < M->n; i++) {
        const double *body = M->body + BODY_SIZE * i, *J = body + 1, *v = W->v + 3 * i;
        const double *jv = W->jv + 3 * i;
        double turn_b[9], JB[9], BJB[9], S[9], SB[9];
        turn_matrix(W->w[i], v, turn_b);
        multiply3(J, turn_b, JB);
        multiply3(turn_b, JB, BJB);
        skew(jv, S);
        multiply3(S, turn_b, SB);
        for (int r = 0; r < 3; r++) {
            for (int s = 0; s < 3; s++)
                band_add(B, 6 * i + r, 6 * i + s, (BJB[3 * r + s] - jv[r] * v[s] - SB[3 * r + s]) / h);
            band_add(B, 6 * i + 3 + r, 6 * i + 3 + r, body[0] / h);
        }
    }
    if (M->motor) {
        for (int j = 0; j < M->m; j++) {
            const double *actuator = M->actuator + ACTUATOR_SIZE * j;
            int ends[2] = {(int)actuator[0], (int)actuator[1]};
            const double *rows = W->couple_rows + 6 * j;
            double scale = W->scale[j];
            if (scale == 0.0) continue;
            for (int e = 0; e < 2; e++) {
                if (ends[e] < 0) continue;
                const double *column = actuator + (e == 0 ? 2 : 5);
                double sign = e == 0 ? -1.0 : 1.0;
                for (int f = 0; f < 2; f++) {
                    if (ends[f] < 0) continue;
                    for (int r = 0; r < 3; r++)
                        for (int s = 0; s < 3; s++)
                            band_add(B, 6 * ends[e] + r, 6 * ends[f] + s,
                                     -scale * sign * column[r] * rows[3 * f + s]);
                }
            }
        }
    }
    for (int r = 0; r < M->rows; r++) {
        const double *row = M->row + ROW_SIZE * r;
        int ends[2] = {(int)row[1], (int)row[2]};
        for (int e = 0; e < 2; e++) {
            if (ends[e] >= M->n) continue;
            for (int k = 0; k < 6; k++) {
                band_add(B, 6 * ends[e] + k, tangent + r, -h * W->jacobian_k[ROW_SIZE * r + 6 * e + k]);
                band_add(B, tangent + r, 6 * ends[e] + k, W->jacobian_1[ROW_SIZE * r + 6 * e + k]);
            }
        }
    }
}

/* Momentum residual of the step: p^+ - target - actuation - h C_k^T lambda (6n). */
static void momentum_residual(const Model *M, const Work *W, const double *lambda, double *out) {
    for (int i = 0; i < 6 * M->n; i++) out[i] = W->start[i] - W->target[i] - W->actuation[i];
    add_transposed_product(M, W->jacobian_k, lambda, -M->h, out);
}

/* Constant-velocity guess (integrator._guess). */
static void guess(const Model *M, const double *x0, const double *q0, const double *p0,
                  const double *torques0, double *x1, double *q1) {
    double h = M->h;
    for (int i = 0; i < M->n; i++) {
        const double *body = M->body + BODY_SIZE * i;
        double momentum[6], omega[3], phi[3];
        for (int k = 0; k < 3; k++) momentum[k] = 0.0;
        for (int j = 0; j < M->m; j++) {
            const double *actuator = M->actuator + ACTUATOR_SIZE * j;
            if ((int)actuator[1] == i)
                for (int k = 0; k < 3; k++) momentum[k] += actuator[5 + k] * torques0[j];
            if ((int)actuator[0] == i)
                for (int k = 0; k < 3; k++) momentum[k] -= actuator[2 + k] * torques0[j];
        }
        for (int k = 0; k < 3; k++) {
            momentum[k] = p0[6 * i + k] - 0.5 * h * momentum[k];
            momentum[3 + k] = p0[6 * i + 3 + k] - 0.5 * h * (body[0] * M->gravity[k]);
        }
        apply(body + 10, momentum, omega);
        for (int k = 0; k < 3; k++) phi[k] = h * omega[k];
        double e[4];
        from_rotation_vector(phi, e);
        quaternion_multiply(q0 + 4 * i, e, q1 + 4 * i);
        for (int k = 0; k < 3; k++) x1[3 * i + k] = x0[3 * i + k] + h * momentum[3 + k] / body[0];
    }
}

static void apply_increments(const Model *M, const double *delta, double alpha, double *x1,
                             double *q1) {
    for (int i = 0; i < M->n; i++) {
        double phi[3];
        for (int k = 0; k < 3; k++) {
            phi[k] = alpha * delta[6 * i + k];
            x1[3 * i + k] += alpha * delta[6 * i + 3 + k];
        }
        turn(q1 + 4 * i, phi);
    }
}

typedef struct {
    const double *x0, *q0, *p0, *lambda0, *torques0, *commands, *duals0, *slacks0;
    double *x1, *q1, *lambda, *p1, *torques, *impulses, *duals, *slacks;
    int flags, iterations, contact_solved;
} Step;

/* Contact-free Newton (integrator._newton). */
static int newton(const Model *M, Work *W, Step *S) {
    int tangent = 6 * M->n;
    double momentum_tolerance = M->tolerance * fmax(1.0, max_abs(W->target, tangent));
    memcpy(S->lambda, S->lambda0, sizeof(double) * (size_t)M->rows);
    guess(M, S->x0, S->q0, S->p0, S->torques0, S->x1, S->q1);
    for (int iteration = 0; iteration <= M->max_iterations; iteration++) {
        terms(M, W, S->x0, S->q0, S->x1, S->q1, S->commands);
        momentum_residual(M, W, S->lambda, W->residual);
        constraints(M, S->x1, S->q1, W->rotation, W->residual + tangent, W->jacobian_1);
        if (max_abs(W->residual + tangent, M->rows) <= M->tolerance
            && max_abs(W->residual, tangent) <= momentum_tolerance) {
            S->iterations = iteration;
            return OK;
        }
        if (iteration == M->max_iterations) break;
        Band B = band_view(M, W);
        assemble(M, W, &B);
        if (B.outside) return OUTSIDE_BAND;
        if (band_factor(&B, W->pivots) != 0) return SINGULAR;
        for (int i = 0; i < M->size; i++) W->rhs[i] = -W->residual[i];
        band_solve(&B, W->pivots, W->rhs, W->scratch);
        apply_increments(M, W->rhs, 1.0, S->x1, S->q1);
        for (int r = 0; r < M->rows; r++) S->lambda[r] += W->rhs[tangent + r];
        if (max_abs(W->rhs, M->size) <= 1e-15 * fmax(1.0, max_abs(S->x1, 3 * M->n))) {
            S->iterations = iteration + 1;
            return OK;
        }
    }
    return NEWTON_FAILED;
}

/* ---- contact (contact.py, interior_point.py) ------------------------------------------- */

/* Sphere centres (3c) and their Jacobians (c * 3x6 on the contact body's tangent). */
static void centres(const Model *M, const double *x, const double *q, double *out, double *jacobian) {
    for (int i = 0; i < M->c; i++) {
        const double *contact = M->contact + CONTACT_SIZE * i, *point = contact + 1;
        int b = (int)contact[0];
        double R[9], P[9], RP[9];
        rotation_matrix(q + 4 * b, R);
        apply(R, point, out + 3 * i);
        for (int k = 0; k < 3; k++) out[3 * i + k] += x[3 * b + k];
        if (jacobian == NULL) continue;
        skew(point, P);
        multiply3(R, P, RP);
        double *J = jacobian + 18 * i;
        for (int r = 0; r < 3; r++)
            for (int k = 0; k < 3; k++) {
                J[6 * r + k] = -RP[3 * r + k];
                J[6 * r + 3 + k] = r == k ? 1.0 : 0.0;
            }
    }
}

/* The contact's (c) world impulse map columns: rows of J0 for (gamma, b_x, b_y). */
static void add_contact_impulses(const Model *M, const Work *W, const double *unknowns,
                                 double scale, double *out) {
    for (int i = 0; i < M->c; i++) {
        int b = (int)M->contact[CONTACT_SIZE * i];
        const double *J = W->contact_jacobian0 + 18 * i, *u = unknowns + UNKNOWNS * i;
        for (int k = 0; k < 6; k++)
            out[6 * b + k] += scale * (J[12 + k] * u[0] + J[k] * u[5] + J[6 + k] * u[6]);
    }
}

static const double FACETS[4][2] = {{1.0, 1.0}, {1.0, -1.0}, {-1.0, 1.0}, {-1.0, -1.0}};

/* d(equalities)/d(gamma, nu, b) of contact i (7x7, row-major). */
static void unknown_jacobian(const Model *M, int i, double *U) {
    memset(U, 0, 49 * sizeof(double));
    double friction = M->contact[CONTACT_SIZE * i + 5];
    for (int j = 0; j < 4; j++) {
        U[7 * (1 + j)] = friction;
        U[7 * (1 + j) + 5] = -FACETS[j][0];
        U[7 * (1 + j) + 6] = -FACETS[j][1];
        U[7 * 5 + 1 + j] = FACETS[j][0];
        U[7 * 6 + 1 + j] = FACETS[j][1];
    }
}

static void equalities(const Model *M, Work *W) {
    for (int i = 0; i < M->c; i++) {
        double U[49], *e = W->equalities + UNKNOWNS * i;
        const double *u = W->unknowns + UNKNOWNS * i, *c0 = W->centres0 + 3 * i, *c1 = W->centres1 + 3 * i;
        unknown_jacobian(M, i, U);
        for (int r = 0; r < UNKNOWNS; r++) {
            double sum = 0.0;
            for (int k = 0; k < UNKNOWNS; k++) sum += U[7 * r + k] * u[k];
            e[r] = sum;
        }
        e[0] += c1[2] - M->contact[CONTACT_SIZE * i + 4];
        e[5] += (c1[0] - c0[0]) / M->h;
        e[6] += (c1[1] - c0[1]) / M->h;
        for (int k = 0; k < PAIRS; k++) e[k] -= W->slacks[PAIRS * i + k];
    }
}

/* Inverse of a 7x7 matrix by Gauss-Jordan with partial pivoting; -1 if singular. */
static int invert7(double *A, double *out) {
    memset(out, 0, 49 * sizeof(double));
    for (int i = 0; i < 7; i++) out[8 * i] = 1.0;
    for (int k = 0; k < 7; k++) {
        int p = k;
        for (int i = k + 1; i < 7; i++) if (fabs(A[7 * i + k]) > fabs(A[7 * p + k])) p = i;
        if (A[7 * p + k] == 0.0) return -1;
        for (int j = 0; j < 7; j++) {
            double t = A[7 * k + j]; A[7 * k + j] = A[7 * p + j]; A[7 * p + j] = t;
            t = out[7 * k + j]; out[7 * k + j] = out[7 * p + j]; out[7 * p + j] = t;
        }
        double pivot = A[7 * k + k];
        for (int j = 0; j < 7; j++) { A[7 * k + j] /= pivot; out[7 * k + j] /= pivot; }
        for (int i = 0; i < 7; i++) {
            if (i == k || A[7 * i + k] == 0.0) continue;
            double factor = A[7 * i + k];
            for (int j = 0; j < 7; j++) {
                A[7 * i + j] -= factor * A[7 * k + j];
                out[7 * i + j] -= factor * out[7 * k + j];
            }
        }
    }
    return 0;
}

/* ReducedNewtonSystem.__init__: eliminate each contact's unknowns into its body block. */
static int eliminate_contacts(const Model *M, Work *W, Band *B) {
    double h = M->h;
    for (int i = 0; i < M->c; i++) {
        int b = (int)M->contact[CONTACT_SIZE * i];
        double U[49], E[42];
        const double *duals = W->unknowns + UNKNOWNS * i, *slacks = W->slacks + PAIRS * i;
        const double *J1 = W->contact_jacobian1 + 18 * i, *J0 = W->contact_jacobian0 + 18 * i;
        double *H = W->eliminated + 49 * i, *coupling = W->coupling + 42 * i;
        unknown_jacobian(M, i, U);
        for (int k = 0; k < PAIRS; k++) U[8 * k] += slacks[k] / duals[k];
        if (invert7(U, H) != 0) return -1;
        memset(E, 0, sizeof E);
        for (int k = 0; k < 6; k++) {
            E[k] = J1[12 + k];
            E[30 + k] = J1[k] / h;
            E[36 + k] = J1[6 + k] / h;
        }
        for (int r = 0; r < 7; r++)
            for (int k = 0; k < 6; k++)
                coupling[6 * r + k] = H[7 * r] * E[k] + H[7 * r + 5] * E[30 + k] + H[7 * r + 6] * E[36 + k];
        /* G coupling: G's columns are J0's z, x, y rows for (gamma, b_x, b_y) */
        for (int r = 0; r < 6; r++)
            for (int k = 0; k < 6; k++)
                band_add(B, 6 * b + r, 6 * b + k,
                         J0[12 + r] * coupling[k] + J0[r] * coupling[30 + k] + J0[6 + r] * coupling[36 + k]);
    }
    return 0;
}

/* ReducedNewtonSystem.direction for the complementarity residual W->pair_residual. */
static void direction(const Model *M, Work *W, const Band *B, double *step_u, double *step_s) {
    for (int i = 0; i < M->size; i++) W->rhs[i] = -W->residual[i];
    for (int i = 0; i < M->c; i++) {
        double right[UNKNOWNS], *free = W->free + UNKNOWNS * i;
        const double *duals = W->unknowns + UNKNOWNS * i, *H = W->eliminated + 49 * i;
        for (int k = 0; k < UNKNOWNS; k++) right[k] = -W->equalities[UNKNOWNS * i + k];
        for (int k = 0; k < PAIRS; k++) right[k] -= W->pair_residual[PAIRS * i + k] / duals[k];
        for (int r = 0; r < UNKNOWNS; r++) {
            double sum = 0.0;
            for (int k = 0; k < UNKNOWNS; k++) sum += H[7 * r + k] * right[k];
            free[r] = sum;
        }
    }
    add_contact_impulses(M, W, W->free, 1.0, W->rhs);
    band_solve(B, W->pivots, W->rhs, W->scratch);
    for (int i = 0; i < M->c; i++) {
        int b = (int)M->contact[CONTACT_SIZE * i];
        const double *coupling = W->coupling + 42 * i, *smooth = W->rhs + 6 * b;
        const double *duals = W->unknowns + UNKNOWNS * i, *slacks = W->slacks + PAIRS * i;
        for (int r = 0; r < UNKNOWNS; r++) {
            double sum = 0.0;
            for (int k = 0; k < 6; k++) sum += coupling[6 * r + k] * smooth[k];
            step_u[UNKNOWNS * i + r] = W->free[UNKNOWNS * i + r] - sum;
        }
        for (int k = 0; k < PAIRS; k++)
            step_s[PAIRS * i + k] = -(W->pair_residual[PAIRS * i + k]
                                      + slacks[k] * step_u[UNKNOWNS * i + k]) / duals[k];
    }
}

/* interior_point.max_step */
static double max_step(const double *values, int stride, const double *steps, int step_stride,
                       int count, int width, double fraction) {
    double result = 1.0;
    for (int i = 0; i < count; i++)
        for (int k = 0; k < width; k++) {
            double s = steps[step_stride * i + k];
            if (s < 0.0) result = fmin(result, -fraction * values[stride * i + k] / s);
        }
    return result;
}

/* interior_point.centring_target, from the affine direction in W->affine_u/s */
static double centring_target(const Model *M, const Work *W) {
    int c = M->c, size = PAIRS * c;
    double mu = 0.0, affine = 0.0;
    double alpha = fmin(max_step(W->unknowns, UNKNOWNS, W->affine_u, UNKNOWNS, c, PAIRS, 1.0),
                        max_step(W->slacks, PAIRS, W->affine_s, PAIRS, c, PAIRS, 1.0));
    for (int i = 0; i < c; i++)
        for (int k = 0; k < PAIRS; k++) {
            double d = W->unknowns[UNKNOWNS * i + k], s = W->slacks[PAIRS * i + k];
            mu += d * s;
            affine += (d + alpha * W->affine_u[UNKNOWNS * i + k]) * (s + alpha * W->affine_s[PAIRS * i + k]);
        }
    mu /= size;
    affine /= size;
    return fmax(KAPPA_FINAL, mu * pow(affine / mu, 3.0));
}

static void starting_point(const Model *M, Work *W, const Step *S) {
    for (int i = 0; i < M->c; i++) {
        double *u = W->unknowns + UNKNOWNS * i, *s = W->slacks + PAIRS * i;
        if ((S->flags & WARM_START) && (S->flags & HAVE_PAIRS)) {
            for (int k = 0; k < UNKNOWNS; k++) u[k] = S->duals0[UNKNOWNS * i + k];
            for (int k = 0; k < PAIRS; k++) {
                u[k] = fmax(u[k], WARM_START_FLOOR);
                s[k] = fmax(S->slacks0[PAIRS * i + k], WARM_START_FLOOR);
            }
        } else {
            double gap = W->centres1[3 * i + 2] - M->contact[CONTACT_SIZE * i + 4];
            for (int k = 0; k < PAIRS; k++) s[k] = sqrt(KAPPA_START);
            s[0] = fmax(gap, sqrt(KAPPA_START));
            for (int k = 0; k < PAIRS; k++) u[k] = KAPPA_START / s[k];
            u[5] = u[6] = 0.0;
        }
    }
}

/* Newton on the dynamics, the joints and the relaxed contact conditions
 * (ContactVariationalMultibody._interior_point). */
static int interior_point(const Model *M, Work *W, Step *S) {
    int tangent = 6 * M->n, c = M->c, blocked = 0;
    centres(M, S->x0, S->q0, W->centres0, W->contact_jacobian0);
    memcpy(S->lambda, S->lambda0, sizeof(double) * (size_t)M->rows);
    guess(M, S->x0, S->q0, S->p0, S->torques0, S->x1, S->q1);
    centres(M, S->x1, S->q1, W->centres1, NULL);
    starting_point(M, W, S);
    for (int iteration = 0; iteration < M->max_iterations; iteration++) {
        terms(M, W, S->x0, S->q0, S->x1, S->q1, S->commands);
        momentum_residual(M, W, S->lambda, W->residual);
        add_contact_impulses(M, W, W->unknowns, -1.0, W->residual);
        constraints(M, S->x1, S->q1, W->rotation, W->residual + tangent, W->jacobian_1);
        centres(M, S->x1, S->q1, W->centres1, W->contact_jacobian1);
        equalities(M, W);
        double largest_product = 0.0, mu = 0.0;
        for (int i = 0; i < c; i++)
            for (int k = 0; k < PAIRS; k++) {
                double product = W->unknowns[UNKNOWNS * i + k] * W->slacks[PAIRS * i + k];
                largest_product = fmax(largest_product, product);
                mu += product;
            }
        mu /= PAIRS * c;
        double equality = fmax(fmax(max_abs(W->residual, tangent), max_abs(W->equalities, UNKNOWNS * c)),
                               max_abs(W->residual + tangent, M->rows));
        if (equality <= M->tolerance && largest_product <= COMPLEMENTARITY_TOLERANCE) {
            S->iterations = iteration;
            for (int i = 0; i < c; i++) {
                const double *u = W->unknowns + UNKNOWNS * i;
                S->impulses[3 * i] = u[5];
                S->impulses[3 * i + 1] = u[6];
                S->impulses[3 * i + 2] = u[0];
            }
            memcpy(S->duals, W->unknowns, sizeof(double) * UNKNOWNS * (size_t)c);
            memcpy(S->slacks, W->slacks, sizeof(double) * PAIRS * (size_t)c);
            return OK;
        }
        Band B = band_view(M, W);
        assemble(M, W, &B);
        if (eliminate_contacts(M, W, &B) != 0) return SINGULAR;
        if (B.outside) return OUTSIDE_BAND;
        if (band_factor(&B, W->pivots) != 0) return SINGULAR;
        if ((S->flags & PREDICTOR_CORRECTOR) && !blocked) {
            for (int i = 0; i < c; i++)
                for (int k = 0; k < PAIRS; k++)
                    W->pair_residual[PAIRS * i + k] = W->unknowns[UNKNOWNS * i + k] * W->slacks[PAIRS * i + k];
            direction(M, W, &B, W->affine_u, W->affine_s);
            double centre = centring_target(M, W);
            for (int i = 0; i < c; i++)
                for (int k = 0; k < PAIRS; k++)
                    W->pair_residual[PAIRS * i + k] += W->affine_u[UNKNOWNS * i + k] * W->affine_s[PAIRS * i + k] - centre;
        } else {
            double centre = fmax(KAPPA_FINAL, PATH_REDUCTION * mu);
            for (int i = 0; i < c; i++)
                for (int k = 0; k < PAIRS; k++)
                    W->pair_residual[PAIRS * i + k] = W->unknowns[UNKNOWNS * i + k] * W->slacks[PAIRS * i + k] - centre;
        }
        direction(M, W, &B, W->step_u, W->step_s);
        double fraction = fmax(FRACTION_TO_BOUNDARY, 1.0 - mu);
        double alpha = fmin(max_step(W->unknowns, UNKNOWNS, W->step_u, UNKNOWNS, c, PAIRS, fraction),
                            max_step(W->slacks, PAIRS, W->step_s, PAIRS, c, PAIRS, fraction));
        apply_increments(M, W->rhs, alpha, S->x1, S->q1);
        for (int r = 0; r < M->rows; r++) S->lambda[r] += alpha * W->rhs[tangent + r];
        for (int i = 0; i < UNKNOWNS * c; i++) W->unknowns[i] += alpha * W->step_u[i];
        for (int i = 0; i < PAIRS * c; i++) W->slacks[i] += alpha * W->step_s[i];
        if (alpha < BLOCKED_STEP) {
            for (int i = 0; i < c; i++)
                for (int k = 0; k < PAIRS; k++) {
                    W->unknowns[UNKNOWNS * i + k] = fmax(W->unknowns[UNKNOWNS * i + k], RECENTRE_FLOOR);
                    W->slacks[PAIRS * i + k] = fmax(W->slacks[PAIRS * i + k], RECENTRE_FLOOR);
                }
            blocked = 1;
        }
    }
    return INTERIOR_POINT_FAILED;
}

/* VariationalMultibody.step / ContactVariationalMultibody._solve. */
static int whole_step(const Model *M, Work *W, Step *S) {
    int tangent = 6 * M->n, c = M->c, status;
    double h = M->h;
    for (int i = 0; i < M->n; i++)
        for (int k = 0; k < 3; k++) {
            W->target[6 * i + k] = S->p0[6 * i + k];
            W->target[6 * i + 3 + k] = S->p0[6 * i + 3 + k] + 0.5 * h * (M->body[BODY_SIZE * i] * M->gravity[k]);
        }
    constraints(M, S->x0, S->q0, W->rotation, W->residual + tangent, W->jacobian_k);
    int in_contact = 0;
    if (S->flags & HAVE_PAIRS)
        for (int i = 0; i < c; i++) in_contact |= S->duals0[UNKNOWNS * i] > S->slacks0[PAIRS * i];
    S->contact_solved = 0;
    int clear = 0;
    if (c == 0 || ((S->flags & FREE_STEP_FIRST) && !in_contact)) {
        status = newton(M, W, S);
        if (status != OK) return status;
        centres(M, S->x1, S->q1, W->centres1, NULL);
        clear = 1;
        for (int i = 0; i < c; i++) clear &= W->centres1[3 * i + 2] >= M->contact[CONTACT_SIZE * i + 4];
    }
    if (clear) {
        memset(S->impulses, 0, sizeof(double) * 3 * (size_t)c);
    } else {
        status = interior_point(M, W, S);
        if (status != OK) return status;
        S->contact_solved = 1;
    }
    terms(M, W, S->x0, S->q0, S->x1, S->q1, S->commands);
    for (int i = 0; i < M->n; i++)
        for (int k = 0; k < 3; k++) {
            S->p1[6 * i + k] = W->end[6 * i + k] + W->actuation[6 * i + k];
            S->p1[6 * i + 3 + k] = W->end[6 * i + 3 + k]
                                   + 0.5 * h * (M->body[BODY_SIZE * i] * M->gravity[k])
                                   + W->actuation[6 * i + 3 + k];
        }
    memcpy(S->torques, W->torque, sizeof(double) * (size_t)M->m);
    return OK;
}

/* ---- Python entry points ----------------------------------------------------------------- */

/* Get a C-contiguous float64 buffer of exactly count values (count < 0: any length). */
static int get_doubles(PyObject *object, Py_buffer *view, int writable, Py_ssize_t count,
                       const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, view, flags) != 0) {
        PyErr_Format(PyExc_TypeError, "%s: expected a %sC-contiguous float64 array", name,
                     writable ? "writable " : "");
        return -1;
    }
    if (view->format == NULL || strcmp(view->format, "d") != 0
        || (count >= 0 && view->len != count * (Py_ssize_t)sizeof(double))) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd float64 values", name, count);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *workspace_size(PyObject *self, PyObject *args) {
    PyObject *model_object;
    Py_buffer view;
    Model M;
    (void)self;
    if (!PyArg_ParseTuple(args, "O:workspace_size", &model_object)) return NULL;
    if (get_doubles(model_object, &view, 0, -1, "model") != 0) return NULL;
    int ok = model_view(&view, &M) == 0;
    Py_ssize_t size = ok ? work_size(&M) : 0;
    PyBuffer_Release(&view);
    return ok ? PyLong_FromSsize_t(size) : NULL;
}

#define STEP_BUFFERS 18

static PyObject *step(PyObject *self, PyObject *args) {
    static const char *names[STEP_BUFFERS] = {
        "model", "work", "positions", "quaternions", "momenta", "multipliers", "torques",
        "commands", "duals", "slacks", "out positions", "out quaternions",
        "out multipliers", "out momenta", "out torques", "out impulses", "out duals",
        "out slacks"};
    PyObject *objects[STEP_BUFFERS];
    Py_buffer views[STEP_BUFFERS];
    int flags, taken = 0;
    PyObject *result = NULL;
    Model M;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOiOOOOOOOO:step", &objects[0], &objects[1],
                          &objects[2], &objects[3], &objects[4], &objects[5], &objects[6],
                          &objects[7], &objects[8], &objects[9], &flags, &objects[10],
                          &objects[11], &objects[12], &objects[13], &objects[14],
                          &objects[15], &objects[16], &objects[17]))
        return NULL;
    if (get_doubles(objects[0], &views[0], 0, -1, names[0]) != 0) return NULL;
    taken = 1;
    if (model_view(&views[0], &M) != 0) goto done;
    {
        Py_ssize_t n = M.n, c = M.c, pairs = (flags & HAVE_PAIRS) ? c : -1;
        Py_ssize_t counts[STEP_BUFFERS] = {
            -1, work_size(&M), 3 * n, 4 * n, 6 * n, M.rows, M.m, M.m,
            pairs < 0 ? -1 : UNKNOWNS * c, pairs < 0 ? -1 : PAIRS * c,
            3 * n, 4 * n, M.rows, 6 * n, M.m, 3 * c, UNKNOWNS * c, PAIRS * c};
        for (; taken < STEP_BUFFERS; taken++) {
            int writable = taken == 1 || taken >= 10;
            if (get_doubles(objects[taken], &views[taken], writable, counts[taken], names[taken]) != 0)
                goto done;
        }
    }
    {
        Work W;
        Step S;
        const double *in[8];
        double *out[8];
        for (int i = 0; i < 8; i++) {
            in[i] = views[2 + i].buf;
            out[i] = views[10 + i].buf;
        }
        work_view(&M, views[1].buf, &W);
        S.x0 = in[0]; S.q0 = in[1]; S.p0 = in[2]; S.lambda0 = in[3]; S.torques0 = in[4];
        S.commands = in[5]; S.duals0 = in[6]; S.slacks0 = in[7];
        S.x1 = out[0]; S.q1 = out[1]; S.lambda = out[2]; S.p1 = out[3]; S.torques = out[4];
        S.impulses = out[5]; S.duals = out[6]; S.slacks = out[7];
        S.flags = flags; S.iterations = 0; S.contact_solved = 0;
        /* the GIL stays held: the workspace belongs to one integrator */
        int status = whole_step(&M, &W, &S);
        result = Py_BuildValue("(iii)", status, S.iterations, S.contact_solved);
    }
done:
    for (int i = 0; i < taken; i++) PyBuffer_Release(&views[i]);
    return result;
}

static PyObject *contact_gaps(PyObject *self, PyObject *args) {
    PyObject *objects[4];
    Py_buffer views[4];
    int taken = 0;
    PyObject *result = NULL;
    Model M;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO:contact_gaps", &objects[0], &objects[1], &objects[2],
                          &objects[3]))
        return NULL;
    if (get_doubles(objects[0], &views[0], 0, -1, "model") != 0) return NULL;
    taken = 1;
    if (model_view(&views[0], &M) != 0) goto done;
    {
        static const char *names[4] = {"model", "positions", "quaternions", "out"};
        Py_ssize_t counts[4] = {-1, 3 * (Py_ssize_t)M.n, 4 * (Py_ssize_t)M.n, M.c};
        for (; taken < 4; taken++)
            if (get_doubles(objects[taken], &views[taken], taken == 3, counts[taken], names[taken]) != 0)
                goto done;
    }
    {
        double centre[3], *out = views[3].buf;
        for (int i = 0; i < M.c; i++) {
            const double *contact = M.contact + CONTACT_SIZE * i;
            int b = (int)contact[0];
            double R[9];
            rotation_matrix((const double *)views[2].buf + 4 * b, R);
            apply(R, contact + 1, centre);
            out[i] = centre[2] + ((const double *)views[1].buf)[3 * b + 2] - contact[4];
        }
        Py_INCREF(Py_None);
        result = Py_None;
    }
done:
    for (int i = 0; i < taken; i++) PyBuffer_Release(&views[i]);
    return result;
}

/* kinematics.joint_angle for one configuration: 2 atan2 of conj(Q_a) Q_b conj(Q_0)'s
 * axis and scalar parts, wrapped to [-pi, pi] as numpy's angle(exp(1j x)). */
static PyObject *joint_angle(PyObject *self, PyObject *args) {
    PyObject *objects[4];
    Py_buffer views[4];
    static const char *names[4] = {"parent", "child", "orientation", "axis"};
    static const Py_ssize_t counts[4] = {4, 4, 4, 3};
    int taken = 0;
    PyObject *result = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO:joint_angle", &objects[0], &objects[1], &objects[2],
                          &objects[3]))
        return NULL;
    for (; taken < 4; taken++)
        if (get_doubles(objects[taken], &views[taken], 0, counts[taken], names[taken]) != 0) goto done;
    {
        const double *a = views[0].buf, *o = views[2].buf;
        double conjugate_a[4] = {-a[0], -a[1], -a[2], a[3]}, conjugate_o[4] = {-o[0], -o[1], -o[2], o[3]};
        double relative[4];
        quaternion_multiply(conjugate_a, views[1].buf, relative);
        quaternion_multiply(relative, conjugate_o, relative);
        double angle = 2.0 * atan2(dot(relative, views[3].buf), relative[3]);
        result = PyFloat_FromDouble(atan2(sin(angle), cos(angle)));
    }
done:
    for (int i = 0; i < taken; i++) PyBuffer_Release(&views[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"contact_gaps", contact_gaps, METH_VARARGS,
     "contact_gaps(model, positions, quaternions, out): gap (m) of each contact sphere."},
    {"joint_angle", joint_angle, METH_VARARGS,
     "joint_angle(parent, child, orientation, axis) -> angle (rad) of a revolute joint."},
    {"workspace_size", workspace_size, METH_VARARGS,
     "workspace_size(model) -> number of float64 values of step()'s workspace."},
    {"step", step, METH_VARARGS,
     "step(model, work, positions, quaternions, momenta, multipliers, torques, commands, "
     "duals, slacks, flags, out_positions, out_quaternions, out_multipliers, out_momenta, "
     "out_torques, out_impulses, out_duals, out_slacks) -> (status, iterations, "
     "contact_solved): one whole step (see multibody.compiled)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "variational_sim.multibody._kernels",
    "One whole maximal-coordinate multibody step (Newton, interior-point contact) in C.",
    -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
