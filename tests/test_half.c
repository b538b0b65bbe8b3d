/* test_half.c — float16 and bfloat16: the dtypes, the conversions against
 * hand-computed bit patterns and an independent rounding reference, copies
 * and element access, ops computed in float32 and rounded once (as
 * PyTorch's CPU kernels compute half tensors), ops that move half elements
 * as they are, gradients, and the refusal of a kernel called below the
 * dispatcher. */
#include "test.h"
#include "dispatch/dispatch.h"

#include <float.h>

static const jag_dtype HALVES[2] = {JAG_FLOAT16, JAG_BFLOAT16};

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float f32_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The value of a float16 bit pattern from its fields:
 * (-1)^s 2^(e-15) (1 + m/1024), subnormals 2^-14 (m/1024). */
static double f16_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

/* Round x to the format with `mant` explicit significand bits, smallest
 * normal exponent `emin` and overflow threshold `big` (values at or past
 * it become infinite), in double: x / ulp rounded to an integer with ties
 * to even (nearbyint, default rounding mode), times ulp. */
static double round_to_format(double x, int mant, int emin, double big) {
    if (isnan(x) || isinf(x) || x == 0) return x;
    if (fabs(x) >= big) return copysign(INFINITY, x);
    int e;
    frexp(fabs(x), &e); /* |x| in [2^(e-1), 2^e) */
    int exp = e - 1 < emin ? emin : e - 1;
    double ulp = ldexp(1.0, exp - mant);
    return copysign(nearbyint(fabs(x) / ulp) * ulp, x);
}

static void test_dtype_table(void) {
    TEST_BEGIN();
    CHECK(strcmp(jag_dtype_name(JAG_FLOAT16), "float16") == 0);
    CHECK(strcmp(jag_dtype_name(JAG_BFLOAT16), "bfloat16") == 0);
    CHECK(jag_dtype_size(JAG_FLOAT16) == 2 && jag_dtype_size(JAG_BFLOAT16) == 2);
    CHECK(jag_dtype_is_floating(JAG_FLOAT16) && jag_dtype_is_floating(JAG_BFLOAT16));
    CHECK(jag_dtype_is_half(JAG_FLOAT16) && jag_dtype_is_half(JAG_BFLOAT16) && !jag_dtype_is_half(JAG_FLOAT32));
    /* the existing dtypes keep their numbers */
    CHECK(JAG_FLOAT32 == 0 && JAG_FLOAT64 == 1 && JAG_INT32 == 2 && JAG_INT64 == 3 && JAG_BOOL == 4);
    /* torch.promote_types */
    CHECK(jag_promote_types(JAG_FLOAT16, JAG_BFLOAT16) == JAG_FLOAT32);
    CHECK(jag_promote_types(JAG_BFLOAT16, JAG_FLOAT16) == JAG_FLOAT32);
    CHECK(jag_promote_types(JAG_FLOAT16, JAG_FLOAT32) == JAG_FLOAT32);
    CHECK(jag_promote_types(JAG_FLOAT64, JAG_BFLOAT16) == JAG_FLOAT64);
    CHECK(jag_promote_types(JAG_INT64, JAG_FLOAT16) == JAG_FLOAT16);
    CHECK(jag_promote_types(JAG_BFLOAT16, JAG_INT32) == JAG_BFLOAT16);
    CHECK(jag_promote_types(JAG_BOOL, JAG_BFLOAT16) == JAG_BFLOAT16);
    CHECK(jag_promote_types(JAG_FLOAT16, JAG_FLOAT16) == JAG_FLOAT16);
}

