/*
 * _function.c — jag.autograd.Function over jag_function_apply.
 *
 * The Python layer (autograd.py) runs the user's forward with grad mode off
 * and then calls _function_record(ctx, args, outputs), which records one
 * custom-function node through jag_function_apply: its forward callback
 * hands jag fresh tensors sharing the outputs' data (so that jag attaches
 * the node to new objects, never to an input or to a nested tensor's inner
 * values), and keeps the Python ctx alive for backward through a saved
 * zero-size tensor whose release callback drops the ctx reference. The
 * ctx's address is also kept in the node's free-form values. backward calls
 * ctx._run_backward(*grad_outputs) (autograd.py: ctx._cls.backward(ctx, ...)
 * with None for outputs marked non-differentiable) with the GIL and maps
 * the returned gradients back to the tensor arguments.
 *
 * What the ctx holds (saved tensors, attributes) is ordinary Python state;
 * the node owns the ctx, and the graph is freed after backward (unless
 * retain_graph) or with its outputs.
 */
#include "_jagpy.h"

#include <string.h>

/* Node names must outlive the nodes: interned here for good. */
static PyObject *names;

static const char *node_name(PyObject *pyctx) {
    PyObject *cls = PyObject_GetAttrString(pyctx, "_cls");
    if (!cls) {
        PyErr_Clear();
        return "Function";
    }
    PyObject *qn = PyObject_GetAttrString(cls, "__qualname__");
    Py_DECREF(cls);
    if (!qn || !PyUnicode_Check(qn)) {
        Py_XDECREF(qn);
        PyErr_Clear();
        return "Function";
    }
    if (!names && !(names = PyDict_New())) {
        Py_DECREF(qn);
        PyErr_Clear();
        return "Function";
    }
    PyObject *kept = PyDict_SetDefault(names, qn, qn);
    Py_DECREF(qn);
    const char *s = kept ? PyUnicode_AsUTF8(kept) : NULL;
    if (!s) PyErr_Clear();
    return s ? s : "Function";
}

typedef struct {
    PyObject *pyctx;
    jag_tensor *outs[4];
    int n_out, n_in;
} record_state;

/* The node's free-form values: [0] the ctx's address, [1] the number of
 * tensor inputs, [2] the number of outputs (kept in C: backward must not
 * trust attributes Python code can change). */

static void release_ctx(void *ctx, void *data) {
    (void)data;
    if (!Py_IsInitialized()) return;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF((PyObject *)ctx);
    PyGILState_Release(g);
}

static jag_status record_forward(jag_autograd_ctx *actx, jag_tensor *const *inputs, int n_inputs, jag_tensor **outs) {
    (void)inputs, (void)n_inputs;
    record_state *s = jag_autograd_user(actx);
    jag_tensor *made[4] = {0};
    jag_status st = JAG_OK;
    for (int i = 0; !st && i < s->n_out; i++) st = jag_detach(s->outs[i], &made[i]);
    /* the ctx lives as long as the node: a saved tensor owns one reference */
    static double anchor;
    int64_t zero = 0;
    jag_tensor *keep = NULL;
    if (!st) st = jag_from_blob(&anchor, &zero, NULL, 1, JAG_FLOAT64, release_ctx, s->pyctx, &keep);
    if (!st) {
        Py_INCREF(s->pyctx); /* given back by release_ctx */
        st = jag_autograd_save(actx, &keep, 1);
        jag_release(keep);
    }
    if (st) {
        for (int i = 0; i < 4; i++) jag_release(made[i]);
        return st;
    }
    double *vals = jag_autograd_values(actx);
    memcpy(&vals[0], &s->pyctx, sizeof s->pyctx);
    vals[1] = s->n_in;
    vals[2] = s->n_out;
    for (int i = 0; i < s->n_out; i++) outs[i] = made[i];
    return JAG_OK;
}

/* Python values for the n_args positions of the original call: which are
 * tensors is in ctx._tensor_positions. */
