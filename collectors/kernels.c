/* collectors/kernels.c — two pointer-keyed open-addressing tables (stub ->
 * name, handle -> stub) behind one mutex. Registration runs in constructors
 * and once per launch site, never per launch. Demangling uses __cxa_demangle
 * from the libstdc++ already in the process (every nvcc program has it), or
 * one dlopened with RTLD_LOCAL so nothing leaks into the target's scope;
 * names of stubs nobody registered (plain C programs passing a function
 * pointer) come from the dynamic symbol table via dladdr. */
#define _GNU_SOURCE
#include "kernels.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
    const void *key;
    const void *val;
} slot_t;

typedef struct table {
    slot_t *s;
    size_t cap, used;
} table_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static table_t names;    /* stub -> strdup'ed mangled name */
static table_t handles;  /* handle -> stub */

static size_t hash_ptr(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static slot_t *find(table_t *t, const void *key)
{
    if (!t->cap)
        return NULL;
    for (size_t i = hash_ptr(key, t->cap);; i = (i + 1) & (t->cap - 1)) {
        if (t->s[i].key == key || t->s[i].key == NULL)
            return &t->s[i];
    }
}

static int grow(table_t *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 256;
    slot_t *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    table_t nt = {ns, ncap, 0};
    for (size_t i = 0; i < t->cap; i++) {
        if (t->s[i].key) {
            *find(&nt, t->s[i].key) = t->s[i];
            nt.used++;
        }
    }
    free(t->s);
    *t = nt;
    return 0;
}

static void put(table_t *t, const void *key, const void *val)
{
    if ((t->used + 1) * 2 > t->cap && grow(t) != 0)
        return;
    slot_t *s = find(t, key);
    if (!s->key) {
        s->key = key;
        t->used++;
    }
    s->val = val;
}

void sp_kern_register(const void *host_fun, const char *mangled)
{
    if (!host_fun || !mangled)
        return;
    char *copy = strdup(mangled);
    if (!copy)
        return;
    pthread_mutex_lock(&lock);
    slot_t *old = find(&names, host_fun);
    if (old && old->key)
        free((void *)old->val);
    put(&names, host_fun, copy);
    pthread_mutex_unlock(&lock);
}

void sp_kern_map_handle(const void *handle, const void *host_fun)
{
    if (!handle)
        return;
    pthread_mutex_lock(&lock);
    put(&handles, handle, host_fun);
    pthread_mutex_unlock(&lock);
}

const char *sp_kern_mangled(const void *ptr, int is_handle)
{
    const char *name = NULL;
    pthread_mutex_lock(&lock);
    if (is_handle) {
        slot_t *h = find(&handles, ptr);
        ptr = (h && h->key) ? h->val : NULL;
    }
    if (ptr) {
        slot_t *s = find(&names, ptr);
        if (s && s->key)
            name = s->val;
    }
    pthread_mutex_unlock(&lock);
    if (!name && ptr) {
        Dl_info info;
        if (dladdr(ptr, &info) && info.dli_sname && info.dli_saddr == ptr)
            name = info.dli_sname;
    }
    return name;
}

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

static demangle_fn find_demangler(void)
{
    static demangle_fn fn;
    static int tried;
    if (!tried) {
        tried = 1;
        fn = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
        if (!fn) {
            void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
            if (h)
                fn = (demangle_fn)dlsym(h, "__cxa_demangle");
        }
    }
    return fn;
}

const char *sp_kern_demangle_r(const char *m, char *buf, size_t size)
{
    demangle_fn dm = (m && m[0] == '_' && m[1] == 'Z') ? find_demangler() : NULL;
    if (!dm)
        return NULL;
    int status = -1;
    size_t len = 0;
    char *out = dm(m, NULL, &len, &status);
    const char *r = NULL;
    if (status == 0 && out) {
        snprintf(buf, size, "%s", out);
        r = buf;
    }
    free(out);
    return r;
}

const char *sp_kern_name_r(const void *ptr, int is_handle, char *buf, size_t size)
{
    const char *m = sp_kern_mangled(ptr, is_handle);
    if (!m)
        return NULL;
    if (!sp_kern_demangle_r(m, buf, size))
        snprintf(buf, size, "%s", m);
    return buf;
}

/* The exporter's (one thread at a time); recording threads use the _r forms. */
const char *sp_kern_demangle(const char *m)
{
    static char buf[4096];
    return sp_kern_demangle_r(m, buf, sizeof buf);
}

const char *sp_kern_name(const void *ptr, int is_handle)
{
    static char buf[4096];
    return sp_kern_name_r(ptr, is_handle, buf, sizeof buf);
}

/* fork() copies a lock some other thread (often the exporter) may hold; the
 * child has only the forking thread, so the lock starts over there. */
void sp_kern_after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
}
