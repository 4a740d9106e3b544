/* collectors/kernels.c — two pointer-keyed open-addressing tables (stub ->
 * name, handle -> stub) behind one mutex. Registration runs in constructors
 * and once per launch site, never per launch. Demangling uses __cxa_demangle
 * from the libstdc++ already in the process (every nvcc program has it), or
 * one dlopened with RTLD_LOCAL so nothing leaks into the target's scope;
 * names of stubs nobody registered (plain C programs passing a function
 * pointer) come from the dynamic symbol table via dladdr. Export sees a
 * kernel once per launch: each distinct name is demangled once (a table by
 * content) and each stub or handle resolved once (tables by pointer, read
 * without the lock, forgotten when a stub is registered again under another
 * name), dladdr included. What lives as long as the process (pretty names,
 * resolved nodes) is carved from chunks that start small and double, and the
 * tables an export fills start at the size the registered kernels need: a
 * window that names 4096 kernels once held ~850 KiB for them, in a malloc
 * block, a header and a table doubling per name. */
#define _GNU_SOURCE
#include "kernels.h"

#include "hash.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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
    slot_t *s = find(t, key);   /* a key already there is replaced in place: no growth, no failure */
    if (!s || !s->key) {
        if ((t->used + 1) * 2 > t->cap && grow(t) != 0)
            return;
        s = find(t, key);
    }
    if (!s->key) {
        s->key = key;
        t->used++;
    }
    s->val = val;
}

/* n bytes (8-aligned) that are never freed; caller holds lock. Chunks start
 * at 4 KiB and double up to 64 KiB. NULL when out of memory. */
static void *perm_alloc(size_t n)
{
    static char *at, *end;
    static size_t next = 4096;
    n = (n + 7) & ~(size_t)7;
    if ((size_t)(end - at) < n) {
        size_t c = n > next ? n : next;
        char *b = malloc(c);
        if (!b)
            return NULL;
        at = b;
        end = b + c;
        next = next < 65536 ? next * 2 : next;
    }
    void *p = at;
    at += n;
    return p;
}

/* Fill bounds in quarters. The pretty table, read under the lock at export,
 * is kept at most 3/4 full (4096 names fit 8192 slots instead of 16384); the
 * resolved tables, read without the lock on every launch a kernel: marker
 * asks about, at most 1/2 (linear probing: ~1.5 probes per hit, ~2.5 at 3/4). */
enum { PRETTY_FILL = 3, RESOLVED_FILL = 2 };
static int too_full(size_t used, size_t cap, unsigned quarters)
{
    return (used + 1) * 4 > cap * quarters;
}

/* A table that used + 1 entries do not make too full (a power of two, at least min). */
static size_t cap_for(size_t used, size_t min, unsigned quarters)
{
    size_t c = min;
    while (too_full(used, c, quarters))
        c *= 2;
    return c;
}

/* Pretty names by mangled name, never freed (callers keep the pointers): a
 * 16-byte header, then the mangled name and, when it differs from it, the
 * shown one (demangled, else the mangled name cut to 4095 bytes). */
typedef struct pretty {
    uint64_t hash;
    uint32_t mlen;        /* the mangled name's length */
    uint16_t apart;       /* 1: the shown text follows the mangled one; 0: it is the mangled one */
    uint16_t demangled;   /* 1: the shown text is the demangled name */
    char text[];          /* mangled NUL [shown NUL] */
} pretty_t;

static const char *p_mangled(const pretty_t *p)
{
    return p->text;
}

/* demangled, else mangled; at most 4095 bytes */
static const char *p_display(const pretty_t *p)
{
    return p->apart ? p->text + p->mlen + 1 : p->text;
}
static pretty_t **pretty_tab;
static size_t pretty_cap, pretty_used;
static pretty_t unknown;

/* What a stub or handle resolved to, read without the lock (the export looks
 * a name up per launch, the kernel marker per launch on the program's
 * thread). Nodes are immutable once published and never freed while the
 * process lives; a lookup trusts a node only when its generation is the
 * current one, so forgetting every answer is one increment, and forgetting
 * one is publishing a node of generation 0. Tables grow by publishing a
 * bigger copy; readers still probing an old one find what it held, which is
 * at worst a miss that the locked path settles. All writes hold the lock. */
typedef struct rnode {
    const void *key;
    const pretty_t *val;     /* &unknown: nobody registered it, dladdr neither */
    _Atomic uint64_t gen;    /* moved on in place while the answer stays val */
    struct rnode *all;       /* every node ever made, so none is lost */
} rnode_t;

typedef struct rtable {
    size_t cap, used;
    struct rtable *older;    /* retired tables, kept for readers still in them */
    _Atomic(rnode_t *) slot[];
} rtable_t;

static _Atomic(rtable_t *) resolved[2];  /* stub / handle */
static _Atomic uint64_t resolved_gen = 1;
static rnode_t *all_nodes;

