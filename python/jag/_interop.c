/*
 * _interop.c — zero-copy exchange of dense jag tensors with other array
 * libraries: DLPack (export as "dltensor" / "dltensor_versioned" capsules,
 * import from either) and the buffer protocol (memoryview, numpy.asarray).
 *
 * Lifetimes. Export: the capsule owns a DLManagedTensor(Versioned) holding
 * one reference on the jag tensor; the consumer renames the capsule to
 * "used_dltensor[_versioned]" and calls the deleter once when done; a
 * capsule nobody consumed calls the deleter from its destructor. The deleter
 * only releases a jag reference, so it may run on any thread without the GIL.
 * Import: the jag tensor borrows the producer's memory through
 * jag_from_blob; its release callback (the last jag tensor using the memory
 * goes away) calls the producer's deleter, exactly once, holding the GIL.
 * A capsule is renamed "used_..." only once jag owns it, so on any failure
 * the producer's capsule destructor still frees it.
 */
#include "_jagpy.h"

#include <stdlib.h>
#include <string.h>

#include "_dlpack.h"

static const char NAME_LEGACY[] = "dltensor", NAME_VERSIONED[] = "dltensor_versioned";
static const char USED_LEGACY[] = "used_dltensor", USED_VERSIONED[] = "used_dltensor_versioned";

/* A stand-in address for the data of an empty tensor (never read). */
static double empty_data[1];

/* ------------------------------------------------------------------------ */
/* dtype mapping                                                             */
/* ------------------------------------------------------------------------ */

static int dl_dtype_of(jag_dtype d, jag_DLDataType *out) {
    out->lanes = 1;
    switch (d) {
    case JAG_FLOAT32: out->code = jag_kDLFloat, out->bits = 32; return 0;
    case JAG_FLOAT64: out->code = jag_kDLFloat, out->bits = 64; return 0;
    case JAG_INT32: out->code = jag_kDLInt, out->bits = 32; return 0;
    case JAG_INT64: out->code = jag_kDLInt, out->bits = 64; return 0;
    case JAG_BOOL: out->code = jag_kDLBool, out->bits = 8; return 0;
    case JAG_FLOAT16: out->code = jag_kDLFloat, out->bits = 16; return 0;
    case JAG_BFLOAT16: out->code = jag_kDLBfloat, out->bits = 16; return 0;
    default: return -1;
    }
}

