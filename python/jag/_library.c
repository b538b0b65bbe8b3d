/*
 * _library.c — custom ops from Python (jag.library): define an op from a
 * schema, give it Python kernels per key ("CPU", "Meta", "Autograd"), and
 * register Python decompositions of ops for nested tensors.
 *
 * Python callbacks are called from C through trampolines that take the GIL
 * (PyGILState_Ensure: a no-op when the calling thread holds it, as it does
 * for every call coming from Python), convert the boxed jag arguments to
 * Python values, and convert the results back to new references. A callback
 * that raises leaves its exception in a per-thread slot and returns a
 * failure status; when the failure reaches the Python caller,
 * jagpy_raise_status re-raises that very exception (with its traceback)
 * instead of building one from the C message.
 *
 * Ops and their kernels live until the process ends (the C op table is
 * append-only), so the kernels' Python callables are kept for good too.
 */
#include "_jagpy.h"

#include <pthread.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The stashed exception                                                     */
/* ------------------------------------------------------------------------ */

static _Thread_local PyObject *stash_type, *stash_value, *stash_tb;

void jagpy_clear_stashed(void) {
    if (!stash_type) return;
    Py_CLEAR(stash_type);
    Py_CLEAR(stash_value);
    Py_CLEAR(stash_tb);
}

void jagpy_stash_exception(void) {
    if (!PyErr_Occurred()) return;
    jagpy_clear_stashed(); /* the newest failure is the one to report */
    PyErr_Fetch(&stash_type, &stash_value, &stash_tb);
    PyErr_NormalizeException(&stash_type, &stash_value, &stash_tb);
    if (stash_tb && stash_value) PyException_SetTraceback(stash_value, stash_tb);
}

int jagpy_restore_exception(void) {
    if (!stash_type) return 0;
    PyErr_Restore(stash_type, stash_value, stash_tb); /* steals the three */
    stash_type = stash_value = stash_tb = NULL;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Boxed values <-> Python                                                   */
/* ------------------------------------------------------------------------ */

/* A Python tensor for t: t itself, or (detach) a new tensor sharing its
 * data without its autograd state. */
static PyObject *wrap_arg(const jag_tensor *t, int detach) {
    if (!detach) return jagpy_wrap(jag_retain((jag_tensor *)t));
    jag_tensor *d = NULL;
    jag_status st = jag_detach(t, &d);
    if (st) return jagpy_raise_status(st);
    return jagpy_wrap(d);
}

static PyObject *unbox(const jag_value *v, int detach) {
    switch (v->kind) {
    case JAG_VAL_NONE: Py_RETURN_NONE;
    case JAG_VAL_TENSOR: return wrap_arg(v->u.t, detach);
    case JAG_VAL_INT: return PyLong_FromLongLong((long long)v->u.i);
    case JAG_VAL_DOUBLE: return PyFloat_FromDouble(v->u.d);
    case JAG_VAL_BOOL: return PyBool_FromLong(v->u.b);
    case JAG_VAL_INTS: {
        PyObject *l = PyList_New(v->u.ints.n);
        for (int i = 0; l && i < v->u.ints.n; i++) {
            PyObject *x = PyLong_FromLongLong((long long)v->u.ints.v[i]);
            if (!x) Py_CLEAR(l);
            else PyList_SET_ITEM(l, i, x);
        }
        return l;
    }
    case JAG_VAL_TENSORS: {
        PyObject *l = PyList_New(v->u.tensors.n);
        for (int i = 0; l && i < v->u.tensors.n; i++) {
            PyObject *x = wrap_arg(v->u.tensors.v[i], detach);
            if (!x) Py_CLEAR(l);
            else PyList_SET_ITEM(l, i, x);
        }
        return l;
    }
    }
    PyErr_SetString(PyExc_RuntimeError, "unknown boxed value kind");
    return NULL;
}

PyObject *jagpy_unbox_args(const jag_value *args, int nargs, int detach) {
    PyObject *tup = PyTuple_New(nargs);
    if (!tup) return NULL;
    for (int i = 0; i < nargs; i++) {
        PyObject *x = unbox(&args[i], detach);
        if (!x) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, i, x);
    }
    return tup;
}