static void forget_resolved(void)
{
    atomic_fetch_add_explicit(&resolved_gen, 1, memory_order_release);
}

/* One probe for key in t: the slot where it ended (key's, or the empty one
 * where it goes) and, in *seen, the node it read there. A lock-free reader
 * answers from *seen: reading the slot again would race a writer filling that
 * empty slot with another key's node, and answer with that kernel's name. */
static size_t rprobe(rtable_t *t, const void *key, rnode_t **seen)
{
    for (size_t i = hash_ptr(key, t->cap);; i = (i + 1) & (t->cap - 1)) {
        rnode_t *n = atomic_load_explicit(&t->slot[i], memory_order_acquire);
        if (!n || n->key == key) {
            *seen = n;
            return i;
        }
    }
}

/* Caller holds lock: the slot of key, or the empty one where it goes. */
static _Atomic(rnode_t *) *rslot(rtable_t *t, const void *key)
{
    rnode_t *seen;
    return &t->slot[rprobe(t, key, &seen)];
}

/* Caller holds lock. */
static void rput(int which, const void *key, const pretty_t *val, uint64_t gen)
{
    rtable_t *t = atomic_load_explicit(&resolved[which], memory_order_relaxed);
    if (!t || too_full(t->used, t->cap, RESOLVED_FILL)) {
        size_t cap = t ? t->cap * 2 : cap_for(which ? handles.used : names.used, 256, RESOLVED_FILL);
        rtable_t *nt = calloc(1, sizeof *nt + cap * sizeof nt->slot[0]);
        if (!nt)
            return;
        nt->cap = cap;
        nt->older = t;
        for (size_t i = 0; t && i < t->cap; i++) {
            rnode_t *n = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
            if (n) {
                atomic_store_explicit(rslot(nt, n->key), n, memory_order_relaxed);
                nt->used++;
            }
        }
        atomic_store_explicit(&resolved[which], nt, memory_order_release);
        t = nt;
    }
    _Atomic(rnode_t *) *s = rslot(t, key);
    rnode_t *old = atomic_load_explicit(s, memory_order_relaxed);
    if (old && old->val == val) {
        /* The same answer in a later generation (a module load moved the
         * generation on): no new node, so lookups after every load of a
         * program that keeps loading modules allocate nothing. */
        atomic_store_explicit(&old->gen, gen, memory_order_release);
        return;
    }
    rnode_t *n = perm_alloc(sizeof *n);
    if (!n)
        return;
    *n = (rnode_t){key, val, gen, all_nodes};
    all_nodes = n;
    if (!atomic_load_explicit(s, memory_order_relaxed))
        t->used++;
    atomic_store_explicit(s, n, memory_order_release);
}

/* A stub or handle that gets a name resolves again (it may have been looked
 * up, and found unknown, before); handles resolved through a stub, too. */
static void forget_one(int is_handle, const void *ptr)
{
    rtable_t *t = atomic_load_explicit(&resolved[is_handle], memory_order_relaxed);
    if (t && atomic_load_explicit(rslot(t, ptr), memory_order_relaxed))
        rput(is_handle, ptr, NULL, 0);
    t = atomic_load_explicit(&resolved[1], memory_order_relaxed);
    if (!is_handle && t && t->used)
        forget_resolved();
}

int sp_kern_register(const void *host_fun, const char *mangled)
{
    if (!host_fun || !mangled)
        return 0;
    pthread_mutex_lock(&lock);
    slot_t *old = find(&names, host_fun);
    if (old && old->key && strcmp(old->val, mangled) == 0) {   /* asked again: no copy */
        pthread_mutex_unlock(&lock);
        return 0;
    }
    char *copy = strdup(mangled);
    if (!copy) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    if (old && old->key) {
        forget_resolved();
        free((void *)old->val);
    }
    forget_one(0, host_fun);
    put(&names, host_fun, copy);
    pthread_mutex_unlock(&lock);
    return 1;
}

void sp_kern_map_handle(const void *handle, const void *host_fun)
{
    if (!handle)
        return;
    pthread_mutex_lock(&lock);
    slot_t *old = find(&handles, handle);
    if (old && old->key && old->val != host_fun)
        forget_resolved();
    forget_one(1, handle);
    put(&handles, handle, host_fun);
    pthread_mutex_unlock(&lock);
}

/* Caller holds lock. */
static const char *mangled_locked(const void *ptr, int is_handle)
{
    if (is_handle) {
        slot_t *h = find(&handles, ptr);
        ptr = (h && h->key) ? h->val : NULL;
    }
    if (ptr) {
        slot_t *s = find(&names, ptr);
        if (s && s->key)
            return s->val;
        Dl_info info;
        if (dladdr(ptr, &info) && info.dli_sname && info.dli_saddr == ptr)
            return info.dli_sname;
    }
    return NULL;
}

