/* collectors/strings_log.c — the deferred-text log behind sp_str_defer and
 * sp_str_settle (strings.h): recording an NVTX range copies its name into
 * the thread's current 16 KiB block instead of interning it, so a push costs
 * one pass over the text, a word at a time, whatever the number of distinct
 * names (interning a new name is a cache miss and more in a table of a
 * million).
 *
 * Blocks are slices of one region reserved at first use (MAX_BLOCKS of them,
 * never unmapped, so a stale read of a block header is always safe). A block
 * is in exactly one of four places:
 *   - some thread's current block (TLS cur/off), written by that thread only;
 *   - the retired list: a full block, or the block of a thread that exited.
 *     Many threads push (CAS on the head); the collecting side takes the
 *     whole list at once (exchange), so ABA cannot hurt: a push only needs
 *     its node's next to equal the head at the moment of its CAS;
 *   - the pending list, private to the collecting side (under settle_lock):
 *     retired blocks that hold text of a window not collected yet;
 *   - the free stack: pushed by the collecting side, popped by any thread.
 *     Its head carries a 32-bit tag bumped by every successful CAS, so a pop
 *     whose view of head->next went stale (the block was popped and pushed
 *     again meanwhile) fails its CAS instead of corrupting the stack.
 * A block whose highest window (maxwin, written by its owner, published by
 * the release CAS that retires it) is <= the window just collected goes back
 * to the free stack: every record naming it has been settled, or belongs to a
 * window no collection will take. Text written by the owner reaches the
 * settling thread through the event chunk's release/acquire count (the
 * record naming the text is committed after the text is written); a reused
 * block's old text was read before the release CAS that freed it.
 *
 * A deferred id is SP_STR_DEFERRED | block << OFF_BITS | offset / 8. */
#define _GNU_SOURCE
#include "strings.h"

#include <emmintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#define BLOCK_BYTES 16384u
#define OFF_BITS 11u                /* BLOCK_BYTES / 8 offsets */
#ifndef SP_STR_LOG_BLOCKS           /* the unit test builds a smaller log */
#define SP_STR_LOG_BLOCKS 16384u    /* 256 MiB of text in flight at most */
#endif
#define MAX_BLOCKS SP_STR_LOG_BLOCKS
#define SLOTS (BLOCK_BYTES / 8u)
#define HDR (8u + SLOTS / 8u)       /* the header below and its dropped bitmap */

typedef struct block {
    uint32_t maxwin;                /* highest window of its text; owner-written */
    _Atomic uint32_t next;          /* retired / pending / free link: index + 1 */
    /* Bit k: the text at byte 8k was given back while text after it was
     * still in use (owner-written, current block only): taken back with the
     * text after it. */
    uint8_t dropped[SLOTS / 8u];
} block_t;
_Static_assert(sizeof(block_t) == HDR && HDR % 8u == 0, "text starts 8-aligned after the header");

static unsigned char *region;
static pthread_once_t region_once = PTHREAD_ONCE_INIT;
static _Atomic uint32_t fresh;      /* blocks never used yet start here */
static _Atomic uint32_t retired;    /* index + 1 of the list head, 0 = empty */
static _Atomic uint64_t free_head;  /* tag << 32 | (index + 1) */
static uint32_t pending;            /* under settle_lock */
static pthread_mutex_t settle_lock = PTHREAD_MUTEX_INITIALIZER;

/* This thread's block; one TLS object, so one TLS-descriptor call. */
static __thread struct {
    uint32_t cur;                   /* index + 1 of the block, 0 = none */
    uint32_t off;                   /* next free byte in it */
    volatile int busy;              /* a signal handler must not enter */
} me;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static block_t *block_at(uint32_t b) /* b = index + 1 */
{
    return (block_t *)(region + (size_t)(b - 1) * BLOCK_BYTES);
}

/* Under valgrind (whose vgpreload_*.so its client's LD_PRELOAD names) texts
 * are copied without copy_text's reads past their NUL: memcheck takes the
 * bytes after the NUL of a heap text for undefined and reports the ',' test
 * on them. Set once, with the log's region. */
