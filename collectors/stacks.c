/* collectors/stacks.c — see stacks.h. The table is open addressing over a
 * 64-bit hash of the return addresses: readers probe with acquire loads and
 * compare the stored addresses, so a hit is lock-free; an insert takes the
 * mutex, fills the entry, then publishes the slot's hash with a release
 * store. Addresses live in chunks that never move, so ids handed out stay
 * readable while the table grows. Capacity is fixed at init (MAX_STACKS
 * distinct stacks); beyond it captures return 0 and are counted. A stack's
 * Python frames (pystack.h: tagged ids, not addresses) follow its native
 * frames in the same entry, so one id names the merged stack. The table does
 * not depend on the native unwinder: without one (no libunwind, no libgcc_s)
 * a stack is its Python frames alone. */
#define _GNU_SOURCE
#include "stacks.h"

#include "log.h"
#include "pystack.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 256
#define OWN_FRAMES 8                   /* room for our own frames above the caller's */
#define SLOTS (1u << 17)
#define MAX_STACKS (SLOTS / 2)         /* keeps probes short */
#define CHUNK_PCS (64u * 1024u)
#define MAX_CHUNKS 512u

/* unw_backtrace and glibc's backtrace have this signature. */
typedef int (*backtrace_fn)(void **buf, int size);

typedef struct entry {
    uint32_t chunk, off, n;
} entry_t;

typedef struct slot {
    _Atomic uint64_t hash;   /* 0 = empty; published last */
    uint32_t id;
} slot_t;

int sp_stack_enabled;
static backtrace_fn native_bt;      /* NULL: no native frames */
static int depth;
static uintptr_t own_lo, own_hi;       /* libstepprof's mapped range */
static slot_t *slots;
static entry_t *entries;               /* index = id; id 0 unused */
static uintptr_t *chunks[MAX_CHUNKS];
static uint32_t nchunks, chunk_used;
static uint32_t nstacks = 1;
static _Atomic uint64_t overflow;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int find_own(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t want = (uintptr_t)data, lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        lo = a < lo ? a : lo;
        hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
    }
    if (want < lo || want >= hi)
        return 0;
    own_lo = lo;
    own_hi = hi;
    return 1;
}

/* libunwind's unw_backtrace, or NULL with the reason in why. */
static backtrace_fn load_libunwind(char *why, size_t len)
{
    void *h = dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
    backtrace_fn f = h ? (backtrace_fn)dlsym(h, "unw_backtrace") : NULL;
    if (!f) {
        snprintf(why, len, "cannot load unw_backtrace from libunwind.so.8 (%s)", h ? "symbol missing" : dlerror());
        if (h)
            dlclose(h);
    }
    return f;
}

/* glibc's backtrace, NULL when it finds no frame (libgcc_s.so.1 missing).
 * Taken from libc itself, not the first `backtrace` in the global scope: a
 * sanitizer runtime or a libunwind the program loaded interposes one (ASan's
 * adds its own frame). Its first call dlopens libgcc_s: done here, before
 * any capture can run in a signal handler or on the hot path. */
static backtrace_fn load_glibc(void)
{
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    backtrace_fn f = libc ? (backtrace_fn)dlsym(libc, "backtrace") : NULL;
    if (libc)
        dlclose(libc);
    void *probe[4];
    return f && f(probe, 4) > 0 ? f : NULL;
}

/* Picks the native unwinder (unwinder: SP_STACK_UNWIND_*) and says so once:
 * a fallback from libunwind to glibc as info (auto) or a warning (asked for
 * libunwind), no unwinder at all as an error. */
static backtrace_fn pick_unwinder(int unwinder)
{
    char why[512] = "";
    backtrace_fn f = unwinder == SP_STACK_UNWIND_GLIBC ? NULL : load_libunwind(why, sizeof why);
    if (f) {
        sp_log(SP_LOG_DEBUG, "with_stack: native frames by libunwind's unw_backtrace");
        return f;
    }
    f = load_glibc();
    if (!f)
        sp_log(SP_LOG_ERROR, "with_stack: %s%sglibc's backtrace() found no frames (libgcc_s.so.1 missing?); native "
               "frames are off, Python frames are still recorded", why, *why ? "; " : "");
    else if (unwinder == SP_STACK_UNWIND_GLIBC)
        sp_log(SP_LOG_DEBUG, "with_stack: native frames by glibc's backtrace() (unwinder: glibc)");
    else
        sp_log(unwinder == SP_STACK_UNWIND_AUTO ? SP_LOG_INFO : SP_LOG_WARN,
               "with_stack: %s; native frames come from glibc's backtrace() instead (slower: apt-get install "
               "libunwind8 for libunwind's)", why);
    return f;
}

int sp_stack_init(long want_depth, int unwinder)
{
    if (sp_stack_enabled)
        return 0;
    slots = calloc(SLOTS, sizeof *slots);
    entries = calloc(MAX_STACKS, sizeof *entries);
    if (!slots || !entries) {
        free(slots);
        free(entries);
        sp_log(SP_LOG_ERROR, "with_stack: out of memory for the stack table; call stacks are off");
        return -1;
    }
    native_bt = pick_unwinder(unwinder);
    depth = want_depth < 1 ? 1 : want_depth > MAX_DEPTH ? MAX_DEPTH : (int)want_depth;
    dl_iterate_phdr(find_own, (void *)(uintptr_t)&sp_stack_init);
    sp_stack_enabled = 1;
    return 0;
}

