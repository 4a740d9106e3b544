/* inject/elfobj.h — what stepprof reads and writes in the loaded objects'
 * dynamic sections: their symbol tables (through the hash tables), their
 * GOT relocations (R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT) and the slots
 * those name, written past RELRO. Shared by the marker hooks
 * (funchook_got.c) and the second-runtime redirection (cudacopies.c). Every
 * function here reads memory of objects that must stay loaded while it runs:
 * callers run them inside dl_iterate_phdr, which holds the loader's list
 * lock; none of them calls back into the loader. */
#ifndef SP_ELFOBJ_H
#define SP_ELFOBJ_H

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>

/* One loaded object's dynamic section, as far as the walks need it. */
typedef struct {
    const struct dl_phdr_info *info;
    const char *name;
    const ElfW(Dyn) *dyn;
    const ElfW(Sym) *symtab;
    const char *strtab;
    size_t strsz;
    const ElfW(Rela) *rel[2]; /* DT_JMPREL, DT_RELA */
    size_t relsz[2];
    const uint32_t *gnu_hash, *sysv_hash;
} sp_elf_obj_t;

/* Is addr inside one of info's PT_LOAD segments? */
int sp_elf_contains(const struct dl_phdr_info *info, uintptr_t addr);
int sp_elf_is_vdso(const struct dl_phdr_info *info);
/* Is info libstepprof itself? */
int sp_elf_is_ours(const struct dl_phdr_info *info);
/* Objects whose slots stepprof never writes: itself, the dynamic loader,
 * the vDSO and libc (its few PLT calls are internal). */
int sp_elf_never_patched(const struct dl_phdr_info *info, const char *name);
/* Reads info's dynamic section into o; index is the object's place in the
 * walk (0: the executable, named by its path). 0 ok, -1 none. */
int sp_elf_read(const struct dl_phdr_info *info, int index, sp_elf_obj_t *o);
const char *sp_elf_sym_name(const sp_elf_obj_t *o, const ElfW(Sym) *s);
/* The dynamic symbols of o that define the function `name` (several with
 * symbol versions), at most max; returns their count. */
int sp_elf_lookup(const sp_elf_obj_t *o, const char *name, const ElfW(Sym) **out, int max);
/* The DT_NEEDED entry number i of o, or NULL past the last. */
const char *sp_elf_needed(const sp_elf_obj_t *o, int i);
/* o's DT_SONAME, or NULL. */
const char *sp_elf_soname(const sp_elf_obj_t *o);

/* Calls fn for every JUMP_SLOT / GLOB_DAT relocation of o that names a
 * symbol: s is that symbol, slot the run-time address of its GOT slot. */
typedef void (*sp_elf_slot_fn)(void *arg, const sp_elf_obj_t *o, uint32_t type, const ElfW(Sym) *s,
                               uintptr_t slot);
void sp_elf_each_slot(const sp_elf_obj_t *o, sp_elf_slot_fn fn, void *arg);
/* Stores value in the GOT slot at `slot` of info (made writable for the
 * store when it lies in RELRO). 0 ok, -1 with errno. */
int sp_elf_write_slot(const struct dl_phdr_info *info, uintptr_t slot, uintptr_t value);

/* The objects a walk has handled already, by base and program headers.
 * sp_elf_seen_walk must see the walk's first object (index 0): it forgets
 * them all after an unload, whose base the next object may reuse. */
typedef struct {
    struct {
        uintptr_t base;
        const void *phdr;
    } *v;
    size_t n, cap;
    unsigned long long subs;
} sp_elf_seen_t;
void sp_elf_seen_walk(sp_elf_seen_t *s, const struct dl_phdr_info *info, size_t size, int index);
/* Was info handled before? */
int sp_elf_seen_has(const sp_elf_seen_t *s, const struct dl_phdr_info *info);
/* Remembers info (best effort: when out of memory it is handled again next
 * time). */
void sp_elf_seen_add(sp_elf_seen_t *s, const struct dl_phdr_info *info);

#endif
