/* inject/funchook_got.c — hooks a function defined in a shared library by
 * pointing the GOT slots that name it (R_X86_64_JUMP_SLOT: calls through the
 * PLT; R_X86_64_GLOB_DAT: -fno-plt calls and address-taken uses) at a
 * trampoline, in every loaded object and in each object dlopen()ed later.
 *
 * A slot is only rewritten when it holds one of the symbol's definitions in
 * the libraries asked for, or is a lazy-binding slot not resolved yet (it
 * still points into its own object's PLT): a slot bound elsewhere (another
 * library's same-named function, an executable's canonical PLT entry, which
 * leads to a slot of its own) is left alone, so each call passes one
 * trampoline. Never patched: libstepprof, the dynamic loader, the vDSO and
 * libc (its few PLT calls are internal). The walk over the loaded objects runs
 * under the loader's lock (dl_iterate_phdr), so no object can be unloaded
 * while its slots are written; nothing in it calls back into the loader. */
#define _GNU_SOURCE
#include "funchook.h"

#include "elfobj.h"

#include "../collectors/log.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEFS = 16, MAX_TARGETS = 16 };

struct sp_fh_got {
    char symbol[256];
    char library[256];
    void (*cb)(void);
    uintptr_t defs[MAX_DEFS]; /* addresses a bound slot may hold */
    int ndefs;
    uintptr_t lazy_def;       /* what an unresolved lazy slot would bind to */
    struct {
        uintptr_t target, stub;
        sp_fh_hook_t *hook;
    } targets[MAX_TARGETS];
    int ntargets;
    sp_elf_seen_t seen;       /* objects already patched */
    int write_errors;
    char where[256];
};

static int in_list(const uintptr_t *list, int n, uintptr_t v)
{
    for (int i = 0; i < n; i++)
        if (list[i] == v)
            return 1;
    return 0;
}

/* ---- pass 1: definitions ------------------------------------------------ */

typedef struct {
    sp_fh_got_t *g;
    int index;
    int matched;       /* objects (other than ours) the library pattern matched */
    int defining;      /* of those, objects that define the symbol */
    int need_ifunc;    /* an IFUNC definition: its target is known only to dlsym */
    const char *first; /* first defining object's name */
} defs_walk_t;

static int defs_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    defs_walk_t *w = arg;
    sp_elf_obj_t o;
    int index = w->index++;
    if (sp_elf_is_vdso(info) || sp_elf_read(info, index, &o) != 0)
        return 0;
    int ours = sp_elf_is_ours(info);
    if (!ours && !sp_fh_lib_matches(w->g->library, o.name))
        return 0;
    w->matched += !ours;
    const ElfW(Sym) *syms[MAX_DEFS];
    int n = sp_elf_lookup(&o, w->g->symbol, syms, MAX_DEFS);
    if (n && !ours && !w->defining++)
        w->first = o.name;
    for (int i = 0; i < n; i++) {
        uintptr_t a = info->dlpi_addr + syms[i]->st_value;
        if (ELF64_ST_TYPE(syms[i]->st_info) == STT_GNU_IFUNC)
            w->need_ifunc = 1;
        else if (!in_list(w->g->defs, w->g->ndefs, a) && w->g->ndefs < MAX_DEFS)
            w->g->defs[w->g->ndefs++] = a;
    }
    return 0;
}

/* ---- pass 2: slots -------------------------------------------------------- */

/* The stub that runs the callback and then jumps to `target`, made on first
 * use; 0 when out of hooks or memory. */
static uintptr_t stub_for(sp_fh_got_t *g, uintptr_t target)
{
    for (int i = 0; i < g->ntargets; i++)
        if (g->targets[i].target == target)
            return g->targets[i].stub;
    if (g->ntargets == MAX_TARGETS)
        return 0;
    sp_fh_hook_t *h = sp_fh_hook_new(g->cb);
    uint8_t *page = h ? sp_fh_code_alloc(0) : NULL;
    if (!page)
        return 0;
    sp_fh_stub_head(page, h);
    sp_fh_emit_abs_jmp(page + SP_FH_STUB_TAIL, target);
    if (sp_fh_code_seal(page) != 0)
        return 0;
    g->targets[g->ntargets].target = target;
    g->targets[g->ntargets].hook = h;
    g->targets[g->ntargets].stub = (uintptr_t)page + SP_FH_STUB_ENTRY;
    return g->targets[g->ntargets++].stub;
}

