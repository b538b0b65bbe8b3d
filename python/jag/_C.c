/*
 * _C.c — the CPython extension under the `jag` package: a TensorBase type
 * wrapping a jag_tensor* and thin functions over the public C API (jag.h).
 * Everything torch-like (names, operators, defaults) is in __init__.py; this
 * file only converts arguments, calls jag and maps jag_status to exceptions.
 *
 * Ownership: TensorBase owns exactly one reference on its jag_tensor (taken
 * from the `out` of a jag call, or with jag_retain) and gives it back in
 * tp_dealloc. No jag scope is ever opened here.
 *
 * The other bindings live in files of their own (DLPack and the buffer
 * protocol in _interop.c, custom ops in _library.c, autograd.Function in
 * _function.c, generators and meta tensors in _factory.c, dropout and the
 * losses in _nn.c), share _jagpy.h, and are added to the module at the end
 * of PyInit__C.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <jag.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "_jagpy.h"

typedef jagpy_tensor_object TensorObject;

static PyTypeObject TensorBase_Type;
/* The Python class that wrap() instantiates (jag.Tensor, a subclass of
 * TensorBase set by __init__.py); TensorBase itself until then. */
static PyTypeObject *tensor_class = &TensorBase_Type;

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

static PyObject *exception_for(jag_status st) {
    switch (st) {
    case JAG_EINVAL:
    case JAG_ESHAPE:
    case JAG_EOVERFLOW:
    case JAG_ERANGE: return PyExc_ValueError;
    case JAG_EDTYPE: return PyExc_TypeError;
    case JAG_ENOTIMPL: return PyExc_NotImplementedError;
    case JAG_ENOMEM: return PyExc_MemoryError;
    case JAG_ESTATE:
    case JAG_EINTERNAL:
    default: return PyExc_RuntimeError;
    }
}

/* Set a Python exception for a failed jag call; returns NULL. */
static PyObject *raise_status(jag_status st) {
    if (jagpy_restore_exception()) return NULL; /* a Python callback raised: keep its exception */
    const char *msg = jag_last_error();
    if (!msg || !*msg) msg = jag_status_str(st);
    PyErr_SetString(exception_for(st), msg);
    return NULL;
}

/* As raise_status, but JAG_ERANGE becomes IndexError (indexing). */
static PyObject *raise_index_status(jag_status st) {
    if (st == JAG_ERANGE) {
        const char *msg = jag_last_error();
        PyErr_SetString(PyExc_IndexError, (msg && *msg) ? msg : jag_status_str(st));
        return NULL;
    }
    return raise_status(st);
}

/* ------------------------------------------------------------------------ */
/* Wrapping                                                                  */
/* ------------------------------------------------------------------------ */

/* Freed objects of the exact class jag.Tensor, kept for the next wrap():
 * a small op's result is made and dropped once per call, and allocating a
 * GC-tracked heap-type object and freeing it through subtype_dealloc costs
 * about as much as the op's own dispatch. Only when tensor_class is
 * `fast_class` (a subclass of TensorBase that adds no storage, dict or
 * finalizer: m_set_tensor_class checks this and gives it
 * Tensor_heap_dealloc). Entries are dead objects (refcount 0, untracked,
 * no type reference); the list is bounded, like CPython's own free lists. */
#define TENSOR_FREELIST_MAX 64
static PyObject *tensor_freelist[TENSOR_FREELIST_MAX];
static int tensor_freelist_n;
static PyTypeObject *fast_class;
#ifndef Py_TPFLAGS_MANAGED_DICT /* before Python 3.11 */
#define Py_TPFLAGS_MANAGED_DICT 0
#endif

/* A new Python tensor owning `t` (the reference is stolen, also on failure). */
static PyObject *wrap(jag_tensor *t) {
    if (!t) {
        PyErr_SetString(PyExc_RuntimeError, "jag returned no tensor");
        return NULL;
    }
    TensorObject *o;
    if (tensor_freelist_n && tensor_class == fast_class) {
        /* as PyType_GenericAlloc: type (a new reference), refcount 1, fields, tracked */
        o = (TensorObject *)PyObject_Init(tensor_freelist[--tensor_freelist_n], tensor_class);
        o->weakreflist = NULL;
        o->t = t;
        PyObject_GC_Track(o);
        return (PyObject *)o;
    }
    o = (TensorObject *)tensor_class->tp_alloc(tensor_class, 0);
    if (!o) {
        jag_release(t);
        return NULL;
    }
    o->t = t;
    return (PyObject *)o;
}

/* tp_dealloc of fast_class (jag.Tensor), in place of subtype_dealloc, and
 * the base deallocator its own subclasses' subtype_dealloc calls (they
 * re-track the object, keep their weakref list for the base to clear, and
 * leave the type's reference to the base, as for any heap base): untrack,
 * clear weakrefs, release the jag tensor, free (or keep an exact
 * fast_class object for reuse), drop the type's reference. */
static void Tensor_heap_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    TensorObject *o = (TensorObject *)self;
    PyObject_GC_UnTrack(self);
    if (o->weakreflist) PyObject_ClearWeakRefs(self);
    jag_tensor *t = o->t;
    o->t = NULL;
    jag_release(t);
    if (tp == fast_class && tensor_freelist_n < TENSOR_FREELIST_MAX)
        tensor_freelist[tensor_freelist_n++] = self;
    else
        tp->tp_free(self);
    Py_DECREF(tp);
}

static int is_tensor(PyObject *o) { return PyObject_TypeCheck(o, &TensorBase_Type); }

/* The jag tensor of `o`, or NULL with a TypeError. */
static jag_tensor *get_tensor(PyObject *o, const char *what) {
    if (!is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a jag.Tensor, not %.100s", what, Py_TYPE(o)->tp_name);
        return NULL;
    }
    jag_tensor *t = ((TensorObject *)o)->t;
    if (!t) {
        PyErr_Format(PyExc_RuntimeError, "%s is an uninitialised jag.Tensor", what);
        return NULL;
    }
    return t;
}

static int get_dtype(PyObject *o, jag_dtype *out) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v >= JAG_DTYPE_COUNT) {
        PyErr_Format(PyExc_ValueError, "invalid dtype code %ld", v);
        return -1;
    }
    *out = (jag_dtype)v;
    return 0;
}

/* A sequence of ints into sizes[0..*n). */
static int get_sizes(PyObject *seq, int64_t *sizes, int *n, const char *what) {
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
    if (!fast) return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    if (len > JAG_MAX_DIMS) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s: at most %d dims, got %zd", what, JAG_MAX_DIMS, len);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyLong_Check(item) && !PyIndex_Check(item)) {
            Py_DECREF(fast);
            PyErr_Format(PyExc_TypeError, "%s: entry %zd must be an int, not %.100s", what, i,
                         Py_TYPE(item)->tp_name);
            return -1;
        }
        long long v = PyLong_AsLongLong(item);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        sizes[i] = (int64_t)v;
    }
    *n = (int)len;
    Py_DECREF(fast);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* TensorBase                                                                */
/* ------------------------------------------------------------------------ */

static void Tensor_dealloc(TensorObject *self) {
    if (self->weakreflist) PyObject_ClearWeakRefs((PyObject *)self);
    jag_tensor *t = self->t;
    self->t = NULL;
    jag_release(t);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Tensor_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)type; (void)args; (void)kw;
    PyErr_SetString(PyExc_TypeError, "jag.Tensor cannot be made directly; use jag.tensor(), jag.zeros(), ...");
    return NULL;
}

static PyObject *Tensor_repr(TensorObject *self) {
    if (!self->t) return PyUnicode_FromString("<uninitialised jag.Tensor>");
    char small[1024];
    size_t need = jag_format(self->t, small, sizeof small);
    if (need < sizeof small) return PyUnicode_FromString(small);
    char *buf = malloc(need + 1);
    if (!buf) return PyErr_NoMemory();
    jag_format(self->t, buf, need + 1);
    PyObject *r = PyUnicode_FromString(buf);
    free(buf);
    return r;
}

#define SELF_T(self)                                                          \
    jag_tensor *t = get_tensor((PyObject *)(self), "self");                   \
    if (!t) return NULL

/* A tuple of Python ints from n int64 values. */
static PyObject *int64_tuple(const int64_t *v, int n) {
    PyObject *tup = PyTuple_New(n);
    if (!tup) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong((long long)v[i]);
        if (!x) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, i, x);
    }
    return tup;
}

static PyObject *Tensor_get_sizes(TensorObject *self, void *c) {
    (void)c;
    SELF_T(self);
    return int64_tuple(jag_sizes(t), jag_ndim(t));
}