static int no_overread;

static void reserve_region(void)
{
    const char *pre = getenv("LD_PRELOAD");
    no_overread = pre && strstr(pre, "/vgpreload_") != NULL;
    void *p = mmap(NULL, (size_t)MAX_BLOCKS * BLOCK_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    region = p == MAP_FAILED ? NULL : p;
}

static void push_retired(uint32_t b)
{
    uint32_t h = atomic_load_explicit(&retired, memory_order_relaxed);
    do
        atomic_store_explicit(&block_at(b)->next, h, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&retired, &h, b, memory_order_release, memory_order_relaxed));
}

static void push_free(uint32_t b)
{
    uint64_t h = atomic_load_explicit(&free_head, memory_order_relaxed);
    do
        atomic_store_explicit(&block_at(b)->next, (uint32_t)h, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&free_head, &h, ((h >> 32) + 1) << 32 | b, memory_order_release,
                                                  memory_order_relaxed));
}

static uint32_t pop_free(void)
{
    uint64_t h = atomic_load_explicit(&free_head, memory_order_acquire);
    while ((uint32_t)h) {
        uint32_t next = atomic_load_explicit(&block_at((uint32_t)h)->next, memory_order_relaxed);
        if (atomic_compare_exchange_weak_explicit(&free_head, &h, ((h >> 32) + 1) << 32 | next,
                                                  memory_order_acquire, memory_order_acquire))
            return (uint32_t)h;
    }
    return 0;
}

static void retire_at_exit(void *unused)
{
    (void)unused;
    if (me.cur)
        push_retired(me.cur);
    me.cur = 0;
}

static void make_exit_key(void)
{
    pthread_key_create(&exit_key, retire_at_exit);
}

/* Cold: the thread's block cannot take `need` more bytes. */
static int refill(size_t need)
{
    if (need > BLOCK_BYTES - HDR || pthread_once(&region_once, reserve_region) != 0 || !region)
        return 0;
    if (me.cur) {
        push_retired(me.cur);
        me.cur = 0;
    } else if (pthread_once(&exit_once, make_exit_key) != 0 || pthread_setspecific(exit_key, region) != 0) {
        return 0;
    }
    uint32_t b = pop_free();
    if (!b) {
        /* Checked before the add: a full log retried on every push must not
         * wrap the counter round to blocks still in use. */
        if (atomic_load_explicit(&fresh, memory_order_relaxed) >= MAX_BLOCKS)
            return 0;
        uint32_t i = atomic_fetch_add_explicit(&fresh, 1, memory_order_relaxed);
        if (i >= MAX_BLOCKS)
            return 0;
        b = i + 1;
    }
    block_at(b)->maxwin = 0;
    memset(block_at(b)->dropped, 0, sizeof block_at(b)->dropped);
    me.cur = b;
    me.off = HDR;
    return 1;
}

/* 16 bytes at p, which may run past the end of the text that holds them
 * but never past its page: a load the sanitizers do not see (the one
 * over-read stepprof makes on purpose). */
static inline __m128i load16(const char *p)
{
    __m128i v;
    __asm__("movdqu %1, %0" : "=x"(v) : "m"(*(const char(*)[16])p));
    return v;
}

/* Copies s, its NUL included, to dst (8-aligned) 16 bytes at a time while
 * they fit in `room` bytes: its length with the NUL, or 0 when it does not
 * fit, a load would cross a page (the caller's strlen path takes those), or
 * (plain) a ',' comes before the NUL. A load never leaves the page of the
 * bytes it needs, so reading past the NUL never faults. What followed the
 * NUL in its 16 bytes is copied too, into room past the text that the next
 * text overwrites. Inline: one call per push. */
