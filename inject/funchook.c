/* inject/funchook.c — the `function:` step marker's shared machinery: which
 * mechanism hooks a symbol (entry patch for the executable's own functions,
 * GOT patch for shared libraries' — see funchook.h), the hook records, the
 * trampoline pages and the thunk every trampoline calls, the dlopen
 * interposer that hooks objects loaded later (armed by a GOT hook, and once
 * cudacopies.c has seen a second CUDA copy), and the warning
 * at exit when a marker never fired.
 *
 * The thunk is assembly because it must leave the hooked function's state
 * exactly as it found it: argument registers (the function may be variadic:
 * %al), %r10 (static chain), %r11 and the flags (gcc's -fipa-ra lets callers
 * of a local function keep values in registers the callee does not touch),
 * and the whole vector state (vector arguments; the callback may run AVX code
 * that ends in vzeroupper), saved with XSAVE, or FXSAVE where the OS has not
 * enabled XSAVE. */
#define _GNU_SOURCE
#include "funchook.h"

#include "../collectors/log.h"
#include "cudacopies.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- hook records and trampoline pages ------------------------------- */

enum { MAX_HOOKS = 256, MAX_PAGES = 256 };
static sp_fh_hook_t hooks[MAX_HOOKS];
static int nhooks;
static uint8_t *pages[MAX_PAGES];
static int npages;
static size_t page_size;

sp_fh_hook_t *sp_fh_hook_new(void (*cb)(void))
{
    if (nhooks == MAX_HOOKS)
        return NULL;
    sp_fh_hook_t *h = &hooks[nhooks++];
    h->cb = cb;
    return h;
}

