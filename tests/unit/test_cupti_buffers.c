/* tests/unit/test_cupti_buffers.c — the activity buffers of
 * collectors/cupti_buffers.c (parsed by cupti_records.c, linked too), with a
 * stand-in for CUPTI's record walk and
 * posix_memalign counted (-Wl,--wrap): a collect's forced flush gives the
 * parsed pages back and the buffer waits cold; kinds going on while cold
 * buffers wait ask for them to be warmed instead of allocating new ones
 * beside them (memory grew by two buffers each time); a request carries the
 * highest collect number it may warm, and the collect that turns kinds on
 * leaves its own buffers to its export; a rewarm warms up to that number
 * only, and stops between buffers when asked to. */
#define _GNU_SOURCE
#include "../../collectors/cupti.h"
#include "../../collectors/cupti_int.h"
#include "../../collectors/cupti_load.h"
#include "../../collectors/clock.h"
#include "../../collectors/log.h"
#include "../../collectors/memory.h"
#include "../../collectors/strings.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BUF (4u << 20)
#define STEP (64u << 10)   /* one stand-in record: every 64 KiB, of no kind parse() reads */

static int allocs;   /* 4 MiB allocations */
int __real_posix_memalign(void **p, size_t align, size_t size);
int __wrap_posix_memalign(void **p, size_t align, size_t size)
{
    allocs += size == BUF;
    return __real_posix_memalign(p, align, size);
}

static CUptiResult next_record(uint8_t *buf, size_t valid, CUpti_Activity **r)
{
    uint8_t *at = *r ? (uint8_t *)*r + STEP : buf;
    if (at + sizeof(CUpti_Activity) > buf + valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *r = (CUpti_Activity *)at;
    return CUPTI_SUCCESS;
}

sp_cupti_api_t sp_cupti_api = {.next_record = next_record};

/* What cupti_records.c needs from the rest of the library. */
uint64_t sp_clock_bracket(int (*read)(void *arg, uint64_t *value), void *arg, int tries, uint64_t *value)
{
    (void)read, (void)arg, (void)tries, (void)value;
    return 0;
}
void sp_log(int level, const char *fmt, ...)
{
    (void)level, (void)fmt;
}
void sp_mem_cupti_record(int is_alloc, int kind, uint64_t addr, uint64_t bytes, uint64_t ts_ns, int device,
                         uint64_t stream)
{
    (void)is_alloc, (void)kind, (void)addr, (void)bytes, (void)ts_ns, (void)device, (void)stream;
}
uint32_t sp_str_intern(const char *s)
{
    (void)s;
    return 1;
}
const char *sp_cupti_api_name(int driver, uint32_t cbid)
{
    (void)driver, (void)cbid;
    return NULL;
}
int sp_cupti_api_is_query(int driver, uint32_t cbid)
{
    (void)driver, (void)cbid;
    return 0;
}
void sp_cupti_launch_records_lost(void)
{
}

static int asked;
static uint64_t asked_upto;
static void wake(uint64_t upto)
{
    asked++;
    asked_upto = upto;
}

static void *request(void)
{
    uint8_t *b = NULL;
    size_t size = 0, max = 0;
    sp_cupti_buffer_requested(&b, &size, &max);
    return b;
}

/* CUPTI filled b and a collect's forced flush hands it back: its number. */
static uint64_t collect(void **bufs, int n)
{
    uint64_t gen = sp_cupti_release_pages(1);
    for (int i = 0; i < n; i++) {
        memset(bufs[i], 0, BUF);   /* CUPTI's writes: every page resident */
        sp_cupti_buffer_completed(NULL, 0, bufs[i], BUF, BUF);
    }
    sp_cupti_release_pages(0);
    return gen;
}

/* Resident pages of the buffer's first MiB, past its first page (the allocator's header shares that one). */
static int resident(void *b)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t from = ((uintptr_t)b + (uintptr_t)page) & ~(uintptr_t)(page - 1);
    size_t len = 1u << 20;
    unsigned char vec[(1u << 20) / 4096];
    if (mincore((void *)from, len, vec) != 0)
        return -1;
    int n = 0;
    for (size_t i = 0; i < len / (size_t)page; i++)
        n += vec[i] & 1;
    return n;
}

