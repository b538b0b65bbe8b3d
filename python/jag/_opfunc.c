/*
 * _opfunc.c — jag._C.OpFunction: a jag op as a Python callable that runs no
 * Python frame of its own.
 *
 * A function like `def mm(input, mat2): return _op("mm", input, mat2)`
 * costs a Python frame on every call, though its body only hands its
 * arguments on: about 370 of the 1850 instructions that Python added to
 * jag.relu or jag.mm on a tiny nested tensor (callgrind, against the same
 * op in a C loop: bench/bench_python.py's pairs). An
 * OpFunction made from such a function (jag._op_function in __init__.py)
 * does that hand-on in C: its positional arguments go to the op as they
 * are, keyword arguments by the wrapped function's parameter names, and
 * the call is _op(name, *args) (a "unary" one first checks that its one
 * argument is a jag.Tensor, as _unary does). It keeps the Python function
 * as __wrapped__ (so inspect.signature and help() show its signature) and
 * copies its __name__, __qualname__, __module__ and __doc__.
 *
 * As a class attribute it binds as a method does (Tensor.relu: x.relu()
 * passes x first); Py_TPFLAGS_METHOD_DESCRIPTOR lets the interpreter call
 * it with the object first without making a bound-method object. It
 * pickles (and copies) by reference, as functions do: by its module and
 * qualified name.
 */
#include "_jagpy.h"

#include <structmember.h>

#define OPFUNC_MAX_ARGS 16

typedef struct {
    PyObject_HEAD
    PyObject *op_name;     /* str: the op's name, as _op takes it */
    PyObject *params;      /* tuple of str: the parameter names, in order */
    int unary;             /* 1: one argument, which must be a jag.Tensor */
    PyObject *dict;        /* __name__, __doc__, __wrapped__, ... */
    vectorcallfunc vectorcall;
} opfunc_object;

/* The positional array of a call with keywords: args by position, then each
 * keyword in its parameter's place. Fills out[0..n_params) and returns the
 * count (the last given parameter + 1), or -1 with a TypeError. */
static Py_ssize_t place_keywords(opfunc_object *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                 PyObject **out) {
    Py_ssize_t n_params = PyTuple_GET_SIZE(f->params), n = nargs;
    for (Py_ssize_t i = 0; i < n_params; i++) out[i] = i < nargs ? args[i] : NULL;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t at = -1;
        for (Py_ssize_t i = 0; i < n_params && at < 0; i++) {
            int eq = PyUnicode_Compare(key, PyTuple_GET_ITEM(f->params, i)) == 0;
            if (PyErr_Occurred()) return -1;
            if (eq) at = i;
        }
        if (at < 0) {
            PyErr_Format(PyExc_TypeError, "%U() got an unexpected keyword argument '%U'", f->op_name, key);
            return -1;
        }
        if (out[at]) {
            PyErr_Format(PyExc_TypeError, "%U() got multiple values for argument '%U'", f->op_name, key);
            return -1;
        }
        out[at] = args[nargs + k];
        if (at + 1 > n) n = at + 1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%U() missing required argument '%U' (pos %zd)", f->op_name,
                         PyTuple_GET_ITEM(f->params, i), i + 1);
            return -1;
        }
    return n;
}

static PyObject *opfunc_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    opfunc_object *f = (opfunc_object *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), n_params = PyTuple_GET_SIZE(f->params);
    PyObject *placed[OPFUNC_MAX_ARGS];
    if (nargs > n_params) {
        PyErr_Format(PyExc_TypeError, "%U() takes %zd positional argument%s but %zd were given", f->op_name, n_params,
                     n_params == 1 ? "" : "s", nargs);
        return NULL;
    }
    if (kwnames && PyTuple_GET_SIZE(kwnames)) {
        if ((nargs = place_keywords(f, args, nargs, kwnames, placed)) < 0) return NULL;
        args = placed;
    }
    /* every parameter of the wrapped functions is required (no defaults) */
    if (nargs < n_params) {
        PyErr_Format(PyExc_TypeError, "%U() missing required argument '%U' (pos %zd)", f->op_name,
                     PyTuple_GET_ITEM(f->params, nargs), nargs + 1);
        return NULL;
    }
    if (f->unary && jagpy_check_unary_input(f->op_name, args[0]) < 0) return NULL;
    return jagpy_call_op(f->op_name, args, nargs);
}

/* OpFunction(op_name, function, unary): function is the Python function it
 * stands for (its parameters, all required and positional-or-keyword, are
 * the op's arguments in order). */
