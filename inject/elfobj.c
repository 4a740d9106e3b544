/* inject/elfobj.c — reading loaded objects' dynamic sections (symbols through
 * their hash tables, DT_NEEDED, DT_SONAME, GOT relocations) and writing GOT
 * slots; see elfobj.h. Used inside dl_iterate_phdr walks only. */
#define _GNU_SOURCE
#include "elfobj.h"

#include "funchook.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

int sp_elf_contains(const struct dl_phdr_info *info, uintptr_t addr)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type == PT_LOAD && addr - (info->dlpi_addr + p->p_vaddr) < p->p_memsz)
            return 1;
    }
    return 0;
}

int sp_elf_is_vdso(const struct dl_phdr_info *info)
{
    uintptr_t vdso = getauxval(AT_SYSINFO_EHDR);
    return vdso && sp_elf_contains(info, vdso);
}

int sp_elf_is_ours(const struct dl_phdr_info *info)
{
    return sp_elf_contains(info, (uintptr_t)&sp_elf_is_ours);
}

int sp_elf_never_patched(const struct dl_phdr_info *info, const char *name)
{
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    uintptr_t ldso = getauxval(AT_BASE);
    return sp_elf_is_ours(info) || sp_elf_is_vdso(info) || (ldso && sp_elf_contains(info, ldso)) ||
           strncmp(base, "libc.so", 7) == 0 || strncmp(base, "libc-", 5) == 0;
}

/* glibc rebases most d_ptr entries in place when it loads an object at a
 * non-zero base; a read-only dynamic section (the vDSO's) keeps link-time
 * values. An address below the base can only be a link-time one. */
static uintptr_t dyn_addr(uintptr_t base, ElfW(Addr) p)
{
    return p < base ? base + p : p;
}

int sp_elf_read(const struct dl_phdr_info *info, int index, sp_elf_obj_t *o)
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
    o->dyn = dyn;
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

static const char *str_at(const sp_elf_obj_t *o, size_t off)
{
    return off < o->strsz ? o->strtab + off : "";
}

const char *sp_elf_sym_name(const sp_elf_obj_t *o, const ElfW(Sym) *s)
{
    return str_at(o, s->st_name);
}

const char *sp_elf_needed(const sp_elf_obj_t *o, int i)
{
    for (const ElfW(Dyn) *d = o->dyn; d && d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_NEEDED && i-- == 0)
            return str_at(o, d->d_un.d_val);
    return NULL;
}

const char *sp_elf_soname(const sp_elf_obj_t *o)
{
    for (const ElfW(Dyn) *d = o->dyn; d && d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_SONAME)
            return str_at(o, d->d_un.d_val);
    return NULL;
}

static int is_def(const sp_elf_obj_t *o, uint32_t i, const char *name)
{
    const ElfW(Sym) *s = &o->symtab[i];
    int type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
    return s->st_shndx != SHN_UNDEF && s->st_value != 0 && (type == STT_FUNC || type == STT_GNU_IFUNC) &&
           bind != STB_LOCAL && strcmp(sp_elf_sym_name(o, s), name) == 0;
}

int sp_elf_lookup(const sp_elf_obj_t *o, const char *name, const ElfW(Sym) **out, int max)
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

void sp_elf_each_slot(const sp_elf_obj_t *o, sp_elf_slot_fn fn, void *arg)
{
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; o->rel[k] && i < o->relsz[k] / sizeof(ElfW(Rela)); i++) {
            const ElfW(Rela) *r = &o->rel[k][i];
            uint32_t type = ELF64_R_TYPE(r->r_info), si = ELF64_R_SYM(r->r_info);
            if ((type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT) && si != 0)
                fn(arg, o, type, &o->symtab[si], o->info->dlpi_addr + r->r_offset);
        }
    }
}

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

int sp_elf_write_slot(const struct dl_phdr_info *info, uintptr_t slot, uintptr_t value)
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

void sp_elf_seen_walk(sp_elf_seen_t *s, const struct dl_phdr_info *info, size_t size, int index)
{
    if (index == 0 && size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs &&
        info->dlpi_subs != s->subs) {
        s->subs = info->dlpi_subs;
        s->n = 0;
    }
}

int sp_elf_seen_has(const sp_elf_seen_t *s, const struct dl_phdr_info *info)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].base == info->dlpi_addr && s->v[i].phdr == info->dlpi_phdr)
            return 1;
    return 0;
}

void sp_elf_seen_add(sp_elf_seen_t *s, const struct dl_phdr_info *info)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        void *p = realloc(s->v, cap * sizeof *s->v);
        if (!p)
            return;
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n].base = info->dlpi_addr;
    s->v[s->n++].phdr = info->dlpi_phdr;
}
