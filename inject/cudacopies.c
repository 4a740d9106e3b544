/* inject/cudacopies.c — keeps each object on the CUDA runtime (or driver)
 * copy it binds to without stepprof (see cudacopies.h).
 *
 * Bare, glibc binds an object's call to the first definition in the global
 * scope, else in the object's own dependencies: a plugin loaded RTLD_LOCAL
 * with its own libcudart calls that copy. Under stepprof the global scope
 * holds stepprof's interposers, whose real function is the first copy loaded
 * (lookup.c): without this file a second plugin's launches, registrations
 * and allocations would reach the first plugin's runtime while its other
 * calls stay in its own. So once two objects define cudaMalloc (or cuInit),
 * every GOT slot bound to one of stepprof's exports (or a lazy slot that
 * would bind to one) is pointed at the object's own binding (the global
 * scope has none for the name: it is searched first, through dlsym; then the
 * object and its DT_NEEDED dependencies breadth first, read from their ELF
 * tables) when that is not the interposer's real function. Those calls are
 * no longer recorded (CUPTI still sees their GPU work). Registration calls
 * made by constructors inside dlopen run before the slots can be written:
 * their interposer asks sp_copies_target.
 *
 * Locking: the loaded objects are read and their slots written inside
 * dl_iterate_phdr (the loader's list lock, recursive: nested walks are safe),
 * dlsym runs outside it. The pass lock is only tried, never waited for: a
 * constructor holds the loader's lock that the thread holding ours may be
 * waiting for in dlsym. */
#define _GNU_SOURCE
#include "cudacopies.h"

#include "../collectors/log.h"
#include "elfobj.h"
#include "funchook.h"
#include "hook.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static const char *const probes[] = {"cudaMalloc", "cuInit"};
enum { NPROBES = sizeof probes / sizeof probes[0], MAX_NAMES = 1024, MAX_WARNED = 16 };

static _Atomic unsigned long long done_adds = ~0ull, done_subs = ~0ull;
static atomic_int multi; /* some probe has two definitions */
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;
static sp_elf_seen_t seen;             /* objects whose slots were handled (pass lock) */
static uintptr_t warned[MAX_WARNED];   /* copies said (pass lock) */
static int nwarned;

/* ---- the loaded objects, read in one walk ------------------------------ */

typedef struct {
    struct dl_phdr_info info; /* a copy: the walk's own is gone after its callback */
    sp_elf_obj_t o;
    int ok;
} ent_t;

typedef struct {
    ent_t *v;
    size_t n, cap;
    size_t ours;  /* index of libstepprof */
    size_t *order; /* scratch: one object's scope */
} objs_t;

static int collect_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    objs_t *a = arg;
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 128;
        ent_t *p = realloc(a->v, cap * sizeof *p);
        if (!p)
            return 1;
        a->v = p;
        a->cap = cap;
    }
    ent_t *e = &a->v[a->n];
    memset(e, 0, sizeof *e);
    memcpy(&e->info, info, size < sizeof e->info ? size : sizeof e->info);
    e->ok = !sp_elf_is_vdso(info) && sp_elf_read(info, (int)a->n, &e->o) == 0;
    if (sp_elf_is_ours(info))
        a->ours = a->n;
    a->n++;
    return 0;
}

typedef void (*with_fn)(objs_t *a, void *arg);
typedef struct {
    with_fn fn;
    void *arg;
    int done;
} under_t;

/* Runs fn once over every loaded object, inside an outer walk so that none
 * can be unloaded meanwhile. */
static int under_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info, (void)size;
    under_t *u = arg;
    if (u->done++)
        return 1;
    objs_t a = {.ours = (size_t)-1};
    dl_iterate_phdr(collect_cb, &a);
    a.order = malloc((a.n ? a.n : 1) * sizeof *a.order);
    if (a.order && a.ours != (size_t)-1) {
        for (size_t i = 0; i < a.n; i++)
            a.v[i].o.info = &a.v[i].info;
        u->fn(&a, u->arg);
    }
    free(a.order);
    free(a.v);
    return 1;
}

static void with_objects(with_fn fn, void *arg)
{
    under_t u = {fn, arg, 0};
    dl_iterate_phdr(under_cb, &u);
}

static int in_obj(const objs_t *a, size_t i, uintptr_t p)
{
    return i < a->n && sp_elf_contains(&a->v[i].info, p);
}

static size_t obj_of(const objs_t *a, uintptr_t p)
{
    for (size_t i = 0; i < a->n; i++)
        if (in_obj(a, i, p))
            return i;
    return (size_t)-1;
}

/* The loaded object glibc takes for a DT_NEEDED entry: matched by soname or
 * file name. */