const char *sp_kern_mangled(const void *ptr, int is_handle)
{
    pthread_mutex_lock(&lock);
    const char *name = mangled_locked(ptr, is_handle);
    pthread_mutex_unlock(&lock);
    return name;
}

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

/* Looked up once; caller holds lock (demangle_now is reached only from
 * pretty_locked). Not ahead of an export: loading libstdc++ beside a running
 * window (a C program has none) held the loader lock the program's dlsym
 * needs and made a recorded step 1 ms slow. */
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

static char *demangle_now(const char *m)
{
    demangle_fn dm = (m[0] == '_' && m[1] == 'Z') ? find_demangler() : NULL;
    if (!dm)
        return NULL;
    int status = -1;
    size_t len = 0;
    char *out = dm(m, NULL, &len, &status);
    if (status != 0 || !out) {
        free(out);
        return NULL;
    }
    if (strlen(out) > 4095)
        out[4095] = 0;
    return out;
}

/* The pretty_t of a mangled name, made on first sight; caller holds lock. */
static pretty_t *pretty_locked(const char *m)
{
    uint64_t h = sp_hash_bytes(m, strlen(m));
    if (!pretty_cap || too_full(pretty_used, pretty_cap, PRETTY_FILL)) {
        size_t ncap = pretty_cap ? pretty_cap * 2 : cap_for(names.used, 1024, PRETTY_FILL);
        pretty_t **nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return NULL;
        for (size_t i = 0; i < pretty_cap; i++) {
            if (!pretty_tab[i])
                continue;
            size_t j = (size_t)pretty_tab[i]->hash & (ncap - 1);
            while (nt[j])
                j = (j + 1) & (ncap - 1);
            nt[j] = pretty_tab[i];
        }
        free(pretty_tab);
        pretty_tab = nt;
        pretty_cap = ncap;
    }
    size_t j = (size_t)h & (pretty_cap - 1);
    for (; pretty_tab[j]; j = (j + 1) & (pretty_cap - 1))
        if (pretty_tab[j]->hash == h && strcmp(p_mangled(pretty_tab[j]), m) == 0)
            return pretty_tab[j];
    /* The entry and its texts in one piece: the mangled name, then the
     * demangled one (or the mangled one cut to 4095 bytes as the display,
     * when it is longer). */
    char *dm = demangle_now(m);
    size_t ml = strlen(m), dl = dm ? strlen(dm) : (ml <= 4095 ? 0 : 4095);
    if (ml > UINT32_MAX) {
        free(dm);
        return NULL;
    }
    pretty_t *p = perm_alloc(sizeof *p + ml + 1 + (dl ? dl + 1 : 0));
    if (!p) {
        free(dm);
        return NULL;
    }
    *p = (pretty_t){h, (uint32_t)ml, dl != 0, dm != NULL};
    memcpy(p->text, m, ml + 1);
    if (dl) {
        memcpy(p->text + ml + 1, dm ? dm : m, dl);
        p->text[ml + 1 + dl] = 0;
    }
    free(dm);
    pretty_tab[j] = p;
    pretty_used++;
    return p;
}

const char *sp_kern_demangle(const char *m)
{
    if (!m || m[0] != '_' || m[1] != 'Z')
        return NULL;
    pthread_mutex_lock(&lock);
    pretty_t *p = pretty_locked(m);
    pthread_mutex_unlock(&lock);
    return p && p->demangled ? p_display(p) : NULL;
}

const char *sp_kern_name(const void *ptr, int is_handle)
{
    int which = is_handle ? 1 : 0;
    uint64_t gen = atomic_load_explicit(&resolved_gen, memory_order_acquire);
    rtable_t *t = atomic_load_explicit(&resolved[which], memory_order_acquire);
    rnode_t *n = NULL;
    if (t)
        rprobe(t, ptr, &n);
#ifdef SP_KERN_TEST_YIELD
    /* The unit test's build widens the window after a probe that missed, where
     * a second read of the slot once raced a writer filling it (rprobe). */
    if (!n)
        sched_yield();
#endif
    const pretty_t *p = n && atomic_load_explicit(&n->gen, memory_order_acquire) == gen ? n->val : NULL;
    if (!p) {
        pthread_mutex_lock(&lock);
        gen = atomic_load_explicit(&resolved_gen, memory_order_relaxed);
        const char *m = mangled_locked(ptr, is_handle);
        p = m ? pretty_locked(m) : NULL;
        if (!m)
            p = &unknown;
        if (p)
            rput(which, ptr, p, gen);
        pthread_mutex_unlock(&lock);
    }
    return p && p != &unknown ? p_display(p) : NULL;
}

/* fork() copies a lock some other thread (often the exporter) may hold; the
 * child has only the forking thread, so the lock starts over there. */
void sp_kern_after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
}