static PyObject *Tensor_get_strides(TensorObject *self, void *c) {
    (void)c;
    SELF_T(self);
    if (jag_tensor_subclass(t)) Py_RETURN_NONE;
    return int64_tuple(jag_strides(t), jag_ndim(t));
}

static PyObject *Tensor_get_dtype_code(TensorObject *self, void *c) {
    (void)c;
    SELF_T(self);
    return PyLong_FromLong((long)jag_tensor_dtype(t));
}

static PyObject *Tensor_get_ndim(TensorObject *self, void *c) {
    (void)c;
    SELF_T(self);
    return PyLong_FromLong(jag_ndim(t));
}

static PyObject *Tensor_get_layout_code(TensorObject *self, void *c) {
    (void)c;
    SELF_T(self);
    return PyLong_FromLong((long)jag_tensor_layout(t));
}

static PyObject *Tensor_get_is_nested(TensorObject *self, void *c) {
    (void)c;
    SELF_T(self);
    return PyBool_FromLong(jag_is_nested(t));
}

static PyObject *Tensor_get_requires_grad(TensorObject *self, void *c) {
    (void)c;
    SELF_T(self);
    return PyBool_FromLong(jag_requires_grad(t));
}

static int Tensor_set_requires_grad(TensorObject *self, PyObject *v, void *c) {
    (void)c;
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete requires_grad");
        return -1;
    }
    jag_tensor *t = get_tensor((PyObject *)self, "self");
    if (!t) return -1;
    int b = PyObject_IsTrue(v);
    if (b < 0) return -1;
    jag_status st = jag_set_requires_grad(t, b != 0);
    if (st) {
        raise_status(st);
        return -1;
    }
    return 0;
}

static PyObject *Tensor_get_is_leaf(TensorObject *self, void *c) {
    (void)c;
    SELF_T(self);
    return PyBool_FromLong(jag_is_leaf(t));
}

static PyObject *Tensor_get_grad(TensorObject *self, void *c) {
    (void)c;
    SELF_T(self);
    jag_tensor *g = NULL;
    jag_status st = jag_get_grad(t, &g);
    if (st) return raise_status(st);
    if (!g) Py_RETURN_NONE;
    return wrap(g);
}

static int Tensor_set_grad(TensorObject *self, PyObject *v, void *c) {
    (void)c;
    jag_tensor *t = get_tensor((PyObject *)self, "self");
    if (!t) return -1;
    if (v == NULL || v == Py_None) {
        jag_zero_grad(t);
        return 0;
    }
    PyErr_SetString(PyExc_NotImplementedError, "assigning a tensor to .grad is not supported; only None");
    return -1;
}

static PyObject *Tensor_get_is_contiguous(TensorObject *self, void *c) {
    (void)c;
    SELF_T(self);
    return PyBool_FromLong(jag_is_contiguous(t));
}

/* __array_interface__ of a plain tensor: a zero-copy description of its
 * memory. numpy keeps a reference to the tensor object for as long as the
 * ndarray lives, so the data stays valid. */
static PyObject *Tensor_get_array_interface(TensorObject *self, void *c) {
    (void)c;
    SELF_T(self);
    if (jag_tensor_subclass(t)) {
        PyErr_SetString(PyExc_TypeError,
                        "a nested (or other subclass) tensor has no single array; use .unbind(), .values() "
                        "or jag.nested.to_padded_tensor()");
        return NULL;
    }
    void *data = jag_data(t);
    if (!data) {
        if (jag_numel(t) != 0 || jag_is_meta(t)) {
            PyErr_SetString(PyExc_TypeError, "a meta tensor has no data to convert (inside jag.trace or jag.compile tensors are "
                                             "proxies without data: pass the value as an input, or compute it outside the function)");
            return NULL;
        }
    }
    const char *typestr = "";
    switch (jag_tensor_dtype(t)) {
    case JAG_FLOAT32: typestr = "<f4"; break;
    case JAG_FLOAT64: typestr = "<f8"; break;
    case JAG_INT32: typestr = "<i4"; break;
    case JAG_INT64: typestr = "<i8"; break;
    case JAG_BOOL: typestr = "|b1"; break;
    case JAG_FLOAT16: typestr = "<f2"; break;
    case JAG_BFLOAT16:
        /* as torch's numpy(): numpy has no bfloat16 */
        PyErr_SetString(PyExc_TypeError, "numpy() / __array_interface__: numpy has no bfloat16 dtype; convert with "
                                         ".float() first (a bfloat16 value is exact in float32)");
        return NULL;
    default: PyErr_SetString(PyExc_TypeError, "unknown dtype"); return NULL;
    }
    size_t es = jag_dtype_size(jag_tensor_dtype(t));
    int nd = jag_ndim(t);
    const int64_t *sz = jag_sizes(t), *sd = jag_strides(t);
    PyObject *shape = PyTuple_New(nd), *strides = PyTuple_New(nd);
    if (!shape || !strides) goto fail;
    for (int i = 0; i < nd; i++) {
        PyObject *a = PyLong_FromLongLong((long long)sz[i]);
        PyObject *b = PyLong_FromLongLong((long long)(sd[i] * (int64_t)es));
        if (!a || !b) {
            Py_XDECREF(a);
            Py_XDECREF(b);
            goto fail;
        }
        PyTuple_SET_ITEM(shape, i, a);
        PyTuple_SET_ITEM(strides, i, b);
    }
    /* numpy rejects a NULL pointer for an empty array; any aligned address
     * works there since nothing is read. */
    static double dummy;
    /* a read-only tensor (jag_is_read_only: mapped from a file, a nested
     * tensor's offsets) gives a read-only array */
    PyObject *r = Py_BuildValue("{s:(N,O),s:N,s:s,s:N,s:i}", "data",
                                PyLong_FromVoidPtr(data ? data : (void *)&dummy),
                                jag_is_read_only(t) ? Py_True : Py_False, "shape", shape,
                                "typestr", typestr, "strides", strides, "version", 3);
    return r;
fail:
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return NULL;
}

static PyObject *Tensor_item(TensorObject *self, PyObject *unused) {
    (void)unused;
    SELF_T(self);
    double v = 0;
    jag_status st = jag_item(t, &v);
    if (st) return raise_status(st);
    switch (jag_tensor_dtype(t)) {
    case JAG_INT32:
    case JAG_INT64: return PyLong_FromDouble(v);
    case JAG_BOOL: return PyBool_FromLong(v != 0);
    default: return PyFloat_FromDouble(v);
    }
}

static PyObject *Tensor_select(TensorObject *self, PyObject *args) {
    SELF_T(self);
    int dim;
    long long index;
    if (!PyArg_ParseTuple(args, "iL", &dim, &index)) return NULL;
    jag_tensor *out = NULL;
    jag_status st = jag_select(t, dim, (int64_t)index, &out);
    if (st) return raise_index_status(st);
    return wrap(out);
}

static PyObject *Tensor_narrow(TensorObject *self, PyObject *args) {
    SELF_T(self);
    int dim;
    long long start, length;
    if (!PyArg_ParseTuple(args, "iLL", &dim, &start, &length)) return NULL;
    jag_tensor *out = NULL;
    jag_status st = jag_narrow(t, dim, (int64_t)start, (int64_t)length, &out);
    if (st) return raise_index_status(st);
    return wrap(out);
}

static PyObject *Tensor_reshape(TensorObject *self, PyObject *arg) {
    SELF_T(self);
    int64_t sizes[JAG_MAX_DIMS];
    int n = 0;
    if (get_sizes(arg, sizes, &n, "reshape")) return NULL;
    jag_tensor *out = NULL;
    jag_status st = jag_reshape(t, sizes, n, &out);
    if (st) return raise_status(st);
    return wrap(out);
}

/* Methods that map one tensor to one tensor through a jag function. */
#define TENSOR_TO_TENSOR(name, fn)                                             \
    static PyObject *Tensor_##name(TensorObject *self, PyObject *unused) {     \
        (void)unused;                                                          \
        SELF_T(self);                                                          \
        jag_tensor *out = NULL;                                                \
        jag_status st = fn(t, &out);                                           \
        if (st) return raise_status(st);                                       \
        return wrap(out);                                                      \
    }
TENSOR_TO_TENSOR(flatten, jag_flatten)
TENSOR_TO_TENSOR(contiguous, jag_contiguous)
TENSOR_TO_TENSOR(detach, jag_detach)
#undef TENSOR_TO_TENSOR

