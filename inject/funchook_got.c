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

#include "../collectors/log.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

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
    struct {
        uintptr_t base;
        const void *phdr;
    } *seen;                  /* objects already patched */
    size_t nseen, capseen;
    unsigned long long subs;  /* dlpi_subs when `seen` was last valid */
    int write_errors;
    char where[256];
};

/* One loaded object's dynamic section, as far as the walk needs it. */
typedef struct {
    const struct dl_phdr_info *info;
    const char *name;
    const ElfW(Sym) *symtab;
    const char *strtab;
    size_t strsz;
    const ElfW(Rela) *rel[2]; /* DT_JMPREL, DT_RELA */
    size_t relsz[2];
    const uint32_t *gnu_hash, *sysv_hash;
} obj_t;

static int contains(const struct dl_phdr_info *info, uintptr_t addr)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type == PT_LOAD && addr - (info->dlpi_addr + p->p_vaddr) < p->p_memsz)
            return 1;
    }
    return 0;
}

static int is_vdso(const struct dl_phdr_info *info)
{
    uintptr_t vdso = getauxval(AT_SYSINFO_EHDR);
    return vdso && contains(info, vdso);
}

static int is_ours(const struct dl_phdr_info *info)
{
    return contains(info, (uintptr_t)&sp_fh_got_patch);
}

static int never_patched(const struct dl_phdr_info *info, const char *name)
{
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    uintptr_t ldso = getauxval(AT_BASE);
    return is_ours(info) || is_vdso(info) || (ldso && contains(info, ldso)) || strncmp(base, "libc.so", 7) == 0 ||
           strncmp(base, "libc-", 5) == 0;
}

/* glibc rebases most d_ptr entries in place when it loads an object at a
 * non-zero base; a read-only dynamic section (the vDSO's) keeps link-time
 * values. An address below the base can only be a link-time one. */
static uintptr_t dyn_addr(uintptr_t base, ElfW(Addr) p)
{
    return p < base ? base + p : p;
}

static int obj_read(const struct dl_phdr_info *info, int index, obj_t *o)
{
    memset(o, 0, sizeof *o);
    o->info = info;
    o->name = index == 0 ? sp_fh_exe_path() : info->dlpi_name ? info->dlpi_name : "";
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return -1;
    uintptr_t b = info->dlpi_addr;
    long pltrel = DT_RELA;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: o->symtab = (const ElfW(Sym) *)dyn_addr(b, dyn->d_un.d_ptr); break;
        case DT_STRTAB: o->strtab = (const char *)dyn_addr(b, dyn->d_un.d_ptr); break;
        case DT_STRSZ: o->strsz = dyn->d_un.d_val; break;
        case DT_JMPREL: o->rel[0] = (const ElfW(Rela) *)dyn_addr(b, dyn->d_un.d_ptr); break;
        case DT_PLTRELSZ: o->relsz[0] = dyn->d_un.d_val; break;
        case DT_PLTREL: pltrel = (long)dyn->d_un.d_val; break;
        case DT_RELA: o->rel[1] = (const ElfW(Rela) *)dyn_addr(b, dyn->d_un.d_ptr); break;
        case DT_RELASZ: o->relsz[1] = dyn->d_un.d_val; break;
        case DT_GNU_HASH: o->gnu_hash = (const uint32_t *)dyn_addr(b, dyn->d_un.d_ptr); break;
        case DT_HASH: o->sysv_hash = (const uint32_t *)dyn_addr(b, dyn->d_un.d_ptr); break;
        default: break;
        }
    }
    if (pltrel != DT_RELA)
        o->rel[0] = NULL;
    return o->symtab && o->strtab ? 0 : -1;
}

static const char *sym_name(const obj_t *o, const ElfW(Sym) *s)
{
    return s->st_name < o->strsz ? o->strtab + s->st_name : "";
}

static int is_def(const obj_t *o, uint32_t i, const char *name)
{
    const ElfW(Sym) *s = &o->symtab[i];
    int type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
    return s->st_shndx != SHN_UNDEF && s->st_value != 0 && (type == STT_FUNC || type == STT_GNU_IFUNC) &&
           bind != STB_LOCAL && strcmp(sym_name(o, s), name) == 0;
}

/* The dynamic symbols of o that define `name` (several with symbol versions),
 * found through the object's hash table. */
