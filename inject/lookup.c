/* inject/lookup.c — where the interposers' real functions come from. A
 * program may load CUDA anywhere: in the global scope after us (RTLD_NEXT
 * finds it), inside a plugin dlopen'ed with RTLD_LOCAL (JAX, CuPy,
 * TensorFlow: invisible to RTLD_NEXT), or later than the first call. So a
 * lookup tries RTLD_NEXT, then every loaded object in load order through its
 * own handle (skipping stepprof itself), and a miss is never cached: the
 * caller's resolver stays in place and tries again on the next call. A hit
 * keeps its library loaded (callers cache it; a dlclose by the program must
 * not unmap it). Objects in other dlmopen namespaces are not reachable from
 * here. */
#define _GNU_SOURCE
#include "hook.h"

#include "../collectors/log.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static char self_anchor;

SP_NO_SANITIZE sp_dlsym_fn sp_glibc_dlsym(void)
{
    static sp_dlsym_fn real;
    sp_dlsym_fn f = __atomic_load_n(&real, __ATOMIC_RELAXED);
    if (!f) {
        f = (sp_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!f)
            f = (sp_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        __atomic_store_n(&real, f, __ATOMIC_RELAXED);
    }
    return f;
}

static void *self_base(void)
{
    Dl_info me;
    return dladdr(&self_anchor, &me) ? me.dli_fbase : NULL;
}

static int is_self(void *f)
{
    Dl_info d;
    return f && dladdr(f, &d) && d.dli_fbase == self_base();
}

typedef struct {
    char **paths;
    size_t n, cap;
    void *self;
} objects_t;

/* Only copies the names: dlopen is not called while dl_iterate_phdr holds
 * the loader's list lock. */
static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    objects_t *o = arg;
    if (!info->dlpi_name || !info->dlpi_name[0] || (void *)info->dlpi_addr == o->self)
        return 0;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        char **p = realloc(o->paths, cap * sizeof *p);
        if (!p)
            return 1;
        o->paths = p;
        o->cap = cap;
    }
    char *s = strdup(info->dlpi_name);
    if (s)
        o->paths[o->n++] = s;
    return 0;
}

/* The first definition of `name` among the loaded objects' own scopes. */
static void *search_loaded(const char *name)
{
    objects_t o = {NULL, 0, 0, self_base()};
    dl_iterate_phdr(collect, &o);
    void *f = NULL;
    for (size_t i = 0; i < o.n; i++) {
        if (!f) {
            void *h = dlopen(o.paths[i], RTLD_NOLOAD | RTLD_LAZY);
            if (h) {
                void *g = sp_glibc_dlsym()(h, name);
                if (g && !is_self(g))
                    f = g; /* the handle stays open: the function must outlive a dlclose by its user */
                else
                    dlclose(h);
            }
        }
        free(o.paths[i]);
    }
    free(o.paths);
    return f;
}

/* Keeps the object that defines f loaded: callers cache f, and a library in
 * the global scope (linked, or dlopen'ed RTLD_GLOBAL by a plugin that is
 * closed later) would otherwise be unmapped under it. */
static void pin(void *f)
{
    Dl_info d;
    if (dladdr(f, &d) && d.dli_fname && d.dli_fname[0])
        dlopen(d.dli_fname, RTLD_NOLOAD | RTLD_LAZY); /* never closed, like search_loaded's handle */
}

void *sp_real(const char *name)
{
    void *f = sp_glibc_dlsym()(RTLD_NEXT, name);
    if (f && !is_self(f)) {
        pin(f);
        return f;
    }
    return search_loaded(name);
}

int sp_real_missing(const char *name)
{
    static atomic_int said;
    if (!atomic_exchange(&said, 1))
        sp_log(SP_LOG_ERROR,
               "%s was called but no loaded library defines it; such calls return error 999 until its library is "
               "loaded",
               name);
    return SP_MISSING_RESULT;
}