static PyObject *Tensor_backward(TensorObject *self, PyObject *args) {
    SELF_T(self);
    PyObject *grad = Py_None;
    int retain = 0;
    if (!PyArg_ParseTuple(args, "|Op", &grad, &retain)) return NULL;
    jag_tensor *g = NULL;
    if (grad != Py_None && !(g = get_tensor(grad, "gradient"))) return NULL;
    jagpy_clear_stashed();
    jag_status st = jag_backward(t, g, retain != 0);
    if (st) return raise_status(st);
    Py_RETURN_NONE;
}

/* Tensor.register_post_accumulate_grad_hook: a C hook that calls the
 * Python callable with the tensor (as torch, the return value is ignored).
 * The registration keeps the callable alive and only a weak reference to
 * the tensor object: the hook belongs to the tensor and goes with it (the
 * C registry drops it when the jag tensor is released). When the object
 * went while its jag tensor lives on (a graph holds the leaf), the hook
 * gets a new object over the same tensor. A callable that raises stops
 * backward and its exception is the one backward raises. */
typedef struct py_grad_hook {
    PyObject *hook;
    PyObject *tensor_ref; /* a weak reference to the tensor object */
} py_grad_hook;

static jag_status py_grad_hook_call(jag_tensor *leaf, void *ctx) {
    py_grad_hook *h = ctx;
    PyGILState_STATE gs = PyGILState_Ensure();
    PyObject *obj = PyWeakref_GetObject(h->tensor_ref); /* borrowed; None when gone */
    if (obj == Py_None) obj = wrap(jag_retain(leaf));
    else Py_INCREF(obj);
    PyObject *r = obj ? PyObject_CallOneArg(h->hook, obj) : NULL;
    Py_XDECREF(obj);
    jag_status st = JAG_OK;
    if (!r) {
        jagpy_stash_exception();
        st = JAG_EINVAL;
    }
    Py_XDECREF(r);
    PyGILState_Release(gs);
    return st;
}

static void py_grad_hook_free(void *ctx) {
    py_grad_hook *h = ctx;
    PyGILState_STATE gs = PyGILState_Ensure();
    Py_XDECREF(h->hook);
    Py_XDECREF(h->tensor_ref);
    PyGILState_Release(gs);
    PyMem_RawFree(h);
}

static PyObject *m_remove_post_accumulate_grad_hook(PyObject *Py_UNUSED(mod), PyObject *arg) {
    long long id = PyLong_AsLongLong(arg);
    if (id == -1 && PyErr_Occurred()) return NULL;
    /* a hook whose tensor was released is gone already: as torch's
     * RemovableHandle.remove(), nothing to do */
    if (jag_remove_post_accumulate_grad_hook((int64_t)id)) jag_clear_error();
    Py_RETURN_NONE;
}

static PyObject *Tensor_register_post_accumulate_grad_hook(TensorObject *self, PyObject *hook) {
    SELF_T(self);
    if (!PyCallable_Check(hook))
        return PyErr_Format(PyExc_TypeError, "register_post_accumulate_grad_hook: argument 'hook' must be callable, got %s",
                            Py_TYPE(hook)->tp_name);
    if (!jag_requires_grad(t))
        return PyErr_Format(PyExc_RuntimeError, "register_post_accumulate_grad_hook: cannot register a hook on a tensor "
                            "that doesn't require gradient");
    if (!jag_is_leaf(t))
        return PyErr_Format(PyExc_RuntimeError, "register_post_accumulate_grad_hook: post accumulate grad hooks cannot "
                            "be registered on non-leaf tensors");
    PyObject *mod = PyImport_ImportModule("jag.utils.hooks");
    PyObject *cls = mod ? PyObject_GetAttrString(mod, "RemovableHandle") : NULL;
    PyObject *remove = cls ? PyObject_GetAttrString((PyObject *)Py_TYPE(self), "_remove_post_accumulate_grad_hook") : NULL;
    Py_XDECREF(mod);
    py_grad_hook *h = remove ? PyMem_RawMalloc(sizeof *h) : NULL;
    if (remove && !h) PyErr_NoMemory();
    if (!h) {
        Py_XDECREF(cls), Py_XDECREF(remove);
        return NULL;
    }
    h->tensor_ref = PyWeakref_NewRef((PyObject *)self, NULL);
    if (!h->tensor_ref) {
        PyMem_RawFree(h);
        Py_DECREF(cls), Py_DECREF(remove);
        return NULL;
    }
    Py_INCREF(hook);
    h->hook = hook;
    int64_t id = 0;
    jag_status st = jag_register_post_accumulate_grad_hook(t, py_grad_hook_call, h, py_grad_hook_free, &id);
    if (st) {
        py_grad_hook_free(h);
        Py_DECREF(cls), Py_DECREF(remove);
        return raise_status(st);
    }
    PyObject *handle = PyObject_CallFunction(cls, "OL", remove, (long long)id);
    Py_DECREF(cls), Py_DECREF(remove);
    if (!handle) jag_remove_post_accumulate_grad_hook(id);
    return handle;
}

