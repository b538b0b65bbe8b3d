/* fuse.c — placeholder */
#include "trace.h"
typedef struct jag_fused { atomic_int refcount; } jag_fused;
void jag__fused_free(struct jag_fused *f) { if (f && atomic_fetch_sub(&f->refcount, 1) == 1) free(f); }
struct jag_fused *jag__fused_retain(struct jag_fused *f) { atomic_fetch_add(&f->refcount, 1); return f; }
void jag__fused_format(const struct jag_fused *f, const jag_trace *t, char *buf, size_t cap) { (void)f, (void)t; if (cap) buf[0] = 0; }
jag_status jag__fused_specs(const struct jag_fused *f, const jag_value *args, int nargs, jag_spec *specs) { (void)f,(void)args,(void)nargs,(void)specs; return JAG_ENOTIMPL; }
jag_status jag__fused_run(struct jag_fused *f, const jag_value *args, int nargs, jag_tensor **outs) { (void)f,(void)args,(void)nargs,(void)outs; return JAG_ENOTIMPL; }
jag_status jag_trace_fuse(const jag_trace *t, jag_trace **out) { return jag__trace_clone(t, out); }
