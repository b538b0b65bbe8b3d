/*
 * test_op_table.c — the op table is whole: every row of ops.def has a
 * schema that parses and agrees with the row, a one-line doc, a META
 * function and a kernel, a derivative rule or a tag saying why it has
 * none, and a nested rule or the tag saying it has none; the tables read from the rows (dim arguments, fusable ops) say what
 * the rows say. The dispatcher checks every call's argument kinds against
 * the schema (as PyTorch's native_functions.yaml and derivatives.yaml,
 * or ggml's op-count static_assert, keep their tables whole).
 */
#include "test.h"
#include "autograd/autograd.h"
#include "trace/trace.h"
#include "subclass/nested.h" /* jag__nested_has_rule: the class's registrations (nested_ops.c) */

static void test_every_row_parses(void) {
    TEST_BEGIN();
    CHECK_OK(jag__builtin_schemas_check());
    for (int op = 0; op < JAG_OP_BUILTIN_COUNT; op++) {
        const jag_op_info *info = &jag__ops[op];
        const jag_schema *s = jag__op_schema(op);
        CHECK_MSG(s != NULL, "row %s: schema '%s' does not parse", info->name, info->schema);
        if (!s) continue;
        CHECK_MSG(strcmp(s->name, info->name) == 0, "row %s: schema names '%s'", info->name, s->name);
        CHECK_MSG(s->n_args == info->n_in && s->n_out == info->n_out, "row %s: schema has %d args, %d outputs; row %d, %d",
                  info->name, s->n_args, s->n_out, info->n_in, info->n_out);
        /* the public accessors give the row's text */
        CHECK(jag_op_schema(op) == info->schema);
        CHECK(jag_op_doc(op) == info->doc);
        CHECK_MSG(info->doc && info->doc[0], "row %s: no one-line doc", info->name);
    }
}

static void test_every_row_has_meta_and_kernel(void) {
    TEST_BEGIN();
    for (int op = 0; op < JAG_OP_BUILTIN_COUNT; op++) {
        const jag_op_info *info = &jag__ops[op];
        bool makes_outputs = info->tags & (JAG_TAG_VIEW | JAG_TAG_COMPOSITE);
        CHECK_MSG(info->cpu != NULL, "row %s: no kernel", info->name);
        /* VIEW and COMPOSITE kernels make their outputs; every other row
         * needs a META function to infer them */
        CHECK_MSG(makes_outputs || info->meta != NULL, "row %s: no META function", info->name);
        CHECK_MSG(!makes_outputs || info->meta == NULL, "row %s: a VIEW or COMPOSITE row with a META function", info->name);
    }
}

/* A derivative rule, or a tag that says why none: NONDIFF (no gradient
 * flows), NO_DERIVATIVE (a gradient op, not differentiated again) or
 * COMPOSITE without a rule (autograd records the ops it calls). */
static void test_every_row_has_a_derivative_or_a_reason(void) {
    TEST_BEGIN();
    for (int op = 0; op < JAG_OP_BUILTIN_COUNT; op++) {
        const jag_op_info *info = &jag__ops[op];
        bool rule = jag__derivatives[op] != NULL;
        unsigned why_none = info->tags & (JAG_TAG_NONDIFF | JAG_TAG_NO_DERIVATIVE);
        CHECK_MSG(rule || why_none || (info->tags & JAG_TAG_COMPOSITE),
                  "row %s: no derivative rule and no NONDIFF / NO_DERIVATIVE tag", info->name);
        CHECK_MSG(!(rule && why_none), "row %s: a derivative rule and a tag saying it has none", info->name);
        CHECK_MSG(!(info->tags & JAG_TAG_GRAD_SHAPES_ONLY) || rule, "row %s: GRAD_SHAPES_ONLY without a rule", info->name);
    }
}


/* A nested rule, or NO_NESTED: the generic rule of POINTWISE rows (on the
 * packed values or the strided buffer), or one the nested class registers
 * for the row through jag_subclass_register_decomp (as PyTorch's
 * NestedTensor registers a kernel per aten op, and fails loudly on the
 * others). A row with both is contradictory. */
static void test_every_row_has_a_nested_rule_or_a_reason(void) {
    TEST_BEGIN();
    (void)jag_subclass_find("nested"); /* the class and its rules are in place */
    int registered = 0, none = 0;
    for (int op = 0; op < JAG_OP_BUILTIN_COUNT; op++) {
        const jag_op_info *info = &jag__ops[op];
        bool generic = info->tags & JAG_TAG_POINTWISE, rule = jag__nested_has_rule(op);
        bool no_nested = info->tags & JAG_TAG_NO_NESTED;
        CHECK_MSG(generic || rule || no_nested, "row %s: no nested rule (registered, or POINTWISE) and no NO_NESTED tag",
                  info->name);
        CHECK_MSG(!(no_nested && (generic || rule)), "row %s: a nested rule and the NO_NESTED tag", info->name);
        CHECK_MSG(!(generic && rule), "row %s: POINTWISE and a registered nested rule (the rule would never run)", info->name);
        registered += rule, none += no_nested;
    }
    /* hand-counted: the rows with a jagged or per-component rule of their own */
    CHECK(registered >= 40 && none >= 1);
    CHECK(jag_op_tags(JAG_OP_ragged_reduce) & JAG_TAG_NO_NESTED);
}

