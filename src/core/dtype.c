/* dtype.c — dtype names, sizes, promotion and scalar conversion. */
#include "internal.h"
#include "half.h"

#include <math.h>

bool jag__dtype_valid(jag_dtype d) { return (int)d >= 0 && d < JAG_DTYPE_COUNT; }

const char *jag_dtype_name(jag_dtype d) {
    switch (d) {
#define JAG_X_NAME(E, name, ctype, size) case E: return #name;
        JAG_DTYPE_LIST(JAG_X_NAME)
#undef JAG_X_NAME
    default: return "invalid";
    }
}

size_t jag_dtype_size(jag_dtype d) {
    switch (d) {
#define JAG_X_SIZE(E, name, ctype, size) case E: return size;
        JAG_DTYPE_LIST(JAG_X_SIZE)
#undef JAG_X_SIZE
    default: return 0;
    }
}

bool jag_dtype_is_floating(jag_dtype d) {
    return d == JAG_FLOAT32 || d == JAG_FLOAT64 || d == JAG_FLOAT16 || d == JAG_BFLOAT16;
}

bool jag_dtype_is_half(jag_dtype d) { return d == JAG_FLOAT16 || d == JAG_BFLOAT16; }

/* Rank in the promotion lattice bool < int32 < int64 < half < float32 <
 * float64; float16 and bfloat16 share a rank and meet at float32. */
static int promotion_rank(jag_dtype d) {
    switch (d) {
    case JAG_BOOL: return 0;
    case JAG_INT32: return 1;
    case JAG_INT64: return 2;
    case JAG_FLOAT16:
    case JAG_BFLOAT16: return 3;
    case JAG_FLOAT32: return 4;
    case JAG_FLOAT64: return 5;
    default: return -1;
    }
}

jag_dtype jag_promote_types(jag_dtype a, jag_dtype b) {
    if (jag_dtype_is_half(a) && jag_dtype_is_half(b) && a != b) return JAG_FLOAT32;
    return promotion_rank(a) >= promotion_rank(b) ? a : b;
}

uint16_t jag_float_to_float16(float v) { return jag__f32_to_f16(v); }
float jag_float16_to_float(uint16_t bits) { return jag__f16_to_f32(bits); }
uint16_t jag_float_to_bfloat16(float v) { return jag__f32_to_bf16(v); }
float jag_bfloat16_to_float(uint16_t bits) { return jag__bf16_to_f32(bits); }

double jag__load_as_double(const void *p, jag_dtype dtype) {
    switch (dtype) {
    case JAG_FLOAT32: return *(const float *)p;
    case JAG_FLOAT64: return *(const double *)p;
    case JAG_INT32: return *(const int32_t *)p;
    case JAG_INT64: return (double)*(const int64_t *)p;
    case JAG_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
    case JAG_FLOAT16: return jag__f16_to_f32(*(const uint16_t *)p);
    case JAG_BFLOAT16: return jag__bf16_to_f32(*(const uint16_t *)p);
    default: JAG_ASSERT(!"bad dtype"); return 0;
    }
}

/* Converting a double to an integer type is undefined in C when the value is
 * out of range or NaN; jag saturates instead (NaN -> 0). */
static int64_t saturate_i64(double v, double lo, double hi) {
    if (isnan(v)) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return (int64_t)hi;
    return (int64_t)v;
}

void jag__store_from_double(void *p, jag_dtype dtype, double v) {
    switch (dtype) {
    case JAG_FLOAT32: *(float *)p = (float)v; break;
    case JAG_FLOAT64: *(double *)p = v; break;
    case JAG_INT32: *(int32_t *)p = (int32_t)saturate_i64(v, -2147483648.0, 2147483647.0); break;
    case JAG_INT64:
        /* 2^63 is not representable; clamp to the largest double below it. */
        *(int64_t *)p = saturate_i64(v, -9223372036854775808.0, 9223372036854774784.0);
        break;
    case JAG_BOOL: *(uint8_t *)p = (v != 0.0); break;
    /* through float32, as torch converts a double to a half type */
    case JAG_FLOAT16: *(uint16_t *)p = jag__f32_to_f16((float)v); break;
    case JAG_BFLOAT16: *(uint16_t *)p = jag__f32_to_bf16((float)v); break;
    default: JAG_ASSERT(!"bad dtype");
    }
}