static void test_float16_bit_patterns(void) {
    TEST_BEGIN();
    struct { float in; uint16_t bits; } cases[] = {
        {1.0f, 0x3C00},  {-2.0f, 0xC000}, {0.5f, 0x3800},   {65504.0f, 0x7BFF}, {0.0f, 0x0000},
        {-0.0f, 0x8000}, {0.1f, 0x2E66},  /* 0.1 = 0x1.99999ap-4: 0x266 + round up */
        {65519.0f, 0x7BFF},               /* below the midpoint to 65536 */
        {65520.0f, 0x7C00},               /* the midpoint: ties to even (0x3ff is odd) -> inf */
        {1e6f, 0x7C00},  {-1e6f, 0xFC00}, {INFINITY, 0x7C00}, {-INFINITY, 0xFC00},
        {0x1p-14f, 0x0400},               /* smallest normal */
        {0x1p-24f, 0x0001},               /* smallest subnormal */
        {0x1p-25f, 0x0000},               /* half of it: tie to even -> 0 */
        {0x1.8p-24f, 0x0002},             /* 1.5 units: tie -> 2 */
        {0x1.4p-24f, 0x0001},             /* 1.25 units -> 1 */
        {0x3ffp-24f, 0x03FF},             /* largest subnormal */
        {0x1.ffcp-15f, 0x0400},           /* 1023.5 units: tie -> 1024, the smallest normal */
        {1.0f + 0x1p-11f, 0x3C00},        /* tie between 0x3C00 and 0x3C01 -> even */
        {1.0f + 0x3p-11f, 0x3C02},        /* tie between 0x3C01 and 0x3C02 -> even */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3C01}, /* just above the tie */
        {0x1p-30f, 0x0000},               /* underflows to 0 */
        {-0x1p-24f, 0x8001},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(jag_float_to_float16(cases[i].in) == cases[i].bits, "%a -> 0x%04x, expected 0x%04x", cases[i].in,
                  jag_float_to_float16(cases[i].in), cases[i].bits);
    uint16_t nan = jag_float_to_float16(NAN);
    CHECK((nan & 0x7C00) == 0x7C00 && (nan & 0x3FF) != 0);
    uint16_t snan = jag_float_to_float16(f32_of(0x7F800001u)); /* a payload below the kept bits */
    CHECK((snan & 0x7C00) == 0x7C00 && (snan & 0x3FF) != 0);
    CHECK(jag_float16_to_float(0x3C00) == 1.0f && jag_float16_to_float(0x7BFF) == 65504.0f);
    CHECK(jag_float16_to_float(0x0001) == 0x1p-24f && jag_float16_to_float(0x8000) == 0.0f &&
          signbit(jag_float16_to_float(0x8000)));
    CHECK(jag_float16_to_float(0x3555) == 0.333251953125f);
    CHECK(isinf(jag_float16_to_float(0xFC00)) && jag_float16_to_float(0xFC00) < 0);
    CHECK(isnan(jag_float16_to_float(0x7E00)));
}

static void test_bfloat16_bit_patterns(void) {
    TEST_BEGIN();
    struct { float in; uint16_t bits; } cases[] = {
        {1.0f, 0x3F80},           {-2.0f, 0xC000},          {0.0f, 0x0000}, {-0.0f, 0x8000},
        {3.14159265f, 0x4049},    /* pi = 0x40490FDB: the dropped half below the tie */
        {1.0f + 0x1p-8f, 0x3F80}, /* tie between 0x3F80 and 0x3F81 -> even */
        {1.0f + 0x3p-8f, 0x3F82}, /* tie between 0x3F81 and 0x3F82 -> even */
        {1.0f + 0x1p-8f + 0x1p-20f, 0x3F81},
        {FLT_MAX, 0x7F80},        /* past the largest bfloat16's midpoint to 2^128 -> inf */
        {0x1.fep127f, 0x7F7F},    /* the largest bfloat16 */
        {INFINITY, 0x7F80},       {-INFINITY, 0xFF80},
        {0x1p-126f, 0x0080},      /* smallest normal */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(jag_float_to_bfloat16(cases[i].in) == cases[i].bits, "%a -> 0x%04x, expected 0x%04x", cases[i].in,
                  jag_float_to_bfloat16(cases[i].in), cases[i].bits);
    /* float32 subnormals: 0x00010000 is bfloat16 0x0001 exactly; 0x00018000
     * is a tie between 0x0001 and 0x0002 -> 0x0002 */
    CHECK(jag_float_to_bfloat16(f32_of(0x00010000u)) == 0x0001);
    CHECK(jag_float_to_bfloat16(f32_of(0x00018000u)) == 0x0002);
    CHECK(jag_float_to_bfloat16(f32_of(0x00008000u)) == 0x0000);
    uint16_t nan = jag_float_to_bfloat16(f32_of(0x7F800001u)); /* payload only in the dropped half */
    CHECK((nan & 0x7F80) == 0x7F80 && (nan & 0x7F) != 0);
    CHECK(jag_bfloat16_to_float(0x3F80) == 1.0f && jag_bfloat16_to_float(0x4049) == f32_of(0x40490000u));
}

/* Every float16 and bfloat16 pattern: widening matches the fields' value,
 * and narrowing it back gives the pattern again (a NaN stays a NaN). */
static void test_round_trip_every_pattern(void) {
    TEST_BEGIN();
    long bad16 = 0, badb = 0, badv = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float w = jag_float16_to_float((uint16_t)h);
        double want = f16_value((uint16_t)h);
        if (!(isnan(want) ? isnan(w) : (double)w == want && !signbit(w) == !signbit(want))) badv++;
        uint16_t back = jag_float_to_float16(w);
        if (isnan(want) ? !((back & 0x7C00) == 0x7C00 && (back & 0x3FF)) : back != h) bad16++;
        float wb = jag_bfloat16_to_float((uint16_t)h);
        if (f32_bits(wb) != h << 16) badv++;
        uint16_t bb = jag_float_to_bfloat16(wb);
        if (isnan(wb) ? !((bb & 0x7F80) == 0x7F80 && (bb & 0x7F)) : bb != h) badb++;
    }
    CHECK_MSG(badv == 0, "%ld widened values differ from the fields' value", badv);
    CHECK_MSG(bad16 == 0, "%ld float16 patterns do not round-trip", bad16);
    CHECK_MSG(badb == 0, "%ld bfloat16 patterns do not round-trip", badb);
}