static jag_status record_backward(jag_autograd_ctx *actx, jag_tensor *const *grad_outputs, jag_tensor **grad_inputs) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *pyctx;
    const double *vals = jag_autograd_values(actx);
    memcpy(&pyctx, &vals[0], sizeof pyctx);
    int n_in = (int)vals[1];
    long n_out = (long)vals[2];
    PyObject *positions = NULL, *cls = NULL, *bw = NULL, *args = NULL, *r = NULL, *fast = NULL;
    jag_tensor *got[64] = {0};
    int n_tensors = 0;
    positions = PyObject_GetAttrString(pyctx, "_tensor_positions");
    cls = PyObject_GetAttrString(pyctx, "_cls");
    if (!positions || !cls) goto fail;
    if (!PyTuple_Check(positions) || PyTuple_GET_SIZE(positions) != n_in) {
        PyErr_SetString(PyExc_RuntimeError, "autograd.Function: ctx._tensor_positions was changed");
        goto fail;
    }
    /* ctx._run_backward(*grads) calls cls.backward(ctx, ...) with a gradient
     * (None for outputs marked non-differentiable) per forward output */
    bw = PyObject_GetAttrString(pyctx, "_run_backward");
    if (!bw) goto fail;
    args = PyTuple_New(n_out);
    if (!args) goto fail;
    for (long i = 0; i < n_out; i++) {
        PyObject *x = grad_outputs[i] ? jagpy_wrap(jag_retain(grad_outputs[i])) : Py_NewRef(Py_None);
        if (!x) goto fail;
        PyTuple_SET_ITEM(args, i, x);
    }
    r = PyObject_Call(bw, args, NULL);
    if (!r) goto fail;
    long n_args = 0;
    {
        PyObject *na = PyObject_GetAttrString(pyctx, "_n_args");
        if (!na) goto fail;
        n_args = PyLong_AsLong(na);
        Py_DECREF(na);
        if (n_args < 0 && PyErr_Occurred()) goto fail;
    }
    if (jagpy_is_tensor(r) || r == Py_None) {
        fast = PyTuple_Pack(1, r);
    } else if (PyTuple_Check(r) || PyList_Check(r)) {
        fast = PySequence_Tuple(r);
    } else {
        PyErr_Format(PyExc_TypeError, "Function.backward returned %.100s; expected a jag.Tensor, None or a tuple of them",
                     Py_TYPE(r)->tp_name);
        goto fail;
    }
    if (!fast) goto fail;
    if (PyTuple_GET_SIZE(fast) != n_args) {
        PyErr_Format(PyExc_RuntimeError,
                     "function backward returned an incorrect number of gradients (expected %ld, got %zd)", n_args,
                     PyTuple_GET_SIZE(fast));
        goto fail;
    }
    n_tensors = (int)PyTuple_GET_SIZE(positions);
    if (n_tensors > 64) goto fail;
    for (int k = 0; k < n_tensors; k++) {
        long pos = PyLong_AsLong(PyTuple_GET_ITEM(positions, k));
        if (pos < 0 || pos >= n_args) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "bad tensor position");
            goto fail;
        }
        PyObject *gk = PyTuple_GET_ITEM(fast, pos);
        if (gk == Py_None || !jag_autograd_needs_input_grad(actx, k)) continue;
        if (!jagpy_is_tensor(gk)) {
            PyErr_Format(PyExc_TypeError, "function backward: the gradient of argument %ld is %.100s, expected a "
                         "jag.Tensor or None", pos, Py_TYPE(gk)->tp_name);
            goto fail;
        }
        if (!(got[k] = jagpy_get_tensor(gk, "gradient"))) goto fail;
    }
    for (int k = 0; k < n_tensors; k++) grad_inputs[k] = got[k] ? jag_retain(got[k]) : NULL;
    Py_DECREF(positions), Py_DECREF(cls), Py_DECREF(bw), Py_DECREF(args), Py_DECREF(r);
    Py_DECREF(fast);
    PyGILState_Release(g);
    return JAG_OK;
fail:
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "autograd.Function: malformed ctx in backward");
    jagpy_stash_exception();
    Py_XDECREF(positions), Py_XDECREF(cls), Py_XDECREF(bw), Py_XDECREF(args), Py_XDECREF(r);
    Py_XDECREF(fast);
    PyGILState_Release(g);
    return JAG_EINVAL;
}

/* _function_record(ctx, inputs, outputs) -> tuple of outputs attached to a
 * new node. inputs: the tensor arguments (in order); outputs: 1..4 tensors
 * computed by forward. ctx carries _cls, _n_args and _tensor_positions (set
 * by autograd.py). */
static PyObject *m_function_record(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *pyctx, *inputs, *outputs;
    if (!PyArg_ParseTuple(args, "OO!O!", &pyctx, &PyTuple_Type, &inputs, &PyTuple_Type, &outputs)) return NULL;
    Py_ssize_t n_in = PyTuple_GET_SIZE(inputs), n_out = PyTuple_GET_SIZE(outputs);
    if (n_out < 1 || n_out > 4) {
        PyErr_Format(PyExc_ValueError, "autograd.Function: forward must return 1 to 4 tensors, got %zd", n_out);
        return NULL;
    }
    if (n_in > 64) {
        PyErr_Format(PyExc_ValueError, "autograd.Function: at most 64 tensor arguments, got %zd", n_in);
        return NULL;
    }
    jag_tensor *in[64];
    for (Py_ssize_t i = 0; i < n_in; i++)
        if (!(in[i] = jagpy_get_tensor(PyTuple_GET_ITEM(inputs, i), "autograd.Function input"))) return NULL;
    record_state s = {pyctx, {0}, (int)n_out, (int)n_in};
    for (Py_ssize_t i = 0; i < n_out; i++) {
        PyObject *o = PyTuple_GET_ITEM(outputs, i);
        if (!jagpy_is_tensor(o)) {
            PyErr_Format(PyExc_TypeError, "autograd.Function: forward output %zd is %.100s, expected a jag.Tensor", i,
                         Py_TYPE(o)->tp_name);
            return NULL;
        }
        if (!(s.outs[i] = jagpy_get_tensor(o, "forward output"))) return NULL;
    }
    jag_function_def def = {
        .name = node_name(pyctx),
        .n_outputs = (int)n_out,
        .forward = record_forward,
        .backward = record_backward,
        .user = &s, /* read by record_forward only; backward finds the ctx in the node's values */
    };
    jag_tensor *outs[4] = {0};
    jagpy_clear_stashed();
    jag_status st = jag_function_apply(&def, in, (int)n_in, outs);
    if (st) return jagpy_raise_status(st);
    PyObject *r = PyTuple_New(n_out);
    for (Py_ssize_t i = 0; i < n_out; i++) {
        PyObject *w = r ? jagpy_wrap(outs[i]) : (jag_release(outs[i]), NULL);
        if (r && !w) Py_CLEAR(r);
        else if (r) PyTuple_SET_ITEM(r, i, w);
    }
    return r;
}

static PyMethodDef function_methods[] = {
    {"_function_record", m_function_record, METH_VARARGS,
     "_function_record(ctx, inputs, outputs): record a custom autograd node over computed outputs"},
    {NULL, NULL, 0, NULL},
};

int jagpy_function_init(PyObject *m) { return PyModule_AddFunctions(m, function_methods); }