static PyObject *Tensor_fill_(TensorObject *self, PyObject *arg) {
    SELF_T(self);
    double v = PyFloat_AsDouble(arg);
    if (v == -1.0 && PyErr_Occurred()) return NULL;
    jag_status st = jag_fill_(t, v);
    if (st) return raise_status(st);
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *Tensor_copy_(TensorObject *self, PyObject *arg) {
    SELF_T(self);
    jag_tensor *src = get_tensor(arg, "src");
    if (!src) return NULL;
    jag_status st = jag_copy_(t, src);
    if (st) return raise_status(st);
    Py_INCREF(self);
    return (PyObject *)self;
}

/* In-place ops (jag.h "In-place ops"): each returns self. The torch-like
 * methods (add_, sub_, ..., the operators +=, ...) are in __init__.py. */
static PyObject *Tensor_inplace_binary(TensorObject *self, PyObject *args, int which) {
    SELF_T(self);
    PyObject *other_obj;
    double alpha = 1.0;
    if (!PyArg_ParseTuple(args, "O|d", &other_obj, &alpha)) return NULL;
    jag_tensor *other = get_tensor(other_obj, "other");
    if (!other) return NULL;
    jag_status st;
    switch (which) {
    case 0: st = jag_add_(t, other, alpha); break;
    case 1: st = jag_sub_(t, other, alpha); break;
    case 2: st = jag_mul_(t, other); break;
    default: st = jag_div_(t, other); break;
    }
    if (st) return raise_status(st);
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *Tensor_add_(TensorObject *self, PyObject *args) { return Tensor_inplace_binary(self, args, 0); }
static PyObject *Tensor_sub_(TensorObject *self, PyObject *args) { return Tensor_inplace_binary(self, args, 1); }
static PyObject *Tensor_mul_(TensorObject *self, PyObject *args) { return Tensor_inplace_binary(self, args, 2); }
static PyObject *Tensor_div_(TensorObject *self, PyObject *args) { return Tensor_inplace_binary(self, args, 3); }

/* _scalar_(kind, value): kind 0 self += value, 1 self *= value, 2 self /= value */
static PyObject *Tensor_scalar_(TensorObject *self, PyObject *args) {
    SELF_T(self);
    int kind;
    double v;
    if (!PyArg_ParseTuple(args, "id", &kind, &v)) return NULL;
    jag_status st = kind == 0 ? jag_add_scalar_(t, v) : kind == 1 ? jag_mul_scalar_(t, v) : jag_div_scalar_(t, v);
    if (st) return raise_status(st);
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *Tensor_clamp_(TensorObject *self, PyObject *args) {
    SELF_T(self);
    double lo, hi;
    if (!PyArg_ParseTuple(args, "dd", &lo, &hi)) return NULL;
    jag_status st = jag_clamp_(t, lo, hi);
    if (st) return raise_status(st);
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *Tensor_zero_(TensorObject *self, PyObject *unused) {
    (void)unused;
    SELF_T(self);
    jag_status st = jag_zero_(t);
    if (st) return raise_status(st);
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *Tensor_get_version(TensorObject *self, void *c) {
    (void)c;
    SELF_T(self);
    int64_t v = jag_version(t);
    if (v < 0) {
        const char *msg = jag_last_error();
        PyErr_SetString(PyExc_RuntimeError, (msg && *msg) ? msg : "_version: the tensor was released");
        return NULL;
    }
    return PyLong_FromLongLong((long long)v);
}

static PyObject *Tensor_shares_storage(TensorObject *self, PyObject *arg) {
    SELF_T(self);
    jag_tensor *o = get_tensor(arg, "other");
    if (!o) return NULL;
    return PyBool_FromLong(jag_shares_storage(t, o));
}

/* --- nested-specific accessors ------------------------------------------ */

typedef jag_status (*inner_fn)(const jag_tensor *, jag_tensor **);

static PyObject *inner_call(TensorObject *self, inner_fn fn, int allow_null) {
    SELF_T(self);
    jag_tensor *out = NULL;
    jag_status st = fn(t, &out);
    if (st) return raise_status(st);
    if (!out) {
        if (allow_null) Py_RETURN_NONE;
        PyErr_SetString(PyExc_RuntimeError, "jag returned no tensor");
        return NULL;
    }
    return wrap(out);
}

static PyObject *Tensor_values(TensorObject *self, PyObject *u) { (void)u; return inner_call(self, jag_nested_values, 0); }
static PyObject *Tensor_offsets(TensorObject *self, PyObject *u) { (void)u; return inner_call(self, jag_nested_offsets, 0); }
static PyObject *Tensor_lengths(TensorObject *self, PyObject *u) { (void)u; return inner_call(self, jag_nested_lengths, 1); }
static PyObject *Tensor_buffer(TensorObject *self, PyObject *u) { (void)u; return inner_call(self, jag_nested_buffer, 0); }

static PyObject *Tensor_unbind_nested(TensorObject *self, PyObject *u) {
    (void)u;
    SELF_T(self);
    if (!jag_is_nested(t)) {
        PyErr_SetString(PyExc_TypeError, "_unbind_nested needs a nested tensor");
        return NULL;
    }
    int64_t b = jag_nested_batch_size(t);
    if (b < 0 || b > INT32_MAX) {
        PyErr_SetString(PyExc_RuntimeError, "bad nested batch size");
        return NULL;
    }
    jag_tensor **outs = calloc((size_t)(b ? b : 1), sizeof *outs);
    if (!outs) return PyErr_NoMemory();
    int n = 0;
    jag_status st = jag_nested_unbind(t, outs, (int)b, &n);
    if (st) {
        free(outs);
        return raise_status(st);
    }
    PyObject *list = PyList_New(0);
    for (int i = 0; i < n; i++) {
        PyObject *w = list ? wrap(outs[i]) : (jag_release(outs[i]), NULL);
        if (list && (!w || PyList_Append(list, w))) {
            Py_XDECREF(w);
            Py_CLEAR(list);
            continue;
        }
        Py_XDECREF(w);
    }
    free(outs);
    return list;
}

static PyObject *Tensor_ragged_id(TensorObject *self, PyObject *u) {
    (void)u;
    SELF_T(self);
    if (!jag_is_nested(t)) Py_RETURN_NONE;
    return PyLong_FromLongLong((long long)jag_nested_ragged_id(t));
}

static PyObject *Tensor_ragged_idx(TensorObject *self, PyObject *u) {
    (void)u;
    SELF_T(self);
    if (jag_tensor_layout(t) != JAG_JAGGED) Py_RETURN_NONE;
    return PyLong_FromLong(jag_nested_ragged_idx(t));
}

static PyObject *Tensor_to_layout(TensorObject *self, PyObject *arg) {
    SELF_T(self);
    long l = PyLong_AsLong(arg);
    if (l == -1 && PyErr_Occurred()) return NULL;
    if (l != JAG_JAGGED && l != JAG_STRIDED) {
        PyErr_SetString(PyExc_ValueError, "layout must be jag.jagged or jag.strided");
        return NULL;
    }
    jag_tensor *out = NULL;
    jag_status st = jag_nested_to_layout(t, (jag_layout)l, &out);
    if (st) return raise_status(st);
    return wrap(out);
}

static PyGetSetDef Tensor_getset[] = {
    {"_sizes", (getter)Tensor_get_sizes, NULL, "sizes (-1 for a ragged dim)", NULL},
    {"_strides", (getter)Tensor_get_strides, NULL, "strides in elements (None for a subclass)", NULL},
    {"_dtype_code", (getter)Tensor_get_dtype_code, NULL, NULL, NULL},
    {"_layout_code", (getter)Tensor_get_layout_code, NULL, NULL, NULL},
    {"ndim", (getter)Tensor_get_ndim, NULL, "number of dims", NULL},
    {"is_nested", (getter)Tensor_get_is_nested, NULL, "True for a nested tensor", NULL},
    {"requires_grad", (getter)Tensor_get_requires_grad, (setter)Tensor_set_requires_grad,
     "Whether autograd records ops on this tensor and computes its gradient", NULL},
    {"is_leaf", (getter)Tensor_get_is_leaf, NULL, "True for a tensor no recorded op made (its gradient accumulates in .grad)",
     NULL},
    {"grad", (getter)Tensor_get_grad, (setter)Tensor_set_grad, "accumulated gradient or None", NULL},
    {"_is_contiguous", (getter)Tensor_get_is_contiguous, NULL, NULL, NULL},
    {"__array_interface__", (getter)Tensor_get_array_interface, NULL, "zero-copy numpy view", NULL},
    {"_version", (getter)Tensor_get_version, NULL,
     "the version counter of the tensor's storage (torch's _version): one more at every in-place write", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Tensor_methods[] = {
    {"item", (PyCFunction)Tensor_item, METH_NOARGS, "the value of a one-element tensor"},
    {"_select", (PyCFunction)Tensor_select, METH_VARARGS, NULL},
    {"_narrow", (PyCFunction)Tensor_narrow, METH_VARARGS, NULL},
    {"_reshape", (PyCFunction)Tensor_reshape, METH_O, NULL},
    {"_flatten", (PyCFunction)Tensor_flatten, METH_NOARGS, NULL},
    {"contiguous", (PyCFunction)Tensor_contiguous, METH_NOARGS, "contiguous tensor (self when already)"},
    {"detach", (PyCFunction)Tensor_detach, METH_NOARGS, "a leaf sharing data, not requiring grad"},
    {"_backward", (PyCFunction)Tensor_backward, METH_VARARGS, NULL},
    {"register_post_accumulate_grad_hook", (PyCFunction)Tensor_register_post_accumulate_grad_hook, METH_O,
     "register_post_accumulate_grad_hook(hook) -> RemovableHandle: hook(tensor) runs during backward once this "
     "leaf's .grad holds all of this backward's gradient (torch.Tensor.register_post_accumulate_grad_hook)"},
    {"_remove_post_accumulate_grad_hook", (PyCFunction)m_remove_post_accumulate_grad_hook, METH_O | METH_STATIC, NULL},
    {"_fill_", (PyCFunction)Tensor_fill_, METH_O, NULL},
    {"_copy_", (PyCFunction)Tensor_copy_, METH_O, NULL},
    {"_add_", (PyCFunction)Tensor_add_, METH_VARARGS, NULL},
    {"_sub_", (PyCFunction)Tensor_sub_, METH_VARARGS, NULL},
    {"_mul_", (PyCFunction)Tensor_mul_, METH_VARARGS, NULL},
    {"_div_", (PyCFunction)Tensor_div_, METH_VARARGS, NULL},
    {"_scalar_", (PyCFunction)Tensor_scalar_, METH_VARARGS, NULL},
    {"_clamp_", (PyCFunction)Tensor_clamp_, METH_VARARGS, NULL},
    {"_zero_", (PyCFunction)Tensor_zero_, METH_NOARGS, NULL},
    {"_shares_storage", (PyCFunction)Tensor_shares_storage, METH_O, NULL},
    {"_values", (PyCFunction)Tensor_values, METH_NOARGS, NULL},
    {"_offsets", (PyCFunction)Tensor_offsets, METH_NOARGS, NULL},
    {"_lengths", (PyCFunction)Tensor_lengths, METH_NOARGS, NULL},
    {"_buffer", (PyCFunction)Tensor_buffer, METH_NOARGS, NULL},
    {"_unbind_nested", (PyCFunction)Tensor_unbind_nested, METH_NOARGS, NULL},
    {"_ragged_id", (PyCFunction)Tensor_ragged_id, METH_NOARGS, NULL},
    {"_ragged_idx_of", (PyCFunction)Tensor_ragged_idx, METH_NOARGS, NULL},
    {"_to_layout", (PyCFunction)Tensor_to_layout, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TensorBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jag._C.TensorBase",
    .tp_basicsize = sizeof(TensorObject),
    .tp_weaklistoffset = offsetof(TensorObject, weakreflist),
    .tp_dealloc = (destructor)Tensor_dealloc,
    .tp_repr = (reprfunc)Tensor_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A jag tensor (dense or nested); see jag.Tensor.",
    .tp_methods = Tensor_methods,
    .tp_getset = Tensor_getset,
    .tp_new = Tensor_new,
};

/* ------------------------------------------------------------------------ */
/* Module functions                                                          */
/* ------------------------------------------------------------------------ */

static PyObject *m_set_tensor_class(PyObject *mod, PyObject *cls) {
    (void)mod;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &TensorBase_Type)) {
        PyErr_SetString(PyExc_TypeError, "expected a subclass of TensorBase");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    /* the reuse of freed objects (wrap, Tensor_heap_dealloc) for a class
     * laid out as TensorBase, with nothing of its own to clear or finalize */
    if (!fast_class && tp->tp_base == &TensorBase_Type && (tp->tp_flags & Py_TPFLAGS_HEAPTYPE) &&
        (tp->tp_flags & Py_TPFLAGS_HAVE_GC) && !(tp->tp_flags & Py_TPFLAGS_MANAGED_DICT) &&
        tp->tp_basicsize == TensorBase_Type.tp_basicsize && tp->tp_itemsize == 0 && tp->tp_dictoffset == 0 &&
        tp->tp_weaklistoffset == TensorBase_Type.tp_weaklistoffset && !tp->tp_finalize && !tp->tp_del &&
        tp->tp_free == PyObject_GC_Del) {
        tp->tp_dealloc = Tensor_heap_dealloc;
        fast_class = tp;
    }
    Py_INCREF(cls);
    if (tensor_class != &TensorBase_Type) Py_DECREF((PyObject *)tensor_class);
    tensor_class = tp;
    Py_RETURN_NONE;
}

/* _factory(kind, sizes, dtype[, a, b]): kind in empty/zeros/ones/full/rand/randn */
static PyObject *m_factory(PyObject *mod, PyObject *args) {
    (void)mod;
    const char *kind;
    PyObject *shape, *dt;
    double a = 0, b = 1;
    if (!PyArg_ParseTuple(args, "sOO|dd", &kind, &shape, &dt, &a, &b)) return NULL;
    int64_t sizes[JAG_MAX_DIMS];
    int n = 0;
    jag_dtype dtype;
    if (get_sizes(shape, sizes, &n, kind) || get_dtype(dt, &dtype)) return NULL;
    jag_tensor *out = NULL;
    jag_status st;
    if (!strcmp(kind, "empty")) st = jag_empty(sizes, n, dtype, &out);
    else if (!strcmp(kind, "zeros")) st = jag_zeros(sizes, n, dtype, &out);
    else if (!strcmp(kind, "ones")) st = jag_ones(sizes, n, dtype, &out);
    else if (!strcmp(kind, "full")) st = jag_full(sizes, n, a, dtype, &out);
    else if (!strcmp(kind, "rand")) st = jag_rand_uniform(sizes, n, a, b, dtype, NULL, &out);
    else if (!strcmp(kind, "randn")) st = jag_rand_normal(sizes, n, a, b, dtype, NULL, &out);
    else {
        PyErr_Format(PyExc_ValueError, "unknown factory %s", kind);
        return NULL;
    }
    if (st) return raise_status(st);
    return wrap(out);
}

/* _like(kind, x[, value]): jag_<kind>_like (dense or nested; nested results
 * share x's offsets). */
static PyObject *m_like(PyObject *mod, PyObject *args) {
    (void)mod;
    const char *kind;
    PyObject *x;
    double value = 0;
    if (!PyArg_ParseTuple(args, "sO|d", &kind, &x, &value)) return NULL;
    jag_tensor *t = get_tensor(x, "input");
    if (!t) return NULL;
    jag_tensor *out = NULL;
    jag_status st;
    if (!strcmp(kind, "empty")) st = jag_empty_like(t, &out);
    else if (!strcmp(kind, "zeros")) st = jag_zeros_like(t, &out);
    else if (!strcmp(kind, "ones")) st = jag_ones_like(t, &out);
    else if (!strcmp(kind, "full")) st = jag_full_like(t, value, &out);
    else if (!strcmp(kind, "rand")) st = jag_rand_like(t, NULL, &out);
    else if (!strcmp(kind, "randn")) st = jag_randn_like(t, NULL, &out);
    else {
        PyErr_Format(PyExc_ValueError, "unknown factory %s_like", kind);
        return NULL;
    }
    if (st) return raise_status(st);
    return wrap(out);
}

static PyObject *m_arange(PyObject *mod, PyObject *args) {
    (void)mod;
    double start, end, step;
    PyObject *dt;
    if (!PyArg_ParseTuple(args, "dddO", &start, &end, &step, &dt)) return NULL;
    jag_dtype dtype;
    if (get_dtype(dt, &dtype)) return NULL;
    jag_tensor *out = NULL;
    jag_status st = jag_arange(start, end, step, dtype, &out);
    if (st) return raise_status(st);
    return wrap(out);
}

/* _from_buffer(bytes_like, shape, dtype): a copy of C-contiguous data. */
static PyObject *m_from_buffer(PyObject *mod, PyObject *args) {
    (void)mod;
    Py_buffer view;
    PyObject *shape, *dt;
    if (!PyArg_ParseTuple(args, "y*OO", &view, &shape, &dt)) return NULL;
    int64_t sizes[JAG_MAX_DIMS];
    int n = 0;
    jag_dtype dtype;
    PyObject *r = NULL;
    if (get_sizes(shape, sizes, &n, "tensor") || get_dtype(dt, &dtype)) goto done;
    int64_t numel = 1;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "negative size");
            goto done;
        }
        numel *= sizes[i];
    }
    if ((Py_ssize_t)(numel * (int64_t)jag_dtype_size(dtype)) != view.len) {
        PyErr_SetString(PyExc_ValueError, "buffer size does not match shape and dtype");
        goto done;
    }
    jag_tensor *out = NULL;
    jag_status st = jag_from_data(view.buf, sizes, n, dtype, &out);
    if (st) raise_status(st);
    else r = wrap(out);
done:
    PyBuffer_Release(&view);
    return r;
}

/* Boxed argument conversion for _op. Arrays live in `pool` (freed by the
 * caller). Returns 0 or -1 with an exception. */
typedef struct {
    int64_t *ints[16];
    jag_tensor **tens[16];
    int n_ints, n_tens;
} arg_pool;

static int box(PyObject *o, jag_value *v, arg_pool *pool, Py_ssize_t pos, const char *op) {
    if (o == Py_None) {
        v->kind = JAG_VAL_NONE;
        return 0;
    }
    if (is_tensor(o)) {
        jag_tensor *t = get_tensor(o, "argument");
        if (!t) return -1;
        v->kind = JAG_VAL_TENSOR;
        v->u.t = t;
        return 0;
    }
    if (PyBool_Check(o)) {
        v->kind = JAG_VAL_BOOL;
        v->u.b = (o == Py_True);
        return 0;
    }
    if (PyLong_Check(o)) {
        long long x = PyLong_AsLongLong(o);
        if (x == -1 && PyErr_Occurred()) return -1;
        v->kind = JAG_VAL_INT;
        v->u.i = (int64_t)x;
        return 0;
    }
    if (PyFloat_Check(o)) {
        v->kind = JAG_VAL_DOUBLE;
        v->u.d = PyFloat_AS_DOUBLE(o);
        return 0;
    }
    if (PyList_Check(o) || PyTuple_Check(o)) {
        PyObject *fast = PySequence_Fast(o, "sequence");
        if (!fast) return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
        if (n > INT32_MAX / 2) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_ValueError, "sequence too long");
            return -1;
        }
        int all_tensors = n > 0, all_ints = 1;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *it = PySequence_Fast_GET_ITEM(fast, i);
            if (!is_tensor(it)) all_tensors = 0;
            if (!PyLong_Check(it) || PyBool_Check(it)) all_ints = 0;
        }
        if (all_tensors) {
            if (pool->n_tens >= 16) goto too_many;
            jag_tensor **arr = malloc((size_t)n * sizeof *arr);
            if (!arr) {
                Py_DECREF(fast);
                PyErr_NoMemory();
                return -1;
            }
            pool->tens[pool->n_tens++] = arr;
            for (Py_ssize_t i = 0; i < n; i++) {
                arr[i] = get_tensor(PySequence_Fast_GET_ITEM(fast, i), "list entry");
                if (!arr[i]) {
                    Py_DECREF(fast);
                    return -1;
                }
            }
            v->kind = JAG_VAL_TENSORS;
            v->u.tensors.v = arr;
            v->u.tensors.n = (int)n;
        } else if (all_ints) {
            if (pool->n_ints >= 16) goto too_many;
            int64_t *arr = malloc((size_t)(n ? n : 1) * sizeof *arr);
            if (!arr) {
                Py_DECREF(fast);
                PyErr_NoMemory();
                return -1;
            }
            pool->ints[pool->n_ints++] = arr;
            for (Py_ssize_t i = 0; i < n; i++) {
                long long x = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
                if (x == -1 && PyErr_Occurred()) {
                    Py_DECREF(fast);
                    return -1;
                }
                arr[i] = (int64_t)x;
            }
            v->kind = JAG_VAL_INTS;
            v->u.ints.v = arr;
            v->u.ints.n = (int)n;
        } else {
            Py_DECREF(fast);
            PyErr_Format(PyExc_TypeError, "%s: argument %zd must be a list of ints or a list of tensors", op, pos);
            return -1;
        }
        Py_DECREF(fast);
        return 0;
    too_many:
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "too many list arguments");
        return -1;
    }
    PyErr_Format(PyExc_TypeError,
                 "%s: argument %zd has type %.100s; expected a jag.Tensor, int, float, bool, None or a list",
                 op, pos, Py_TYPE(o)->tp_name);
    return -1;
}