/* Narrowing over float32 patterns spread over every binade (and the ties
 * just below each half value's midpoints) against round_to_format. */
static void test_narrowing_matches_reference(void) {
    TEST_BEGIN();
    long bad16 = 0, badb = 0;
    for (uint64_t u = 0; u < 0x100000000ull; u += 997) {
        float x = f32_of((uint32_t)u);
        if (isnan(x)) continue;
        double r16 = round_to_format(x, 10, -14, 65520.0);
        double got16 = f16_value(jag_float_to_float16(x));
        if (!(got16 == r16 && !signbit(got16) == !signbit(r16))) {
            if (bad16++ < 3) fprintf(stderr, "float16(%a) = %a, reference %a\n", x, got16, r16);
        }
        double rb = round_to_format(x, 7, -126, ldexp(2.0 - ldexp(1, -8), 127));
        double gotb = jag_bfloat16_to_float(jag_float_to_bfloat16(x));
        if (!(gotb == rb && !signbit(gotb) == !signbit(rb))) {
            if (badb++ < 3) fprintf(stderr, "bfloat16(%a) = %a, reference %a\n", x, gotb, rb);
        }
    }
    /* every midpoint between neighbouring positive float16 values */
    for (uint32_t h = 0; h < 0x7C00; h++) {
        float mid = (float)((f16_value((uint16_t)h) + f16_value((uint16_t)(h + 1))) / 2);
        uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        if (jag_float_to_float16(mid) != want) bad16++;
    }
    CHECK_MSG(bad16 == 0, "%ld float16 roundings differ", bad16);
    CHECK_MSG(badb == 0, "%ld bfloat16 roundings differ", badb);
}

/* A half tensor holding the given bit patterns. */
static jag_tensor *t_bits(const uint16_t *bits, int64_t n, jag_dtype dt) {
    jag_tensor *t = NULL;
    if (jag_empty(&n, 1, dt, &t)) exit(2);
    memcpy(jag_data(t), bits, (size_t)n * 2);
    return t;
}

/* Tensor conversions (the vector paths and the strided ones) against the
 * scalar conversions checked above. */
static void test_tensor_conversions(void) {
    TEST_BEGIN();
    static uint16_t all[65536];
    for (uint32_t h = 0; h < 65536; h++) all[h] = (uint16_t)h;
    for (int k = 0; k < 2; k++) {
        jag_dtype dt = HALVES[k];
        jag_tensor *h = t_bits(all, 65536, dt), *f = NULL, *back = NULL, *d = NULL;
        CHECK_OK(jag_to_dtype(h, JAG_FLOAT32, &f));
        CHECK_OK(jag_to_dtype(h, JAG_FLOAT64, &d));
        long bad = 0;
        const float *fp = jag_data(f);
        const double *dp = jag_data(d);
        for (uint32_t i = 0; i < 65536; i++) {
            float want = dt == JAG_FLOAT16 ? jag_float16_to_float((uint16_t)i) : jag_bfloat16_to_float((uint16_t)i);
            if (f32_bits(fp[i]) != f32_bits(want) && !(isnan(fp[i]) && isnan(want))) bad++;
            if (!(dp[i] == (double)want || (isnan(dp[i]) && isnan(want)))) bad++;
        }
        CHECK_MSG(bad == 0, "%s: %ld widened elements differ", jag_dtype_name(dt), bad);
        CHECK_OK(jag_to_dtype(f, dt, &back));
        const uint16_t *bp = jag_data(back);
        bad = 0;
        for (uint32_t i = 0; i < 65536; i++) {
            uint16_t want = dt == JAG_FLOAT16 ? jag_float_to_float16(fp[i]) : jag_float_to_bfloat16(fp[i]);
            if (bp[i] != want) bad++;
        }
        CHECK_MSG(bad == 0, "%s: %ld narrowed elements differ", jag_dtype_name(dt), bad);
        jag_release(h), jag_release(f), jag_release(back), jag_release(d);
    }
    /* float32 values of every kind, contiguous and strided, to each half */
    int64_t s[2] = {37, 29};
    jag_tensor *x = t_rand(s, 2, JAG_FLOAT32, -70000, 70000, 5), *xt = NULL;
    CHECK_OK(jag_transpose(x, 0, 1, &xt));
    for (int k = 0; k < 2; k++) {
        jag_dtype dt = HALVES[k];
        jag_tensor *a = NULL, *b = NULL, *i32 = NULL, *bl = NULL, *other = NULL;
        CHECK_OK(jag_to_dtype(x, dt, &a));
        CHECK_OK(jag_to_dtype(xt, dt, &b));
        CHECK_OK(jag_to_dtype(a, JAG_INT32, &i32));
        CHECK_OK(jag_to_dtype(a, JAG_BOOL, &bl));
        CHECK_OK(jag_to_dtype(a, HALVES[1 - k], &other));
        const float *xp = jag_data(x);
        long bad = 0;
        for (int64_t r = 0; r < s[0]; r++)
            for (int64_t c = 0; c < s[1]; c++) {
                float v = xp[r * s[1] + c];
                uint16_t want = dt == JAG_FLOAT16 ? jag_float_to_float16(v) : jag_float_to_bfloat16(v);
                float wv = dt == JAG_FLOAT16 ? jag_float16_to_float(want) : jag_bfloat16_to_float(want);
                if (((const uint16_t *)jag_data(a))[r * s[1] + c] != want) bad++;
                if (((const uint16_t *)jag_data(b))[c * s[0] + r] != want) bad++;
                if (!isinf(wv) && ((const int32_t *)jag_data(i32))[r * s[1] + c] != (int32_t)truncf(wv)) bad++;
                if (((const uint8_t *)jag_data(bl))[r * s[1] + c] != (wv != 0)) bad++;
                uint16_t o = ((const uint16_t *)jag_data(other))[r * s[1] + c];
                uint16_t ow = dt == JAG_FLOAT16 ? jag_float_to_bfloat16(wv) : jag_float_to_float16(wv);
                if (o != ow) bad++;
            }
        CHECK_MSG(bad == 0, "%s: %ld converted elements differ", jag_dtype_name(dt), bad);
        jag_release(a), jag_release(b), jag_release(i32), jag_release(bl), jag_release(other);
    }
    jag_release(x), jag_release(xt);
}

