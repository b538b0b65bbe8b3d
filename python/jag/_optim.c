/*
 * _optim.c — the bindings of jag.optim and jag.nn: one C call per
 * parameter group for the fused optimizer steps (jag_optim_sgd_update,
 * jag_optim_adam_update), clip_grad_norm_, and nn.Parameter's constructor
 * (a detached alias of a tensor as an object of the Parameter class).
 */
#include "_jagpy.h"

#include <math.h>

/* The jag tensors of a sequence of n jag tensors (None allowed when
 * `none_ok`: a NULL entry). Returns a malloc'd array (n >= 1 entries) or
 * NULL with an exception. `fast` keeps the items alive. */
static jag_tensor **tensor_list(PyObject *fast, Py_ssize_t n, int none_ok, const char *what) {
    if (PySequence_Fast_GET_SIZE(fast) != n) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd entries, got %zd", what, n, PySequence_Fast_GET_SIZE(fast));
        return NULL;
    }
    jag_tensor **v = calloc((size_t)(n > 0 ? n : 1), sizeof *v);
    if (!v) return (jag_tensor **)PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        if (o == Py_None && none_ok) continue;
        if (!(v[i] = jagpy_get_tensor(o, what))) {
            free(v);
            return NULL;
        }
    }
    return v;
}

/* _sgd_step(params, grads, momentum_buffers, lr, momentum, dampening,
 * weight_decay, nesterov) -> list of momentum buffers (the new ones where
 * the list had None; all None when momentum == 0). */
static PyObject *m_sgd_step(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *ps, *gs, *bs;
    double lr, mom, damp, wd;
    int nest;
    if (!PyArg_ParseTuple(args, "OOOddddp", &ps, &gs, &bs, &lr, &mom, &damp, &wd, &nest)) return NULL;
    PyObject *fp = PySequence_Fast(ps, "_sgd_step: params must be a sequence");
    PyObject *fg = fp ? PySequence_Fast(gs, "_sgd_step: grads must be a sequence") : NULL;
    PyObject *fb = fg ? PySequence_Fast(bs, "_sgd_step: momentum_buffers must be a sequence") : NULL;
    PyObject *res = NULL;
    jag_tensor **p = NULL, **g = NULL, **b = NULL;
    if (!fb) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fp);
    if (n > 1 << 30) {
        PyErr_SetString(PyExc_ValueError, "_sgd_step: too many params");
        goto done;
    }
    if (!(p = tensor_list(fp, n, 0, "_sgd_step: params")) || !(g = tensor_list(fg, n, 1, "_sgd_step: grads")) ||
        !(b = tensor_list(fb, n, 1, "_sgd_step: momentum_buffers")))
        goto done;
    int *was_none = calloc((size_t)(n > 0 ? n : 1), sizeof *was_none);
    if (!was_none) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) was_none[i] = b[i] == NULL;
    jag_status st;
    st = jag_optim_sgd_update(p, g, b, (int)n, lr, mom, damp, wd, nest != 0);
    if (st) {
        free(was_none);
        jagpy_raise_status(st);
        goto done;
    }
    res = PyList_New(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = NULL;
        if (was_none[i] && b[i]) {
            o = res ? jagpy_wrap(b[i]) : NULL; /* takes the new reference */
            if (!res) jag_release(b[i]);
        } else if (res) {
            o = b[i] ? PySequence_Fast_GET_ITEM(fb, i) : Py_None;
            Py_INCREF(o);
        }
        if (res && !o) Py_CLEAR(res);
        else if (res) PyList_SET_ITEM(res, i, o);
    }
    free(was_none);
done:
    free(p), free(g), free(b);
    Py_XDECREF(fp), Py_XDECREF(fg), Py_XDECREF(fb);
    return res;
}

/* _adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs or None,
 * steps, lr, beta1, beta2, eps, weight_decay, amsgrad, decoupled): steps are
 * the params' one-element step tensors (torch's state["step"]), each one
 * more after the step. */
