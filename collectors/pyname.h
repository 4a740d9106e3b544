/* collectors/pyname.h — the names collectors/pystack.c gives Python frames
 * and C function calls, as torch.profiler's python tracer writes them, and the
 * Python C API it reaches through dlsym (libpython is never linked). Only for
 * collectors/pystack.c; every call is made by a thread holding the GIL. */
#ifndef SP_PYNAME_H
#define SP_PYNAME_H

#include <stdint.h>

typedef void *sp_pyobj;

typedef struct sp_py_api {
    void (*set_profile)(int (*)(sp_pyobj, sp_pyobj, int, sp_pyobj), sp_pyobj);
    sp_pyobj (*get_frame)(void);          /* borrowed */
    sp_pyobj (*frame_back)(sp_pyobj);     /* new reference */
    sp_pyobj (*frame_code)(sp_pyobj);     /* new reference */
    int (*frame_line)(sp_pyobj);
    sp_pyobj (*getattr)(sp_pyobj, const char *);
    const char *(*utf8)(sp_pyobj);
    long (*as_long)(sp_pyobj);
    void (*incref)(sp_pyobj);
    void (*decref)(sp_pyobj);
    void (*err_clear)(void);
    sp_pyobj (*sys_object)(const char *);            /* borrowed */
    sp_pyobj (*dict_item)(sp_pyobj, const char *);   /* borrowed */
    sp_pyobj (*repr)(sp_pyobj);                      /* new reference */
    void *(*cfunc_meth)(sp_pyobj);                   /* PyCFunction_GetFunction */
    sp_pyobj (*frame_var)(sp_pyobj, sp_pyobj);       /* 3.12+: new reference; NULL before */
    sp_pyobj (*intern)(const char *);                /* new reference */
    sp_pyobj (*frame_locals)(sp_pyobj);              /* 3.11: new reference (a dict) */
    sp_pyobj (*dict_get)(sp_pyobj, sp_pyobj);        /* borrowed */
    sp_pyobj (*type)(sp_pyobj);                      /* new reference */
    void *cfunc_type, *cmethod_type;                 /* &PyCFunction_Type, &PyCMethod_Type */
} sp_py_api_t;
extern sp_py_api_t sp_py;

/* Loads the API once: 1 ok, -1 not (one stepprof: line said why). */
int sp_pyname_load(void);

/* The file-name prefixes (see sp_pystack_set in pystack.h): "dir/" cut,
 * "!dir/" hidden, "=name" a function of a hidden file that is a pass-through
 * (not written, and what it calls is not hidden: stepprof's wrapper around
 * the optimizer's step). */
void sp_pyname_prefixes(const char *list);

/* A frame's name id: 0 for a hidden frame, SP_PYNAME_THROUGH for a
 * pass-through one. seeded: running before recording began (named by its
 * current line, else by its first: torch does both); a generator's or
 * coroutine's frame is named by its current line at every call (its first
 * line on the first, the line it yielded at on a resume), as torch names it.
 * *m: an nn.Module call's module, else m->name = 0. */
#define SP_PYNAME_THROUGH 0xFFFFFFFFu
typedef struct sp_pymod {
    sp_pyobj self, cls;
    uint32_t name;     /* "nn.Module: <class>" */
} sp_pymod_t;
uint32_t sp_pyname_frame(sp_pyobj frame, int seeded, sp_pymod_t *m);

/* A C function call's name, as torch names it: the repr of the function
 * object ("<built-in method relu of type object at 0x..>", "<built-in
 * function isinstance>") when its method definition is first seen; later
 * calls of the same definition (a bound method of another object too) reuse
 * it, as torch's tracer does (torch per profiling session, stepprof for
 * the process). 0 when fn is not a C function. */
uint32_t sp_pyname_cfunc(sp_pyobj fn);

/* Grows the caches that are a quarter full (a thread turns recording on):
 * misses while it records then seldom grow them. */
void sp_pyname_reserve(void);

/* Learns torch.nn.Module.__call__'s code from the torch.nn already imported. */
void sp_pyname_learn_module(void);

/* Forgets the modules (no thread records now; torch keeps them per
 * profiling session). */
void sp_pyname_forget(void);

#endif