static void test_creation_item_and_printing(void) {
    TEST_BEGIN();
    int64_t s[2] = {2, 3};
    for (int k = 0; k < 2; k++) {
        jag_dtype dt = HALVES[k];
        jag_tensor *z = NULL, *o = NULL, *f = NULL;
        CHECK_OK(jag_zeros(s, 2, dt, &z));
        CHECK_OK(jag_ones(s, 2, dt, &o));
        CHECK_OK(jag_full(s, 2, 0.1, dt, &f));
        /* 0.1 rounds to float32 first, then to the half type, as torch.full */
        double tenth = dt == JAG_FLOAT16 ? jag_float16_to_float(jag_float_to_float16(0.1f))
                                         : jag_bfloat16_to_float(jag_float_to_bfloat16(0.1f));
        for (int64_t i = 0; i < 6; i++) {
            CHECK(t_get(z, i) == 0 && t_get(o, i) == 1);
            CHECK(t_get(f, i) == tenth);
        }
        CHECK(((const uint16_t *)jag_data(o))[5] == (dt == JAG_FLOAT16 ? 0x3C00 : 0x3F80));
        char buf[256];
        jag_format(o, buf, sizeof buf);
        char want[128];
        snprintf(want, sizeof want, "tensor([[1.0000, 1.0000, 1.0000],\n        [1.0000, 1.0000, 1.0000]], dtype=%s, size=[2, 3])",
                 jag_dtype_name(dt));
        CHECK_MSG(strcmp(buf, want) == 0, "%s", buf);
        jag_release(z), jag_release(o), jag_release(f);
    }
}

/* out (of dtype dt) equals op computed on the float32 widening of the
 * inputs, rounded to dt: bit for bit. */
static bool same_bits(const jag_tensor *a, const jag_tensor *b) {
    if (jag_tensor_dtype(a) != jag_tensor_dtype(b) || !t_same_shape(a, b)) return false;
    jag_tensor *ca = NULL, *cb = NULL;
    if (jag_clone(a, &ca) || jag_clone(b, &cb)) exit(2);
    bool same = memcmp(jag_data(ca), jag_data(cb), (size_t)jag_numel(ca) * jag_dtype_size(jag_tensor_dtype(ca))) == 0;
    jag_release(ca), jag_release(cb);
    return same;
}

static jag_tensor *widened(const jag_tensor *x) {
    jag_tensor *w = NULL;
    if (jag_to_dtype(x, JAG_FLOAT32, &w)) exit(2);
    return w;
}
static jag_tensor *narrowed(jag_tensor *x, jag_dtype dt) {
    jag_tensor *n = NULL;
    if (jag_to_dtype(x, dt, &n)) exit(2);
    jag_release(x);
    return n;
}