static PyObject *m_adam_step(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *ps, *gs, *ms, *vs, *xs, *ss;
    double lr, b1, b2, eps, wd;
    int ams, dec;
    if (!PyArg_ParseTuple(args, "OOOOOOdddddpp", &ps, &gs, &ms, &vs, &xs, &ss, &lr, &b1, &b2, &eps, &wd, &ams, &dec))
        return NULL;
    PyObject *f[6] = {0};
    PyObject *src[6] = {ps, gs, ms, vs, xs, ss};
    static const char *const names[6] = {"params", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs", "steps"};
    jag_tensor **t[6] = {0};
    int64_t *steps = NULL;
    PyObject *res = NULL;
    char what[64];
    for (int k = 0; k < 6; k++) {
        if (k == 4 && xs == Py_None) continue;
        snprintf(what, sizeof what, "_adam_step: %s must be a sequence", names[k]);
        if (!(f[k] = PySequence_Fast(src[k], what))) goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f[0]);
    if (n > 1 << 30) {
        PyErr_SetString(PyExc_ValueError, "_adam_step: too many params");
        goto done;
    }
    for (int k = 0; k < 6; k++) {
        if (!f[k]) continue;
        snprintf(what, sizeof what, "_adam_step: %s", names[k]);
        if (!(t[k] = tensor_list(f[k], n, k == 1, what))) goto done;
    }
    steps = calloc((size_t)(n > 0 ? n : 1), sizeof *steps);
    if (!steps) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        double s;
        jag_status st = jag_item(t[5][i], &s);
        if (st) {
            jagpy_raise_status(st);
            goto done;
        }
        if (!(s >= 0 && s < 9e15) || s != floor(s)) {
            PyErr_Format(PyExc_ValueError, "_adam_step: steps[%zd] is %g; expected a whole number >= 0", i, s);
            goto done;
        }
        steps[i] = (int64_t)s + 1;
    }
    jag_status st;
    st = jag_optim_adam_update(t[0], t[1], t[2], t[3], t[4], steps, (int)n, lr, b1, b2, eps, wd, ams != 0, dec != 0);
    if (st) {
        jagpy_raise_status(st);
        goto done;
    }
    /* the step tensors of the params that stepped count one more */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!t[1][i]) continue;
        int prev = jag_set_grad_enabled(false);
        st = jag_fill_(t[5][i], (double)steps[i]);
        jag_set_grad_enabled(prev);
        if (st) {
            jagpy_raise_status(st);
            goto done;
        }
    }
    res = Py_None;
    Py_INCREF(res);
done:
    for (int k = 0; k < 6; k++) free(t[k]), Py_XDECREF(f[k]);
    free(steps);
    return res;
}

/* _clip_grad_norm(params, max_norm, norm_type) -> the total norm (float). */
static PyObject *m_clip_grad_norm(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *ps;
    double max_norm, p;
    if (!PyArg_ParseTuple(args, "Odd", &ps, &max_norm, &p)) return NULL;
    PyObject *fp = PySequence_Fast(ps, "clip_grad_norm_: parameters must be a sequence");
    if (!fp) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fp);
    jag_tensor **t = n > 1 << 30 ? NULL : tensor_list(fp, n, 0, "clip_grad_norm_: parameters");
    if (!t) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "clip_grad_norm_: too many parameters");
        Py_DECREF(fp);
        return NULL;
    }
    double total = 0;
    jag_status st;
    st = jag_clip_grad_norm(t, (int)n, max_norm, p, &total);
    free(t);
    Py_DECREF(fp);
    if (st) return jagpy_raise_status(st);
    return PyFloat_FromDouble(total);
}

/* _as_parameter(cls, tensor, requires_grad) -> a new object of class cls (a
 * subclass of jag.Tensor) over a detached alias of tensor: the same data, a
 * leaf, requires_grad as asked (torch's nn.Parameter(data)). */
static PyObject *m_as_parameter(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *cls, *x;
    int rg;
    if (!PyArg_ParseTuple(args, "OOp", &cls, &x, &rg)) return NULL;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, jagpy_tensor_base_type())) {
        PyErr_SetString(PyExc_TypeError, "_as_parameter: cls must be a subclass of jag.Tensor");
        return NULL;
    }
    jag_tensor *t = jagpy_get_tensor(x, "Parameter: data");
    if (!t) return NULL;
    jag_tensor *d = NULL;
    jag_status st = jag_detach(t, &d);
    if (st) return jagpy_raise_status(st);
    if (rg && (st = jag_set_requires_grad(d, true))) {
        jag_release(d);
        return jagpy_raise_status(st);
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    jagpy_tensor_object *o = (jagpy_tensor_object *)tp->tp_alloc(tp, 0);
    if (!o) {
        jag_release(d);
        return NULL;
    }
    o->t = d;
    return (PyObject *)o;
}

static PyMethodDef optim_methods[] = {
    {"_sgd_step", m_sgd_step, METH_VARARGS,
     "_sgd_step(params, grads, momentum_buffers, lr, momentum, dampening, weight_decay, nesterov)"},
    {"_adam_step", m_adam_step, METH_VARARGS,
     "_adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, eps, "
     "weight_decay, amsgrad, decoupled)"},
    {"_clip_grad_norm", m_clip_grad_norm, METH_VARARGS, "_clip_grad_norm(params, max_norm, norm_type) -> float"},
    {"_as_parameter", m_as_parameter, METH_VARARGS, "_as_parameter(cls, tensor, requires_grad)"},
    {NULL, NULL, 0, NULL},
};

int jagpy_optim_init(PyObject *m) { return PyModule_AddFunctions(m, optim_methods); }