static int jag_dtype_of(jag_DLDataType t, jag_dtype *out) {
    if (t.lanes != 1) goto bad;
    if (t.code == jag_kDLFloat && t.bits == 32) *out = JAG_FLOAT32;
    else if (t.code == jag_kDLFloat && t.bits == 64) *out = JAG_FLOAT64;
    else if (t.code == jag_kDLInt && t.bits == 32) *out = JAG_INT32;
    else if (t.code == jag_kDLInt && t.bits == 64) *out = JAG_INT64;
    else if (t.code == jag_kDLBool && t.bits == 8) *out = JAG_BOOL;
    else if (t.code == jag_kDLFloat && t.bits == 16) *out = JAG_FLOAT16;
    else if (t.code == jag_kDLBfloat && t.bits == 16) *out = JAG_BFLOAT16;
    else goto bad;
    return 0;
bad:;
    static const char *codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
    PyErr_Format(PyExc_TypeError,
                 "from_dlpack: jag has no dtype for DLPack %s%u (lanes %u); it supports float32, float64, "
                 "float16, bfloat16, int32, int64 and bool",
                 t.code < 7 ? codes[t.code] : "code?", (unsigned)t.bits, (unsigned)t.lanes);
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Export                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct {
    union {
        jag_DLManagedTensor legacy;
        jag_DLManagedTensorVersioned versioned;
    } m;
    jag_tensor *t; /* one reference, given back by the deleter */
    int64_t shape[JAG_MAX_DIMS], strides[JAG_MAX_DIMS];
} exported;

static void free_exported(exported *e) {
    jag_release(e->t);
    free(e);
}

static void deleter_legacy(jag_DLManagedTensor *self) { free_exported(self->manager_ctx); }
static void deleter_versioned(jag_DLManagedTensorVersioned *self) { free_exported(self->manager_ctx); }

/* Capsule destructors: free a capsule nobody consumed (still unused name). */
static void capsule_dtor(PyObject *cap, const char *unused_name, int versioned) {
    if (!PyCapsule_IsValid(cap, unused_name)) return; /* consumed: the consumer calls the deleter */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    void *p = PyCapsule_GetPointer(cap, unused_name);
    if (p) {
        if (versioned) {
            jag_DLManagedTensorVersioned *m = p;
            if (m->deleter) m->deleter(m);
        } else {
            jag_DLManagedTensor *m = p;
            if (m->deleter) m->deleter(m);
        }
    } else {
        PyErr_WriteUnraisable(cap);
    }
    PyErr_Restore(et, ev, tb);
}

static void capsule_dtor_legacy(PyObject *cap) { capsule_dtor(cap, NAME_LEGACY, 0); }
static void capsule_dtor_versioned(PyObject *cap) { capsule_dtor(cap, NAME_VERSIONED, 1); }

/* _to_dlpack(tensor, versioned, copy): a capsule over the tensor's memory
 * (over a fresh copy when copy is true). A read-only tensor
 * (jag_is_read_only) goes to a versioned capsule with
 * JAG_DLPACK_FLAG_READ_ONLY set; a legacy capsule cannot say "read-only", so
 * there it is copied when copy is true and refused with a BufferError
 * otherwise (as numpy does for its read-only arrays). */
static PyObject *m_to_dlpack(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *obj;
    int versioned, copy;
    if (!PyArg_ParseTuple(args, "Opp", &obj, &versioned, &copy)) return NULL;
    jag_tensor *t = jagpy_get_tensor(obj, "__dlpack__: self");
    if (!t) return NULL;
    if (jag_tensor_subclass(t)) {
        PyErr_SetString(PyExc_BufferError,
                        "__dlpack__: a nested (or other subclass) tensor has no single strided array; export "
                        ".values(), .offsets() or jag.nested.to_padded_tensor() instead");
        return NULL;
    }
    if (jag_is_meta(t)) {
        PyErr_SetString(PyExc_BufferError, "__dlpack__: a meta tensor has no data to export (inside jag.trace or jag.compile "
                                           "tensors are proxies without data: pass the value as an input, or compute it outside "
                                           "the function)");
        return NULL;
    }
    jag_DLDataType dt;
    if (dl_dtype_of(jag_tensor_dtype(t), &dt)) {
        PyErr_SetString(PyExc_BufferError, "__dlpack__: unsupported dtype");
        return NULL;
    }
    int read_only = !copy && jag_is_read_only(t);
    if (read_only && !versioned) {
        PyErr_SetString(PyExc_BufferError,
                        "__dlpack__: the tensor is read-only (mapped from a file by jag.load(mmap=True), or a nested "
                        "tensor's offsets/lengths) and an unversioned (DLPack 0.x) consumer cannot be told so; "
                        "ask for max_version=(1, 0), pass copy=True, or export .clone()");
        return NULL;
    }
    exported *e = calloc(1, sizeof *e);
    if (!e) return PyErr_NoMemory();
    if (copy) {
        jag_tensor *c = NULL;
        jag_status st = jag_clone(t, &c);
        if (st) {
            free(e);
            return jagpy_raise_status(st);
        }
        e->t = c;
    } else {
        e->t = jag_retain(t);
    }
    int nd = jag_ndim(e->t);
    memcpy(e->shape, jag_sizes(e->t), (size_t)nd * sizeof(int64_t));
    memcpy(e->strides, jag_strides(e->t), (size_t)nd * sizeof(int64_t));
    void *data = jag_data(e->t);
    jag_DLTensor dl = {
        .data = data ? data : (void *)empty_data,
        .device = {jag_kDLCPU, 0},
        .ndim = nd,
        .dtype = dt,
        .shape = nd ? e->shape : NULL,
        .strides = nd ? e->strides : NULL,
        .byte_offset = 0,
    };
    PyObject *cap;
    if (versioned) {
        e->m.versioned.version.major = JAG_DLPACK_MAJOR;
        e->m.versioned.version.minor = JAG_DLPACK_MINOR;
        e->m.versioned.manager_ctx = e;
        e->m.versioned.deleter = deleter_versioned;
        e->m.versioned.flags = (copy ? JAG_DLPACK_FLAG_IS_COPIED : 0) | (read_only ? JAG_DLPACK_FLAG_READ_ONLY : 0);
        e->m.versioned.dl_tensor = dl;
        cap = PyCapsule_New(&e->m.versioned, NAME_VERSIONED, capsule_dtor_versioned);
    } else {
        e->m.legacy.manager_ctx = e;
        e->m.legacy.deleter = deleter_legacy;
        e->m.legacy.dl_tensor = dl;
        cap = PyCapsule_New(&e->m.legacy, NAME_LEGACY, capsule_dtor_legacy);
    }
    if (!cap) free_exported(e);
    return cap;
}

/* ------------------------------------------------------------------------ */
/* Import                                                                    */
/* ------------------------------------------------------------------------ */

/* jag_from_blob release callbacks: the producer's deleter, with the GIL
 * (producers' deleters may touch Python objects). */
static void release_legacy(void *ctx, void *data) {
    (void)data;
    jag_DLManagedTensor *m = ctx;
    if (!m->deleter || !Py_IsInitialized()) return;
    PyGILState_STATE g = PyGILState_Ensure();
    m->deleter(m);
    PyGILState_Release(g);
}

static void release_versioned(void *ctx, void *data) {
    (void)data;
    jag_DLManagedTensorVersioned *m = ctx;
    if (!m->deleter || !Py_IsInitialized()) return;
    PyGILState_STATE g = PyGILState_Ensure();
    m->deleter(m);
    PyGILState_Release(g);
}

/* A contiguous copy of n-d strided memory (byte strides, any sign, any
 * alignment) into dst. */
static void copy_strided(char *dst, const char *src, int nd, const int64_t *shape, const int64_t *bstrides,
                         size_t es) {
    if (nd == 0) {
        memcpy(dst, src, es);
        return;
    }
    int64_t idx[JAG_MAX_DIMS] = {0};
    int64_t numel = 1;
    for (int d = 0; d < nd; d++) numel *= shape[d];
    for (int64_t k = 0; k < numel; k++) {
        const char *p = src;
        for (int d = 0; d < nd; d++) p += idx[d] * bstrides[d];
        memcpy(dst + (size_t)k * es, p, es);
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < shape[d]) break;
            idx[d] = 0;
        }
    }
}