static void test_ops_compute_in_float32(void) {
    TEST_BEGIN();
    int64_t s[2] = {6, 40}, sb[2] = {40, 5};
    for (int k = 0; k < 2; k++) {
        jag_dtype dt = HALVES[k];
        jag_tensor *x = t_rand(s, 2, dt, -3, 3, 11), *y = t_rand(s, 2, dt, 0.5, 4, 12), *m = t_rand(sb, 2, dt, -1, 1, 13);
        jag_tensor *xw = widened(x), *yw = widened(y), *mw = widened(m);
        jag_tensor *got = NULL, *ref = NULL;
        typedef jag_status (*unary)(const jag_tensor *, jag_tensor **);
        unary un[] = {jag_exp, jag_sin, jag_tanh, jag_sigmoid, jag_gelu, jag_sqrt, jag_neg, jag_abs};
        for (size_t i = 0; i < sizeof un / sizeof un[0]; i++) {
            jag_tensor *in = i == 5 ? y : x, *inw = i == 5 ? yw : xw;
            CHECK_OK(un[i](in, &got));
            CHECK_OK(un[i](inw, &ref));
            ref = narrowed(ref, dt);
            CHECK_MSG(got && same_bits(got, ref), "%s: unary op %zu", jag_dtype_name(dt), i);
            jag_release(got), jag_release(ref);
        }
        typedef jag_status (*binary)(const jag_tensor *, const jag_tensor *, jag_tensor **);
        binary bin[] = {jag_mul, jag_div, jag_sub, jag_maximum, jag_pow};
        for (size_t i = 0; i < sizeof bin / sizeof bin[0]; i++) {
            CHECK_OK(bin[i](i == 4 ? y : x, y, &got));
            CHECK_OK(bin[i](i == 4 ? yw : xw, yw, &ref));
            ref = narrowed(ref, dt);
            CHECK_MSG(got && same_bits(got, ref), "%s: binary op %zu", jag_dtype_name(dt), i);
            jag_release(got), jag_release(ref);
        }
        CHECK_OK(jag_add(x, y, 0.5, &got));
        CHECK_OK(jag_add(xw, yw, 0.5, &ref));
        ref = narrowed(ref, dt);
        CHECK(same_bits(got, ref));
        jag_release(got), jag_release(ref);
        /* comparisons give bool, as on the widened values */
        CHECK_OK(jag_lt(x, y, &got));
        CHECK_OK(jag_lt(xw, yw, &ref));
        CHECK(jag_tensor_dtype(got) == JAG_BOOL && same_bits(got, ref));
        jag_release(got), jag_release(ref);
        /* reductions, softmax, layer_norm, mm */
        int d1[1] = {1};
        jag_status (*red[])(const jag_tensor *, const int *, int, bool, jag_tensor **) = {jag_sum, jag_mean, jag_amax};
        for (size_t i = 0; i < 3; i++) {
            CHECK_OK(red[i](x, d1, 1, false, &got));
            CHECK_OK(red[i](xw, d1, 1, false, &ref));
            ref = narrowed(ref, dt);
            CHECK_MSG(got && same_bits(got, ref), "%s: reduction %zu", jag_dtype_name(dt), i);
            jag_release(got), jag_release(ref);
        }
        CHECK_OK(jag_softmax(x, 1, &got));
        CHECK_OK(jag_softmax(xw, 1, &ref));
        ref = narrowed(ref, dt);
        CHECK(same_bits(got, ref));
        jag_release(got), jag_release(ref);
        CHECK_OK(jag_layer_norm(x, 1, NULL, NULL, 1e-5, &got));
        CHECK_OK(jag_layer_norm(xw, 1, NULL, NULL, 1e-5, &ref));
        ref = narrowed(ref, dt);
        CHECK(same_bits(got, ref));
        jag_release(got), jag_release(ref);
        /* float16 mm widens too; bfloat16 mm runs its own kernel
         * (tests/test_half_gemm.c) */
        if (dt == JAG_FLOAT16) {
            CHECK_OK(jag_mm(x, m, &got));
            CHECK_OK(jag_mm(xw, mw, &ref));
            ref = narrowed(ref, dt);
            CHECK(same_bits(got, ref));
            jag_release(got), jag_release(ref);
        }
        /* meta tensors infer the half dtype */
        jag_tensor *mx = NULL;
        CHECK_OK(jag_meta_tensor(s, 2, dt, &mx));
        CHECK_OK(jag_exp(mx, &got));
        CHECK(jag_tensor_dtype(got) == dt && jag_size(got, 1) == 40);
        jag_release(got), jag_release(mx);
        jag_release(x), jag_release(y), jag_release(m), jag_release(xw), jag_release(yw), jag_release(mw);
    }
}

