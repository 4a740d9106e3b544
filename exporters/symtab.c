/* exporters/symtab.c — see symtab.h. The executable's STT_FUNC symbols are
 * sorted by address once; a lookup is a binary search. The load bias of a
 * PIE executable is the first dl_iterate_phdr entry's dlpi_addr. */
#define _GNU_SOURCE
#include "symtab.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct fsym {
    uintptr_t addr, size;
    const char *name;
} fsym_t;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static fsym_t *syms;
static size_t nsyms;
static char *strtab;
static uintptr_t bias;

static int first_object(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    *(uintptr_t *)out = info->dlpi_addr;
    return 1;
}

static int by_addr(const void *a, const void *b)
{
    uintptr_t x = ((const fsym_t *)a)->addr, y = ((const fsym_t *)b)->addr;
    return (x > y) - (x < y);
}

static void *read_at(int fd, off_t off, size_t len)
{
    void *p = len < (256u << 20) ? malloc(len + 1) : NULL;
    if (p && pread(fd, p, len, off) != (ssize_t)len) {
        free(p);
        p = NULL;
    }
    return p;
}

static void load(void)
{
    dl_iterate_phdr(first_object, &bias);
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    Elf64_Ehdr eh;
    Elf64_Shdr *sh = NULL;
    Elf64_Sym *st = NULL;
    if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0)
        goto out;
    sh = read_at(fd, (off_t)eh.e_shoff, (size_t)eh.e_shnum * sizeof *sh);
    for (size_t i = 0; sh && i < eh.e_shnum && !st; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh.e_shnum || sh[i].sh_entsize != sizeof(Elf64_Sym))
            continue;
        const Elf64_Shdr *strs = &sh[sh[i].sh_link];
        st = read_at(fd, (off_t)sh[i].sh_offset, sh[i].sh_size);
        strtab = read_at(fd, (off_t)strs->sh_offset, strs->sh_size);
        if (!st || !strtab)
            break;
        strtab[strs->sh_size] = 0;
        size_t n = sh[i].sh_size / sizeof *st;
        syms = malloc((n ? n : 1) * sizeof *syms);
        for (size_t k = 0; syms && k < n; k++) {
            if (ELF64_ST_TYPE(st[k].st_info) != STT_FUNC || !st[k].st_value || !st[k].st_size ||
                st[k].st_name >= strs->sh_size)
                continue;
            syms[nsyms++] = (fsym_t){(uintptr_t)st[k].st_value + bias, st[k].st_size, strtab + st[k].st_name};
        }
        qsort(syms, nsyms, sizeof *syms, by_addr);
    }
out:
    free(st);
    free(sh);
    close(fd);
}

const char *sp_symtab_exe_lookup(uintptr_t pc, uintptr_t *offset)
{
    pthread_once(&once, load);
    size_t lo = 0, hi = nsyms;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (syms[mid].addr <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || pc >= syms[lo - 1].addr + syms[lo - 1].size)
        return NULL;
    *offset = pc - syms[lo - 1].addr;
    return syms[lo - 1].name;
}
