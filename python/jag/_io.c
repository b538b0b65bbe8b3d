/*
 * _io.c — jag._C._save / jag._C._load: the bindings of jag_save / jag_load
 * (safetensors files), compiled into the jag._C extension and registered by
 * jag_py_io_init from PyInit__C. The tensor type and the helpers to wrap a
 * jag_tensor and to raise a jag status come from _C.c through the init call,
 * so this file depends on nothing else there. The Python API is in
 * serialization.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <jag.h>
#include <stdlib.h>

static PyObject *(*io_wrap)(jag_tensor *);          /* steals the reference */
static jag_tensor *(*io_get)(PyObject *, const char *); /* borrowed, or NULL with TypeError */
static PyObject *(*io_raise)(jag_status);

/* _save(path, names: list[str], tensors: list[Tensor], metadata: list[(str, str)], object: str | None = None)
 * object: the JSON description of the object the tensors belong to, kept
 * under JAG_OBJECT_KEY (jag_save_described); None: jag_save. */
static PyObject *m_save(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *path_obj, *names, *tensors, *meta, *object = Py_None;
    if (!PyArg_ParseTuple(args, "O&O!O!O!|O", PyUnicode_FSConverter, &path_obj, &PyList_Type, &names, &PyList_Type,
                          &tensors, &PyList_Type, &meta, &object))
        return NULL;
    const char *description = NULL;
    if (object != Py_None) {
        if (!PyUnicode_Check(object)) {
            PyErr_Format(PyExc_TypeError, "jag.save: the object description must be a str, got %.100s",
                         Py_TYPE(object)->tp_name);
            Py_DECREF(path_obj);
            return NULL;
        }
        if (!(description = PyUnicode_AsUTF8(object))) {
            Py_DECREF(path_obj);
            return NULL;
        }
    }
    Py_ssize_t n = PyList_GET_SIZE(names), nm = PyList_GET_SIZE(meta);
    PyObject *r = NULL;
    const char **cnames = NULL, **cmeta = NULL;
    jag_tensor **ts = NULL;
    if (n != PyList_GET_SIZE(tensors) || n > INT32_MAX || nm > INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "jag.save: names and tensors differ in length");
        goto done;
    }
    cnames = calloc((size_t)n + 1, sizeof *cnames);
    ts = calloc((size_t)n + 1, sizeof *ts);
    cmeta = calloc((size_t)nm * 2 + 1, sizeof *cmeta);
    if (!cnames || !ts || !cmeta) {
        PyErr_NoMemory();
        goto done;
    }
    /* the strings stay alive: they belong to the lists, which we hold */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyList_GET_ITEM(names, i);
        if (!PyUnicode_Check(s)) {
            PyErr_Format(PyExc_TypeError, "jag.save: names must be str, got %.100s", Py_TYPE(s)->tp_name);
            goto done;
        }
        if (!(cnames[i] = PyUnicode_AsUTF8(s))) goto done;
        if (!(ts[i] = io_get(PyList_GET_ITEM(tensors, i), "jag.save: every value"))) goto done;
    }
    for (Py_ssize_t i = 0; i < nm; i++) {
        PyObject *kv = PyList_GET_ITEM(meta, i);
        if (!PyTuple_Check(kv) || PyTuple_GET_SIZE(kv) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(kv, 0)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(kv, 1))) {
            PyErr_SetString(PyExc_TypeError, "jag.save: metadata must map str to str");
            goto done;
        }
        if (!(cmeta[2 * i] = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kv, 0))) ||
            !(cmeta[2 * i + 1] = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kv, 1))))
            goto done;
    }
    jag_status st;
    Py_BEGIN_ALLOW_THREADS
    st = description ? jag_save_described(PyBytes_AS_STRING(path_obj), cnames, ts, (int)n, cmeta, (int)nm,
                                          JAG_OBJECT_KEY, description)
                     : jag_save(PyBytes_AS_STRING(path_obj), cnames, ts, (int)n, cmeta, (int)nm);
    Py_END_ALLOW_THREADS
    if (st) {
        io_raise(st);
        goto done;
    }
    r = Py_None;
    Py_INCREF(r);
done:
    free(cnames), free(ts), free(cmeta);
    Py_DECREF(path_obj);
    return r;
}

/* _load(path, mmap: bool) -> (list[(name, Tensor)], list[(key, value)], object description: str | None) */
static PyObject *m_load(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *path_obj;
    int use_mmap = 0;
    if (!PyArg_ParseTuple(args, "O&p", PyUnicode_FSConverter, &path_obj, &use_mmap)) return NULL;
    jag_tensor_set *set = NULL;
    jag_status st;
    Py_BEGIN_ALLOW_THREADS
    st = jag_load(PyBytes_AS_STRING(path_obj), use_mmap ? JAG_LOAD_MMAP : JAG_LOAD_COPY, &set);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_obj);
    if (st) return io_raise(st);
    PyObject *items = PyList_New(0), *meta = PyList_New(0), *r = NULL;
    if (!items || !meta) goto done;
    for (int i = 0; i < jag_tensor_set_count(set); i++) {
        PyObject *t = io_wrap(jag_retain(jag_tensor_set_get(set, i)));
        if (!t) goto done;
        PyObject *pair = Py_BuildValue("(sN)", jag_tensor_set_name(set, i), t);
        if (!pair || PyList_Append(items, pair) < 0) {
            Py_XDECREF(pair);
            goto done;
        }
        Py_DECREF(pair);
    }
    for (int i = 0; i < jag_tensor_set_metadata_count(set); i++) {
        PyObject *pair = Py_BuildValue("(ss)", jag_tensor_set_metadata_key(set, i), jag_tensor_set_metadata_value(set, i));
        if (!pair || PyList_Append(meta, pair) < 0) {
            Py_XDECREF(pair);
            goto done;
        }
        Py_DECREF(pair);
    }
    const char *object = jag_tensor_set_description(set, JAG_OBJECT_KEY);
    if (object) r = Py_BuildValue("(OOs)", items, meta, object);
    else r = Py_BuildValue("(OOO)", items, meta, Py_None);
done:
    Py_XDECREF(items);
    Py_XDECREF(meta);
    jag_tensor_set_free(set);
    return r;
}

static PyObject *m_is_read_only(PyObject *mod, PyObject *o) {
    (void)mod;
    jag_tensor *t = io_get(o, "t");
    if (!t) return NULL;
    return PyBool_FromLong(jag_is_read_only(t));
}

static PyMethodDef io_methods[] = {
    {"_save", m_save, METH_VARARGS, "jag_save(path, names, tensors, metadata pairs[, object description])"},
    {"_load", m_load, METH_VARARGS, "jag_load(path, mmap) -> (name/tensor pairs, metadata pairs, object description)"},
    {"_is_read_only", m_is_read_only, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

int jag_py_io_init(PyObject *module, PyObject *(*wrap)(jag_tensor *), jag_tensor *(*get)(PyObject *, const char *),
                   PyObject *(*raise)(jag_status)) {
    io_wrap = wrap, io_get = get, io_raise = raise;
    return PyModule_AddFunctions(module, io_methods);
}