/* torch's result dtypes of mixed operands */
static void test_mixed_promotion(void) {
    TEST_BEGIN();
    int64_t n = 4;
    jag_tensor *h = t_rand(&n, 1, JAG_FLOAT16, -2, 2, 1), *b = t_rand(&n, 1, JAG_BFLOAT16, -2, 2, 2);
    jag_tensor *f = t_rand(&n, 1, JAG_FLOAT32, -2, 2, 3), *i = t_rand(&n, 1, JAG_INT32, -5, 5, 4), *o = NULL;
    CHECK_OK(jag_mul(h, b, &o));
    CHECK(jag_tensor_dtype(o) == JAG_FLOAT32);
    for (int64_t k = 0; k < n; k++) CHECK(t_get(o, k) == (double)(float)(t_get(h, k) * t_get(b, k)));
    jag_release(o);
    CHECK_OK(jag_mul(h, f, &o));
    CHECK(jag_tensor_dtype(o) == JAG_FLOAT32);
    for (int64_t k = 0; k < n; k++) CHECK(t_get(o, k) == (double)(float)(t_get(h, k) * t_get(f, k)));
    jag_release(o);
    CHECK_OK(jag_mul(b, i, &o));
    CHECK(jag_tensor_dtype(o) == JAG_BFLOAT16);
    for (int64_t k = 0; k < n; k++)
        CHECK(t_get(o, k) == jag_bfloat16_to_float(jag_float_to_bfloat16((float)(t_get(b, k) * t_get(i, k)))));
    jag_release(o);
    CHECK_OK(jag_mul_scalar(h, 3.0, &o));
    CHECK(jag_tensor_dtype(o) == JAG_FLOAT16);
    jag_release(o);
    /* as torch.mm: both operands of one dtype */
    int64_t s22[2] = {2, 2};
    jag_tensor *hm = NULL, *fm = NULL, *bm = NULL;
    CHECK_OK(jag_view(h, s22, 2, &hm));
    CHECK_OK(jag_view(f, s22, 2, &fm));
    CHECK_OK(jag_view(b, s22, 2, &bm));
    o = NULL;
    CHECK_ERR(jag_mm(hm, fm, &o), JAG_EDTYPE, "jag_mm: argument 'b' has dtype float32, expected float16");
    CHECK_ERR(jag_mm(hm, bm, &o), JAG_EDTYPE, "expected float16");
    CHECK(o == NULL);
    /* index results keep their integer dtype: argmax and max's indices as
     * on the widened values */
    jag_tensor *vals = NULL, *idx = NULL, *wv = NULL, *wi = NULL, *hw = NULL;
    CHECK_OK(jag_to_dtype(hm, JAG_FLOAT32, &hw));
    CHECK_OK(jag_argmax(hm, 1, false, &o));
    CHECK_OK(jag_argmax(hw, 1, false, &wi));
    CHECK(jag_tensor_dtype(o) == JAG_INT64 && same_bits(o, wi));
    jag_release(o), jag_release(wi);
    CHECK_OK(jag_max_dim(hm, 1, false, &vals, &idx));
    CHECK_OK(jag_max_dim(hw, 1, false, &wv, &wi));
    CHECK(jag_tensor_dtype(vals) == JAG_FLOAT16 && jag_tensor_dtype(idx) == JAG_INT64 && same_bits(idx, wi));
    for (int64_t k = 0; k < 2; k++) CHECK(t_get(vals, k) == t_get(wv, k));
    jag_release(vals), jag_release(idx), jag_release(wv), jag_release(wi), jag_release(hw);
    jag_release(hm), jag_release(fm), jag_release(bm);
    jag_release(h), jag_release(b), jag_release(f), jag_release(i);
}

/* views, clone, cat, index_select move half elements bit for bit */
static void test_moves_keep_bits(void) {
    TEST_BEGIN();
    uint16_t bits[6] = {0x3C00, 0x7C01, 0x0001, 0x8000, 0x7BFF, 0xFC00}; /* a signalling NaN pattern kept too */
    for (int k = 0; k < 2; k++) {
        jag_dtype dt = HALVES[k];
        jag_tensor *x = t_bits(bits, 6, dt), *v = NULL, *t = NULL, *c = NULL, *cat = NULL, *sel = NULL;
        int64_t s23[2] = {2, 3};
        CHECK_OK(jag_view(x, s23, 2, &v));
        CHECK_OK(jag_transpose(v, 0, 1, &t));
        CHECK_OK(jag_clone(t, &c));
        const uint16_t *cp = jag_data(c);
        for (int r = 0; r < 3; r++)
            for (int q = 0; q < 2; q++) CHECK(cp[r * 2 + q] == bits[q * 3 + r]);
        jag_tensor *two[2] = {x, x};
        CHECK_OK(jag_cat(two, 2, 0, &cat));
        CHECK(jag_tensor_dtype(cat) == dt && memcmp(jag_data(cat), bits, 12) == 0 &&
              memcmp((const uint16_t *)jag_data(cat) + 6, bits, 12) == 0);
        int64_t idx[3] = {5, 1, 1}, three = 3;
        jag_tensor *ix = t_i64(idx, three);
        CHECK_OK(jag_index_select(x, 0, ix, &sel));
        const uint16_t *sp = jag_data(sel);
        CHECK(sp[0] == bits[5] && sp[1] == bits[1] && sp[2] == bits[1]);
        jag_release(ix), jag_release(x), jag_release(v), jag_release(t), jag_release(c), jag_release(cat),
            jag_release(sel);
    }
}

