/*
 * fuzz.h — what the libFuzzer targets share: a reader that turns the fuzzer's
 * bytes into small numbers (running out of bytes reads zeros, so every input
 * means something), and a trap that makes a broken property a crash libFuzzer
 * records.
 */
#ifndef JAG_FUZZ_H
#define JAG_FUZZ_H

#include "jag.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long jag__live_tensors(void); /* internal: tensor headers alive on this thread */

typedef struct {
    const uint8_t *p;
    size_t n;
} fuzz_reader;

static inline uint8_t fz_u8(fuzz_reader *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

/* Mostly small integers around 0 (the interesting ones for sizes and
 * offsets), sometimes any 64-bit value. */
static inline int64_t fz_i64(fuzz_reader *r) {
    uint8_t b = fz_u8(r);
    if (b < 224) return (int64_t)(b % 20) - 3;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | fz_u8(r);
    return (int64_t)v;
}

static inline double fz_double(fuzz_reader *r) {
    static const double table[] = {0.0, 1.0, -1.0, 0.5, 2.0, -3.0, 1e-300, 1e300, -0.0, 3.0, 7.0, 0.25};
    uint8_t b = fz_u8(r);
    if (b < 240) return table[b % (sizeof table / sizeof table[0])];
    switch (b % 4) {
    case 0: return __builtin_nan("");
    case 1: return __builtin_inf();
    case 2: return -__builtin_inf();
    default: return (double)(int8_t)fz_u8(r);
    }
}

#define FUZZ_CHECK(cond)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: property failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
                    jag_last_error());                                        \
            __builtin_trap();                                                 \
        }                                                                     \
    } while (0)

#endif /* JAG_FUZZ_H */
