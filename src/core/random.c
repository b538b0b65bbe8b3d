/* random.c — reproducible random numbers: Philox-4x32-10, counter based.
 *
 * Element i of a draw uses counter (offset + i / 4, 0) under key seed, so
 * the numbers depend only on the seed and how many were drawn before, never
 * on the thread count. Written here rather than taken from a library: it is
 * 40 lines, and a dependency would not make it more reproducible. */
#include "internal.h"

#include <math.h>

struct jag_generator {
    uint64_t seed;
    uint64_t offset; /* Philox blocks consumed so far */
};

static _Thread_local jag_generator default_generator;

void jag_manual_seed(uint64_t seed) {
    default_generator.seed = seed;
    default_generator.offset = 0;
}

jag_status jag_generator_new(uint64_t seed, jag_generator **out) {
    if (!out) return jag__error(JAG_EINVAL, "jag_generator_new: argument 'out' is NULL");
    jag_generator *g = malloc(sizeof *g);
    if (!g) return jag__error(JAG_ENOMEM, "jag_generator_new: out of memory");
    g->seed = seed;
    g->offset = 0;
    *out = g;
    return JAG_OK;
}

void jag_generator_free(jag_generator *g) { free(g); }

static void philox(uint64_t counter, uint64_t key, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1, c3 = (uint32_t)p0, c0 = n0, c2 = n2;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* Uniform in [0, 1) with 24 (float) or 53 (double) random bits. */
static double u01_53(uint32_t a, uint32_t b) { return (double)(((uint64_t)a << 21) ^ b) * 0x1.0p-53; }

typedef enum { DIST_UNIFORM, DIST_NORMAL } dist;

static jag_status draw(const char *op, const int64_t *sizes, int ndim, double a, double b, jag_dtype dtype,
                       jag_generator *g, dist kind, jag_tensor **out) {
    if (!out) return jag__error(JAG_EINVAL, "%s: argument 'out' is NULL", op);
    if (!jag_dtype_is_floating(dtype))
        return jag__error(JAG_EDTYPE, "%s: argument 'dtype' is %s, expected float32 or float64", op, jag_dtype_name(dtype));
    if (!isfinite(a) || !isfinite(b))
        return jag__error(JAG_EINVAL, "%s: parameters %g and %g must be finite", op, a, b);
    if (kind == DIST_UNIFORM && b < a)
        return jag__error(JAG_EINVAL, "%s: argument 'high' (%g) is below 'low' (%g)", op, b, a);
    if (kind == DIST_NORMAL && b < 0)
        return jag__error(JAG_EINVAL, "%s: argument 'std' is %g, expected >= 0", op, b);
    if (!g) g = &default_generator;
    jag__enter();
    jag_tensor *t = jag__tensor_new(op, sizes, ndim, dtype, false, false);
    if (!t) return jag__leave(jag_last_status(), NULL, 0);
    int64_t n = jag_numel(t);
    /* Two uniforms per element (53-bit doubles; Box-Muller pairs): 4 words
     * per Philox block give 2 elements. */
    int64_t blocks = (n + 1) / 2;
    float *f32 = dtype == JAG_FLOAT32 ? (float *)jag__ptr(t) : NULL;
    double *f64 = dtype == JAG_FLOAT64 ? (double *)jag__ptr(t) : NULL;
#pragma omp parallel for schedule(static) if (n > JAG_PARALLEL_GRAIN)
    for (int64_t blk = 0; blk < blocks; blk++) {
        uint32_t w[4];
        philox(g->offset + (uint64_t)blk, g->seed, w);
        double u1 = u01_53(w[0], w[1]), u2 = u01_53(w[2], w[3]);
        double v[2];
        if (kind == DIST_UNIFORM) {
            v[0] = a + (b - a) * u1;
            v[1] = a + (b - a) * u2;
        } else {
            double r = sqrt(-2.0 * log(1.0 - u1)); /* 1 - u1 is in (0, 1] */
            v[0] = a + b * r * cos(2.0 * M_PI * u2);
            v[1] = a + b * r * sin(2.0 * M_PI * u2);
        }
        for (int k = 0; k < 2; k++) {
            int64_t i = blk * 2 + k;
            if (i >= n) break;
            if (f32) {
                float x = (float)v[k];
                /* float rounding can reach `high`; keep the interval half-open */
                if (kind == DIST_UNIFORM && x >= (float)b && b > a) x = nextafterf((float)b, -INFINITY);
                f32[i] = x;
            } else {
                f64[i] = v[k];
            }
        }
    }
    g->offset += (uint64_t)blocks;
    *out = t;
    return jag__leave(JAG_OK, out, 1);
}

jag_status jag_rand_uniform(const int64_t *sizes, int ndim, double low, double high, jag_dtype dtype,
                            jag_generator *g, jag_tensor **out) {
    return draw("jag_rand_uniform", sizes, ndim, low, high, dtype, g, DIST_UNIFORM, out);
}

jag_status jag_rand_normal(const int64_t *sizes, int ndim, double mean, double std, jag_dtype dtype,
                           jag_generator *g, jag_tensor **out) {
    return draw("jag_rand_normal", sizes, ndim, mean, std, dtype, g, DIST_NORMAL, out);
}