/* _from_dlpack(capsule, allow_copy=True, uint16_as_bfloat16=False): a jag
 * tensor over the capsule's memory (a copy when the producer marked it
 * read-only, or its strides are negative, or the data is misaligned for its
 * dtype; with allow_copy false that is a BufferError and the capsule stays
 * unconsumed). With uint16_as_bfloat16, uint16 elements are taken as the
 * bit patterns of bfloat16 ones (frombuffer's bfloat16 view: numpy, which
 * views the buffer, has no bfloat16). */
static PyObject *m_from_dlpack(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *cap;
    int allow_copy = 1, uint16_as_bfloat16 = 0;
    if (!PyArg_ParseTuple(args, "O|pp", &cap, &allow_copy, &uint16_as_bfloat16)) return NULL;
    if (!PyCapsule_CheckExact(cap)) {
        PyErr_Format(PyExc_TypeError, "from_dlpack: expected a DLPack capsule or an object with __dlpack__, got %.100s",
                     Py_TYPE(cap)->tp_name);
        return NULL;
    }
    int versioned;
    if (PyCapsule_IsValid(cap, NAME_VERSIONED)) versioned = 1;
    else if (PyCapsule_IsValid(cap, NAME_LEGACY)) versioned = 0;
    else {
        const char *name = PyCapsule_GetName(cap);
        PyErr_Clear();
        if (name && (!strcmp(name, USED_LEGACY) || !strcmp(name, USED_VERSIONED)))
            PyErr_SetString(PyExc_ValueError, "from_dlpack: this DLPack capsule was already consumed");
        else
            PyErr_Format(PyExc_TypeError, "from_dlpack: a capsule named '%s' is not a DLPack capsule",
                         name ? name : "(null)");
        return NULL;
    }
    void *managed = PyCapsule_GetPointer(cap, versioned ? NAME_VERSIONED : NAME_LEGACY);
    if (!managed) return NULL;
    jag_DLTensor *dl;
    uint64_t flags = 0;
    if (versioned) {
        jag_DLManagedTensorVersioned *m = managed;
        if (m->version.major != JAG_DLPACK_MAJOR) {
            PyErr_Format(PyExc_BufferError, "from_dlpack: DLPack version %u.%u is not supported (jag reads %d.x)",
                         (unsigned)m->version.major, (unsigned)m->version.minor, JAG_DLPACK_MAJOR);
            return NULL;
        }
        dl = &m->dl_tensor;
        flags = m->flags;
    } else {
        dl = &((jag_DLManagedTensor *)managed)->dl_tensor;
    }
    if (dl->device.device_type != jag_kDLCPU && dl->device.device_type != jag_kDLCUDAHost) {
        PyErr_Format(PyExc_BufferError, "from_dlpack: jag reads CPU memory only, got DLPack device type %d",
                     dl->device.device_type);
        return NULL;
    }
    jag_dtype dtype;
    if (uint16_as_bfloat16 && dl->dtype.code == jag_kDLUInt && dl->dtype.bits == 16 && dl->dtype.lanes == 1)
        dtype = JAG_BFLOAT16;
    else if (jag_dtype_of(dl->dtype, &dtype))
        return NULL;
    int nd = dl->ndim;
    if (nd < 0 || nd > JAG_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "from_dlpack: %d dims; jag tensors have at most %d", nd, JAG_MAX_DIMS);
        return NULL;
    }
    if (nd > 0 && !dl->shape) {
        PyErr_SetString(PyExc_ValueError, "from_dlpack: the DLTensor has no shape");
        return NULL;
    }
    size_t es = jag_dtype_size(dtype);
    int64_t sizes[JAG_MAX_DIMS], strides[JAG_MAX_DIMS], numel = 1;
    int negative = 0;
    for (int d = 0; d < nd; d++) {
        if (dl->shape[d] < 0) {
            PyErr_Format(PyExc_ValueError, "from_dlpack: negative size %lld at dim %d", (long long)dl->shape[d], d);
            return NULL;
        }
        sizes[d] = dl->shape[d];
        numel *= sizes[d];
    }
    for (int d = nd - 1; d >= 0; d--) {
        strides[d] = dl->strides ? dl->strides[d] : (d == nd - 1 ? 1 : strides[d + 1] * sizes[d + 1]);
        if (strides[d] < 0) negative = 1;
    }
    char *data = (char *)dl->data + dl->byte_offset;
    if (numel == 0 || !dl->data) data = (char *)empty_data;
    int misaligned = ((uintptr_t)data % es) != 0;
    jag_tensor *out = NULL;
    jag_status st;
    if ((flags & JAG_DLPACK_FLAG_READ_ONLY) || negative || misaligned) {
        if (!allow_copy) {
            PyErr_Format(PyExc_BufferError, "from_dlpack: copy=False, but the data is %s: jag needs a copy",
                         (flags & JAG_DLPACK_FLAG_READ_ONLY) ? "read-only"
                         : negative                          ? "negatively strided"
                                                             : "misaligned for its dtype");
            return NULL;
        }
        /* a tensor over borrowed memory is writable, and jag needs aligned,
         * non-negative strides: copy, then hand the producer's memory back
         * at once */
        st = jag_empty(sizes, nd, dtype, &out);
        if (st) return jagpy_raise_status(st);
        if (numel > 0) {
            int64_t bstrides[JAG_MAX_DIMS];
            for (int d = 0; d < nd; d++) bstrides[d] = strides[d] * (int64_t)es;
            copy_strided(jag_data(out), data, nd, sizes, bstrides, es);
        }
        if (PyCapsule_SetName(cap, versioned ? USED_VERSIONED : USED_LEGACY)) {
            jag_release(out);
            return NULL;
        }
        if (versioned) release_versioned(managed, NULL);
        else release_legacy(managed, NULL);
        return jagpy_wrap(out);
    }
    st = jag_from_blob(data, sizes, strides, nd, dtype, versioned ? release_versioned : release_legacy, managed, &out);
    if (st) return jagpy_raise_status(st); /* release not called: the capsule still owns it */
    if (PyCapsule_SetName(cap, versioned ? USED_VERSIONED : USED_LEGACY)) {
        /* cannot happen for a valid capsule; keep the deleter unique: jag
         * would call it, so the capsule must not */
        PyErr_Clear();
    }
    return jagpy_wrap(out);
}