/* A NO_NESTED row refuses a nested argument with JAG_ENOTIMPL naming the
 * op; nothing is made. */
static void test_no_nested_rows_refuse(void) {
    TEST_BEGIN();
    int64_t o[3] = {0, 2, 5}, n3 = 3, vs[2] = {5, 4}, order[3] = {0, 2, 1};
    jag_tensor *off = NULL, *v = NULL, *nt = NULL, *out = NULL;
    CHECK_OK(jag_from_data(o, &n3, 1, JAG_INT64, &off));
    CHECK_OK(jag_ones(vs, 2, JAG_FLOAT32, &v));
    CHECK_OK(jag_nested_from_jagged(v, off, NULL, &nt));
    long live = jag__live_tensors();
    jag_value a[2] = {jag__v_tensor(nt), jag__v_ints(order, 3)};
    CHECK_ERR(jag_op_call(JAG_OP_permute, a, 2, &out), JAG_ENOTIMPL,
              "jag_permute: not supported for nested tensors with the jagged layout");
    CHECK(out == NULL && jag__live_tensors() == live);
    jag_release(nt), jag_release(v), jag_release(off);
}

/* Tags that imply others, and the tables read from the rows. */
static void test_tags_are_consistent(void) {
    TEST_BEGIN();
    int fusable = 0;
    for (int op = 0; op < JAG_OP_BUILTIN_COUNT; op++) {
        const jag_op_info *info = &jag__ops[op];
        if (info->tags & JAG_TAG_FUSABLE) {
            fusable++;
            CHECK_MSG(info->tags & JAG_TAG_POINTWISE, "row %s: FUSABLE but not POINTWISE", info->name);
            CHECK_MSG(info->n_out == 1, "row %s: FUSABLE with %d outputs", info->name, info->n_out);
        }
        CHECK(jag__fusable_op(op) == ((info->tags & JAG_TAG_FUSABLE) != 0));
        CHECK_MSG(!((info->tags & JAG_TAG_VIEW) && (info->tags & JAG_TAG_COMPOSITE)), "row %s: VIEW and COMPOSITE",
                  info->name);
    }
    /* the fuser's scalar forms: the unary activations, + - * /, max, min, clamp */
    CHECK(fusable >= 30);
    CHECK(jag__fusable_op(JAG_OP_sub) && jag__fusable_op(JAG_OP_gelu) && !jag__fusable_op(JAG_OP_eq) &&
          !jag__fusable_op(JAG_OP_softmax));
}

/* Arguments named dim / dim0 / dim1 (int) and dims (int[]) are the dims
 * the nested rules relabel; hand-checked on ops of each shape. */
static void test_dim_args_come_from_schemas(void) {
    TEST_BEGIN();
    unsigned bits;
    int list;
    jag__op_dim_args(JAG_OP_transpose, &bits, &list);
    CHECK(bits == 0x6 && list == -1);
    jag__op_dim_args(JAG_OP_softmax, &bits, &list);
    CHECK(bits == 0x2 && list == -1);
    jag__op_dim_args(JAG_OP_cat, &bits, &list);
    CHECK(bits == 0x2 && list == -1);
    jag__op_dim_args(JAG_OP_var, &bits, &list);
    CHECK(bits == 0 && list == 1);
    jag__op_dim_args(JAG_OP_softmax_backward, &bits, &list);
    CHECK(bits == 0x4 && list == -1);
    jag__op_dim_args(JAG_OP_add, &bits, &list);
    CHECK(bits == 0 && list == -1);
    /* no other argument name means a dim: a row that names one "axis" or
     * "d" would silently escape the relabelling */
    for (int op = 0; op < JAG_OP_BUILTIN_COUNT; op++) {
        const jag_schema *s = jag__op_schema(op);
        for (int i = 0; s && i < s->n_args; i++) {
            const char *n = s->arg_names[i];
            CHECK_MSG(strcmp(n, "axis") && strcmp(n, "axes") && strcmp(n, "d"), "row %s: argument '%s'",
                      jag__ops[op].name, n);
            if (!strcmp(n, "dims")) CHECK_MSG(s->types[i] == JAG_ARG_INTS, "row %s: dims is not int[]", jag__ops[op].name);
            if (!strncmp(n, "dim", 3) && strcmp(n, "dims"))
                CHECK_MSG(s->types[i] == JAG_ARG_INT, "row %s: %s is not int", jag__ops[op].name, n);
        }
    }
}