/* in-place ops into a half tensor: computed aside in float32, rounded */
static void test_inplace(void) {
    TEST_BEGIN();
    int64_t n = 9;
    for (int k = 0; k < 2; k++) {
        jag_dtype dt = HALVES[k];
        jag_tensor *x = t_rand(&n, 1, dt, -3, 3, 21), *y = t_rand(&n, 1, dt, -3, 3, 22), *want = NULL;
        CHECK_OK(jag_add(x, y, 1.0, &want));
        CHECK_OK(jag_add_(x, y, 1.0));
        CHECK(same_bits(x, want));
        jag_release(x), jag_release(y), jag_release(want);
    }
}

/* gradients have the input's dtype (as torch's): d/dx sum(x * x) = 2 x,
 * exact in a half type; d/dx sum(exp(x)) = exp(x) as the forward rounds it */
static void test_gradients(void) {
    TEST_BEGIN();
    int64_t n = 7;
    for (int k = 0; k < 2; k++) {
        jag_dtype dt = HALVES[k];
        jag_tensor *x = t_rand(&n, 1, dt, -2, 2, 31), *sq = NULL, *s = NULL, *g = NULL, *e = NULL;
        CHECK_OK(jag_set_requires_grad(x, true));
        CHECK_OK(jag_mul(x, x, &sq));
        CHECK_OK(jag_sum(sq, NULL, 0, false, &s));
        CHECK(jag_tensor_dtype(s) == dt);
        CHECK_OK(jag_backward(s, NULL, false));
        CHECK_OK(jag_get_grad(x, &g));
        CHECK(g && jag_tensor_dtype(g) == dt);
        for (int64_t i = 0; g && i < n; i++) CHECK(t_get(g, i) == 2 * t_get(x, i));
        jag_release(g), jag_release(s), jag_release(sq);
        jag_tensor *x2 = t_rand(&n, 1, dt, -2, 2, 32);
        CHECK_OK(jag_set_requires_grad(x2, true));
        CHECK_OK(jag_exp(x2, &e));
        CHECK_OK(jag_sum(e, NULL, 0, false, &s));
        CHECK_OK(jag_backward(s, NULL, false));
        CHECK_OK(jag_get_grad(x2, &g));
        CHECK(g && jag_tensor_dtype(g) == dt && same_bits(g, e));
        jag_release(g), jag_release(s), jag_release(e), jag_release(x), jag_release(x2);
        /* gelu, gelu_tanh and silu: their fused gradient ops in float32,
         * rounded once to the type: against the formula in double on the
         * same x, within the type's epsilon of the formula's largest term
         * (a composite of half-type ops lost gelu_tanh's to 1 + tanh
         * cancelling from x = -3.4 on) */
        typedef jag_status (*act_fn)(const jag_tensor *, jag_tensor **);
        act_fn acts[3] = {jag_gelu, jag_gelu_tanh, jag_silu};
        int64_t m = 41;
        for (int a = 0; a < 3; a++) {
            jag_tensor *xa = t_rand(&m, 1, dt, -6, 6, 40 + a), *ya = NULL, *sa = NULL, *ga = NULL;
            CHECK_OK(jag_set_requires_grad(xa, true));
            CHECK_OK(acts[a](xa, &ya));
            CHECK_OK(jag_sum(ya, NULL, 0, false, &sa));
            CHECK_OK(jag_backward(sa, NULL, false));
            CHECK_OK(jag_get_grad(xa, &ga));
            double eps = dt == JAG_FLOAT16 ? 9.77e-4 : 7.81e-3;
            for (int64_t i = 0; ga && i < m; i++) {
                double xv = t_get(xa, i), want, big;
                if (a == 0) {
                    double c = 0.5 * erfc(-xv / sqrt(2.0)), q = xv * exp(-0.5 * xv * xv) / sqrt(2 * M_PI);
                    want = c + q, big = fmax(fabs(c), fabs(q));
                } else if (a == 1) {
                    double kk = sqrt(2 / M_PI), t = tanh(kk * (xv + 0.044715 * xv * xv * xv));
                    double p1 = 0.5 * (1 + t), p2 = 0.5 * xv * (1 - t * t) * kk * (1 + 3 * 0.044715 * xv * xv);
                    want = p1 + p2, big = fmax(fabs(p1), fabs(p2));
                } else {
                    double sg = 1 / (1 + exp(-xv)), p2 = sg * xv * (1 - sg);
                    want = sg + p2, big = fmax(fabs(sg), fabs(p2));
                }
                CHECK_MSG(fabs(t_get(ga, i) - want) <= eps * big + 1e-3 * eps, "%s activation %d x %g: %g, want %g",
                          jag_dtype_name(dt), a, xv, t_get(ga, i), want);
            }
            jag_release(xa), jag_release(ya), jag_release(sa), jag_release(ga);
        }
    }
}