/* _op_rows(): every op of the table as (name, schema, doc or None, tags),
 * in id order: the package derives its op functions and their docs from
 * the table instead of keeping lists of names. */
static PyObject *m_op_rows(PyObject *mod, PyObject *unused) {
    (void)mod, (void)unused;
    PyObject *rows = PyList_New(0);
    for (jag_op_id id = 0; rows && jag_op_name(id); id++) {
        const char *doc = jag_op_doc(id);
        PyObject *row = Py_BuildValue("(ssNI)", jag_op_name(id), jag_op_schema(id),
                                      doc ? PyUnicode_FromString(doc) : Py_NewRef(Py_None), jag_op_tags(id));
        if (!row || PyList_Append(rows, row) < 0) Py_CLEAR(rows);
        Py_XDECREF(row);
    }
    return rows;
}

/* ------------------------------------------------------------------------ */
/* Calling ops: the generic entry _op and the hot paths beside it            */
/* ------------------------------------------------------------------------ */

/* Where the time of a small op goes from Python (bench/bench_python.py):
 * the interpreter's call, boxing, the name lookup, allocating and freeing
 * the result object. The entry points below are METH_FASTCALL (no argument
 * tuple), find an op id by the name object's address (one compare), box
 * only the arguments given, and the operators + - * / @ of TensorBase call
 * the op without a Python frame (nb_* slots). Every path ends in the same
 * jag_op_call, so results, gradients and error messages are those of
 * _op(name, *args); what the fast paths do not cover (scalars on the left,
 * lists, numpy arrays, bools) goes to the Python code that handled it
 * before (jag._binary, set by _set_binary_fallback). */