/* The dispatcher refuses a call whose kinds disagree with the schema,
 * naming the op, the argument and the expected kind; nothing is made. */
static void test_dispatcher_checks_kinds(void) {
    TEST_BEGIN();
    int64_t sz[2] = {2, 3};
    jag_tensor *x = NULL, *out = NULL;
    CHECK_OK(jag_ones(sz, 2, JAG_FLOAT32, &x));
    long live = jag__live_tensors();
    jag_value a[2] = {{.kind = JAG_VAL_TENSOR}, {.kind = JAG_VAL_DOUBLE}};
    a[0].u.t = x, a[1].u.d = 1.0;
    CHECK_ERR(jag_op_call(JAG_OP_softmax, a, 2, &out), JAG_EINVAL, "jag_softmax: argument 'dim' is a double, expected an int");
    CHECK(out == NULL);
    a[1].kind = JAG_VAL_NONE;
    CHECK_ERR(jag_op_call(JAG_OP_softmax, a, 2, &out), JAG_EINVAL, "jag_softmax: argument 'dim' is NULL, expected an int");
    /* Tensor|float takes a number; float takes an int */
    jag_value b[3] = {{.kind = JAG_VAL_TENSOR}, {.kind = JAG_VAL_INT}, {.kind = JAG_VAL_INT}};
    b[0].u.t = x, b[1].u.i = 2, b[2].u.i = 1;
    CHECK_OK(jag_op_call(JAG_OP_add, b, 3, &out));
    double v;
    int64_t at[2] = {1, 2};
    CHECK_OK(jag_item_at(out, at, &v));
    CHECK(v == 3.0); /* 1 + 1 * 2 */
    jag_release(out), out = NULL;
    b[1].kind = JAG_VAL_BOOL, b[1].u.b = true;
    CHECK_ERR(jag_op_call(JAG_OP_add, b, 3, &out), JAG_EINVAL, "argument 'b' is a bool, expected a tensor or a scalar");
    CHECK(jag__live_tensors() == live);
    jag_release(x);
}

/* Every unary pointwise row has its public C entry point jag_<name> in
 * JAG_UNARY_OP_LIST (clone's, jag_clone, is written beside the copies). */
static void test_unary_rows_are_public(void) {
    TEST_BEGIN();
#define NAME(n) #n,
    static const char *listed[] = {JAG_UNARY_OP_LIST(NAME)};
#undef NAME
    int n_listed = (int)(sizeof listed / sizeof listed[0]), found = 0;
    for (int op = 0; op < JAG_OP_BUILTIN_COUNT; op++) {
        const jag_op_info *info = &jag__ops[op];
        char unary[160];
        snprintf(unary, sizeof unary, "%s(Tensor x) -> Tensor", info->name);
        if (!(info->tags & JAG_TAG_POINTWISE) || strcmp(info->schema, unary) || op == JAG_OP_clone) continue;
        bool in_list = false;
        for (int i = 0; i < n_listed; i++) in_list |= strcmp(listed[i], info->name) == 0;
        CHECK_MSG(in_list, "row %s: a unary pointwise op missing from JAG_UNARY_OP_LIST", info->name);
        found += in_list;
    }
    CHECK(found == n_listed); /* and the list names no op without a row */
}

/* A custom op's schema goes through the same parser. */
static void test_custom_schemas_share_the_parser(void) {
    TEST_BEGIN();
    jag_op_id id;
    CHECK_ERR(jag_op_define("table_test::bad(Tensor x, axis y) -> Tensor", &id), JAG_EINVAL,
              "jag_op_define: schema 'table_test::bad(Tensor x, axis y) -> Tensor': expected an argument type");
    CHECK_ERR(jag_op_define("nonamespace(Tensor x) -> Tensor", &id), JAG_EINVAL, "expected '::' after the namespace");
    CHECK_OK(jag_op_define("table_test::scale(Tensor x, Tensor|float s) -> Tensor", &id));
    CHECK(strcmp(jag_op_schema(id), "table_test::scale(Tensor x, Tensor|float s) -> Tensor") == 0);
    CHECK(jag_op_doc(id) == NULL);
    CHECK(jag_op_num_inputs(id) == 2 && jag_op_num_outputs(id) == 1);
}

TEST_MAIN(test_every_row_parses, test_every_row_has_meta_and_kernel, test_every_row_has_a_derivative_or_a_reason,
          test_every_row_has_a_nested_rule_or_a_reason, test_no_nested_rows_refuse,
          test_tags_are_consistent, test_dim_args_come_from_schemas, test_dispatcher_checks_kinds,
          test_unary_rows_are_public, test_custom_schemas_share_the_parser)
