/* inject/funchook_entry.c — hooks a function defined in the main executable by
 * patching its entry: the first instructions (at least 5 bytes) make way for
 * `jmp rel32` to a trampoline near the executable that runs the callback
 * (funchook.c's thunk), then the displaced instructions, moved and fixed up,
 * then jumps back. Also finds such functions in the executable's .symtab
 * (static ones included) and .dynsym, read from /proc/self/exe.
 *
 * Instruction boundaries come from the capstone disassembler, dlopen()ed
 * (RTLD_LOCAL) only when this is needed and closed after: stepprof does not
 * link it, and its headers are not needed to build. The few declarations
 * below mirror capstone 4's ABI (checked against capstone 4.0.2's headers by
 * the static assertions); the library's version is checked at run time and a
 * self-test decodes two known instructions before anything is patched.
 *
 * A patch is refused, with the reason, when it cannot be made safely: the
 * function is shorter than the jump, a displaced instruction is a conditional
 * branch or a RIP-relative access the trampoline cannot reach, or a branch in
 * the function (or its .cold part) lands inside the displaced bytes. */
#define _GNU_SOURCE
#include "funchook.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- capstone 4, as far as used ---------------------------------------- */

typedef size_t csh;
enum { CS_ARCH_X86 = 3, CS_MODE_64 = 1 << 3, CS_OPT_DETAIL = 2, CS_OPT_ON = 3 };
enum { CS_GRP_CALL = 2, CS_GRP_BRANCH_RELATIVE = 7 };

typedef struct {
    uint8_t prefix[4], opcode[4], rex, addr_size, modrm, sib;
    int64_t disp;
    int sib_index;
    int8_t sib_scale;
    int sib_base, xop_cc, sse_cc, avx_cc;
    uint8_t avx_sae;
    int avx_rm;
    uint64_t eflags;
    uint8_t op_count;
    uint64_t operands[8][6]; /* cs_x86_op, 48 bytes each: not read */
    struct {
        uint8_t modrm_offset, disp_offset, disp_size, imm_offset, imm_size;
    } encoding;
} cs_x86_t;

typedef struct {
    uint16_t regs_read[12];
    uint8_t regs_read_count;
    uint16_t regs_write[20];
    uint8_t regs_write_count;
    uint8_t groups[8];
    uint8_t groups_count;
    cs_x86_t x86; /* first member of a union of all architectures */
} cs_detail_t;

typedef struct {
    unsigned id;
    uint64_t address;
    uint16_t size;
    uint8_t bytes[16];
    char mnemonic[32];
    char op_str[160];
    cs_detail_t *detail;
} cs_insn_t;

_Static_assert(offsetof(cs_insn_t, detail) == 232 && sizeof(cs_insn_t) == 240, "capstone 4 cs_insn");
_Static_assert(offsetof(cs_detail_t, groups) == 67 && offsetof(cs_detail_t, x86) == 80, "capstone 4 cs_detail");
_Static_assert(offsetof(cs_x86_t, op_count) == 64 && offsetof(cs_x86_t, encoding) == 456, "capstone 4 cs_x86");

static struct {
    void *lib;
    csh h;
    unsigned (*version)(int *, int *);
    int (*open)(int, int, csh *);
    int (*option)(csh, int, size_t);
    size_t (*disasm)(csh, const uint8_t *, size_t, uint64_t, size_t, cs_insn_t **);
    void (*free)(cs_insn_t *, size_t);
    int (*close)(csh *);
} cs;

static int has_group(const cs_insn_t *in, int group)
{
    for (int i = 0; i < in->detail->groups_count && i < 8; i++)
        if (in->detail->groups[i] == group)
            return 1;
    return 0;
}

/* A relative branch's target; 0 for an encoding not understood. */
static uintptr_t branch_target(const cs_insn_t *in)
{
    unsigned off = in->detail->x86.encoding.imm_offset, size = in->detail->x86.encoding.imm_size;
    if (off == 0 || off + size > in->size || (size != 1 && size != 4))
        return 0;
    int32_t rel = size == 1 ? (int8_t)in->bytes[off] : 0;
    if (size == 4)
        memcpy(&rel, in->bytes + off, 4);
    return (uintptr_t)(in->address + in->size + (int64_t)rel);
}

