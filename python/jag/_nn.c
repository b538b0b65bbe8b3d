/*
 * _nn.c — bindings of libjag's composite functions that are not rows of the
 * op table: dropout (with an optional jag.Generator), clamp, and the losses
 * (cross_entropy, mse_loss). Dense and nested alike; differentiable.
 */
#include "_jagpy.h"

/* The jag_generator of a jag._C._Generator, or NULL for None (_factory.c). */
jag_generator *jagpy_generator(PyObject *o);

static PyObject *m_dropout(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x, *gen = Py_None;
    double p;
    int train;
    if (!PyArg_ParseTuple(args, "Odp|O", &x, &p, &train, &gen)) return NULL;
    jag_tensor *t = jagpy_get_tensor(x, "dropout: input");
    if (!t) return NULL;
    jag_generator *g = jagpy_generator(gen);
    if (!g && gen != Py_None) return NULL;
    jag_tensor *out = NULL;
    jag_status st = jag_dropout(t, p, train != 0, g, &out);
    if (st) return jagpy_raise_status(st);
    return jagpy_wrap(out);
}

static PyObject *m_clamp(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *x;
    double lo, hi;
    if (!PyArg_ParseTuple(args, "Odd", &x, &lo, &hi)) return NULL;
    jag_tensor *t = jagpy_get_tensor(x, "clamp: input");
    if (!t) return NULL;
    jag_tensor *out = NULL;
    jag_status st = jag_clamp(t, lo, hi, &out);
    if (st) return jagpy_raise_status(st);
    return jagpy_wrap(out);
}

typedef jag_status (*loss_fn)(const jag_tensor *, const jag_tensor *, jag_tensor **);

static PyObject *loss(PyObject *args, loss_fn fn, const char *name) {
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "OO", &a, &b)) return NULL;
    char what[64];
    snprintf(what, sizeof what, "%s: input", name);
    jag_tensor *x = jagpy_get_tensor(a, what);
    if (!x) return NULL;
    snprintf(what, sizeof what, "%s: target", name);
    jag_tensor *y = jagpy_get_tensor(b, what);
    if (!y) return NULL;
    jag_tensor *out = NULL;
    jag_status st = fn(x, y, &out);
    if (st) return jagpy_raise_status(st);
    return jagpy_wrap(out);
}

static PyObject *m_cross_entropy(PyObject *mod, PyObject *args) {
    (void)mod;
    return loss(args, jag_cross_entropy, "cross_entropy");
}

static PyObject *m_mse_loss(PyObject *mod, PyObject *args) {
    (void)mod;
    return loss(args, jag_mse_loss, "mse_loss");
}

static PyMethodDef nn_methods[] = {
    {"_dropout", m_dropout, METH_VARARGS, "_dropout(x, p, train[, generator])"},
    {"_clamp", m_clamp, METH_VARARGS, "_clamp(x, lo, hi)"},
    {"_cross_entropy", m_cross_entropy, METH_VARARGS, "_cross_entropy(logits, target)"},
    {"_mse_loss", m_mse_loss, METH_VARARGS, "_mse_loss(pred, target)"},
    {NULL, NULL, 0, NULL},
};

int jagpy_nn_init(PyObject *m) { return PyModule_AddFunctions(m, nn_methods); }