static uint8_t *try_map(uintptr_t hint, int flags)
{
    void *p = mmap((void *)hint, page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int within_1g(uintptr_t a, uintptr_t b)
{
    return (a > b ? a - b : b - a) < (1ul << 30);
}

/* Near pages are probed at 1 MiB steps below and above `near`: the
 * executable's neighbourhood is mostly free address space (its heap lies
 * above it, shared libraries far away). MAP_FIXED_NOREPLACE never clobbers a
 * mapping; a kernel older than 4.17 takes it as a hint, hence the check. */
uint8_t *sp_fh_code_alloc(uintptr_t near)
{
    if (npages == MAX_PAGES)
        return NULL;
    uint8_t *p = NULL;
    if (!near) {
        p = try_map(0, 0);
    } else {
        uintptr_t base = near & ~(uintptr_t)(page_size - 1);
        const uintptr_t step = 1ul << 20;
        for (uintptr_t d = step; !p && d < (1ul << 30) - step; d += step) {
            for (int dir = 0; dir < 2 && !p; dir++) {
                if (dir == 0 && base < d + (16ul << 20))
                    continue;
                uintptr_t hint = dir == 0 ? base - d : base + d;
                p = try_map(hint, MAP_FIXED_NOREPLACE);
                if (p && !within_1g((uintptr_t)p, near)) {
                    munmap(p, page_size);
                    p = NULL;
                }
            }
        }
    }
    if (p)
        pages[npages++] = p;
    return p;
}

int sp_fh_code_seal(uint8_t *page)
{
    return mprotect(page, page_size, PROT_READ | PROT_EXEC);
}

void sp_fh_code_free(uint8_t *page)
{
    for (int i = 0; i < npages; i++) {
        if (pages[i] == page) {
            pages[i] = pages[--npages];
            munmap(page, page_size);
            return;
        }
    }
}

int sp_fh_is_ours(uintptr_t addr)
{
    for (int i = 0; i < npages; i++)
        if (addr - (uintptr_t)pages[i] < page_size)
            return 1;
    return 0;
}

/* ---- the thunk -------------------------------------------------------- */

#define SP_FH_STR2(x) #x
#define SP_FH_STR(x) SP_FH_STR2(x)

static uint32_t xsave_size __attribute__((used)); /* 0: use FXSAVE (512 bytes) */
static uint64_t xsave_mask __attribute__((used));
static __thread int in_callback;

/* Called by the thunk with the stub's hook record. The guard keeps a callback
 * that itself calls the hooked function from recursing. */
__attribute__((used, noipa)) static void fire(sp_fh_hook_t *h)
{
    if (in_callback)
        return;
    in_callback = 1;
    int saved = errno;
    __atomic_fetch_add(&h->fired, 1, __ATOMIC_RELAXED);
    h->cb();
    errno = saved;
    in_callback = 0;
}

/* Entered by `call` from a stub, so 0(%rsp) is the stub's tail and the hook
 * pointer sits SP_FH_STUB_TAIL bytes before it. Returning with `ret` keeps
 * call/return pairs balanced (return prediction, shadow stacks). */
__asm__(".text\n"
        ".p2align 4\n"
        ".type sp_fh_thunk, @function\n"
        "sp_fh_thunk:\n"
        "  endbr64\n"
        "  pushq %rbp\n"
        "  movq %rsp, %rbp\n"
        "  pushfq\n"
        "  pushq %rdi\n  pushq %rsi\n  pushq %rdx\n  pushq %rcx\n  pushq %r8\n"
        "  pushq %r9\n  pushq %rax\n  pushq %r10\n  pushq %r11\n  pushq %rbx\n"
        "  movq 8(%rbp), %rbx\n"
        "  movq -" SP_FH_STR(SP_FH_STUB_TAIL) "(%rbx), %rbx\n"
        "  movl xsave_size(%rip), %eax\n"
        "  testl %eax, %eax\n"
        "  jz 1f\n"
        "  subq %rax, %rsp\n"
        "  andq $-64, %rsp\n"
        "  xorl %eax, %eax\n" /* XSAVE leaves header bits it does not own: start from zero */
        "  movq %rax, 512(%rsp)\n  movq %rax, 520(%rsp)\n  movq %rax, 528(%rsp)\n  movq %rax, 536(%rsp)\n"
        "  movq %rax, 544(%rsp)\n  movq %rax, 552(%rsp)\n  movq %rax, 560(%rsp)\n  movq %rax, 568(%rsp)\n"
        "  movl xsave_mask(%rip), %eax\n"
        "  movl xsave_mask+4(%rip), %edx\n"
        "  xsave64 (%rsp)\n"
        "  jmp 2f\n"
        "1:\n"
        "  subq $512, %rsp\n"
        "  andq $-16, %rsp\n"
        "  fxsave64 (%rsp)\n"
        "2:\n"
        "  movq %rbx, %rdi\n"
        "  call fire\n"
        "  movl xsave_size(%rip), %eax\n"
        "  testl %eax, %eax\n"
        "  jz 3f\n"
        "  movl xsave_mask(%rip), %eax\n"
        "  movl xsave_mask+4(%rip), %edx\n"
        "  xrstor64 (%rsp)\n"
        "  jmp 4f\n"
        "3:\n"
        "  fxrstor64 (%rsp)\n"
        "4:\n"
        "  leaq -88(%rbp), %rsp\n"
        "  popq %rbx\n  popq %r11\n  popq %r10\n  popq %rax\n  popq %r9\n"
        "  popq %r8\n  popq %rcx\n  popq %rdx\n  popq %rsi\n  popq %rdi\n"
        "  popfq\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size sp_fh_thunk, .-sp_fh_thunk\n");
void sp_fh_thunk(void);

/* Which state components XSAVE must cover: x87, SSE, AVX and AVX-512 (the
 * registers code may pass arguments in or the callback may clobber); the area
 * size follows from where CPUID says the highest of them lies. */
static void vector_init(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    uint64_t mask = (((uint64_t)hi << 32) | lo) & 0xe7;
    uint32_t size = 576;
    for (unsigned i = 2; i < 8; i++) {
        if (!(mask & (1u << i)))
            continue;
        __cpuid_count(0xd, i, a, b, c, d);
        if (b + a > size)
            size = b + a;
    }
    xsave_mask = mask;
    xsave_size = (size + 63) & ~63u;
}

void sp_fh_stub_head(uint8_t *p, sp_fh_hook_t *h)
{
    static const uint8_t head[] = {0xf3, 0x0f, 0x1e, 0xfa,              /* endbr64 */
                                   0xff, 0x15, 0, 0, 0, 0};              /* call *lit(%rip) */
    _Static_assert(8 + sizeof head == SP_FH_STUB_TAIL, "stub layout");
    memcpy(p, &h, 8);
    memcpy(p + 8, head, sizeof head);
    /* The thunk's address goes at the end of the page, out of the tail's way. */
    uint8_t *lit = p + page_size - 8;
    uintptr_t thunk = (uintptr_t)sp_fh_thunk;
    memcpy(lit, &thunk, 8);
    int32_t rel = (int32_t)(lit - (p + SP_FH_STUB_TAIL));
    memcpy(p + SP_FH_STUB_TAIL - 4, &rel, 4);
}

size_t sp_fh_emit_abs_jmp(uint8_t *p, uintptr_t target)
{
    static const uint8_t jmp[] = {0xff, 0x25, 0, 0, 0, 0}; /* jmp *0(%rip) */
    memcpy(p, jmp, sizeof jmp);
    memcpy(p + sizeof jmp, &target, 8);
    return sizeof jmp + 8;
}

/* ---- dlopen ------------------------------------------------------------ */

typedef void *(*dlopen_fn)(const char *, int);
static dlopen_fn real_dlopen __attribute__((used));
static int dlopen_armed __attribute__((used)); /* a GOT hook or cudacopies.c needs to see new objects */

static void *dlopen_missing(const char *file, int mode)
{
    (void)file;
    (void)mode;
    return NULL;
}

__attribute__((used, noipa)) static dlopen_fn resolve_dlopen(void)
{
    dlopen_fn f = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
    if (!f)
        f = dlopen_missing;
    __atomic_store_n(&real_dlopen, f, __ATOMIC_RELEASE);
    return f;
}

void *sp_fh_real_dlopen(const char *file, int mode)
{
    dlopen_fn f = __atomic_load_n(&real_dlopen, __ATOMIC_ACQUIRE);
    return (f ? f : resolve_dlopen())(file, mode);
}

static void *dlopen_hooked(const char *file, int mode);

/* The exported dlopen. glibc's dlopen takes its caller's return address to
 * pick the caller's DT_RUNPATH and namespace, so it is reached by a tail jump
 * that leaves the caller's return address in place. Until it is armed
 * (sp_fh_dlopen_watch) that is all this does. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl dlopen\n"
        ".type dlopen, @function\n"
        "dlopen:\n"
        "  endbr64\n"
        "  cmpl $0, dlopen_armed(%rip)\n"
        "  jne dlopen_hooked\n"
        "  movq real_dlopen(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jz 1f\n"
        "  jmp *%rax\n"
        "1:\n"
        "  pushq %rdi\n"
        "  pushq %rsi\n"
        "  subq $8, %rsp\n"
        "  call resolve_dlopen\n"
        "  addq $8, %rsp\n"
        "  popq %rsi\n"
        "  popq %rdi\n"
        "  jmp *%rax\n"
        ".size dlopen, .-dlopen\n");

static int serinfo(void *map, Dl_serinfo **out)
{
    Dl_serinfo size;
    if (dlinfo(map, RTLD_DI_SERINFOSIZE, &size) != 0 || !(*out = malloc(size.dls_size)))
        return -1;
    memcpy(*out, &size, sizeof size);
    return dlinfo(map, RTLD_DI_SERINFO, *out);
}

static int in_serinfo(const Dl_serinfo *si, const char *dir)
{
    for (unsigned i = 0; si && i < si->dls_cnt; i++)
        if (strcmp(si->dls_serpath[i].dls_name, dir) == 0)
            return 1;
    return 0;
}

/* Would glibc take path as a candidate (an ELF object for this machine)?
 * One it skips (a 32-bit library in a multilib directory) lets the search
 * go on. */
static int loadable_elf(const char *path)
{
    Elf64_Ehdr eh;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int ok = pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
             eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_machine == EM_X86_64;
    close(fd);
    return ok;
}

/* Once armed, dlopen is called from here, so glibc takes libstepprof for the
 * caller. For a bare file name, look where the real caller's search path
 * would, before the directories ours shares with it: the caller's
 * DT_RPATH/DT_RUNPATH directories are the ones that differ. A file found
 * there that fails to load fails the call, with glibc's message, as it would
 * without us. */
static void *dlopen_as(const char *file, int mode, const void *caller)
{
    Dl_info info;
    void *caller_map = NULL, *our_map = NULL;
    if (!file || strchr(file, '/') || !dladdr1(caller, &info, &caller_map, RTLD_DL_LINKMAP) ||
        !dladdr1((void *)dlopen_as, &info, &our_map, RTLD_DL_LINKMAP) || caller_map == our_map)
        return sp_fh_real_dlopen(file, mode);
    Dl_serinfo *theirs = NULL, *ours = NULL;
    void *h = NULL;
    int found = 0;
    if (serinfo(caller_map, &theirs) == 0 && serinfo(our_map, &ours) == 0) {
        for (unsigned i = 0; i < theirs->dls_cnt; i++) {
            const char *dir = theirs->dls_serpath[i].dls_name;
            char path[PATH_MAX];
            if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path || !loadable_elf(path))
                continue;
            if (in_serinfo(ours, dir))
                break;
            /* Objects already loaded are matched by name before any search.
             * glibc stops at the first file it finds: if that one fails to
             * load, its error (a missing dependency) is the caller's. */
            if (!(h = sp_fh_real_dlopen(file, mode | RTLD_NOLOAD)))
                h = sp_fh_real_dlopen(path, mode);
            found = 1;
            break;
        }
    }
    free(theirs);
    free(ours);
    if (h)
        dlerror(); /* a refused RTLD_NOLOAD probe is not the caller's error */
    if (h || found)
        return h;
    return sp_fh_real_dlopen(file, mode);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sp_fh_got_t *got_hooks[4];
static int ngot;

__attribute__((used, noipa)) static void *dlopen_hooked(const char *file, int mode)
{
    void *h = dlopen_as(file, mode, __builtin_return_address(0));
    if (h) {
        int saved = errno;
        pthread_mutex_lock(&lock);
        for (int i = 0; i < ngot; i++)
            sp_fh_got_patch(got_hooks[i]);
        pthread_mutex_unlock(&lock);
        errno = saved;
        sp_copies_check();
    }
    return h;
}

void sp_fh_dlopen_watch(void)
{
    __atomic_store_n(&dlopen_armed, 1, __ATOMIC_RELEASE);
}

/* ---- names ------------------------------------------------------------- */

/* Read once for the process (pthread_once: threads never see it half-written). */
static char exe_path[PATH_MAX];

static void read_exe_path(void)
{
    ssize_t n = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
    if (n <= 0)
        snprintf(exe_path, sizeof exe_path, "/proc/self/exe");
    else
        exe_path[n] = 0;
}

const char *sp_fh_exe_path(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_exe_path);
    return exe_path;
}

int sp_fh_lib_matches(const char *pattern, const char *path)
{
    if (!pattern[0])
        return 1;
    const char *slash = strrchr(path, '/');
    return strstr(path, pattern) || fnmatch(pattern, path, 0) == 0 ||
           fnmatch(pattern, slash ? slash + 1 : path, 0) == 0;
}

/* ---- install ----------------------------------------------------------- */

/* What every installed marker needs at exit: how to count its calls. */
static struct {
    char spec[520];
    sp_fh_hook_t *entry_hooks[8];
    int nentry;
    sp_fh_got_t *got;
} markers[4];
static int nmarkers;
static pid_t install_pid;

static unsigned long marker_fired(int i)
{
    unsigned long n = markers[i].got ? sp_fh_got_fired(markers[i].got) : 0;
    for (int k = 0; k < markers[i].nentry; k++)
        n += __atomic_load_n(&markers[i].entry_hooks[k]->fired, __ATOMIC_RELAXED);
    return n;
}

/* A marker that never fired explains an empty run; only the process that
 * installed it says so (forked children inherit the hooks, not the calls). */
static void report_unfired(void)
{
    if (getpid() != install_pid)
        return;
    for (int i = 0; i < nmarkers; i++) {
        if (marker_fired(i))
            continue;
        if (markers[i].got)
            sp_log(SP_LOG_WARN,
                   "marker %s never fired: no call went through a hooked call site (calls from inside %s itself, "
                   "or through a function pointer taken before stepprof started, cannot be seen)",
                   markers[i].spec, sp_fh_got_where(markers[i].got));
        else
            sp_log(SP_LOG_WARN, "marker %s never fired: the function was not called", markers[i].spec);
    }
}

/* Entry-patches every definition in the executable, or none: all are
 * prepared (checked, trampolines built) before the first is written. */
static int install_entry(int m, sp_fh_exe_sym_t *defs, int n, void (*cb)(void), char *why, size_t whylen)
{
    sp_fh_entry_t *prep[8];
    int np = 0, rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        sp_fh_hook_t *h = sp_fh_hook_new(cb);
        if (!h) {
            snprintf(why, whylen, "too many hooked definitions");
            rc = -1;
        } else if (!(prep[np] = sp_fh_entry_prepare(&defs[i], h, why, whylen))) {
            rc = -1;
        } else {
            markers[m].entry_hooks[np++] = h;
        }
    }
    for (int i = 0; i < np; i++) {
        if (rc == 0 && sp_fh_entry_commit(prep[i], why, whylen) != 0)
            rc = -1; /* mprotect refused: it refuses the rest the same way */
        else if (rc != 0)
            sp_fh_entry_cancel(prep[i]);
    }
    markers[m].nentry = rc == 0 ? np : 0;
    sp_fh_entry_done();
    return rc;
}

