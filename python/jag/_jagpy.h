/*
 * _jagpy.h — internal header shared by the C files of the jag._C extension
 * (_C.c, _interop.c, _library.c, _function.c, _factory.c, _nn.c). Not
 * installed, not public.
 */
#ifndef JAGPY_H
#define JAGPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <jag.h>

/* The Python object of a jag tensor (jag._C.TensorBase and subclasses). */
typedef struct {
    PyObject_HEAD
    jag_tensor *t;
    PyObject *weakreflist; /* weakref support (the grad hooks hold one) */
} jagpy_tensor_object;

/* --- defined in _C.c ------------------------------------------------------ */

/* A new Python tensor owning `t` (the reference is stolen, also on failure). */
PyObject *jagpy_wrap(jag_tensor *t);
/* True when `o` is a jag tensor object. */
int jagpy_is_tensor(PyObject *o);
/* The jag tensor of `o` (borrowed), or NULL with a TypeError naming `what`. */
jag_tensor *jagpy_get_tensor(PyObject *o, const char *what);
/* Set the Python exception for a failed jag call (the pending Python
 * exception of a Python callback, if one is stashed, else one built from
 * jag_last_error()); returns NULL. */
PyObject *jagpy_raise_status(jag_status st);
/* The TensorBase type. */
PyTypeObject *jagpy_tensor_base_type(void);
/* _op(name, *args): the op `name` (a str) on the Python arguments
 * args[0..n), boxed as _op boxes them; a new reference, or NULL with an
 * exception. */
PyObject *jagpy_call_op(PyObject *name, PyObject *const *args, Py_ssize_t n);
/* 0 when x is a jag.Tensor, else -1 with the TypeError of jag.<name>
 * (_unary's check). */
int jagpy_check_unary_input(PyObject *name, PyObject *x);

/* --- _library.c: Python callbacks called from C --------------------------- */

/* A Python callback (a kernel, a decomposition, an autograd Function's
 * forward or backward) that raised stashes its exception here before
 * returning a failure status to jag; jagpy_raise_status restores it, so the
 * caller sees the original exception. One slot per thread. */
void jagpy_stash_exception(void);
/* Restore the stashed exception as the current one; 1 if there was one. */
int jagpy_restore_exception(void);
/* Drop a stashed exception (a new top-level call begins). */
void jagpy_clear_stashed(void);
/* Boxed C arguments as a new tuple of Python values (tensors are wrapped
 * with new references; detach: as new tensors sharing the data without the
 * autograd state). NULL with an exception on failure. */
PyObject *jagpy_unbox_args(const jag_value *args, int nargs, int detach);
/* Python results (a tensor, or a tuple/list of n tensors) into n new
 * references; -1 with an exception (nothing written) on failure. */
int jagpy_results_to_outs(PyObject *r, int n, jag_tensor **outs, const char *who);

/* --- module setup: each file adds its functions to the module ------------ */
int jagpy_interop_init(PyObject *m);  /* _interop.c: DLPack */
int jagpy_library_init(PyObject *m);  /* _library.c: custom ops, decompositions */
int jagpy_function_init(PyObject *m); /* _function.c: autograd.Function */
int jagpy_factory_init(PyObject *m);  /* _factory.c: jag.Generator, meta tensors */
int jagpy_nn_init(PyObject *m);       /* _nn.c: dropout, clamp, losses */
int jagpy_trace_init(PyObject *m);    /* _trace.c: jag.trace, jag.compile */
int jagpy_optim_init(PyObject *m);    /* _optim.c: jag.optim's fused steps, nn.Parameter */
int jagpy_dist_init(PyObject *m);     /* _dist.c: jag.distributed */
int jagpy_opfunc_init(PyObject *m);   /* _opfunc.c: jag._C.OpFunction */
/* The buffer protocol of TensorBase (set before PyType_Ready). */
extern PyBufferProcs jagpy_buffer_procs;

#endif
