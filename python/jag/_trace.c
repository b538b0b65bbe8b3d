/*
 * _trace.c — jag.trace and jag.compile over the C tracer (jag_trace_function,
 * the passes, jag_trace_compile, jag_compile).
 *
 * A Python function is traced through one C callback: it wraps the proxies
 * jag hands it as jag tensors, calls the function, and hands its results
 * back. The C tracer wants the number of outputs up front; Python functions
 * do not declare it, so the callback is first run expecting one output and,
 * when the function returned another number, the trace is taken again with
 * that number (the function then runs twice while tracing, never while a
 * program runs).
 *
 * Types: Trace (a recorded program: str() prints it; the passes and
 * compile() return new objects), Program (a compiled trace, callable) and
 * Compiled (a function compiled on first call with each new kind of inputs).
 */
#include "_jagpy.h"

/* ---- calling the Python function from the tracer -------------------------- */

typedef struct {
    PyObject *fn;
    int wanted;   /* outputs the tracer asked for */
    int returned; /* outputs the function gave, when that differed; else -1 */
} call_state;

/* Results as a sequence of tensors: a tensor is one, a tuple or list is
 * itself; -1 with a TypeError otherwise. */
static int count_results(PyObject *r) {
    if (jagpy_is_tensor(r)) return 1;
    if (PyTuple_Check(r) || PyList_Check(r)) return (int)PySequence_Fast_GET_SIZE(r);
    PyErr_Format(PyExc_TypeError, "jag.trace: the traced function returned %.100s, expected a jag.Tensor or a tuple of them",
                 Py_TYPE(r)->tp_name);
    return -1;
}

static jag_status traced_trampoline(void *ctx, jag_tensor *const *inputs, int n_inputs, jag_tensor **outputs,
                                    int n_outputs) {
    call_state *s = ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    jag_status st = JAG_EINVAL;
    PyObject *args = PyTuple_New(n_inputs), *r = NULL;
    if (!args) goto fail;
    for (int i = 0; i < n_inputs; i++) {
        PyObject *x = jagpy_wrap(jag_retain(inputs[i]));
        if (!x) goto fail;
        PyTuple_SET_ITEM(args, i, x);
    }
    if (!(r = PyObject_CallObject(s->fn, args))) goto fail;
    int n = count_results(r);
    if (n < 0) goto fail;
    if (n != n_outputs) {
        if (n < 1 || n > 64) {
            PyErr_Format(PyExc_TypeError, "jag.trace: the traced function returned %d tensors, expected 1 to 64", n);
            goto fail;
        }
        s->returned = n; /* the caller traces again for n outputs */
        Py_DECREF(r), Py_DECREF(args);
        PyGILState_Release(g);
        return JAG_EINVAL;
    }
    if (jagpy_results_to_outs(r, n_outputs, outputs, "the traced function") < 0) goto fail;
    st = JAG_OK;
    Py_DECREF(r), Py_DECREF(args);
    PyGILState_Release(g);
    return st;
fail:
    jagpy_stash_exception();
    Py_XDECREF(r), Py_XDECREF(args);
    PyGILState_Release(g);
    return st;
}

/* A tuple of tensors as a C array of borrowed jag tensors (at most 64). */
static int tensors_of(PyObject *seq, jag_tensor **out, int *n, const char *who) {
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len > 64) {
        PyErr_Format(PyExc_ValueError, "%s: %zd inputs, at most 64", who, len);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        if (!(out[i] = jagpy_get_tensor(PySequence_Fast_GET_ITEM(seq, i), who))) return -1;
    *n = (int)len;
    return 0;
}