static size_t by_name(const objs_t *a, const char *need)
{
    for (size_t i = 0; i < a->n; i++) {
        if (!a->v[i].ok || i == a->ours)
            continue;
        const char *so = sp_elf_soname(&a->v[i].o), *slash = strrchr(a->v[i].o.name, '/');
        if ((so && strcmp(so, need) == 0) || strcmp(slash ? slash + 1 : a->v[i].o.name, need) == 0)
            return i;
    }
    return (size_t)-1;
}

/* x and its dependencies, breadth first, into a->order; returns the count. */
static size_t scope_of(objs_t *a, size_t x)
{
    size_t n = 0;
    a->order[n++] = x;
    for (size_t q = 0; q < n; q++) {
        const char *need;
        for (int i = 0; (need = sp_elf_needed(&a->v[a->order[q]].o, i)) != NULL; i++) {
            size_t d = by_name(a, need), k = 0;
            while (k < n && a->order[k] != d)
                k++;
            if (d != (size_t)-1 && k == n)
                a->order[n++] = d;
        }
    }
    return n;
}

static uintptr_t scope_def(const objs_t *a, size_t nscope, const char *name)
{
    for (size_t i = 0; i < nscope; i++) {
        const ent_t *e = &a->v[a->order[i]];
        const ElfW(Sym) *s;
        if (e->ok && a->order[i] != a->ours && sp_elf_lookup(&e->o, name, &s, 1) &&
            ELF64_ST_TYPE(s->st_info) == STT_FUNC)
            return e->info.dlpi_addr + s->st_value;
    }
    return 0;
}

/* ---- the names whose slots may need redirecting ----------------------- */

typedef struct {
    char *name[MAX_NAMES];
    void *real[MAX_NAMES]; /* the interposer's real function; NULL: leave its slots alone */
    int n;
} names_t;

static int name_index(const names_t *nm, const char *name)
{
    for (int i = 0; i < nm->n; i++)
        if (strcmp(nm->name[i], name) == 0)
            return i;
    return -1;
}

/* What a name binds to in the global scope past stepprof, or NULL (the
 * error of a miss is not the program's). */
static void *global_def(const char *name)
{
    void *g = sp_glibc_dlsym()(RTLD_NEXT, name);
    if (!g)
        dlerror();
    return g && !sp_is_ours(g) ? g : NULL;
}

/* ---- one pass ----------------------------------------------------------- */

typedef struct {
    objs_t *a;
    size_t x;
    names_t *nm;
    int collect;     /* 1: gather names; 0: write slots */
    int unknown;     /* x has a slot for a name the first walk did not gather */
    size_t nscope;   /* x's scope, once computed (0: not yet) */
    const char *copy_of[MAX_WARNED], *copy_user[MAX_WARNED];
    uintptr_t copy_base[MAX_WARNED];
    void *copy_real[MAX_WARNED];
    int ncopies;
    int probes[NPROBES];
} pass_t;

/* A slot stepprof's export answers: bound to it, or lazy and to be bound to it. */
static int ours_answers(const pass_t *p, const sp_elf_obj_t *o, uint32_t type, const ElfW(Sym) *s, uintptr_t v,
                        const char *name)
{
    const ElfW(Sym) *def;
    if (in_obj(p->a, p->a->ours, v))
        return 1;
    return type == R_X86_64_JUMP_SLOT && s->st_shndx == SHN_UNDEF && sp_elf_contains(o->info, v) &&
           sp_elf_lookup(&p->a->v[p->a->ours].o, name, &def, 1);
}

static void note_copy(pass_t *p, size_t copy, void *real)
{
    uintptr_t base = p->a->v[copy].info.dlpi_addr;
    for (int i = 0; i < p->ncopies; i++)
        if (p->copy_base[i] == base)
            return;
    if (p->ncopies == MAX_WARNED)
        return;
    p->copy_base[p->ncopies] = base;
    p->copy_of[p->ncopies] = p->a->v[copy].o.name;
    p->copy_user[p->ncopies] = p->a->v[p->x].o.name;
    p->copy_real[p->ncopies++] = real;
}

static void slot_cb(void *arg, const sp_elf_obj_t *o, uint32_t type, const ElfW(Sym) *s, uintptr_t slot)
{
    pass_t *p = arg;
    const char *name = sp_elf_sym_name(o, s);
    uintptr_t v = __atomic_load_n((const uintptr_t *)slot, __ATOMIC_ACQUIRE);
    if (!name[0] || !ours_answers(p, o, type, s, v, name))
        return;
    int k = name_index(p->nm, name);
    if (p->collect) {
        if (k < 0 && p->nm->n < MAX_NAMES && (p->nm->name[p->nm->n] = strdup(name)) != NULL)
            p->nm->n++;
        return;
    }
    p->unknown |= k < 0;
    if (k < 0 || !p->nm->real[k])
        return;
    if (!p->nscope)
        p->nscope = scope_of(p->a, p->x);
    uintptr_t bare = scope_def(p->a, p->nscope, name);
    size_t copy = bare ? obj_of(p->a, bare) : (size_t)-1;
    if (!bare || bare == (uintptr_t)p->nm->real[k] || copy == (size_t)-1)
        return;
    if (sp_elf_write_slot(o->info, slot, bare) == 0)
        note_copy(p, copy, p->nm->real[k]);
}