static inline __attribute__((always_inline)) size_t copy_text(char *dst, const char *s, size_t room, int plain)
{
    const __m128i nul = _mm_setzero_si128(), comma = _mm_set1_epi8(',');
    for (size_t n = 0; n + 16 <= room; n += 16) {
        const char *p = s + n;
        if (__builtin_expect(((uintptr_t)p & 4095u) > 4080u, 0))
            return 0;
        __m128i v = load16(p);
        unsigned z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nul));
        if (plain && ((unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, comma)) & (z ^ (z - 1u))))
            return 0;     /* a ',' before the NUL (or in these 16 bytes, none being the NUL) */
        _mm_storeu_si128((__m128i *)(dst + n), v);
        if (z)
            return n + (size_t)__builtin_ctz(z) + 1;
    }
    return 0;
}

/* The id of the n bytes (NUL included) just copied at the thread's offset
 * in its block k, now claimed. */
static uint32_t claim(__typeof__(me) *m, block_t *k, size_t n, uint32_t window)
{
    if (window > k->maxwin)
        k->maxwin = window;
    uint32_t id = SP_STR_DEFERRED | (m->cur - 1) << OFF_BITS | m->off >> 3;
    m->off += (uint32_t)((n + 7) & ~(size_t)7);
    return id;
}

/* Copies s into the thread's current block (the caller holds busy): its
 * deferred id, or 0 when there is no block, no room left in it, a load
 * would cross a page, or (plain) s holds a ','. */
static inline __attribute__((always_inline)) uint32_t defer_in_block(__typeof__(me) *m, const char *s, uint32_t window, int plain)
{
    if (!m->cur || __builtin_expect(no_overread, 0))
        return 0;
    block_t *k = block_at(m->cur);
    size_t n = copy_text((char *)k + m->off, s, BLOCK_BYTES - m->off, plain);
    return n ? claim(m, k, n, window) : 0;
}

uint32_t sp_str_defer(const char *s, uint32_t window)
{
    __typeof__(me) *m = &me;
    __asm__("" : "+r"(m));      /* opaque: kept, not re-derived by another TLS-descriptor call after memcpy */
    if (!s)
        s = "";
    if (m->busy)
        return 0;
    m->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    uint32_t id = defer_in_block(m, s, window, 0);
    if (!id) {
        size_t n = strlen(s) + 1, need = (n + 7) & ~(size_t)7;
        if ((m->cur && m->off + need <= BLOCK_BYTES) || refill(need)) {
            block_t *k = block_at(m->cur);
            memcpy((char *)k + m->off, s, n);
            id = claim(m, k, n, window);
        }
    }
    atomic_signal_fence(memory_order_seq_cst);
    m->busy = 0;
    return id ? id : sp_str_intern(s);
}

uint32_t sp_str_defer_plain(const char *s, uint32_t window)
{
    __typeof__(me) *m = &me;
    __asm__("" : "+r"(m));
    if (m->busy)
        return 0;
    m->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    uint32_t id = defer_in_block(m, s, window, 1);
    atomic_signal_fence(memory_order_seq_cst);
    m->busy = 0;
    return id;
}

/* Where the text that ends at `end` (> HDR) in block k starts: its last
 * 8-byte slot holds its NUL, every earlier slot of it none (no NUL inside a
 * text), and the slot before it is the previous text's last, or the header. */
