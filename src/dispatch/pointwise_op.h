/*
 * pointwise_op.h — what the pointwise ops' dispatch side (unary_op.c,
 * binary_op.c) shares: which op a shared META function checks, and the
 * boxed forms of the pointwise references.
 */
#ifndef JAG_POINTWISE_OP_H
#define JAG_POINTWISE_OP_H

#include "dispatch.h"

#include <string.h>

/* Whether `op`, the name a META function receives ("jag_sub"; "sub" is
 * accepted too), names the op `name` ("sub"). META functions shared by
 * several ops learn from it which op they check. */
static inline bool jag__pw_op_is(const char *op, const char *name) {
    if (!strncmp(op, "jag_", 4)) op += 4;
    return !strcmp(op, name);
}

/* The output a boxed reference writes: op's META function checks args and
 * says the dtype and shape of *y, a new contiguous tensor. */
static inline jag_status jag__pw_ref_output(jag_op_id op, const jag_value *args, int nargs, jag_tensor **y) {
    const jag_op_info *info = &jag__ops[op];
    jag_spec spec;
    jag_status st = info->meta(info->api_name, args, nargs, &spec);
    if (st != JAG_OK) return st;
    *y = jag__tensor_from_spec(info->api_name, &spec, false);
    return *y ? JAG_OK : jag_last_status();
}

/* The naive references, boxed: the op's id and boxed arguments; its META
 * function checks them and gives the dtype and shape of *out, a new
 * contiguous tensor computed by jag__unary_reference,
 * jag__binary_reference, jag__where_reference or jag__clamp_reference
 * (src/cpu/kernels.h). */
/* The unary ops of JAG_UNARY_OP_LIST: (x). */
jag_status jag__ref_unary(jag_op_id op, const jag_value *args, int nargs, jag_tensor **out);
/* The parametrised unary ops (leaky_relu, elu, softplus, hardtanh): x and
 * their scalar arguments. */
jag_status jag__ref_unary_param(jag_op_id op, const jag_value *args, int nargs, jag_tensor **out);
/* Binary ops (add ... ge: a, b or a scalar[, alpha]) and where (cond, a, b). */
jag_status jag__ref_binary(jag_op_id op, const jag_value *args, int nargs, jag_tensor **out);
/* clamp (x, lo, hi). */
jag_status jag__ref_clamp(const jag_value *args, int nargs, jag_tensor **out);

#endif /* JAG_POINTWISE_OP_H */
