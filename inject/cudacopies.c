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
#include "objtab.h"

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
static uintptr_t warned[MAX_WARNED];   /* copies said (pass lock) */
static int nwarned;

/* ---- the loaded objects ------------------------------------------------ */

/* The table the passes and registrations share (pass lock held). */
static sp_ot_t tab = {.probes = probes, .nprobes = NPROBES};

typedef void (*with_fn)(sp_ot_t *t, void *arg);
typedef struct {
    sp_ot_t *t;
    with_fn fn;
    void *arg;
    int done;
} under_t;

/* Runs fn once over t brought up to date, inside an outer walk so that no
 * object can be unloaded meanwhile. */
static int under_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    under_t *u = arg;
    if (u->done++)
        return 1;
    if (sp_ot_refresh(u->t, info) == 0 && u->t->ours != SP_OT_NONE)
        u->fn(u->t, u->arg);
    return 1;
}

static void with_objects(sp_ot_t *t, with_fn fn, void *arg)
{
    under_t u = {t, fn, arg, 0};
    dl_iterate_phdr(under_cb, &u);
}

static int in_obj(const sp_ot_t *t, size_t i, uintptr_t p)
{
    return i < t->n && sp_elf_contains(&t->v[i].info, p);
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
    sp_ot_t *a;
    size_t x;
    names_t *nm;
    int collect;     /* 1: gather names; 0: write slots */
    int unknown;     /* x has a slot for a name the first walk did not gather */
    int answers;     /* x has a slot stepprof's export answers */
    size_t nscope;   /* x's scope, once computed (0: not yet) */
    char *copy_of[MAX_WARNED], *copy_user[MAX_WARNED]; /* copies: said after the walk, when a dlclose may
                                                         * have freed the loader's strings */
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
    p->copy_of[p->ncopies] = strdup(p->a->v[copy].o.name);
    p->copy_user[p->ncopies] = strdup(p->a->v[p->x].o.name);
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
    p->answers = 1;
    if (p->collect) {
        if (k < 0 && p->nm->n < MAX_NAMES && (p->nm->name[p->nm->n] = strdup(name)) != NULL)
            p->nm->n++;
        return;
    }
    p->unknown |= k < 0;
    if (k < 0 || !p->nm->real[k])
        return;
    if (!p->nscope)
        p->nscope = sp_ot_scope(p->a, p->x);
    uintptr_t bare = sp_ot_scope_def(p->a, p->nscope, name);
    size_t copy = bare ? sp_ot_find(p->a, bare) : SP_OT_NONE;
    if (!bare || bare == (uintptr_t)p->nm->real[k] || copy == SP_OT_NONE)
        return;
    if (sp_elf_write_slot(o->info, slot, bare) == 0)
        note_copy(p, copy, p->nm->real[k]);
}

/* Only the objects no pass has handled yet are read: after an unload the
 * table is read again and every object is handled once more. */
static void pass_objects(sp_ot_t *a, void *arg)
{
    pass_t *p = arg;
    p->a = a;
    if (p->collect) {
        int two = 0;
        for (int k = 0; k < NPROBES; k++)
            two |= (p->probes[k] = a->nprobe[k]) >= 2;
        if (!two)
            return;
    }
    for (p->x = 0; p->x < a->n; p->x++) {
        sp_ot_ent_t *e = &a->v[p->x];
        if (e->handled)
            continue;
        if (!e->ok || sp_elf_never_patched(&e->info, e->o.name)) {
            e->handled = 1;
            continue;
        }
        p->nscope = 0;
        p->unknown = 0;
        p->answers = 0;
        sp_elf_each_slot(&e->o, slot_cb, p);
        /* loaded between the walks: handled by the next pass; none of its
         * slots is ours: nothing for any pass to do */
        if ((!p->collect && !p->unknown) || !p->answers)
            e->handled = 1;
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
               p->copy_of[i] ? p->copy_of[i] : "?", p->copy_user[i] ? p->copy_user[i] : "?", first);
    }
}

static void pass(void)
{
    static names_t nm;
    pass_t p = {.nm = &nm, .collect = 1};
    with_objects(&tab, pass_objects, &p);
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
        with_objects(&tab, pass_objects, &p);
        say(&p);
    }
    for (int i = 0; i < p.ncopies; i++)
        free(p.copy_of[i]), free(p.copy_user[i]);
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

/* Registrations (~50k at start-up) ask for one name, from few objects: the
 * answer is kept per object until the loaded objects change, and the global
 * scope's for that generation (pass lock). */
static const char memo_name[] = "__cudaRegisterFunction";
static struct {
    unsigned long long adds, subs;
    int valid;
    void *def;
} memo_global;

typedef struct {
    uintptr_t caller;
    const char *name;
    int memo; /* name is memo_name, t is the shared table */
    int walked; /* the table was brought up to date (not out of memory): adds, subs are its generation */
    uintptr_t bare;
    unsigned long long adds, subs;
} target_t;

static void target_objects(sp_ot_t *a, void *arg)
{
    target_t *t = arg;
    t->walked = 1;
    t->adds = a->adds;
    t->subs = a->subs;
    size_t x = sp_ot_find(a, t->caller);
    if (x == SP_OT_NONE || x == a->ours)
        return;
    sp_ot_ent_t *e = &a->v[x];
    if (t->memo && e->memo_ver == a->ver) {
        t->bare = e->memo;
        return;
    }
    t->bare = sp_ot_scope_def(a, sp_ot_scope(a, x), t->name);
    if (t->memo) {
        e->memo = t->bare;
        e->memo_ver = a->ver;
    }
}

/* What the caller binds to in its own scope (t->bare) and in the global one
 * (returned). Another thread's pass is not waited for: a table of our own. */
static void *target_find(target_t *t)
{
    if (pthread_mutex_trylock(&pass_lock) != 0) {
        sp_ot_t own = {.probes = probes, .nprobes = NPROBES};
        t->memo = 0;
        with_objects(&own, target_objects, t);
        sp_ot_free(&own);
        return global_def(t->name);
    }
    t->memo = strcmp(t->name, memo_name) == 0;
    with_objects(&tab, target_objects, t);
    void *g;
    if (t->memo && t->walked && memo_global.valid && memo_global.adds == t->adds && memo_global.subs == t->subs) {
        g = memo_global.def;
    } else {
        g = global_def(t->name);
        if (t->memo && t->walked)
            memo_global = (typeof(memo_global)){t->adds, t->subs, 1, g};
    }
    pthread_mutex_unlock(&pass_lock);
    return g;
}

void *sp_copies_target(const void *caller, const char *name, void *fallback)
{
    if (!atomic_load(&multi) || !caller)
        return fallback;
    int saved = errno;
    target_t t = {.caller = (uintptr_t)caller, .name = name};
    void *g = target_find(&t);
    /* sp_real only when the answer may differ from fallback (its lookup may walk every object) */
    void *to = !g && t.bare && (void *)t.bare != fallback && (void *)t.bare != sp_real(name) ? (void *)t.bare
                                                                                            : fallback;
    errno = saved;
    return to;
}
