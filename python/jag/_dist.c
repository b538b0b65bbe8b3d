/*
 * _dist.c — jag.distributed's C functions (jag.h): the process group,
 * the collectives on dense and nested tensors, and the DDP gradient
 * averaging, added to jag._C by jagpy_dist_init. A libjag built without
 * MPI has the same functions, failing with JAG_ENOTIMPL: then
 * jag.distributed.is_available() is False.
 */
#include "_jagpy.h"


static PyObject *d_is_available(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused)) { return PyBool_FromLong(jag_dist_is_available()); }
static PyObject *d_is_initialized(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused)) {
    return PyBool_FromLong(jag_dist_is_initialized());
}

static PyObject *d_init(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused)) {
    jag_status st = jag_dist_init();
    if (st) return jagpy_raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *d_finalize(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused)) {
    jag_status st = jag_dist_finalize();
    if (st) return jagpy_raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *d_rank(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused)) { return PyLong_FromLong(jag_dist_rank()); }
static PyObject *d_world_size(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused)) { return PyLong_FromLong(jag_dist_world_size()); }

static PyObject *d_barrier(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused)) {
    jag_status st;
    Py_BEGIN_ALLOW_THREADS st = jag_dist_barrier();
    Py_END_ALLOW_THREADS if (st) return jagpy_raise_status(st);
    Py_RETURN_NONE;
}

/* _dist_all_reduce(tensor, op) / _dist_broadcast(tensor, src): in place */
static PyObject *d_all_reduce(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *o;
    int op;
    if (!PyArg_ParseTuple(args, "Oi", &o, &op)) return NULL;
    jag_tensor *t = jagpy_get_tensor(o, "all_reduce: tensor");
    if (!t) return NULL;
    jag_status st = jag_dist_all_reduce(t, (jag_reduce_op)op);
    if (st) return jagpy_raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *d_broadcast(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *o;
    int src;
    if (!PyArg_ParseTuple(args, "Oi", &o, &src)) return NULL;
    jag_tensor *t = jagpy_get_tensor(o, "broadcast: tensor");
    if (!t) return NULL;
    jag_status st = jag_dist_broadcast(t, src);
    if (st) return jagpy_raise_status(st);
    Py_RETURN_NONE;
}

/* _dist_all_gather(tensor_list, tensor): every rank's tensor copied into
 * tensor_list[r] (torch.distributed.all_gather; dense tensors). */
static PyObject *d_all_gather(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *list, *o;
    if (!PyArg_ParseTuple(args, "OO", &list, &o)) return NULL;
    jag_tensor *t = jagpy_get_tensor(o, "all_gather: tensor");
    if (!t) return NULL;
    int p = jag_dist_world_size();
    if (!PyList_Check(list) || (p > 0 && PyList_GET_SIZE(list) != p))
        return PyErr_Format(PyExc_ValueError, "all_gather: tensor_list must be a list of world_size (%d) tensors", p);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++)
        if (!jagpy_get_tensor(PyList_GET_ITEM(list, i), "all_gather: tensor_list")) return NULL;
    jag_tensor *outs[256] = {NULL};
    jag_status st = p > 256 ? JAG_ENOTIMPL : jag_dist_all_gather(t, outs, p);
    bool prev = jag_set_grad_enabled(false);
    for (int r = 0; !st && r < p; r++) st = jag_copy_(jagpy_get_tensor(PyList_GET_ITEM(list, r), "all_gather"), outs[r]);
    jag_set_grad_enabled(prev);
    for (int r = 0; r < p && r < 256; r++) jag_release(outs[r]);
    if (st) return jagpy_raise_status(st);
    Py_RETURN_NONE;
}

/* _dist_reduce_scatter(output, input, op): torch's reduce_scatter_tensor */
static PyObject *d_reduce_scatter(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *oo, *io;
    int op;
    if (!PyArg_ParseTuple(args, "OOi", &oo, &io, &op)) return NULL;
    jag_tensor *out = jagpy_get_tensor(oo, "reduce_scatter_tensor: output");
    jag_tensor *in = out ? jagpy_get_tensor(io, "reduce_scatter_tensor: input") : NULL;
    if (!in) return NULL;
    jag_tensor *res = NULL;
    jag_status st = jag_dist_reduce_scatter(in, (jag_reduce_op)op, &res);
    bool prev = jag_set_grad_enabled(false);
    if (!st) st = jag_copy_(out, res);
    jag_set_grad_enabled(prev);
    jag_release(res);
    if (st) return jagpy_raise_status(st);
    Py_RETURN_NONE;
}