static int stop_always(void)
{
    return 1;
}

int main(void)
{
    sp_cupti_set_buffer_cap(64);
    sp_cupti_set_rewarm_wake(wake);
    sp_cupti_shared.window_end = 1000;   /* a window closed: its collect gives pages back */

    sp_cupti_preallocate(0);
    CHECK(allocs == 2, "an empty pool is filled with 2 buffers, got %d", allocs);
    void *a = request(), *b = request();
    CHECK(a && b && allocs == 2, "the 2 buffers are handed out, %d allocated", allocs);
    uint64_t g1 = collect((void *[]){a, b}, 2);
    CHECK(g1 == 1 && resident(a) == 0 && resident(b) == 0, "collect %llu gave the pages back: %d %d resident",
          (unsigned long long)g1, resident(a), resident(b));

    /* Kinds go on (a program's thread) while both wait cold: no new buffer, a request up to collect 1. */
    asked = 0;
    sp_cupti_preallocate(0);
    CHECK(allocs == 2, "kinds on with 2 cold buffers allocated %d more", allocs - 2);
    CHECK(asked == 1 && asked_upto == g1, "asked %d times, up to %llu", asked, (unsigned long long)asked_upto);
    CHECK(sp_cupti_rewarm(asked_upto, NULL) == 0, "cold buffers left after the rewarm");
    CHECK(resident(a) > 200 && resident(b) > 200, "warmed: %d %d pages resident", resident(a), resident(b));
    void *x = request(), *y = request();
    CHECK(((x == a && y == b) || (x == b && y == a)) && allocs == 2, "the warmed buffers are handed out again");

    /* Collect 2 gives a back; then collect 3 gives b back and turns kinds on: it
     * asks for collect 2's buffer only (its own wait for its export). */
    uint64_t g2 = collect((void *[]){a}, 1), g3 = collect((void *[]){b}, 1);
    asked = 0;
    sp_cupti_preallocate(g3);
    CHECK(allocs == 2, "kinds on with 2 cold buffers allocated %d more", allocs - 2);
    CHECK(asked == 1 && asked_upto == g2, "asked %d times, up to %llu (want %llu)", asked,
          (unsigned long long)asked_upto, (unsigned long long)g2);
    CHECK(sp_cupti_rewarm(asked_upto, NULL) == 0, "collect 2's buffer left cold");
    CHECK(resident(a) > 200 && resident(b) == 0, "collect 2's warmed, collect 3's cold: %d %d pages resident",
          resident(a), resident(b));

    /* A program's request takes the last warm buffer while one is cold: it asks up to the latest collect. */
    asked = 0;
    x = request();
    CHECK(x == a && asked == 1 && asked_upto == g3, "took %p (a %p), asked %d times up to %llu", x, a, asked,
          (unsigned long long)asked_upto);
    void *c = request();   /* the pool's next: the cold one, none being warm */
    CHECK(c == b && allocs == 2, "the cold buffer is taken before a new one is allocated");

    /* Two cold buffers; a rewarm told to stop warms one and says one is left. */
    g3 = collect((void *[]){a, b}, 2);
    CHECK(sp_cupti_rewarm(g3, stop_always) == 1, "a stopped rewarm said nothing was left");
    CHECK((resident(a) > 200) + (resident(b) > 200) == 1, "a stopped rewarm warmed %d of 2",
          (resident(a) > 200) + (resident(b) > 200));
    CHECK(sp_cupti_rewarm(g3, NULL) == 0 && resident(a) > 200 && resident(b) > 200, "the rest warmed after");

    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