static int obj_lookup(const obj_t *o, const char *name, const ElfW(Sym) **out, int max)
{
    int n = 0;
    if (o->gnu_hash) {
        const uint32_t *h = o->gnu_hash;
        uint32_t nbuckets = h[0], symoff = h[1], nbloom = h[2];
        const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(h + 4) + nbloom);
        const uint32_t *chain = buckets + nbuckets;
        uint32_t hv = 5381;
        for (const char *c = name; *c; c++)
            hv = hv * 33 + (uint8_t)*c;
        uint32_t i = nbuckets ? buckets[hv % nbuckets] : 0;
        for (; i >= symoff && i != 0; i++) {
            uint32_t ch = chain[i - symoff];
            if ((ch | 1) == (hv | 1) && is_def(o, i, name) && n < max)
                out[n++] = &o->symtab[i];
            if (ch & 1)
                break;
        }
    } else if (o->sysv_hash) {
        const uint32_t *h = o->sysv_hash;
        uint32_t nbucket = h[0];
        const uint32_t *bucket = h + 2, *chain = bucket + nbucket;
        unsigned long hv = 0;
        for (const char *c = name; *c; c++) {
            hv = (hv << 4) + (uint8_t)*c;
            hv = (hv ^ ((hv & 0xf0000000ul) >> 24)) & 0x0ffffffful;
        }
        for (uint32_t i = nbucket ? bucket[hv % nbucket] : 0; i != 0; i = chain[i])
            if (is_def(o, i, name) && n < max)
                out[n++] = &o->symtab[i];
    }
    return n;
}

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
    obj_t o;
    int index = w->index++;
    if (is_vdso(info) || obj_read(info, index, &o) != 0)
        return 0;
    int ours = is_ours(info);
    if (!ours && !sp_fh_lib_matches(w->g->library, o.name))
        return 0;
    w->matched += !ours;
    const ElfW(Sym) *syms[MAX_DEFS];
    int n = obj_lookup(&o, w->g->symbol, syms, MAX_DEFS);
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

/* The protection of the page holding a GOT slot: read-only inside PT_GNU_RELRO
 * (the loader rounds that range down to pages at both ends), else its
 * segment's. */
static int slot_prot(const struct dl_phdr_info *info, uintptr_t slot, size_t page)
{
    int prot = PROT_READ | PROT_WRITE;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + p->p_vaddr;
        if (p->p_type == PT_GNU_RELRO && slot >= (start & ~(page - 1)) &&
            slot < ((start + p->p_memsz) & ~(page - 1)))
            return PROT_READ;
        if (p->p_type == PT_LOAD && slot - start < p->p_memsz)
            prot = (p->p_flags & PF_R ? PROT_READ : 0) | (p->p_flags & PF_W ? PROT_WRITE : 0) |
                   (p->p_flags & PF_X ? PROT_EXEC : 0);
    }
    return prot;
}

static int write_slot(const struct dl_phdr_info *info, uintptr_t slot, uintptr_t value)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int prot = slot_prot(info, slot, page);
    void *pg = (void *)(slot & ~(page - 1));
    if (!(prot & PROT_WRITE) && mprotect(pg, page, prot | PROT_WRITE) != 0)
        return -1;
    __atomic_store_n((uintptr_t *)slot, value, __ATOMIC_RELEASE);
    if (!(prot & PROT_WRITE))
        mprotect(pg, page, prot);
    return 0;
}

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

static int seen_before(sp_fh_got_t *g, const struct dl_phdr_info *info)
{
    for (size_t i = 0; i < g->nseen; i++)
        if (g->seen[i].base == info->dlpi_addr && g->seen[i].phdr == info->dlpi_phdr)
            return 1;
    if (g->nseen == g->capseen) {
        size_t cap = g->capseen ? 2 * g->capseen : 64;
        void *p = realloc(g->seen, cap * sizeof *g->seen);
        if (!p)
            return 0; /* not remembered: patched again next time, which finds nothing to do */
        g->seen = p;
        g->capseen = cap;
    }
    g->seen[g->nseen].base = info->dlpi_addr;
    g->seen[g->nseen++].phdr = info->dlpi_phdr;
    return 0;
}

static void patch_slot(slots_walk_t *w, const obj_t *o, const ElfW(Rela) *r)
{
    sp_fh_got_t *g = w->g;
    uint32_t type = ELF64_R_TYPE(r->r_info), si = ELF64_R_SYM(r->r_info);
    if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || si == 0)
        return;
    const ElfW(Sym) *s = &o->symtab[si];
    if (strcmp(sym_name(o, s), g->symbol) != 0)
        return;
    uintptr_t slot = o->info->dlpi_addr + r->r_offset;
    uintptr_t v = *(const uintptr_t *)slot, target = 0;
    if (in_list(g->defs, g->ndefs, v))
        target = v;
    else if (type == R_X86_64_JUMP_SLOT && s->st_shndx == SHN_UNDEF && contains(o->info, v) && !sp_fh_is_ours(v))
        target = g->lazy_def;
    if (!target)
        return;
    uintptr_t stub = stub_for(g, target);
    if (stub && write_slot(o->info, slot, stub) == 0) {
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
    /* An unloaded object's base may be reused by the next one: forget them all. */
    if (index == 0 && size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs &&
        info->dlpi_subs != w->g->subs) {
        w->g->subs = info->dlpi_subs;
        w->g->nseen = 0;
    }
    obj_t o;
    if (seen_before(w->g, info) || obj_read(info, index, &o) != 0 || never_patched(info, o.name))
        return 0;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; o.rel[k] && i < o.relsz[k] / sizeof(ElfW(Rela)); i++)
            patch_slot(w, &o, &o.rel[k][i]);
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