/* name -> op id. Ids never change (the op table only grows), so a hit is
 * final. First a direct-mapped cache keyed by the name object's address
 * (call sites pass the same interned constant each time; the cache holds a
 * reference, so an address cannot be reused by another object while it is
 * cached), then a dict by value, then jag_op_find (which compares names
 * one by one). Returns 0, or -1 with an exception. */
#define OP_CACHE_SIZE 256
static struct {
    PyObject *name;
    jag_op_id id;
    int n_out;
} op_cache[OP_CACHE_SIZE];
static PyObject *op_ids; /* str -> int, every name looked up so far */

static int op_lookup(PyObject *name_obj, jag_op_id *op, int *n_out) {
    size_t slot = ((uintptr_t)name_obj >> 4) % OP_CACHE_SIZE;
    if (op_cache[slot].name == name_obj) {
        *op = op_cache[slot].id;
        *n_out = op_cache[slot].n_out;
        return 0;
    }
    jag_op_id id;
    PyObject *cached = op_ids ? PyDict_GetItemWithError(op_ids, name_obj) : NULL;
    if (cached) {
        id = (jag_op_id)PyLong_AsLong(cached);
    } else {
        if (PyErr_Occurred()) return -1;
        const char *name = PyUnicode_AsUTF8(name_obj);
        if (!name) return -1;
        jag_status st = jag_op_find(name, &id);
        if (st) {
            raise_status(st);
            return -1;
        }
        PyObject *v = PyLong_FromLong(id);
        if (!v || (!op_ids && !(op_ids = PyDict_New())) || PyDict_SetItem(op_ids, name_obj, v) < 0) {
            Py_XDECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    Py_INCREF(name_obj);
    Py_XSETREF(op_cache[slot].name, name_obj);
    op_cache[slot].id = id;
    op_cache[slot].n_out = jag_op_num_outputs(id);
    *op = id;
    *n_out = op_cache[slot].n_out;
    return 0;
}

/* jag_op_call on boxed values and the result as Python: a tensor, or a
 * tuple of n_out tensors. */
static PyObject *call_boxed(jag_op_id op, int n_out, const jag_value *vals, int nvals) {
    if (n_out < 1 || n_out > 8) {
        PyErr_SetString(PyExc_RuntimeError, "op has an unexpected number of outputs");
        return NULL;
    }
    jagpy_clear_stashed();
    jag_tensor *outs[8] = {0};
    jag_status st = jag_op_call(op, vals, nvals, outs);
    if (st) return raise_status(st);
    if (n_out == 1) return wrap(outs[0]);
    PyObject *result = PyTuple_New(n_out);
    for (int i = 0; i < n_out; i++) {
        PyObject *w = wrap(outs[i]);
        if (!result || !w) {
            Py_XDECREF(w);
            continue; /* wrap stole outs[i] */
        }
        PyTuple_SET_ITEM(result, i, w);
    }
    if (result && PyErr_Occurred()) Py_CLEAR(result);
    return result;
}

/* The op `name_obj` on Python arguments args[0..n), boxed as _op boxes them. */
static PyObject *call_op(PyObject *name_obj, PyObject *const *args, Py_ssize_t n) {
    jag_op_id op;
    int n_out;
    if (op_lookup(name_obj, &op, &n_out)) return NULL;
    if (n > 32) {
        PyErr_SetString(PyExc_ValueError, "too many arguments");
        return NULL;
    }
    jag_value vals[32];
    arg_pool pool;
    pool.n_ints = pool.n_tens = 0;
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = args[i];
        memset(&vals[i], 0, sizeof vals[i]);
        if (Py_IS_TYPE(o, tensor_class) && ((TensorObject *)o)->t) { /* the common case first */
            vals[i].kind = JAG_VAL_TENSOR;
            vals[i].u.t = ((TensorObject *)o)->t;
        } else if (box(o, &vals[i], &pool, i, PyUnicode_AsUTF8(name_obj))) {
            goto done;
        }
    }
    result = call_boxed(op, n_out, vals, (int)n);
done:
    for (int i = 0; i < pool.n_ints; i++) free(pool.ints[i]);
    for (int i = 0; i < pool.n_tens; i++) free(pool.tens[i]);
    return result;
}

/* _op(name, *args): call any op through jag_op_find / jag_op_call. Returns a
 * tensor, or a tuple of tensors for ops with several outputs. */
static PyObject *m_op(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    (void)mod;
    if (kwnames && PyTuple_GET_SIZE(kwnames)) {
        PyErr_SetString(PyExc_TypeError, "_op() takes no keyword arguments");
        return NULL;
    }
    if (nargs < 1 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "_op(name: str, *args)");
        return NULL;
    }
    return call_op(args[0], args + 1, nargs - 1);
}

/* The name Python gives a type (type(x).__name__): tp_name after its last dot. */
static const char *type_name(PyTypeObject *tp) {
    const char *dot = strrchr(tp->tp_name, '.');
    return dot ? dot + 1 : tp->tp_name;
}

/* _unary(name, input): the body of the generated jag.<name> functions
 * (__init__.py, _make_unary): `input` must be a jag.Tensor (the TypeError
 * and its message are those of the Python check it replaces). */
static PyObject *m_unary(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "_unary(name: str, input)");
        return NULL;
    }
    if (jagpy_check_unary_input(args[0], args[1]) < 0) return NULL;
    return call_op(args[0], args + 1, 1);
}

int jagpy_check_unary_input(PyObject *name, PyObject *x) {
    if (PyObject_TypeCheck(x, tensor_class)) return 0;
    int ok = PyObject_IsInstance(x, (PyObject *)tensor_class); /* __instancecheck__, __class__ */
    if (ok < 0) return -1;
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "jag.%U: expected a jag.Tensor, got %s", name, type_name(Py_TYPE(x)));
        return -1;
    }
    return 0;
}

PyObject *jagpy_call_op(PyObject *name, PyObject *const *args, Py_ssize_t n) { return call_op(name, args, n); }

/* --- the operators of TensorBase ------------------------------------------ */

/* What the fast paths do not cover: jag._binary(name, a, b) (and
 * matmul(tensor(a), b) for "rmatmul"), set by __init__.py. */
static PyObject *binary_fallback;