int jagpy_results_to_outs(PyObject *r, int n, jag_tensor **outs, const char *who) {
    jag_tensor *got[8] = {0};
    if (n < 1 || n > 8) {
        PyErr_Format(PyExc_RuntimeError, "%s: %d outputs", who, n);
        return -1;
    }
    if (jagpy_is_tensor(r)) {
        if (n != 1) {
            PyErr_Format(PyExc_TypeError, "%s returned one tensor, but the op has %d outputs", who, n);
            return -1;
        }
        if (!(got[0] = jagpy_get_tensor(r, who))) return -1;
    } else if (PyTuple_Check(r) || PyList_Check(r)) {
        Py_ssize_t len = PySequence_Fast_GET_SIZE(r);
        if (len != n) {
            PyErr_Format(PyExc_TypeError, "%s returned %zd values, but the op has %d outputs", who, len, n);
            return -1;
        }
        for (int i = 0; i < n; i++) {
            PyObject *x = PySequence_Fast_GET_ITEM(r, i);
            if (!jagpy_is_tensor(x)) {
                PyErr_Format(PyExc_TypeError, "%s: output %d is %.100s, expected a jag.Tensor", who, i,
                             Py_TYPE(x)->tp_name);
                return -1;
            }
            if (!(got[i] = jagpy_get_tensor(x, who))) return -1;
        }
    } else {
        PyErr_Format(PyExc_TypeError, "%s returned %.100s, expected a jag.Tensor (or a tuple of %d)", who,
                     Py_TYPE(r)->tp_name, n);
        return -1;
    }
    for (int i = 0; i < n; i++) outs[i] = jag_retain(got[i]);
    return 0;
}

/* Call fn(*args) and put its results into outs; on a Python error stash it
 * and return a failure status. Needs the GIL. */
static jag_status call_python(PyObject *fn, jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs,
                              const char *what, int detach) {
    char who[200];
    const char *name = jag_op_name(op);
    snprintf(who, sizeof who, "the Python %s of %s", what, name ? name : "?");
    PyObject *tup = jagpy_unbox_args(args, nargs, detach);
    if (!tup) goto fail;
    Py_INCREF(fn); /* it may be replaced while it runs */
    PyObject *r = PyObject_Call(fn, tup, NULL);
    Py_DECREF(fn);
    Py_DECREF(tup);
    if (!r) goto fail;
    int rc = jagpy_results_to_outs(r, jag_op_num_outputs(op), outs, who);
    Py_DECREF(r);
    if (rc) goto fail;
    return JAG_OK;
fail:
    jagpy_stash_exception();
    return JAG_EINVAL;
}

/* CPU and Meta kernels run below autograd: they get their tensors detached
 * (the same data, no autograd state), so that .numpy() works on them. The
 * Autograd kernel gets them as they are. */
static jag_status kernel_trampoline(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs, void *ctx) {
    PyGILState_STATE g = PyGILState_Ensure();
    jag_status st = call_python(ctx, op, args, nargs, outs, "kernel", 1);
    PyGILState_Release(g);
    return st;
}

static jag_status autograd_trampoline(jag_op_id op, const jag_value *args, int nargs, jag_tensor **outs,
                                      void *ctx) {
    PyGILState_STATE g = PyGILState_Ensure();
    jag_status st = call_python(ctx, op, args, nargs, outs, "Autograd kernel", 0);
    PyGILState_Release(g);
    return st;
}

static jag_status decomp_trampoline(const jag_subclass *cls, jag_op_id op, const jag_value *args, int nargs,
                                    jag_tensor **outs, void *ctx) {
    (void)cls;
    PyGILState_STATE g = PyGILState_Ensure();
    jag_status st = call_python(ctx, op, args, nargs, outs, "nested decomposition", 1); /* below autograd too */
    PyGILState_Release(g);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Module functions                                                          */
/* ------------------------------------------------------------------------ */

static int find_op(PyObject *name, jag_op_id *op) {
    const char *s = PyUnicode_AsUTF8(name);
    if (!s) return -1;
    jag_status st = jag_op_find(s, op);
    if (st) {
        jagpy_raise_status(st);
        return -1;
    }
    return 0;
}

/* _op_define(schema) -> op id */
static PyObject *m_op_define(PyObject *mod, PyObject *arg) {
    (void)mod;
    const char *schema = PyUnicode_AsUTF8(arg);
    if (!schema) return NULL;
    jag_op_id op;
    jag_status st = jag_op_define(schema, &op);
    if (st) return jagpy_raise_status(st);
    return PyLong_FromLong(op);
}

/* _op_impl(name, key, fn) */
static PyObject *m_op_impl(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *name, *fn;
    const char *key;
    if (!PyArg_ParseTuple(args, "UsO", &name, &key, &fn)) return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "impl: the kernel must be callable, not %.100s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    jag_op_id op;
    if (find_op(name, &op)) return NULL;
    jag_status st = jag_op_impl(op, key, strcmp(key, "Autograd") ? kernel_trampoline : autograd_trampoline, fn);
    if (st) return jagpy_raise_status(st);
    Py_INCREF(fn); /* kept by the op table for good */
    Py_RETURN_NONE;
}

/* The Python decompositions by op id, holding their references (a new
 * registration replaces the old one, here and in the C table). */
static PyObject *decomps;

/* _register_decomp(class_name, op_name, fn) */
static PyObject *m_register_decomp(PyObject *mod, PyObject *args) {
    (void)mod;
    const char *cls_name;
    PyObject *name, *fn;
    if (!PyArg_ParseTuple(args, "sUO", &cls_name, &name, &fn)) return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "register_decomp: the decomposition must be callable, not %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    const jag_subclass *cls = jag_subclass_find(cls_name);
    if (!cls) {
        PyErr_Format(PyExc_ValueError, "register_decomp: no tensor subclass named '%s'", cls_name);
        return NULL;
    }
    jag_op_id op;
    if (find_op(name, &op)) return NULL;
    if (!decomps && !(decomps = PyDict_New())) return NULL;
    PyObject *key = Py_BuildValue("(si)", cls_name, op);
    if (!key) return NULL;
    /* keep the new callable before the C table points at it */
    PyObject *old = PyDict_GetItemWithError(decomps, key);
    Py_XINCREF(old);
    if (PyDict_SetItem(decomps, key, fn) < 0) {
        Py_XDECREF(old);
        Py_DECREF(key);
        return NULL;
    }
    jag_status st = jag_subclass_register_decomp(cls, op, decomp_trampoline, fn);
    if (st) { /* the C table still points at the old one: keep it */
        if (old) PyDict_SetItem(decomps, key, old);
        else PyDict_DelItem(decomps, key);
        Py_XDECREF(old);
        Py_DECREF(key);
        return jagpy_raise_status(st);
    }
    Py_XDECREF(old);
    Py_DECREF(key);
    Py_RETURN_NONE;
}

/* _op_info(name) -> (id, schema or None, n_inputs, n_outputs, tags) */
static PyObject *m_op_info(PyObject *mod, PyObject *name) {
    (void)mod;
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "_op_info(name: str)");
        return NULL;
    }
    jag_op_id op;
    if (find_op(name, &op)) return NULL;
    const char *schema = jag_op_schema(op);
    return Py_BuildValue("(iziiI)", op, schema, jag_op_num_inputs(op), jag_op_num_outputs(op), jag_op_tags(op));
}