/* ------------------------------------------------------------------------ */
/* Buffer protocol                                                           */
/* ------------------------------------------------------------------------ */

static int getbuffer(PyObject *self, Py_buffer *view, int flags) {
    view->obj = NULL;
    jag_tensor *t = jagpy_get_tensor(self, "buffer exporter");
    if (!t) return -1;
    if (jag_tensor_subclass(t)) {
        PyErr_SetString(PyExc_BufferError,
                        "a nested (or other subclass) tensor has no single buffer; use .values(), .unbind() or "
                        "jag.nested.to_padded_tensor()");
        return -1;
    }
    if (jag_is_meta(t)) {
        PyErr_SetString(PyExc_BufferError, "a meta tensor has no data (inside jag.trace or jag.compile tensors are proxies "
                                           "without data: pass the value as an input, or compute it outside the function)");
        return -1;
    }
    int read_only = jag_is_read_only(t);
    if (read_only && (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError,
                        "jag.Tensor: a writable buffer was requested, but the tensor is read-only (mapped from a "
                        "file by jag.load(mmap=True), or a nested tensor's offsets/lengths); export .clone() to "
                        "get writable memory");
        return -1;
    }
    const char *fmt;
    switch (jag_tensor_dtype(t)) {
    case JAG_FLOAT32: fmt = "f"; break;
    case JAG_FLOAT64: fmt = "d"; break;
    case JAG_INT32: fmt = "i"; break;
    case JAG_INT64: fmt = "q"; break;
    case JAG_BOOL: fmt = "?"; break;
    case JAG_FLOAT16: fmt = "e"; break;
    case JAG_BFLOAT16:
        PyErr_SetString(PyExc_BufferError, "jag.Tensor: the buffer protocol has no bfloat16 format; export .float()");
        return -1;
    default: PyErr_SetString(PyExc_BufferError, "unsupported dtype"); return -1;
    }
    Py_ssize_t es = (Py_ssize_t)jag_dtype_size(jag_tensor_dtype(t));
    int nd = jag_ndim(t);
    const int64_t *sz = jag_sizes(t), *sd = jag_strides(t);
    Py_ssize_t *arr = malloc(sizeof(Py_ssize_t) * (size_t)(2 * nd + 1));
    if (!arr) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t *shape = arr, *strides = arr + nd, numel = 1;
    for (int d = 0; d < nd; d++) {
        shape[d] = (Py_ssize_t)sz[d];
        strides[d] = (Py_ssize_t)(sd[d] * es);
        numel *= shape[d];
    }
    /* C and Fortran contiguity (size-1 dims do not matter; empty is both) */
    int c_contig = 1, f_contig = 1;
    if (numel > 0) {
        Py_ssize_t want = es;
        for (int d = nd - 1; d >= 0; d--) {
            if (shape[d] != 1 && strides[d] != want) c_contig = 0;
            want *= shape[d];
        }
        want = es;
        for (int d = 0; d < nd; d++) {
            if (shape[d] != 1 && strides[d] != want) f_contig = 0;
            want *= shape[d];
        }
    }
    const char *why = NULL;
    if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !c_contig) why = "the consumer needs a C-contiguous buffer";
    else if ((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !c_contig) why = "C-contiguous buffer requested";
    else if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !f_contig) why = "Fortran-contiguous buffer requested";
    else if ((flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS && !c_contig && !f_contig)
        why = "contiguous buffer requested";
    if (why) {
        free(arr);
        PyErr_Format(PyExc_BufferError, "jag.Tensor: %s, but the tensor is not (use .contiguous())", why);
        return -1;
    }
    void *data = jag_data(t);
    view->buf = data ? data : (void *)empty_data;
    view->obj = Py_NewRef(self);
    view->len = numel * es;
    view->readonly = read_only;
    view->itemsize = es;
    view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
    if ((flags & PyBUF_ND) == PyBUF_ND) {
        view->ndim = nd;
        view->shape = nd ? shape : NULL;
    } else {
        view->ndim = 1;
        view->shape = NULL;
    }
    view->strides = ((flags & PyBUF_STRIDES) == PyBUF_STRIDES && nd) ? strides : NULL;
    view->suboffsets = NULL;
    view->internal = arr;
    return 0;
}

static void releasebuffer(PyObject *self, Py_buffer *view) {
    (void)self;
    free(view->internal);
    view->internal = NULL;
}

PyBufferProcs jagpy_buffer_procs = {getbuffer, releasebuffer};

/* ------------------------------------------------------------------------ */

static PyMethodDef interop_methods[] = {
    {"_to_dlpack", m_to_dlpack, METH_VARARGS, "_to_dlpack(t, versioned, copy) -> DLPack capsule"},
    {"_from_dlpack", m_from_dlpack, METH_VARARGS,
     "_from_dlpack(capsule, allow_copy=True, uint16_as_bfloat16=False) -> jag tensor sharing its memory"},
    {NULL, NULL, 0, NULL},
};

int jagpy_interop_init(PyObject *m) {
    if (PyModule_AddFunctions(m, interop_methods) < 0) return -1;
    if (PyModule_AddIntConstant(m, "DLPACK_MAJOR", JAG_DLPACK_MAJOR) < 0) return -1;
    return PyModule_AddIntConstant(m, "DLPACK_MINOR", JAG_DLPACK_MINOR);
}