static PyObject *m_set_binary_fallback(PyObject *mod, PyObject *fn) {
    (void)mod;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "_set_binary_fallback: expected a callable");
        return NULL;
    }
    Py_INCREF(fn);
    Py_XSETREF(binary_fallback, fn);
    Py_RETURN_NONE;
}

enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_POW, BIN_MATMUL, BIN_COUNT };
/* The fallback's name for each operator ("add_": add with alpha 1, as
 * _binary spells it) and the op it calls. */
static const char *const bin_fallback_names[BIN_COUNT] = {"add_", "sub", "mul", "div", "pow", "matmul"};
static const char *const bin_op_names[BIN_COUNT] = {"add", "sub", "mul", "div", "pow", "matmul"};
static PyObject *bin_fallback_strs[BIN_COUNT]; /* interned, made on first use */
static jag_op_id bin_ops[BIN_COUNT];
static int bin_ready;

static int bin_init(void) {
    for (int k = 0; k < BIN_COUNT; k++) {
        jag_status st = jag_op_find(bin_op_names[k], &bin_ops[k]);
        if (st) {
            raise_status(st);
            return -1;
        }
        if (!bin_fallback_strs[k] && !(bin_fallback_strs[k] = PyUnicode_InternFromString(bin_fallback_names[k])))
            return -1;
    }
    bin_ready = 1;
    return 0;
}

/* A Python int or float (exactly: bool and subclasses take the fallback) as a double. */
static int plain_scalar(PyObject *o, double *out) {
    if (PyFloat_CheckExact(o)) {
        *out = PyFloat_AS_DOUBLE(o);
        return 1;
    }
    if (PyLong_CheckExact(o)) {
        *out = PyLong_AsDouble(o); /* OverflowError as float(o) raises it */
        return *out == -1.0 && PyErr_Occurred() ? -1 : 1;
    }
    return 0;
}

static jag_tensor *tensor_of(PyObject *o) {
    return PyObject_TypeCheck(o, tensor_class) ? ((TensorObject *)o)->t : NULL;
}

/* a <op> b for the nb_* slots (** included): one operand at least is a
 * TensorBase.
 *   tensor op tensor    -> op(a, b)            (add: add(a, b, 1.0))
 *   tensor op int/float -> op(a, float(b))     (add: add(a, float(b), 1.0))
 *   int/float + tensor  -> add(b, float(a), 1.0)
 *   tensor @ anything   -> matmul(a, b), b boxed as _op boxes it
 *   anything else       -> the Python fallback (jag._binary) */
static PyObject *tensor_binary(PyObject *a, PyObject *b, int which) {
    if (!bin_ready && bin_init()) return NULL;
    jag_tensor *ta = tensor_of(a), *tb = tensor_of(b);
    jag_value v[3];
    memset(v, 0, sizeof v);
    double s;
    int r;
    if (which == BIN_MATMUL) {
        if (ta) return call_op(bin_fallback_strs[BIN_MATMUL], (PyObject *[]){a, b}, 2);
    } else if (ta && tb) {
        v[0].kind = v[1].kind = JAG_VAL_TENSOR;
        v[0].u.t = ta;
        v[1].u.t = tb;
        v[2].kind = JAG_VAL_DOUBLE;
        v[2].u.d = 1.0;
        return call_boxed(bin_ops[which], 1, v, which == BIN_ADD ? 3 : 2);
    } else if (ta || (tb && which == BIN_ADD)) {
        if ((r = plain_scalar(ta ? b : a, &s)) < 0) return NULL;
        if (r) {
            v[0].kind = JAG_VAL_TENSOR;
            v[0].u.t = ta ? ta : tb;
            v[1].kind = v[2].kind = JAG_VAL_DOUBLE;
            v[1].u.d = s;
            v[2].u.d = 1.0;
            return call_boxed(bin_ops[which], 1, v, which == BIN_ADD ? 3 : 2);
        }
    }
    if (!binary_fallback) Py_RETURN_NOTIMPLEMENTED; /* before __init__.py set it */
    PyObject *name = which == BIN_MATMUL ? PyUnicode_InternFromString("rmatmul") : Py_NewRef(bin_fallback_strs[which]);
    if (!name) return NULL;
    PyObject *res = PyObject_CallFunctionObjArgs(binary_fallback, name, a, b, NULL);
    Py_DECREF(name);
    return res;
}

static PyObject *Tensor_nb_add(PyObject *a, PyObject *b) { return tensor_binary(a, b, BIN_ADD); }
static PyObject *Tensor_nb_sub(PyObject *a, PyObject *b) { return tensor_binary(a, b, BIN_SUB); }
static PyObject *Tensor_nb_mul(PyObject *a, PyObject *b) { return tensor_binary(a, b, BIN_MUL); }
static PyObject *Tensor_nb_div(PyObject *a, PyObject *b) { return tensor_binary(a, b, BIN_DIV); }
static PyObject *Tensor_nb_matmul(PyObject *a, PyObject *b) { return tensor_binary(a, b, BIN_MATMUL); }

/* a ** b (a or b a tensor); the three-argument pow(a, b, m) is refused, as torch does */
static PyObject *Tensor_nb_pow(PyObject *a, PyObject *b, PyObject *m) {
    if (m != Py_None) {
        PyErr_SetString(PyExc_TypeError, "pow: a modulus (the third argument) is not supported for tensors");
        return NULL;
    }
    return tensor_binary(a, b, BIN_POW);
}

static PyNumberMethods Tensor_as_number = {
    .nb_add = Tensor_nb_add,
    .nb_subtract = Tensor_nb_sub,
    .nb_multiply = Tensor_nb_mul,
    .nb_true_divide = Tensor_nb_div,
    .nb_power = Tensor_nb_pow,
    .nb_matrix_multiply = Tensor_nb_matmul,
};

static PyObject *m_op_exists(PyObject *mod, PyObject *arg) {
    (void)mod;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    jag_op_id op;
    jag_status st = jag_op_find(name, &op);
    jag_clear_error();
    return PyBool_FromLong(st == JAG_OK);
}

static PyObject *m_nested_from_list(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *seq;
    int layout;
    if (!PyArg_ParseTuple(args, "Oi", &seq, &layout)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "nested_tensor needs a list of tensors");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > INT32_MAX) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "too many components");
        return NULL;
    }
    jag_tensor **items = malloc((size_t)(n ? n : 1) * sizeof *items);
    if (!items) {
        Py_DECREF(fast);
        return PyErr_NoMemory();
    }
    PyObject *r = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(items[i] = get_tensor(PySequence_Fast_GET_ITEM(fast, i), "nested_tensor component"))) goto done;
    if (layout != JAG_JAGGED && layout != JAG_STRIDED) {
        PyErr_SetString(PyExc_ValueError, "layout must be jag.jagged or jag.strided");
        goto done;
    }
    jag_tensor *out = NULL;
    jag_status st = jag_nested_from_list(items, (int)n, (jag_layout)layout, &out);
    if (st) raise_status(st);
    else r = wrap(out);
done:
    free(items);
    Py_DECREF(fast);
    return r;
}

static PyObject *m_nested_to_padded(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *nt, *size = Py_None;
    double padding;
    if (!PyArg_ParseTuple(args, "Od|O", &nt, &padding, &size)) return NULL;
    jag_tensor *t = get_tensor(nt, "nt");
    if (!t) return NULL;
    int64_t sizes[JAG_MAX_DIMS];
    int n = 0;
    if (size != Py_None && get_sizes(size, sizes, &n, "output_size")) return NULL;
    jag_tensor *out = NULL;
    jag_status st = jag_nested_to_padded(t, padding, size == Py_None ? NULL : sizes, n, &out);
    if (st) return raise_status(st);
    return wrap(out);
}

static PyObject *m_set_grad_enabled(PyObject *mod, PyObject *arg) {
    (void)mod;
    int b = PyObject_IsTrue(arg);
    if (b < 0) return NULL;
    return PyBool_FromLong(jag_set_grad_enabled(b != 0));
}

static PyObject *m_is_grad_enabled(PyObject *mod, PyObject *u) {
    (void)mod; (void)u;
    return PyBool_FromLong(jag_is_grad_enabled());
}

static PyObject *m_manual_seed(PyObject *mod, PyObject *arg) {
    (void)mod;
    unsigned long long s = PyLong_AsUnsignedLongLongMask(arg);
    if (PyErr_Occurred()) return NULL;
    jag_manual_seed((uint64_t)s);
    Py_RETURN_NONE;
}

/* _set_num_threads(n): n > 0 (the Python layer refuses others, as torch). */
static PyObject *m_set_num_threads(PyObject *mod, PyObject *arg) {
    (void)mod;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n <= 0 || n > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "set_num_threads: expected a positive number of threads, got %ld", n);
        return NULL;
    }
    jag_set_num_threads((int)n);
    Py_RETURN_NONE;
}