static uint32_t start_before(const block_t *k, uint32_t end)
{
    uint32_t at = end - 8;
    while (at > HDR) {
        uint64_t w;
        memcpy(&w, (const char *)k + at - 8, 8);
        if ((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull) /* has a zero byte */
            break;
        at -= 8;
    }
    return at;
}

static void take_back(block_t *k, uint32_t at)
{
    size_t need = (strlen((const char *)k + at) + 1 + 7) & ~(size_t)7;
    if (at + need != me.off) {
        /* Text after it is still in use (an overlapping start/end range):
         * taken back once all of that is. */
        k->dropped[at >> 6] |= (uint8_t)(1u << (at >> 3 & 7));
        return;
    }
    uint32_t off = at;
    k->dropped[at >> 6] &= (uint8_t)~(1u << (at >> 3 & 7));
    while (off > HDR) {
        uint32_t p = start_before(k, off);
        uint8_t bit = (uint8_t)(1u << (p >> 3 & 7));
        if (!(k->dropped[p >> 6] & bit))
            break;
        k->dropped[p >> 6] &= (uint8_t)~bit;
        off = p;
    }
    me.off = off;
}

void sp_str_undefer(uint32_t id)
{
    uint32_t b = ((id & ~SP_STR_DEFERRED) >> OFF_BITS) + 1, at = (id & ((1u << OFF_BITS) - 1)) << 3;
    if (!(id & SP_STR_DEFERRED) || me.busy || b != me.cur || at < HDR || at >= me.off)
        return;
    me.busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    take_back(block_at(b), at);
    atomic_signal_fence(memory_order_seq_cst);
    me.busy = 0;
}

/* The text a deferred id names, NULL for an id no block can hold. */
static const char *text_of(uint32_t id)
{
    uint32_t b = ((id & ~SP_STR_DEFERRED) >> OFF_BITS) + 1, at = (id & ((1u << OFF_BITS) - 1)) << 3;
    if (!region || b > atomic_load_explicit(&fresh, memory_order_relaxed) || b > MAX_BLOCKS || at < HDR)
        return NULL;
    const char *s = (const char *)block_at(b) + at;
    return memchr(s, 0, BLOCK_BYTES - at) ? s : NULL;
}

/* Sorts the blocks of list b into free (maxwin <= window) and kept. */
static uint32_t sort_blocks(uint32_t b, uint32_t window, uint32_t keep)
{
    while (b) {
        block_t *k = block_at(b);
        uint32_t next = atomic_load_explicit(&k->next, memory_order_relaxed);
        if (k->maxwin <= window) {
            push_free(b);
        } else {
            atomic_store_explicit(&k->next, keep, memory_order_relaxed);
            keep = b;
        }
        b = next;
    }
    return keep;
}

/* Caller holds settle_lock. */
static void release(uint32_t window)
{
    uint32_t keep = sort_blocks(pending, window, 0);
    pending = sort_blocks(atomic_exchange_explicit(&retired, 0, memory_order_acquire), window, keep);
}

/* Ids at base + i * stride (indirect: a record pointer there, the id at off in the record). */
static void settle(uint32_t window, char *base, size_t n, size_t stride, size_t off, int indirect)
{
    enum { BATCH = 256 };
    const char *text[BATCH];
    uint32_t *dst[BATCH], ids[BATCH];
    pthread_mutex_lock(&settle_lock);
    for (size_t i = 0; i < n;) {
        size_t g = 0;
        for (; i < n && g < BATCH; i++) {
            char *at = base + i * stride;
            uint32_t *p = indirect ? (uint32_t *)(*(char **)at + off) : (uint32_t *)at;
            if (!(*p & SP_STR_DEFERRED))
                continue;
            text[g] = text_of(*p);
            if (text[g])
                dst[g++] = p;
            else
                *p = 0;
        }
        sp_str_intern_many(text, ids, g);
        for (size_t k = 0; k < g; k++)
            *dst[k] = ids[k];
    }
    if (region)
        release(window);
    pthread_mutex_unlock(&settle_lock);
}

void sp_str_settle(uint32_t window, uint32_t *names, size_t n, size_t stride)
{
    settle(window, (char *)names, n, stride, 0, 0);
}

void sp_str_settle_refs(uint32_t window, void *const *refs, size_t n, size_t stride, size_t off)
{
    settle(window, (char *)refs, n, stride, off, 1);
}

/* The child of fork() has only the forking thread: every block starts over
 * (the region itself is inherited); the settle lock may have been held. */
void sp_str_log_after_fork_child(void)
{
    pthread_mutex_init(&settle_lock, NULL);
    atomic_store(&fresh, 0);
    atomic_store(&retired, 0);
    atomic_store(&free_head, 0);
    pending = 0;
    me.cur = 0;
    me.busy = 0;
}