/* Test probe: call a one-tensor op from C with the GIL released, on this
 * thread or on a new C thread that Python has never seen, as a C program
 * embedding jag would. Python kernels must take the GIL themselves. */
typedef struct {
    jag_op_id op;
    jag_value arg;
    jag_tensor *out;
    jag_status st;
    PyObject *et, *ev, *tb; /* a Python kernel's exception, moved out of the worker */
} c_call;

static void *run_c_call(void *p) {
    c_call *c = p;
    c->st = jag_op_call(c->op, &c->arg, 1, &c->out);
    /* a failed kernel stashed its exception in this thread's slot */
    PyGILState_STATE g = PyGILState_Ensure();
    if (jagpy_restore_exception()) PyErr_Fetch(&c->et, &c->ev, &c->tb);
    PyGILState_Release(g);
    return NULL;
}

static PyObject *m_test_call_from_c(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *name, *x;
    int new_thread;
    if (!PyArg_ParseTuple(args, "UOp", &name, &x, &new_thread)) return NULL;
    c_call c = {0};
    if (find_op(name, &c.op)) return NULL;
    jag_tensor *t = jagpy_get_tensor(x, "argument");
    if (!t) return NULL;
    c.arg.kind = JAG_VAL_TENSOR;
    c.arg.u.t = t;
    int failed_thread = 0;
    Py_BEGIN_ALLOW_THREADS
    if (new_thread) {
        pthread_t th;
        if (pthread_create(&th, NULL, run_c_call, &c) == 0) pthread_join(th, NULL);
        else failed_thread = 1;
    } else {
        run_c_call(&c);
    }
    Py_END_ALLOW_THREADS
    if (failed_thread) {
        PyErr_SetString(PyExc_RuntimeError, "_test_call_from_c: pthread_create failed");
        return NULL;
    }
    if (c.et) {
        jag_release(c.out);
        PyErr_Restore(c.et, c.ev, c.tb);
        return NULL;
    }
    if (c.st) return jagpy_raise_status(c.st);
    return jagpy_wrap(c.out);
}

static PyMethodDef library_methods[] = {
    {"_test_call_from_c", m_test_call_from_c, METH_VARARGS,
     "_test_call_from_c(name, x, new_thread): call an op from C without the GIL (test probe)"},
    {"_op_define", m_op_define, METH_O, "_op_define(schema) -> op id"},
    {"_op_impl", m_op_impl, METH_VARARGS, "_op_impl(name, key, fn): a Python kernel for a custom op"},
    {"_register_decomp", m_register_decomp, METH_VARARGS,
     "_register_decomp(class_name, op_name, fn): a Python decomposition of an op for a subclass"},
    {"_op_info", m_op_info, METH_O, "_op_info(name) -> (id, schema, n_inputs, n_outputs, tags)"},
    {NULL, NULL, 0, NULL},
};

int jagpy_library_init(PyObject *m) { return PyModule_AddFunctions(m, library_methods); }
