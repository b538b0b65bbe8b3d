/*
 * _factory.c — factories beyond _C.c's: jag.Generator (a Python object
 * owning a jag_generator) with rand/randn drawing from it, and meta tensors
 * (shape and dtype, no data: jag.empty(..., device="meta")); and a timing
 * loop for bench/bench_python.py.
 */
#include "_jagpy.h"

#include <string.h>
#include <time.h>

typedef struct {
    PyObject_HEAD
    jag_generator *g;
} GeneratorObject;

static void Generator_dealloc(GeneratorObject *self) {
    jag_generator_free(self->g);
    self->g = NULL;
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Generator_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)kw;
    unsigned long long seed = 0;
    if (!PyArg_ParseTuple(args, "|K", &seed)) return NULL;
    jag_generator *g = NULL;
    jag_status st = jag_generator_new((uint64_t)seed, &g);
    if (st) return jagpy_raise_status(st);
    GeneratorObject *o = (GeneratorObject *)type->tp_alloc(type, 0);
    if (!o) {
        jag_generator_free(g);
        return NULL;
    }
    o->g = g;
    return (PyObject *)o;
}

static PyTypeObject Generator_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jag._C._Generator",
    .tp_basicsize = sizeof(GeneratorObject),
    .tp_dealloc = (destructor)Generator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "_Generator(seed): a jag_generator (see jag.Generator)",
    .tp_new = Generator_new,
};

jag_generator *jagpy_generator(PyObject *o) {
    if (o == Py_None) return NULL;
    if (!PyObject_TypeCheck(o, &Generator_Type)) {
        PyErr_Format(PyExc_TypeError, "generator must be a jag.Generator, not %.100s", Py_TYPE(o)->tp_name);
        return NULL;
    }
    return ((GeneratorObject *)o)->g;
}

/* _random_like(kind, x, generator): rand_like / randn_like drawing from it */
static PyObject *m_random_like(PyObject *mod, PyObject *args) {
    (void)mod;
    const char *kind;
    PyObject *x, *gen;
    if (!PyArg_ParseTuple(args, "sOO!", &kind, &x, &Generator_Type, &gen)) return NULL;
    jag_tensor *t = jagpy_get_tensor(x, "input");
    if (!t) return NULL;
    jag_tensor *out = NULL;
    jag_status st;
    if (!strcmp(kind, "rand")) st = jag_rand_like(t, ((GeneratorObject *)gen)->g, &out);
    else if (!strcmp(kind, "randn")) st = jag_randn_like(t, ((GeneratorObject *)gen)->g, &out);
    else {
        PyErr_Format(PyExc_ValueError, "unknown random factory %s_like", kind);
        return NULL;
    }
    if (st) return jagpy_raise_status(st);
    return jagpy_wrap(out);
}

/* _random(kind, sizes, dtype, a, b, generator): kind "rand" (uniform [a, b))
 * or "randn" (normal, mean a, std b). */
static PyObject *m_random(PyObject *mod, PyObject *args) {
    (void)mod;
    const char *kind;
    PyObject *shape, *gen;
    int dtype;
    double a, b;
    if (!PyArg_ParseTuple(args, "sOiddO!", &kind, &shape, &dtype, &a, &b, &Generator_Type, &gen)) return NULL;
    if (dtype < 0 || dtype >= JAG_DTYPE_COUNT) {
        PyErr_Format(PyExc_ValueError, "invalid dtype code %d", dtype);
        return NULL;
    }
    PyObject *fast = PySequence_Fast(shape, "sizes must be a sequence of ints");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > JAG_MAX_DIMS) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: at most %d dims, got %zd", kind, JAG_MAX_DIMS, n);
        return NULL;
    }
    int64_t sizes[JAG_MAX_DIMS];
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return NULL;
        }
        sizes[i] = (int64_t)v;
    }
    Py_DECREF(fast);
    jag_generator *g = ((GeneratorObject *)gen)->g;
    jag_tensor *out = NULL;
    jag_status st;
    if (!strcmp(kind, "rand")) st = jag_rand_uniform(sizes, (int)n, a, b, (jag_dtype)dtype, g, &out);
    else if (!strcmp(kind, "randn")) st = jag_rand_normal(sizes, (int)n, a, b, (jag_dtype)dtype, g, &out);
    else {
        PyErr_Format(PyExc_ValueError, "unknown random factory %s", kind);
        return NULL;
    }
    if (st) return jagpy_raise_status(st);
    return jagpy_wrap(out);
}