static uint64_t hash_pcs(void *const *pc, int n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uintptr_t)pc[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h ? h : 1;
}

static int same(const entry_t *e, void *const *pc, int n)
{
    return e->n == (uint32_t)n && memcmp(chunks[e->chunk] + e->off, pc, (size_t)n * sizeof *pc) == 0;
}

/* One probe for this stack: its id, 0 when the table has none yet, read from
 * the slot the probe saw (reading a slot again after the probe ended on it
 * empty raced an insert filling it with another stack, and answered with
 * that stack's id); with *empty (under the lock) the empty slot where it
 * belongs. */
static uint32_t lookup(uint64_t h, void *const *pc, int n, slot_t **empty)
{
    for (uint32_t i = (uint32_t)h & (SLOTS - 1);; i = (i + 1) & (SLOTS - 1)) {
        uint64_t k = atomic_load_explicit(&slots[i].hash, memory_order_acquire);
        if (k == 0) {
            if (empty)
                *empty = &slots[i];
            return 0;
        }
        if (k == h && same(&entries[slots[i].id], pc, n))
            return slots[i].id;
    }
}

static uint32_t insert(uint64_t h, void *const *pc, int n)
{
    uint32_t id = 0;
    pthread_mutex_lock(&lock);
    slot_t *s = NULL;
    if ((id = lookup(h, pc, n, &s)) != 0)   /* another thread inserted it meanwhile */
        goto out;
    if (nstacks >= MAX_STACKS)
        goto out;
    if (!nchunks || chunk_used + (uint32_t)n > CHUNK_PCS) {
        if (nchunks == MAX_CHUNKS || !(chunks[nchunks] = malloc(CHUNK_PCS * sizeof(uintptr_t))))
            goto out;
        nchunks++;
        chunk_used = 0;
    }
    id = nstacks++;
    memcpy(chunks[nchunks - 1] + chunk_used, pc, (size_t)n * sizeof *pc);
    entries[id] = (entry_t){nchunks - 1, chunk_used, (uint32_t)n};
    chunk_used += (uint32_t)n;
    s->id = id;
    atomic_store_explicit(&s->hash, h, memory_order_release);
out:
    pthread_mutex_unlock(&lock);
    if (!id)
        atomic_fetch_add_explicit(&overflow, 1, memory_order_relaxed);
    return id;
}

static uint32_t intern_pcs(void *const *pc, int n)
{
    uint64_t h = hash_pcs(pc, n);
    uint32_t id = lookup(h, pc, n, NULL);
#ifdef SP_STACKS_TEST
    if (!id)   /* the unit test widens the window after a lookup that missed */
        sched_yield();
#endif
    return id ? id : insert(h, pc, n);
}

#ifdef SP_STACKS_TEST
uint32_t sp_stack_intern_test(void *const *pc, int n)
{
    return intern_pcs(pc, n);
}

uint32_t sp_stack_home_test(void *const *pc, int n)
{
    return (uint32_t)hash_pcs(pc, n) & (SLOTS - 1);
}
#endif

uint32_t sp_stack_capture(void)
{
    if (!sp_stack_enabled)
        return 0;
    void *buf[OWN_FRAMES + 2 * MAX_DEPTH];
    int n = native_bt ? native_bt(buf, depth + OWN_FRAMES) : 0;
    int skip = 0;
    while (skip < n && (uintptr_t)buf[skip] >= own_lo && (uintptr_t)buf[skip] < own_hi)
        skip++;
    n -= skip;
    if (n > depth)
        n = depth;
    if (n < 0)
        n = 0;
    void **pc = buf + skip;
    n += sp_pystack_copy(pc + n, depth);
    return n > 0 ? intern_pcs(pc, n) : 0;
}

uint32_t sp_stack_capture_py(void)
{
    if (!sp_stack_enabled)
        return 0;
    uint32_t id = sp_pystack_memo();
    if (id)
        return id;
    void *buf[MAX_DEPTH];
    int n = sp_pystack_copy(buf, depth);
    id = n > 0 ? intern_pcs(buf, n) : 0;
    sp_pystack_set_memo(id);
    return id;
}

const uintptr_t *sp_stack_get(uint32_t id, size_t *n)
{
    if (!sp_stack_enabled || id == 0 || id >= MAX_STACKS)
        return NULL;
    pthread_mutex_lock(&lock);
    uint32_t known = nstacks;
    pthread_mutex_unlock(&lock);
    if (id >= known)
        return NULL;
    *n = entries[id].n;
    return chunks[entries[id].chunk] + entries[id].off;
}

uint64_t sp_stack_overflow_count(void)
{
    return atomic_load_explicit(&overflow, memory_order_relaxed);
}

void sp_stack_after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
}