static PyObject *opfunc_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *name, *fn;
    int unary;
    static char *kwlist[] = {"op_name", "function", "unary", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "UOp", kwlist, &name, &fn, &unary)) return NULL;
    PyObject *code = PyObject_GetAttrString(fn, "__code__");
    if (!code) return NULL;
    PyObject *varnames = PyObject_GetAttrString(code, "co_varnames");
    PyObject *argcount = PyObject_GetAttrString(code, "co_argcount");
    PyObject *kwonly = PyObject_GetAttrString(code, "co_kwonlyargcount");
    PyObject *defaults = PyObject_GetAttrString(fn, "__defaults__");
    PyObject *flags = PyObject_GetAttrString(code, "co_flags");
    Py_DECREF(code);
    opfunc_object *f = NULL;
    Py_ssize_t n = argcount ? PyLong_AsSsize_t(argcount) : -1;
    long star = flags ? PyLong_AsLong(flags) & (0x04 | 0x08) : 0; /* CO_VARARGS | CO_VARKEYWORDS */
    if (!varnames || !argcount || !kwonly || !defaults || !flags || PyErr_Occurred()) goto done;
    if (n < 1 || n > OPFUNC_MAX_ARGS || PyLong_AsLong(kwonly) != 0 || defaults != Py_None || star ||
        (unary && n != 1)) {
        PyErr_SetString(PyExc_ValueError, "OpFunction: the function must take 1..16 required positional-or-keyword "
                                          "parameters (exactly one when unary) and nothing else");
        goto done;
    }
    if (!(f = (opfunc_object *)type->tp_alloc(type, 0))) goto done;
    f->op_name = Py_NewRef(name);
    f->unary = unary;
    f->vectorcall = opfunc_vectorcall;
    if (!(f->params = PyTuple_GetSlice(varnames, 0, n)) || !(f->dict = PyDict_New())) {
        Py_CLEAR(f);
        goto done;
    }
    static const char *const copied[] = {"__name__", "__qualname__", "__module__", "__doc__"};
    for (size_t i = 0; f && i < sizeof copied / sizeof copied[0]; i++) {
        PyObject *v = PyObject_GetAttrString(fn, copied[i]);
        if (!v || PyDict_SetItemString(f->dict, copied[i], v) < 0) Py_CLEAR(f);
        Py_XDECREF(v);
    }
    if (f && PyDict_SetItemString(f->dict, "__wrapped__", fn) < 0) Py_CLEAR(f);
done:
    Py_XDECREF(varnames), Py_XDECREF(argcount), Py_XDECREF(kwonly), Py_XDECREF(defaults), Py_XDECREF(flags);
    return (PyObject *)f;
}

static int opfunc_traverse(PyObject *self, visitproc visit, void *arg) {
    opfunc_object *f = (opfunc_object *)self;
    Py_VISIT(f->dict);
    return 0;
}

static int opfunc_clear(PyObject *self) {
    Py_CLEAR(((opfunc_object *)self)->dict);
    return 0;
}

static void opfunc_dealloc(PyObject *self) {
    opfunc_object *f = (opfunc_object *)self;
    PyObject_GC_UnTrack(self);
    opfunc_clear(self);
    Py_XDECREF(f->op_name);
    Py_XDECREF(f->params);
    Py_TYPE(self)->tp_free(self);
}

/* As a class attribute: bound to the instance, as a function is. */
static PyObject *opfunc_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (!obj || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *opfunc_repr(PyObject *self) {
    opfunc_object *f = (opfunc_object *)self;
    PyObject *qual = f->dict ? PyDict_GetItemString(f->dict, "__qualname__") : NULL;
    return PyUnicode_FromFormat("<jag op function %S>", qual ? qual : f->op_name);
}

/* pickle and copy: the global of that module and qualified name (the
 * object itself, as for a function) */
static PyObject *opfunc_reduce(PyObject *self, PyObject *unused) {
    (void)unused;
    opfunc_object *f = (opfunc_object *)self;
    PyObject *qual = f->dict ? PyDict_GetItemString(f->dict, "__qualname__") : NULL;
    if (!qual || !PyUnicode_Check(qual)) {
        PyErr_Format(PyExc_TypeError, "cannot pickle the op function of '%U': it has no __qualname__", f->op_name);
        return NULL;
    }
    return Py_NewRef(qual);
}

static PyMethodDef opfunc_methods[] = {
    {"__reduce__", opfunc_reduce, METH_NOARGS, "pickled by reference: its module and qualified name"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef opfunc_members[] = {
    {"op_name", T_OBJECT, offsetof(opfunc_object, op_name), READONLY, "the name of the op it calls"},
    {"unary", T_INT, offsetof(opfunc_object, unary), READONLY, "1 when its one argument must be a jag.Tensor"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject OpFunction_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "jag._C.OpFunction",
    .tp_basicsize = sizeof(opfunc_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A jag op as a Python callable without a Python frame: OpFunction(op_name, function, unary).",
    .tp_new = opfunc_new,
    .tp_dealloc = opfunc_dealloc,
    .tp_traverse = opfunc_traverse,
    .tp_clear = opfunc_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(opfunc_object, vectorcall),
    .tp_descr_get = opfunc_descr_get,
    .tp_repr = opfunc_repr,
    .tp_dictoffset = offsetof(opfunc_object, dict),
    .tp_members = opfunc_members,
    .tp_methods = opfunc_methods,
};

int jagpy_opfunc_init(PyObject *m) {
    if (PyType_Ready(&OpFunction_Type) < 0) return -1;
    Py_INCREF(&OpFunction_Type);
    if (PyModule_AddObject(m, "OpFunction", (PyObject *)&OpFunction_Type) < 0) {
        Py_DECREF(&OpFunction_Type);
        return -1;
    }
    return 0;
}