/* exp(x * 2 + 1) summed: a chain the fuser would merge for float32 */
static jag_status chain_fn(void *ctx, jag_tensor *const *in, int n, jag_tensor **out, int n_out) {
    (void)ctx, (void)n, (void)n_out;
    jag_tensor *a = NULL, *b = NULL, *e = NULL;
    jag_status st = jag_mul_scalar(in[0], 2.0, &a);
    if (!st) st = jag_add_scalar(a, 1.0, &b);
    if (!st) st = jag_exp(b, &e);
    if (!st) st = jag_sum(e, NULL, 0, false, &out[0]);
    jag_release(a), jag_release(b), jag_release(e);
    return st;
}

/* A compiled program on half inputs gives eager's bits: its half steps go
 * through the dispatcher (widened, run, rounded once each, as eager), and
 * the fuser, whose loops know float32 and float64 only, leaves them out.
 * (Half attention and bfloat16 products: tests/test_half_gemm.c.) */
static void test_compiled_matches_eager(void) {
    TEST_BEGIN();
    for (int k = 0; k < 2; k++) {
        int64_t s[2] = {5, 7};
        jag_tensor *x = t_rand(s, 2, HALVES[k], -1, 1, 21 + (uint64_t)k), *eager = NULL;
        CHECK_OK(chain_fn(NULL, &x, 1, &eager, 1));
        jag_compiled *c = NULL;
        CHECK_OK(jag_compile(chain_fn, NULL, 1, JAG_PASSES_ALL, &c));
        for (int run = 0; run < 2; run++) { /* traced and compiled, then the planned buffers */
            jag_tensor *compiled = NULL;
            CHECK_OK(jag_compiled_call(c, &x, 1, &compiled, 1));
            CHECK(compiled && jag_tensor_dtype(compiled) == HALVES[k] && same_bits(compiled, eager));
            jag_release(compiled);
        }
        jag_compiled_free(c);
        jag_release(eager), jag_release(x);
    }
}

/* Random draws of a half dtype: the float32 draw of the same generator
 * state rounded once (torch draws half tensors in float and rounds), and a
 * uniform in [low, high) never reaches high once rounded (values just
 * below 1.0 round up to it in both half types). */
static void test_random_draws(void) {
    TEST_BEGIN();
    int64_t n = 4096;
    for (int k = 0; k < 2; k++) {
        jag_generator *g1 = NULL, *g2 = NULL;
        CHECK_OK(jag_generator_new(7, &g1));
        CHECK_OK(jag_generator_new(7, &g2));
        jag_tensor *h = NULL, *f = NULL;
        CHECK_OK(jag_rand_normal(&n, 1, 0.5, 2.0, HALVES[k], g1, &h));
        CHECK_OK(jag_rand_normal(&n, 1, 0.5, 2.0, JAG_FLOAT32, g2, &f));
        const uint16_t *hv = jag_data(h);
        const float *fv = jag_data(f);
        bool same = true;
        for (int64_t i = 0; i < n; i++)
            same &= hv[i] == (HALVES[k] == JAG_FLOAT16 ? jag_float_to_float16(fv[i]) : jag_float_to_bfloat16(fv[i]));
        CHECK_MSG(same, "%s normal draws are float32's rounded", jag_dtype_name(HALVES[k]));
        jag_release(h), jag_release(f);
        CHECK_OK(jag_rand_uniform(&n, 1, 0.0, 1.0, HALVES[k], g1, &h));
        hv = jag_data(h);
        float lo = 1, hi = 0;
        for (int64_t i = 0; i < n; i++) {
            float x = HALVES[k] == JAG_FLOAT16 ? jag_float16_to_float(hv[i]) : jag_bfloat16_to_float(hv[i]);
            lo = x < lo ? x : lo, hi = x > hi ? x : hi;
        }
        CHECK_MSG(lo >= 0.0f && hi < 1.0f && hi > 0.9f, "%s uniform in [%g, %g]", jag_dtype_name(HALVES[k]), lo, hi);
        jag_release(h);
        jag_generator_free(g1), jag_generator_free(g2);
    }
}

TEST_MAIN(test_dtype_table, test_float16_bit_patterns, test_bfloat16_bit_patterns, test_round_trip_every_pattern,
          test_narrowing_matches_reference, test_tensor_conversions, test_creation_item_and_printing,
          test_ops_compute_in_float32, test_mixed_promotion, test_moves_keep_bits, test_inplace, test_gradients,
          test_compiled_matches_eager, test_random_draws)