typedef struct {
    sp_fh_got_t *g;
    int index;
    int patched;
} slots_walk_t;

static void patch_slot(void *arg, const sp_elf_obj_t *o, uint32_t type, const ElfW(Sym) *s, uintptr_t slot)
{
    slots_walk_t *w = arg;
    sp_fh_got_t *g = w->g;
    if (strcmp(sp_elf_sym_name(o, s), g->symbol) != 0)
        return;
    uintptr_t v = *(const uintptr_t *)slot, target = 0;
    if (in_list(g->defs, g->ndefs, v))
        target = v;
    else if (type == R_X86_64_JUMP_SLOT && s->st_shndx == SHN_UNDEF && sp_elf_contains(o->info, v) &&
             !sp_fh_is_ours(v))
        target = g->lazy_def;
    if (!target)
        return;
    uintptr_t stub = stub_for(g, target);
    if (stub && sp_elf_write_slot(o->info, slot, stub) == 0) {
        w->patched++;
    } else if (!g->write_errors++) {
        sp_log(SP_LOG_ERROR, "marker function:%s: cannot hook a call site in %s (%s); calls from there are not seen",
               g->symbol, o->name, stub ? strerror(errno) : "out of trampoline memory");
    }
}

static int slots_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    slots_walk_t *w = arg;
    int index = w->index++;
    sp_elf_seen_walk(&w->g->seen, info, size, index);
    sp_elf_obj_t o;
    if (sp_elf_seen_has(&w->g->seen, info))
        return 0;
    sp_elf_seen_add(&w->g->seen, info);
    if (sp_elf_read(info, index, &o) != 0 || sp_elf_never_patched(info, o.name))
        return 0;
    sp_elf_each_slot(&o, patch_slot, w);
    return 0;
}

int sp_fh_got_patch(sp_fh_got_t *g)
{
    defs_walk_t d = {.g = g};
    dl_iterate_phdr(defs_cb, &d);
    slots_walk_t w = {.g = g};
    dl_iterate_phdr(slots_cb, &w);
    return w.patched;
}

sp_fh_got_t *sp_fh_got_prepare(const char *symbol, const char *library, void (*cb)(void), char *why, size_t whylen)
{
    sp_fh_got_t *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    snprintf(g->symbol, sizeof g->symbol, "%s", symbol);
    snprintf(g->library, sizeof g->library, "%s", library);
    g->cb = cb;
    defs_walk_t d = {.g = g};
    dl_iterate_phdr(defs_cb, &d);
    /* dlsym is safe here, outside the walk: it resolves IFUNCs, and gives the
     * global-scope binding that unresolved lazy slots will get. */
    uintptr_t global = (uintptr_t)dlsym(RTLD_DEFAULT, symbol);
    if (d.need_ifunc && global && !in_list(g->defs, g->ndefs, global) && g->ndefs < MAX_DEFS)
        g->defs[g->ndefs++] = global;
    if (library[0] && !d.matched) {
        snprintf(why, whylen, "no loaded library matches '%s' (the library must be loaded by the first CUDA call)",
                 library);
    } else if (!d.defining) {
        if (library[0])
            snprintf(why, whylen, "no library matching '%s' defines a function named '%s'", library, symbol);
        else
            snprintf(why, whylen,
                     "no function named '%s' in the executable's symbol table or in any loaded library's dynamic "
                     "symbols", symbol);
    } else {
        const char *slash = strrchr(d.first, '/');
        if (d.defining == 1)
            snprintf(g->where, sizeof g->where, "%s", slash ? slash + 1 : d.first);
        else
            snprintf(g->where, sizeof g->where, "%d libraries", d.defining);
        g->lazy_def = in_list(g->defs, g->ndefs, global) ? global : g->defs[0];
        return g;
    }
    free(g);
    return NULL;
}

unsigned long sp_fh_got_fired(const sp_fh_got_t *g)
{
    unsigned long n = 0;
    for (int i = 0; i < g->ntargets; i++)
        n += __atomic_load_n(&g->targets[i].hook->fired, __ATOMIC_RELAXED);
    return n;
}

const char *sp_fh_got_where(const sp_fh_got_t *g)
{
    return g->where;
}