static void pass_objects(objs_t *a, void *arg)
{
    pass_t *p = arg;
    p->a = a;
    if (p->collect) {
        for (size_t i = 0; i < a->n; i++)
            for (int k = 0; k < NPROBES; k++) {
                const ElfW(Sym) *s;
                p->probes[k] += a->v[i].ok && i != a->ours && sp_elf_lookup(&a->v[i].o, probes[k], &s, 1);
            }
        int two = 0;
        for (int k = 0; k < NPROBES; k++)
            two |= p->probes[k] >= 2;
        if (!two)
            return;
    }
    if (a->n && a->v[0].info.dlpi_subs != seen.subs) {
        seen.subs = a->v[0].info.dlpi_subs;
        seen.n = 0; /* an unloaded object's base may be reused by the next one */
    }
    for (p->x = 0; p->x < a->n; p->x++) {
        ent_t *e = &a->v[p->x];
        if (!e->ok || sp_elf_never_patched(&e->info, e->o.name) || sp_elf_seen_has(&seen, &e->info))
            continue;
        p->nscope = 0;
        p->unknown = 0;
        sp_elf_each_slot(&e->o, slot_cb, p);
        if (!p->collect && !p->unknown) /* loaded between the walks: handled by the next pass */
            sp_elf_seen_add(&seen, &e->info);
    }
}

static void say(const pass_t *p)
{
    for (int i = 0; i < p->ncopies; i++) {
        int known = 0;
        for (int k = 0; k < nwarned; k++)
            known |= warned[k] == p->copy_base[i];
        if (known || nwarned == MAX_WARNED)
            continue;
        warned[nwarned++] = p->copy_base[i];
        Dl_info d;
        const char *first = dladdr(p->copy_real[i], &d) && d.dli_fname ? d.dli_fname : "another copy";
        sp_log(SP_LOG_WARN,
               "a second CUDA library copy is loaded: %s (used by %s) beside %s; calls into it go to it as "
               "without stepprof and are not recorded (CUPTI still sees their GPU work)",
               p->copy_of[i], p->copy_user[i], first);
    }
}

static void pass(void)
{
    static names_t nm;
    pass_t p = {.nm = &nm, .collect = 1};
    with_objects(pass_objects, &p);
    int two = 0;
    for (int k = 0; k < NPROBES; k++)
        two |= p.probes[k] >= 2;
    atomic_store(&multi, two);
    if (two)   /* from now on every object loaded is looked at as it loads */
        sp_fh_dlopen_watch();
    if (two && nm.n) {
        for (int i = 0; i < nm.n; i++)
            nm.real[i] = global_def(nm.name[i]) ? NULL : sp_real(nm.name[i]);
        p.collect = 0;
        with_objects(pass_objects, &p);
        say(&p);
    }
    for (int i = 0; i < nm.n; i++)
        free(nm.name[i]);
    nm.n = 0;
}

static int gen_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    unsigned long long *g = arg;
    g[0] = info->dlpi_adds;
    g[1] = info->dlpi_subs;
    return 1;
}

/* A fork while another thread held the pass lock must not leave the child
 * without passes. */
static void after_fork_child(void)
{
    pthread_mutex_init(&pass_lock, NULL);
}

static void init_once(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

void sp_copies_check(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    int saved = errno;
    pthread_once(&once, init_once);
    unsigned long long g[2] = {0, 0};
    dl_iterate_phdr(gen_cb, g);
    if ((g[0] != atomic_load(&done_adds) || g[1] != atomic_load(&done_subs)) &&
        pthread_mutex_trylock(&pass_lock) == 0) {
        pass();
        atomic_store(&done_adds, g[0]);
        atomic_store(&done_subs, g[1]);
        pthread_mutex_unlock(&pass_lock);
    }
    errno = saved;
}

/* ---- one call ----------------------------------------------------------- */

typedef struct {
    uintptr_t caller;
    const char *name;
    uintptr_t bare;
} target_t;

static void target_objects(objs_t *a, void *arg)
{
    target_t *t = arg;
    size_t x = obj_of(a, t->caller);
    if (x != (size_t)-1 && x != a->ours)
        t->bare = scope_def(a, scope_of(a, x), t->name);
}

void *sp_copies_target(const void *caller, const char *name, void *fallback)
{
    if (!atomic_load(&multi) || !caller)
        return fallback;
    int saved = errno;
    target_t t = {(uintptr_t)caller, name, 0};
    if (!global_def(name))
        with_objects(target_objects, &t);
    void *to = t.bare && (void *)t.bare != sp_real(name) ? (void *)t.bare : fallback;
    errno = saved;
    return to;
}