/* _meta(sizes, dtype): a meta tensor */
static PyObject *m_meta(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *shape;
    int dtype;
    if (!PyArg_ParseTuple(args, "Oi", &shape, &dtype)) return NULL;
    PyObject *fast = PySequence_Fast(shape, "sizes must be a sequence of ints");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int64_t sizes[JAG_MAX_DIMS];
    if (n > JAG_MAX_DIMS) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "empty: at most %d dims, got %zd", JAG_MAX_DIMS, n);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return NULL;
        }
        sizes[i] = (int64_t)v;
    }
    Py_DECREF(fast);
    if (dtype < 0 || dtype >= JAG_DTYPE_COUNT) {
        PyErr_Format(PyExc_ValueError, "invalid dtype code %d", dtype);
        return NULL;
    }
    jag_tensor *out = NULL;
    jag_status st = jag_meta_tensor(sizes, (int)n, (jag_dtype)dtype, &out);
    if (st) return jagpy_raise_status(st);
    return jagpy_wrap(out);
}

static PyObject *m_is_meta(PyObject *mod, PyObject *arg) {
    (void)mod;
    jag_tensor *t = jagpy_get_tensor(arg, "is_meta: argument");
    if (!t) return NULL;
    return PyBool_FromLong(jag_is_meta(t));
}

/* _bench_op_loop(name, n, *args): call the op n times from C with the
 * given arguments (tensors and floats) (each output released at once) and return the
 * seconds it took: the C cost of one call, for bench/bench_python.py to
 * set Python's per-call overhead against. */
static PyObject *m_bench_op_loop(PyObject *mod, PyObject *args) {
    (void)mod;
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs < 2 || nargs > 10 || !PyUnicode_Check(PyTuple_GET_ITEM(args, 0))) {
        PyErr_SetString(PyExc_TypeError, "_bench_op_loop(name, n, *args) with up to 8 tensors or floats");
        return NULL;
    }
    jag_op_id op;
    jag_status st = jag_op_find(PyUnicode_AsUTF8(PyTuple_GET_ITEM(args, 0)), &op);
    if (st) return jagpy_raise_status(st);
    long long n = PyLong_AsLongLong(PyTuple_GET_ITEM(args, 1));
    if (n == -1 && PyErr_Occurred()) return NULL;
    jag_value vals[8];
    int nv = (int)nargs - 2;
    for (int i = 0; i < nv; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, 2 + i);
        if (PyFloat_Check(a)) {
            vals[i].kind = JAG_VAL_DOUBLE;
            vals[i].u.d = PyFloat_AS_DOUBLE(a);
            continue;
        }
        jag_tensor *t = jagpy_get_tensor(a, "argument");
        if (!t) return NULL;
        vals[i].kind = JAG_VAL_TENSOR;
        vals[i].u.t = t;
    }
    int n_out = jag_op_num_outputs(op);
    if (n_out < 1 || n_out > 8) {
        PyErr_SetString(PyExc_ValueError, "_bench_op_loop: unexpected number of outputs");
        return NULL;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long long k = 0; k < n; k++) {
        jag_tensor *outs[8] = {0};
        st = jag_op_call(op, vals, nv, outs);
        if (st) return jagpy_raise_status(st);
        for (int i = 0; i < n_out; i++) jag_release(outs[i]);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    return PyFloat_FromDouble((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9);
}

static PyMethodDef random_methods[] = {
    {"_bench_op_loop", m_bench_op_loop, METH_VARARGS, "_bench_op_loop(name, n, *args) -> seconds"},
    {"_random", m_random, METH_VARARGS, "_random(kind, sizes, dtype, a, b, generator)"},
    {"_random_like", m_random_like, METH_VARARGS, "_random_like(kind, x, generator)"},
    {"_meta", m_meta, METH_VARARGS, "_meta(sizes, dtype): a meta tensor"},
    {"_is_meta", m_is_meta, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

int jagpy_factory_init(PyObject *m) {
    if (PyType_Ready(&Generator_Type) < 0) return -1;
    Py_INCREF(&Generator_Type);
    if (PyModule_AddObject(m, "_Generator", (PyObject *)&Generator_Type) < 0) {
        Py_DECREF(&Generator_Type);
        return -1;
    }
    return PyModule_AddFunctions(m, random_methods);
}