/* DDP: a capsule around jag_ddp over a list of parameters */
static void ddp_capsule_free(PyObject *cap) { jag_ddp_free(PyCapsule_GetPointer(cap, "jag.ddp")); }

static PyObject *d_ddp_new(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *list;
    Py_ssize_t bucket_bytes;
    if (!PyArg_ParseTuple(args, "On", &list, &bucket_bytes)) return NULL;
    PyObject *seq = PySequence_Fast(list, "DistributedDataParallel: parameters must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    jag_tensor **params = PyMem_Calloc(n ? (size_t)n : 1, sizeof *params);
    PyObject *res = NULL;
    if (!params) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(params[i] = jagpy_get_tensor(PySequence_Fast_GET_ITEM(seq, i), "DistributedDataParallel: parameter")))
            goto done;
    jag_ddp *ddp = NULL;
    jag_status st = jag_ddp_new(params, (int)n, (size_t)(bucket_bytes > 0 ? bucket_bytes : 0), &ddp);
    if (st) {
        jagpy_raise_status(st);
        goto done;
    }
    res = PyCapsule_New(ddp, "jag.ddp", ddp_capsule_free);
    if (!res) jag_ddp_free(ddp);
done:
    PyMem_Free(params);
    Py_DECREF(seq);
    return res;
}

static PyObject *d_ddp_sync(PyObject *Py_UNUSED(self), PyObject *cap) {
    jag_ddp *ddp = PyCapsule_GetPointer(cap, "jag.ddp");
    if (!ddp) return NULL;
    jag_status st = jag_ddp_sync_grads(ddp);
    if (st) return jagpy_raise_status(st);
    Py_RETURN_NONE;
}

/* _dist_ddp_set_require_sync(ddp, flag): no_sync */
static PyObject *d_ddp_set_require_sync(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *cap;
    int flag;
    if (!PyArg_ParseTuple(args, "Op", &cap, &flag)) return NULL;
    jag_ddp *ddp = PyCapsule_GetPointer(cap, "jag.ddp");
    if (!ddp) return NULL;
    jag_status st = jag_ddp_set_require_sync(ddp, flag != 0);
    if (st) return jagpy_raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *d_ddp_buckets(PyObject *Py_UNUSED(self), PyObject *cap) {
    jag_ddp *ddp = PyCapsule_GetPointer(cap, "jag.ddp");
    if (!ddp) return NULL;
    int nb = jag_ddp_num_buckets(ddp);
    PyObject *out = PyList_New(nb > 0 ? nb : 0);
    for (int b = 0; out && b < nb; b++) {
        const int *idx = NULL;
        int n = 0;
        jag_ddp_bucket_params(ddp, b, &idx, &n);
        PyObject *l = PyList_New(n);
        if (!l) return Py_DECREF(out), NULL;
        for (int k = 0; k < n; k++) PyList_SET_ITEM(l, k, PyLong_FromLong(idx[k]));
        PyList_SET_ITEM(out, b, l);
    }
    return out;
}

static PyMethodDef dist_methods[] = {
    {"_dist_is_available", d_is_available, METH_NOARGS, NULL},
    {"_dist_is_initialized", d_is_initialized, METH_NOARGS, NULL},
    {"_dist_init", d_init, METH_NOARGS, NULL},
    {"_dist_finalize", d_finalize, METH_NOARGS, NULL},
    {"_dist_rank", d_rank, METH_NOARGS, NULL},
    {"_dist_world_size", d_world_size, METH_NOARGS, NULL},
    {"_dist_barrier", d_barrier, METH_NOARGS, NULL},
    {"_dist_all_reduce", d_all_reduce, METH_VARARGS, NULL},
    {"_dist_broadcast", d_broadcast, METH_VARARGS, NULL},
    {"_dist_all_gather", d_all_gather, METH_VARARGS, NULL},
    {"_dist_reduce_scatter", d_reduce_scatter, METH_VARARGS, NULL},
    {"_dist_ddp_new", d_ddp_new, METH_VARARGS, NULL},
    {"_dist_ddp_sync", d_ddp_sync, METH_O, NULL},
    {"_dist_ddp_buckets", d_ddp_buckets, METH_O, NULL},
    {"_dist_ddp_set_require_sync", d_ddp_set_require_sync, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int jagpy_dist_init(PyObject *m) { return PyModule_AddFunctions(m, dist_methods); }