static int install_locked(const char *symbol, const char *library, void (*cb)(void), char *why, size_t whylen)
{
    if (!page_size) {
        page_size = (size_t)sysconf(_SC_PAGESIZE);
        vector_init();
    }
    if (nmarkers == (int)(sizeof markers / sizeof markers[0]))
        return snprintf(why, whylen, "too many function markers"), -1;
    int m = nmarkers;
    snprintf(markers[m].spec, sizeof markers[m].spec, "function:%s%s%s", symbol, library[0] ? "@" : "", library);

    enum { MAX_DEFS = 8 };
    sp_fh_exe_sym_t defs[MAX_DEFS];
    int n = sp_fh_lib_matches(library, sp_fh_exe_path()) ? sp_fh_exe_find(symbol, defs, MAX_DEFS) : 0;
    if (n > 0) {
        if (install_entry(m, defs, n, cb, why, whylen) != 0)
            return -1;
        nmarkers++;
        sp_log(SP_LOG_INFO, "marker %s hooks the entry of %s%s in the executable", markers[m].spec, defs[0].name,
               n > 1 ? " and its other definitions" : "");
        return 0;
    }
    sp_fh_got_t *g = sp_fh_got_prepare(symbol, library, cb, why, whylen);
    if (!g)
        return -1;
    int sites = sp_fh_got_patch(g);
    markers[m].got = g;
    got_hooks[ngot++] = g;
    nmarkers++;
    sp_fh_dlopen_watch();
    sp_log(SP_LOG_INFO, "marker %s hooks %d call site%s (the function is in %s); libraries loaded later are hooked "
           "as they load", markers[m].spec, sites, sites == 1 ? "" : "s", sp_fh_got_where(g));
    return 0;
}

/* A fork while another thread held the lock must not leave the child's
 * dlopen waiting for it forever. */
static void after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
}

int sp_funchook_install(const char *symbol, const char *library, void (*cb)(void))
{
    int saved = errno;
    char why[512] = "";
    library = library ? library : "";
    int rc = -1;
    if (!symbol || !symbol[0]) {
        snprintf(why, sizeof why, "no symbol name given");
    } else {
        pthread_mutex_lock(&lock);
        rc = install_locked(symbol, library, cb, why, sizeof why);
        pthread_mutex_unlock(&lock);
    }
    if (rc != 0) {
        sp_log(SP_LOG_ERROR, "marker function:%s%s%s: %s; the marker is off and no step will be recorded",
               symbol ? symbol : "", library[0] ? "@" : "", library, why);
    } else if (!install_pid) {
        install_pid = getpid();
        atexit(report_unfired);
        pthread_atfork(NULL, NULL, after_fork_child);
    }
    errno = saved;
    return rc;
}