static PyObject *m_get_num_threads(PyObject *mod, PyObject *u) {
    (void)mod; (void)u;
    return PyLong_FromLong(jag_get_num_threads());
}

static PyObject *m_promote_types(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "OO", &a, &b)) return NULL;
    jag_dtype x, y;
    if (get_dtype(a, &x) || get_dtype(b, &y)) return NULL;
    return PyLong_FromLong((long)jag_promote_types(x, y));
}

/* gradcheck: call a Python function from jag_gradcheck. */
typedef struct {
    PyObject *fn;
    int py_error; /* a Python exception is pending */
} gc_ctx;

static jag_status gc_trampoline(jag_tensor *const *inputs, int n_inputs, jag_tensor **out, void *vctx) {
    gc_ctx *c = vctx;
    if (c->py_error) return JAG_EINVAL;
    PyObject *tup = PyTuple_New(n_inputs);
    if (!tup) goto pyerr;
    for (int i = 0; i < n_inputs; i++) {
        PyObject *w = wrap(jag_retain(inputs[i]));
        if (!w) {
            Py_DECREF(tup);
            goto pyerr;
        }
        PyTuple_SET_ITEM(tup, i, w);
    }
    PyObject *r = PyObject_Call(c->fn, tup, NULL);
    Py_DECREF(tup);
    if (!r) goto pyerr;
    if (!is_tensor(r) || !((TensorObject *)r)->t) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "gradcheck: the function must return a jag.Tensor");
        goto pyerr;
    }
    *out = jag_retain(((TensorObject *)r)->t);
    Py_DECREF(r);
    return JAG_OK;
pyerr:
    c->py_error = 1;
    return JAG_EINVAL;
}

static PyObject *m_gradcheck(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *fn, *inputs;
    double eps, atol, rtol;
    if (!PyArg_ParseTuple(args, "OOddd", &fn, &inputs, &eps, &atol, &rtol)) return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "gradcheck: fn must be callable");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(inputs, "gradcheck: inputs must be a sequence of tensors");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n < 1 || n > 64) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "gradcheck: 1 to 64 inputs");
        return NULL;
    }
    jag_tensor *ts[64];
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(ts[i] = get_tensor(PySequence_Fast_GET_ITEM(fast, i), "gradcheck input"))) {
            Py_DECREF(fast);
            return NULL;
        }
    gc_ctx c = {fn, 0};
    jag_status st = jag_gradcheck(gc_trampoline, &c, ts, (int)n, eps, atol, rtol);
    Py_DECREF(fast);
    if (c.py_error) return NULL; /* the Python exception is set */
    if (st) return raise_status(st);
    Py_RETURN_TRUE;
}

/* Test probes: a float64 tensor over malloc'd memory whose release callback
 * counts, so tests can see exactly when jag frees a storage (libjag exports
 * no live-tensor counter). */
static long blobs_made, blobs_released;

static void blob_release(void *ctx, void *data) {
    (void)ctx;
    free(data);
    blobs_released++;
}

static PyObject *m_test_blob(PyObject *mod, PyObject *arg) {
    (void)mod;
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1 || n > (1 << 20)) {
        PyErr_SetString(PyExc_ValueError, "_test_blob: 1 <= n <= 2**20");
        return NULL;
    }
    double *data = malloc((size_t)n * sizeof *data);
    if (!data) return PyErr_NoMemory();
    for (long long i = 0; i < n; i++) data[i] = (double)i;
    int64_t size = n;
    jag_tensor *out = NULL;
    jag_status st = jag_from_blob(data, &size, NULL, 1, JAG_FLOAT64, blob_release, NULL, &out);
    if (st) {
        free(data);
        return raise_status(st);
    }
    blobs_made++;
    return wrap(out);
}

static PyObject *m_test_blob_counts(PyObject *mod, PyObject *u) {
    (void)mod; (void)u;
    return Py_BuildValue("(ll)", blobs_made, blobs_released);
}

/* ------------------------------------------------------------------------ */
/* Shared with the other C files of the extension (_jagpy.h)                 */
/* ------------------------------------------------------------------------ */

PyObject *jagpy_wrap(jag_tensor *t) { return wrap(t); }
int jagpy_is_tensor(PyObject *o) { return is_tensor(o); }
jag_tensor *jagpy_get_tensor(PyObject *o, const char *what) { return get_tensor(o, what); }
PyObject *jagpy_raise_status(jag_status st) { return raise_status(st); }
PyTypeObject *jagpy_tensor_base_type(void) { return &TensorBase_Type; }

static PyMethodDef module_methods[] = {
    {"_set_tensor_class", m_set_tensor_class, METH_O, NULL},
    {"_factory", m_factory, METH_VARARGS, NULL},
    {"_arange", m_arange, METH_VARARGS, NULL},
    {"_like", m_like, METH_VARARGS, NULL},
    {"_from_buffer", m_from_buffer, METH_VARARGS, NULL},
    {"_op", (PyCFunction)(void (*)(void))m_op, METH_FASTCALL | METH_KEYWORDS, "call a jag op by name with boxed arguments"},
    {"_unary", (PyCFunction)(void (*)(void))m_unary, METH_FASTCALL, "_unary(name, input): jag.<name>(input) of a unary op"},
    {"_set_binary_fallback", m_set_binary_fallback, METH_O, NULL},
    {"_op_rows", m_op_rows, METH_NOARGS, "every op as (name, schema, doc, tags), in id order"},
    {"_op_exists", m_op_exists, METH_O, NULL},
    {"_nested_from_list", m_nested_from_list, METH_VARARGS, NULL},
    {"_nested_to_padded", m_nested_to_padded, METH_VARARGS, NULL},
    {"_set_grad_enabled", m_set_grad_enabled, METH_O, NULL},
    {"_is_grad_enabled", m_is_grad_enabled, METH_NOARGS, NULL},
    {"_manual_seed", m_manual_seed, METH_O, NULL},
    {"_set_num_threads", m_set_num_threads, METH_O, NULL},
    {"_get_num_threads", m_get_num_threads, METH_NOARGS, NULL},
    {"_promote_types", m_promote_types, METH_VARARGS, NULL},
    {"_gradcheck", m_gradcheck, METH_VARARGS, NULL},
    {"_test_blob", m_test_blob, METH_O, NULL},
    {"_test_blob_counts", m_test_blob_counts, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "jag._C", "CPython bindings of libjag (see jag/__init__.py)", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

/* jag._C._save / _load (_io.c) */
int jag_py_io_init(PyObject *module, PyObject *(*wrap)(jag_tensor *), jag_tensor *(*get)(PyObject *, const char *),
                   PyObject *(*raise)(jag_status));

PyMODINIT_FUNC PyInit__C(void) {
    TensorBase_Type.tp_as_buffer = &jagpy_buffer_procs;
    TensorBase_Type.tp_as_number = &Tensor_as_number;
    if (PyType_Ready(&TensorBase_Type) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    Py_INCREF(&TensorBase_Type);
    if (PyModule_AddObject(m, "TensorBase", (PyObject *)&TensorBase_Type) < 0) {
        Py_DECREF(&TensorBase_Type);
        Py_DECREF(m);
        return NULL;
    }
#define ADD_INT(name, v)                                                      \
    if (PyModule_AddIntConstant(m, name, v) < 0) {                            \
        Py_DECREF(m);                                                         \
        return NULL;                                                          \
    }
    ADD_INT("FLOAT32", JAG_FLOAT32);
    ADD_INT("FLOAT64", JAG_FLOAT64);
    ADD_INT("INT32", JAG_INT32);
    ADD_INT("INT64", JAG_INT64);
    ADD_INT("BOOL", JAG_BOOL);
    ADD_INT("FLOAT16", JAG_FLOAT16);
    ADD_INT("BFLOAT16", JAG_BFLOAT16);
    ADD_INT("DENSE", JAG_DENSE);
    ADD_INT("JAGGED", JAG_JAGGED);
    ADD_INT("STRIDED", JAG_STRIDED);
    if (jag_py_io_init(m, wrap, get_tensor, raise_status) < 0 ||
        PyModule_AddStringConstant(m, "VERSION", JAG_VERSION_STRING) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    /* the bindings that live in their own files */
    if (jagpy_interop_init(m) < 0 || jagpy_library_init(m) < 0 || jagpy_function_init(m) < 0 ||
        jagpy_factory_init(m) < 0 || jagpy_nn_init(m) < 0 || jagpy_trace_init(m) < 0 ||
        jagpy_optim_init(m) < 0 || jagpy_dist_init(m) < 0 || jagpy_opfunc_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