/* outputs[0..n) (new references) as one tensor or a tuple. */
static PyObject *results_of(jag_tensor **outs, int n) {
    if (n == 1) return jagpy_wrap(outs[0]);
    PyObject *t = PyTuple_New(n);
    if (!t) {
        for (int i = 0; i < n; i++) jag_release(outs[i]);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        PyObject *x = jagpy_wrap(outs[i]);
        if (!x) {
            for (int j = i + 1; j < n; j++) jag_release(outs[j]);
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

static PyObject *trace_text(const jag_trace *t) {
    size_t need = jag_trace_format(t, NULL, 0);
    char *buf = PyMem_Malloc(need + 1);
    if (!buf) return PyErr_NoMemory();
    jag_trace_format(t, buf, need + 1);
    PyObject *s = PyUnicode_FromString(buf);
    PyMem_Free(buf);
    return s;
}

/* ---- Trace ------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    jag_trace *t;
} trace_object;

static PyTypeObject trace_type;

static PyObject *trace_wrap(jag_trace *t) {
    trace_object *o = PyObject_New(trace_object, &trace_type);
    if (!o) {
        jag_trace_free(t);
        return NULL;
    }
    o->t = t;
    return (PyObject *)o;
}

static void trace_dealloc(trace_object *o) {
    jag_trace_free(o->t);
    PyObject_Free(o);
}

static PyObject *trace_str(trace_object *o) { return trace_text(o->t); }

typedef jag_status (*pass_fn)(const jag_trace *, jag_trace **);

static PyObject *run_pass(trace_object *o, pass_fn fn) {
    jag_trace *out = NULL;
    jagpy_clear_stashed();
    jag_status st = fn(o->t, &out);
    if (st) return jagpy_raise_status(st);
    return trace_wrap(out);
}

static PyObject *trace_desugar(trace_object *o, PyObject *u) { (void)u; return run_pass(o, jag_trace_desugar); }
static PyObject *trace_dce(trace_object *o, PyObject *u) { (void)u; return run_pass(o, jag_trace_dce); }
static PyObject *trace_fuse(trace_object *o, PyObject *u) { (void)u; return run_pass(o, jag_trace_fuse); }
static PyObject *trace_grad(trace_object *o, PyObject *u) { (void)u; return run_pass(o, jag_trace_grad); }

static PyObject *program_wrap(jag_program *p);

static PyObject *trace_compile(trace_object *o, PyObject *args) {
    unsigned passes = JAG_PASSES_ALL;
    if (!PyArg_ParseTuple(args, "|I", &passes)) return NULL;
    jag_program *p = NULL;
    jagpy_clear_stashed();
    jag_status st = jag_trace_compile(o->t, passes, &p);
    if (st) return jagpy_raise_status(st);
    return program_wrap(p);
}

static PyObject *trace_get_counts(trace_object *o, void *which) {
    intptr_t w = (intptr_t)which;
    return PyLong_FromLong(w == 0 ? jag_trace_num_inputs(o->t)
                           : w == 1 ? jag_trace_num_outputs(o->t)
                                    : jag_trace_num_symbols(o->t));
}

static PyMethodDef trace_methods[] = {
    {"desugar", (PyCFunction)trace_desugar, METH_NOARGS, "symbols on subclasses replaced by their handlers' symbols"},
    {"dce", (PyCFunction)trace_dce, METH_NOARGS, "without the symbols no output needs"},
    {"fuse", (PyCFunction)trace_fuse, METH_NOARGS, "pointwise chains merged into fused regions"},
    {"grad", (PyCFunction)trace_grad, METH_NOARGS, "with the backward program appended"},
    {"_compile", (PyCFunction)trace_compile, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef trace_getset[] = {
    {"num_inputs", (getter)trace_get_counts, NULL, NULL, (void *)0},
    {"num_outputs", (getter)trace_get_counts, NULL, NULL, (void *)1},
    {"num_symbols", (getter)trace_get_counts, NULL, NULL, (void *)2},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject trace_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "jag._C.Trace",
    .tp_basicsize = sizeof(trace_object),
    .tp_dealloc = (destructor)trace_dealloc,
    .tp_str = (reprfunc)trace_str,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A function recorded as a program over proxies; str() prints it.",
    .tp_methods = trace_methods,
    .tp_getset = trace_getset,
};

/* _trace(fn, args, names or None) -> Trace */
static PyObject *m_trace(PyObject *mod, PyObject *a) {
    (void)mod;
    PyObject *fn, *args, *names_obj;
    if (!PyArg_ParseTuple(a, "OO!O", &fn, &PyTuple_Type, &args, &names_obj)) return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "jag.trace: expected a callable, got %.100s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    jag_tensor *inputs[64];
    int n = 0;
    if (tensors_of(args, inputs, &n, "jag.trace") < 0) return NULL;
    const char *names[64] = {0};
    if (names_obj != Py_None) {
        if (!PyTuple_Check(names_obj) || PyTuple_GET_SIZE(names_obj) != n) {
            PyErr_SetString(PyExc_TypeError, "jag.trace: names must be a tuple with one name per input");
            return NULL;
        }
        for (int i = 0; i < n; i++) {
            PyObject *s = PyTuple_GET_ITEM(names_obj, i);
            if (s != Py_None && !(names[i] = PyUnicode_AsUTF8(s))) return NULL;
        }
    }
    call_state s = {.fn = fn, .wanted = 1, .returned = -1};
    jag_trace *t = NULL;
    jagpy_clear_stashed();
    jag_status st = jag_trace_function(traced_trampoline, &s, inputs, n, names, 1, &t);
    if (st && s.returned > 0) { /* it returned another number of outputs: trace again for that */
        s.wanted = s.returned, s.returned = -1;
        jagpy_clear_stashed();
        st = jag_trace_function(traced_trampoline, &s, inputs, n, names, s.wanted, &t);
        if (st && s.returned > 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "jag.trace: the traced function returned a different number of tensors when run again");
            return NULL;
        }
    }
    if (st) return jagpy_raise_status(st);
    return trace_wrap(t);
}

/* ---- Program ---------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    jag_program *p;
} program_object;

static PyTypeObject program_type;

static PyObject *program_wrap(jag_program *p) {
    program_object *o = PyObject_New(program_object, &program_type);
    if (!o) {
        jag_program_free(p);
        return NULL;
    }
    o->p = p;
    return (PyObject *)o;
}

static void program_dealloc(program_object *o) {
    jag_program_free(o->p);
    PyObject_Free(o);
}

static PyObject *program_call(program_object *o, PyObject *args, PyObject *kw) {
    if (kw && PyDict_Size(kw)) {
        PyErr_SetString(PyExc_TypeError, "jag program: takes its inputs by position only");
        return NULL;
    }
    jag_tensor *inputs[64], *outs[64];
    int n = 0;
    if (tensors_of(args, inputs, &n, "jag program") < 0) return NULL;
    int n_out = jag_trace_num_outputs(jag_program_trace(o->p));
    jagpy_clear_stashed();
    jag_status st = jag_program_run(o->p, inputs, n, outs, n_out);
    if (st) return jagpy_raise_status(st);
    return results_of(outs, n_out);
}

static PyObject *program_get_trace(program_object *o, void *which) {
    const jag_trace *t = which ? jag_program_backward_trace(o->p) : jag_program_trace(o->p);
    if (!t) Py_RETURN_NONE;
    return trace_text(t);
}

static PyGetSetDef program_getset[] = {
    {"trace", (getter)program_get_trace, NULL, "the forward program's trace, as text", NULL},
    {"backward_trace", (getter)program_get_trace, NULL, "the backward program's trace as text, or None",
     (void *)1},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *program_str(program_object *o) { return program_get_trace(o, NULL); }

static PyTypeObject program_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "jag._C.Program",
    .tp_basicsize = sizeof(program_object),
    .tp_dealloc = (destructor)program_dealloc,
    .tp_call = (ternaryfunc)program_call,
    .tp_str = (reprfunc)program_str,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A compiled trace: call it with inputs of the kind it was traced with.",
    .tp_getset = program_getset,
};

/* ---- Compiled --------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    unsigned passes;
    call_state state;   /* the ctx jag_compile keeps by pointer */
    jag_compiled *c;    /* made on the first call, when the output count is known */
} compiled_object;

static void compiled_dealloc(compiled_object *o) {
    jag_compiled_free(o->c);
    Py_XDECREF(o->fn);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyObject *compiled_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *fn;
    unsigned passes = JAG_PASSES_ALL;
    static char *kwlist[] = {"fn", "passes", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|I", kwlist, &fn, &passes)) return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "jag.compile: expected a callable, got %.100s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    compiled_object *o = (compiled_object *)type->tp_alloc(type, 0);
    if (!o) return NULL;
    Py_INCREF(fn);
    o->fn = fn, o->passes = passes, o->c = NULL;
    o->state = (call_state){.fn = fn, .wanted = 1, .returned = -1};
    return (PyObject *)o;
}

static jag_status compiled_run(compiled_object *o, jag_tensor **inputs, int n, jag_tensor **outs) {
    if (!o->c) {
        jag_status st = jag_compile(traced_trampoline, &o->state, o->state.wanted, o->passes, &o->c);
        if (st) return st;
    }
    o->state.returned = -1;
    return jag_compiled_call(o->c, inputs, n, outs, o->state.wanted);
}

static PyObject *compiled_call(compiled_object *o, PyObject *args, PyObject *kw) {
    if (kw && PyDict_Size(kw)) {
        PyErr_SetString(PyExc_TypeError, "jag.compile: the compiled function takes its inputs by position only");
        return NULL;
    }
    jag_tensor *inputs[64], *outs[64];
    int n = 0;
    if (tensors_of(args, inputs, &n, "jag.compile") < 0) return NULL;
    jagpy_clear_stashed();
    jag_status st = compiled_run(o, inputs, n, outs);
    if (st && o->state.returned > 0) {
        /* The function returns another number of outputs than assumed. Only
         * the first trace can learn it: programs already kept have theirs. */
        if (jag_compiled_num_programs(o->c) > 0) {
            PyErr_Format(PyExc_TypeError,
                         "jag.compile: the function returned %d tensors for these inputs, %d for earlier ones",
                         o->state.returned, o->state.wanted);
            return NULL;
        }
        jag_compiled_free(o->c);
        o->c = NULL;
        o->state.wanted = o->state.returned;
        jagpy_clear_stashed();
        st = compiled_run(o, inputs, n, outs);
        if (st && o->state.returned > 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "jag.compile: the function returned a different number of tensors when traced again");
            return NULL;
        }
    }
    if (st) return jagpy_raise_status(st);
    return results_of(outs, o->state.wanted);
}

static PyObject *compiled_get_num_programs(compiled_object *o, void *u) {
    (void)u;
    return PyLong_FromLong(o->c ? jag_compiled_num_programs(o->c) : 0);
}

static PyGetSetDef compiled_getset[] = {
    {"num_programs", (getter)compiled_get_num_programs, NULL, "programs kept, one per kind of inputs", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject compiled_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "jag._C.Compiled",
    .tp_basicsize = sizeof(compiled_object),
    .tp_dealloc = (destructor)compiled_dealloc,
    .tp_call = (ternaryfunc)compiled_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A function compiled on its first call with each new kind of inputs.",
    .tp_getset = compiled_getset,
    .tp_new = compiled_new,
};

static PyMethodDef trace_module_methods[] = {
    {"_trace", m_trace, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int jagpy_trace_init(PyObject *m) {
    if (PyType_Ready(&trace_type) < 0 || PyType_Ready(&program_type) < 0 || PyType_Ready(&compiled_type) < 0)
        return -1;
    if (PyModule_AddFunctions(m, trace_module_methods) < 0) return -1;
    Py_INCREF(&trace_type), Py_INCREF(&program_type), Py_INCREF(&compiled_type);
    if (PyModule_AddObject(m, "Trace", (PyObject *)&trace_type) < 0 ||
        PyModule_AddObject(m, "Program", (PyObject *)&program_type) < 0 ||
        PyModule_AddObject(m, "Compiled", (PyObject *)&compiled_type) < 0)
        return -1;
    return PyModule_AddIntConstant(m, "PASS_DESUGAR", JAG_PASS_DESUGAR) < 0 ||
                   PyModule_AddIntConstant(m, "PASS_DCE", JAG_PASS_DCE) < 0 ||
                   PyModule_AddIntConstant(m, "PASS_FUSE", JAG_PASS_FUSE) < 0 ||
                   PyModule_AddIntConstant(m, "PASSES_ALL", JAG_PASSES_ALL) < 0
               ? -1
               : 0;
}