/* mov 0x12345678(%rip),%rax; call .+0x15 — what relocation relies on. */
static int cs_selftest(void)
{
    static const uint8_t code[] = {0x48, 0x8b, 0x05, 0x78, 0x56, 0x34, 0x12, 0xe8, 0x10, 0, 0, 0};
    cs_insn_t *in = NULL;
    size_t n = cs.disasm(cs.h, code, sizeof code, 0x1000, 0, &in);
    int ok = n == 2 && in[0].size == 7 && in[0].detail && in[0].detail->x86.encoding.modrm_offset == 2 &&
             in[0].detail->x86.encoding.disp_offset == 3 && in[0].detail->x86.encoding.disp_size == 4 &&
             in[1].size == 5 && in[1].detail && has_group(&in[1], CS_GRP_CALL) &&
             has_group(&in[1], CS_GRP_BRANCH_RELATIVE) && branch_target(&in[1]) == 0x1007 + 5 + 0x10;
    if (n)
        cs.free(in, n);
    return ok;
}

static int cs_load(char *why, size_t whylen)
{
    if (cs.h)
        return 0;
    const char *name = "libcapstone.so.4";
    if (!(cs.lib = sp_fh_real_dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        cs.lib = sp_fh_real_dlopen(name = "libcapstone.so", RTLD_NOW | RTLD_LOCAL);
    if (!cs.lib) {
        snprintf(why, whylen,
                 "hooking a function of the executable needs the capstone disassembler, and libcapstone.so.4 "
                 "cannot be loaded (apt-get install libcapstone4)");
        return -1;
    }
    *(void **)&cs.version = dlsym(cs.lib, "cs_version");
    *(void **)&cs.open = dlsym(cs.lib, "cs_open");
    *(void **)&cs.option = dlsym(cs.lib, "cs_option");
    *(void **)&cs.disasm = dlsym(cs.lib, "cs_disasm");
    *(void **)&cs.free = dlsym(cs.lib, "cs_free");
    *(void **)&cs.close = dlsym(cs.lib, "cs_close");
    int major = 0, minor = 0;
    if (cs.version)
        cs.version(&major, &minor);
    const char *problem = NULL;
    if (!cs.open || !cs.option || !cs.disasm || !cs.free || !cs.close || major != 4)
        problem = "is not capstone 4";
    else if (cs.open(CS_ARCH_X86, CS_MODE_64, &cs.h) != 0 || cs.option(cs.h, CS_OPT_DETAIL, CS_OPT_ON) != 0)
        problem = "does not open an x86-64 disassembler";
    else if (!cs_selftest())
        problem = "decodes differently from capstone 4";
    if (problem) {
        snprintf(why, whylen, "%s (version %d.%d) %s, which hooking a function of the executable needs "
                 "(apt-get install libcapstone4)", name, major, minor, problem);
        sp_fh_entry_done();
        return -1;
    }
    return 0;
}

void sp_fh_entry_done(void)
{
    if (cs.h)
        cs.close(&cs.h);
    if (cs.lib)
        dlclose(cs.lib);
    memset(&cs, 0, sizeof cs);
}

/* ---- finding the function ------------------------------------------------ */

static int first_object(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    *(struct dl_phdr_info *)out = *info;
    return 1;
}

typedef int (*name_pred_t)(const char *name, const char *symbol);

static int is_exact(const char *name, const char *symbol)
{
    return strcmp(name, symbol) == 0;
}

/* gcc's specialised copies, which replace the original when every call was
 * redirected to them; split-off parts (.part, .cold) are not entries. */
static int is_clone(const char *name, const char *symbol)
{
    size_t n = strlen(symbol);
    return strncmp(name, symbol, n) == 0 &&
           (strncmp(name + n, ".isra.", 6) == 0 || strncmp(name + n, ".constprop.", 11) == 0) &&
           !strstr(name + n, ".part") && !strstr(name + n, ".cold");
}

static int is_cold_part(const char *name, const char *entry)
{
    size_t n = strlen(entry);
    return strncmp(name, entry, n) == 0 && strncmp(name + n, ".cold", 5) == 0 &&
           (name[n + 5] == 0 || name[n + 5] == '.');
}

typedef struct {
    const uint8_t *file;
    size_t size;
    const Elf64_Shdr *sh;
    unsigned shnum;
    struct dl_phdr_info main;
} exe_t;

/* Calls visit for each defined function symbol of .symtab and .dynsym that
 * pred accepts; stops early when visit returns nonzero. */
static void each_func(const exe_t *x, name_pred_t pred, const char *symbol,
                      int (*visit)(const exe_t *, const Elf64_Sym *, const char *, void *), void *arg)
{
    for (unsigned i = 0; i < x->shnum; i++) {
        const Elf64_Shdr *s = &x->sh[i];
        if ((s->sh_type != SHT_SYMTAB && s->sh_type != SHT_DYNSYM) || s->sh_link >= x->shnum ||
            s->sh_offset > x->size || s->sh_size > x->size - s->sh_offset)
            continue;
        const Elf64_Shdr *str = &x->sh[s->sh_link];
        if (str->sh_offset > x->size || str->sh_size > x->size - str->sh_offset)
            continue;
        const Elf64_Sym *syms = (const Elf64_Sym *)(x->file + s->sh_offset);
        const char *names = (const char *)(x->file + str->sh_offset);
        for (size_t k = 0; k < s->sh_size / sizeof *syms; k++) {
            const Elf64_Sym *y = &syms[k];
            if (ELF64_ST_TYPE(y->st_info) != STT_FUNC || y->st_shndx == SHN_UNDEF || y->st_name >= str->sh_size ||
                !memchr(names + y->st_name, 0, str->sh_size - y->st_name))
                continue;
            if (pred(names + y->st_name, symbol) && visit(x, y, names + y->st_name, arg))
                return;
        }
    }
}

typedef struct {
    sp_fh_exe_sym_t *out;
    int n, max;
} found_t;

/* The protection of the executable segment holding addr, 0 if none does. */
static int exec_prot(const struct dl_phdr_info *m, uintptr_t addr, size_t size)
{
    for (int i = 0; i < m->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &m->dlpi_phdr[i];
        uintptr_t start = m->dlpi_addr + p->p_vaddr;
        if (p->p_type == PT_LOAD && (p->p_flags & PF_X) && addr >= start && addr - start + size <= p->p_memsz)
            return PROT_EXEC | (p->p_flags & PF_R ? PROT_READ : 0) | (p->p_flags & PF_W ? PROT_WRITE : 0);
    }
    return 0;
}

static int add_def(const exe_t *x, const Elf64_Sym *y, const char *name, void *arg)
{
    found_t *f = arg;
    uintptr_t addr = x->main.dlpi_addr + y->st_value;
    for (int i = 0; i < f->n; i++)
        if (f->out[i].addr == addr)
            return 0; /* the same function in .symtab and .dynsym */
    int prot = exec_prot(&x->main, addr, y->st_size);
    if (!prot || f->n == f->max)
        return 0;
    sp_fh_exe_sym_t *s = &f->out[f->n++];
    memset(s, 0, sizeof *s);
    s->addr = addr;
    s->size = y->st_size;
    s->prot = prot;
    snprintf(s->name, sizeof s->name, "%s", name);
    return 0;
}

static int add_cold(const exe_t *x, const Elf64_Sym *y, const char *name, void *arg)
{
    (void)name;
    sp_fh_exe_sym_t *s = arg;
    s->cold_addr = x->main.dlpi_addr + y->st_value;
    s->cold_size = y->st_size;
    return 1;
}

int sp_fh_exe_find(const char *symbol, sp_fh_exe_sym_t *out, int max)
{
    exe_t x;
    memset(&x, 0, sizeof x);
    dl_iterate_phdr(first_object, &x.main);
    int fd = open(sp_fh_exe_path(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(Elf64_Ehdr)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    x.size = (size_t)st.st_size;
    void *map = mmap(NULL, x.size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return -1;
    x.file = map;
    const Elf64_Ehdr *eh = map;
    found_t f = {out, 0, max};
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
        eh->e_shentsize == sizeof(Elf64_Shdr) && eh->e_shoff < x.size &&
        eh->e_shnum <= (x.size - eh->e_shoff) / sizeof(Elf64_Shdr)) {
        x.sh = (const Elf64_Shdr *)(x.file + eh->e_shoff);
        x.shnum = eh->e_shnum;
        each_func(&x, is_exact, symbol, add_def, &f);
        if (f.n == 0)
            each_func(&x, is_clone, symbol, add_def, &f);
        for (int i = 0; i < f.n; i++)
            each_func(&x, is_cold_part, out[i].name, add_cold, &out[i]);
    }
    munmap(map, x.size);
    return f.n;
}

/* ---- building the trampoline --------------------------------------------- */

struct sp_fh_entry {
    uintptr_t addr;
    int prot;
    uint8_t *page;
    size_t len; /* 5 (jmp rel32) or 14 (jmp *0(%rip); .quad) */
    uint8_t patch[14];
};

/* Copies one displaced instruction to `to` (at out), fixing what depends on
 * its address. *ends is set after an unconditional jump. */
static int move_insn(const cs_insn_t *in, uint8_t *out, size_t *len, int *ends, const char *fn, char *why,
                     size_t whylen)
{
    const cs_x86_t *x = &in->detail->x86;
    uintptr_t to = (uintptr_t)out;
    if (has_group(in, CS_GRP_BRANCH_RELATIVE)) {
        uintptr_t target = branch_target(in);
        uint8_t op = target ? in->bytes[x->encoding.imm_offset - 1] : 0;
        if (op == 0xe8) {
            /* call *2(%rip); jmp .+8; .quad target: the call returns into the trampoline. */
            static const uint8_t call[] = {0xff, 0x15, 2, 0, 0, 0, 0xeb, 8};
            memcpy(out, call, sizeof call);
            memcpy(out + sizeof call, &target, 8);
            *len = sizeof call + 8;
            return 0;
        }
        if (op == 0xe9 || op == 0xeb) {
            *len = sp_fh_emit_abs_jmp(out, target);
            *ends = 1;
            return 0;
        }
        snprintf(why, whylen, "%s starts with a conditional branch (%s %s) that cannot be moved to a trampoline", fn,
                 in->mnemonic, in->op_str);
        return -1;
    }
    memcpy(out, in->bytes, in->size);
    *len = in->size;
    unsigned m = x->encoding.modrm_offset;
    if (m == 0 || m >= in->size || (in->bytes[m] & 0xc7) != 0x05)
        return 0; /* no RIP-relative operand */
    unsigned d = x->encoding.disp_offset;
    int32_t disp;
    if (d != m + 1 || x->encoding.disp_size != 4 || d + 4 > in->size) {
        snprintf(why, whylen, "%s starts with an instruction capstone reports oddly (%s %s)", fn, in->mnemonic,
                 in->op_str);
        return -1;
    }
    memcpy(&disp, in->bytes + d, 4);
    int64_t moved = (int64_t)(in->address + in->size + disp) - (int64_t)(to + in->size);
    if (moved != (int32_t)moved) {
        snprintf(why, whylen, "%s starts with a RIP-relative access (%s %s) out of reach of its trampoline", fn,
                 in->mnemonic, in->op_str);
        return -1;
    }
    disp = (int32_t)moved;
    memcpy(out + d, &disp, 4);
    return 0;
}

/* Moves the instructions covering the first `need` bytes of s to out and
 * appends the jump back; *covered is how many bytes they took. */
static int move_head(const sp_fh_exe_sym_t *s, uint8_t *out, size_t need, size_t *covered, char *why,
                     size_t whylen)
{
    cs_insn_t *in = NULL;
    size_t n = cs.disasm(cs.h, (const uint8_t *)s->addr, s->size < 64 ? s->size : 64, s->addr, 0, &in);
    size_t off = 0, o = 0;
    int ends = 0, rc = 0;
    for (size_t i = 0; i < n && off < need && rc == 0; i++) {
        size_t len = 0;
        rc = move_insn(&in[i], out + o, &len, &ends, s->name, why, whylen);
        o += len;
        off += in[i].size;
    }
    if (n)
        cs.free(in, n);
    if (rc == 0 && (off < need || off > s->size)) {
        snprintf(why, whylen, "%s is too short for the %zu-byte jump that hooks it (or its code cannot be decoded)",
                 s->name, need);
        rc = -1;
    }
    if (rc == 0 && !ends)
        sp_fh_emit_abs_jmp(out + o, s->addr + off);
    *covered = off;
    return rc;
}

/* The address of a relative branch in [start, start+size) that lands in
 * (lo, hi), or 0. Undecodable bytes (padding, data) are stepped over. */
static uintptr_t branch_into(uintptr_t start, size_t size, uintptr_t lo, uintptr_t hi)
{
    size_t off = 0;
    uintptr_t from = 0;
    while (off < size && !from) {
        cs_insn_t *in = NULL;
        size_t n = cs.disasm(cs.h, (const uint8_t *)start + off, size - off, start + off, 0, &in);
        size_t used = 0;
        for (size_t i = 0; i < n && !from; i++) {
            uintptr_t t = has_group(&in[i], CS_GRP_BRANCH_RELATIVE) ? branch_target(&in[i]) : 0;
            if (t > lo && t < hi)
                from = (uintptr_t)in[i].address;
            used += in[i].size;
        }
        if (n)
            cs.free(in, n);
        off += used ? used : 1;
    }
    return from;
}

sp_fh_entry_t *sp_fh_entry_prepare(const sp_fh_exe_sym_t *s, sp_fh_hook_t *h, char *why, size_t whylen)
{
    if (cs_load(why, whylen) != 0)
        return NULL;
    sp_fh_entry_t *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    e->addr = s->addr;
    e->prot = s->prot;
    e->len = 5;
    if (!(e->page = sp_fh_code_alloc(s->addr))) {
        e->len = 14; /* nothing free within reach of rel32: an absolute jump */
        e->page = sp_fh_code_alloc(0);
    }
    size_t covered = 0;
    uintptr_t from = 0;
    if (!e->page) {
        snprintf(why, whylen, "no memory for a trampoline");
        goto fail;
    }
    if (move_head(s, e->page + SP_FH_STUB_TAIL, e->len, &covered, why, whylen) != 0)
        goto fail;
    from = branch_into(s->addr, s->size, s->addr, s->addr + covered);
    if (!from && s->cold_addr)
        from = branch_into(s->cold_addr, s->cold_size, s->addr, s->addr + covered);
    if (from) {
        snprintf(why, whylen, "a branch at %s+0x%lx leads into the first %zu bytes of %s, which the hook overwrites",
                 s->name, (unsigned long)(from - s->addr), covered, s->name);
        goto fail;
    }
    sp_fh_stub_head(e->page, h);
    if (sp_fh_code_seal(e->page) != 0) {
        snprintf(why, whylen, "cannot make its trampoline executable");
        goto fail;
    }
    uintptr_t stub = (uintptr_t)e->page + SP_FH_STUB_ENTRY;
    if (e->len == 5) {
        int32_t rel = (int32_t)((int64_t)stub - (int64_t)(s->addr + 5));
        e->patch[0] = 0xe9;
        memcpy(e->patch + 1, &rel, 4);
    } else {
        sp_fh_emit_abs_jmp(e->patch, stub);
    }
    return e;
fail:
    sp_fh_entry_cancel(e);
    return NULL;
}

/* Another thread may be running the function: the 5-byte jump goes in with
 * one 8-byte store (the three bytes after it rewritten unchanged) when the 8
 * bytes share a cache line, where x86 makes such a store atomic. */
int sp_fh_entry_commit(sp_fh_entry_t *e, char *why, size_t whylen)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t p0 = e->addr & ~(page - 1), p1 = (e->addr + e->len - 1) & ~(page - 1);
    if (mprotect((void *)p0, p1 + page - p0, e->prot | PROT_WRITE) != 0) {
        snprintf(why, whylen, "cannot make the executable's code writable (mprotect: %s)", strerror(errno));
        sp_fh_entry_cancel(e);
        return -1;
    }
    if (e->len == 5 && (e->addr & 63) <= 56) {
        uint64_t v;
        memcpy(&v, (const void *)e->addr, 8);
        memcpy(&v, e->patch, 5);
        __asm__ volatile("movq %1, %0" : "=m"(*(volatile uint64_t *)e->addr) : "r"(v) : "memory");
    } else {
        memcpy((void *)e->addr, e->patch, e->len);
    }
    mprotect((void *)p0, p1 + page - p0, e->prot);
    free(e);
    return 0;
}

void sp_fh_entry_cancel(sp_fh_entry_t *e)
{
    if (e->page)
        sp_fh_code_free(e->page);
    free(e);
}
