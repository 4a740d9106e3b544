/* inject/objtab.h — the loaded objects as the second-runtime redirection
 * (cudacopies.c) reads them: one entry per object with its dynamic section
 * read once, kept from one walk to the next and brought up to date from the
 * loader's adds/subs generation (an object added: one entry appended; one
 * unloaded: read again, as its base may now be another object's). Lookups
 * are by address (sorted extents) and by DT_NEEDED name (a hash of sonames
 * and file names), so nothing here is linear per lookup. Every function runs
 * inside dl_iterate_phdr (the loader's list lock: no object can go while the
 * entries' pointers into it are read). */
#ifndef SP_OBJTAB_H
#define SP_OBJTAB_H

#include "elfobj.h"

#include <stddef.h>
#include <stdint.h>

#define SP_OT_NONE ((size_t)-1)

typedef struct {
    struct dl_phdr_info info; /* a copy: the walk's own is gone after its callback */
    sp_elf_obj_t o;
    int ok;
    int handled;              /* its slots were looked at (cudacopies.c) */
    unsigned probes;          /* bit k: defines the caller's probe k */
    unsigned mark;            /* scope_of's visited stamp */
    uintptr_t lo, hi;         /* extent of its PT_LOAD segments */
    unsigned long long memo_ver; /* memo valid while == sp_ot_t.ver */
    uintptr_t memo;           /* the caller's memo (a definition's address, 0: none) */
} sp_ot_ent_t;

typedef struct {
    const char *name;
    size_t idx;
} sp_ot_name_t;

typedef struct {
    sp_ot_ent_t *v;
    size_t n, cap;
    size_t ours;               /* index of libstepprof, SP_OT_NONE */
    unsigned long long adds, subs; /* the generation the entries are for */
    unsigned long long ver;    /* bumped when entries are read again (an unload) */
    int filled;                /* entries are for (adds, subs) */
    const char *const *probes; /* names whose definitions set probes bits */
    int nprobes;
    int nprobe[8];             /* objects defining probe k (ours and unread ones aside) */
    size_t *order;             /* scratch: one object's scope; capacity cap */
    size_t *byaddr;            /* indexes sorted by lo: the first nsorted entries */
    size_t nsorted;
    sp_ot_name_t *names;       /* open addressing, first entry of a name wins */
    size_t nnames, capnames;
    unsigned stamp;
} sp_ot_t;

/* Brings t up to the loaded objects; called inside a walk (info: its first
 * object). 0 ok, -1 out of memory (t is then empty and fresh again). */
int sp_ot_refresh(sp_ot_t *t, const struct dl_phdr_info *first);
void sp_ot_free(sp_ot_t *t);
/* The entry whose object contains p, or SP_OT_NONE. */
size_t sp_ot_find(sp_ot_t *t, uintptr_t p);
/* The loaded object glibc takes for a DT_NEEDED entry (soname or file name),
 * never ours; SP_OT_NONE when none. */
size_t sp_ot_by_name(const sp_ot_t *t, const char *need);
/* x and its dependencies, breadth first, into t->order; returns the count. */
size_t sp_ot_scope(sp_ot_t *t, size_t x);
/* The first function definition of name in the scope t->order[0..n). */
uintptr_t sp_ot_scope_def(const sp_ot_t *t, size_t n, const char *name);

#endif
