/* tests/unit/test_kernels.c — the kernel-name registry (collectors/kernels.c):
 * names by stub and by launch handle, demangled; re-registration and handle
 * remapping seen by the next lookup; unknown pointers NULL; and lookups from
 * names shown as registered when they do not demangle (cut to 4095 bytes;
 * sp_kern_demangle NULL for them); 64 threads (without the lock) while names are registered and handles mapped,
 * each answer one the stub could have had (built with SP_KERN_TEST_YIELD, which
 * yields after each lock-free probe that missed: the reader that re-read the
 * slot there failed 10 of 10 runs). Clean under ThreadSanitizer:
 *   cc -std=gnu11 -O1 -g -fsanitize=thread tests/unit/test_kernels.c collectors/kernels.c -ldl -lpthread */
#include "../../collectors/kernels.h"
#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

enum { STUBS = 512, THREADS = 64, ROUNDS = 200 };

static char stubs[STUBS], handles[STUBS], nobody, plain_stub, long_stub, bad_stub;
static char long_name[5000];
static char mangled[STUBS][2][32];
static _Atomic int stop;
static _Atomic long bad;
static _Atomic int started;        /* readers past their first lookup */
static _Atomic int writing;        /* the writer is registering */
static _Atomic long during;        /* lookups made while it was */

/* k<i>(int) or k<i>(float): the two names stub i is registered with. */
static int fits(const char *name, int i)
{
    char a[48], b[48];
    snprintf(a, sizeof a, "k%04d(int)", i);
    snprintf(b, sizeof b, "k%04d(float)", i);
    return name && (strcmp(name, a) == 0 || strcmp(name, b) == 0);
}

static void *reader(void *arg)
{
    unsigned x = (unsigned)(size_t)arg * 2654435761u;
    while (!atomic_load(&stop)) {
        x = x * 1103515245u + 12345u;
        int i = (int)(x >> 8) % STUBS;
        const char *n = sp_kern_name(&stubs[i], 0);
        const char *h = sp_kern_name(&handles[i], 1);
        if (!fits(n, i) || (h && !fits(h, i)))
            atomic_fetch_add(&bad, 1);
        if (atomic_load(&writing))
            atomic_fetch_add(&during, 1);
        else if (!atomic_load(&stop))
            atomic_fetch_add(&started, 1);
    }
    return NULL;
}

int main(void)
{
    for (int i = 0; i < STUBS; i++) {
        snprintf(mangled[i][0], sizeof mangled[i][0], "_Z5k%04di", i);
        snprintf(mangled[i][1], sizeof mangled[i][1], "_Z5k%04df", i);
        sp_kern_register(&stubs[i], mangled[i][0]);
    }
    CHECK(sp_kern_name(&nobody, 0) == NULL, "an unregistered pointer has no name");
    CHECK(fits(sp_kern_name(&stubs[3], 0), 3) && strcmp(sp_kern_name(&stubs[3], 0), "k0003(int)") == 0,
          "demangled: %s", sp_kern_name(&stubs[3], 0));
    CHECK(sp_kern_name(&handles[3], 1) == NULL, "a handle not mapped yet has no name");
    sp_kern_map_handle(&handles[3], &stubs[3]);
    CHECK(sp_kern_name(&handles[3], 1) && strcmp(sp_kern_name(&handles[3], 1), "k0003(int)") == 0,
          "a mapped handle: %s", sp_kern_name(&handles[3], 1));
    sp_kern_register(&stubs[3], mangled[3][1]);
    CHECK(strcmp(sp_kern_name(&stubs[3], 0), "k0003(float)") == 0, "registered again: %s", sp_kern_name(&stubs[3], 0));
    CHECK(strcmp(sp_kern_name(&handles[3], 1), "k0003(float)") == 0, "its handle follows: %s",
          sp_kern_name(&handles[3], 1));
    sp_kern_map_handle(&handles[3], &stubs[4]);
    CHECK(strcmp(sp_kern_name(&handles[3], 1), "k0004(int)") == 0, "handle remapped: %s",
          sp_kern_name(&handles[3], 1));
    sp_kern_map_handle(&handles[3], &stubs[3]);

    sp_kern_register(&plain_stub, "plain_c_kernel");
    CHECK(strcmp(sp_kern_name(&plain_stub, 0), "plain_c_kernel") == 0, "a C name as it is: %s",
          sp_kern_name(&plain_stub, 0));
    CHECK(sp_kern_demangle("plain_c_kernel") == NULL, "a C name does not demangle");
    sp_kern_register(&bad_stub, "_Z_not_valid");
    CHECK(strcmp(sp_kern_name(&bad_stub, 0), "_Z_not_valid") == 0 && sp_kern_demangle("_Z_not_valid") == NULL,
          "a name that does not demangle is shown as registered: %s", sp_kern_name(&bad_stub, 0));
    CHECK(strcmp(sp_kern_demangle("_Z5k0003i"), "k0003(int)") == 0, "demangled by name");
    memset(long_name, 'x', sizeof long_name - 1);
    sp_kern_register(&long_stub, long_name);
    const char *cut = sp_kern_name(&long_stub, 0);
    CHECK(cut && strlen(cut) == 4095 && strncmp(cut, long_name, 4095) == 0, "a long name cut to 4095 bytes: %zu",
          cut ? strlen(cut) : 0);
    CHECK(strcmp(sp_kern_name(&plain_stub, 0), "plain_c_kernel") == 0, "the short name kept beside the long one");

    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, reader, (void *)t);
    /* The writes start once every reader is looking up, so they overlap. */
    while (atomic_load(&started) < THREADS)
        sched_yield();
    atomic_store(&writing, 1);
    for (int r = 0; r < ROUNDS; r++) {
        int i = (r * 37) % STUBS;
        sp_kern_register(&stubs[i], mangled[i][r & 1]);
        sp_kern_map_handle(&handles[i], &stubs[i]);
    }
    /* ...and go on until the readers have looked up while names changed. */
    while (atomic_load(&during) < 10000) {
        int i = (int)(atomic_load(&during) % STUBS);
        sp_kern_map_handle(&handles[i], &stubs[i]);
    }
    atomic_store(&writing, 0);
    atomic_store(&stop, 1);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    CHECK(atomic_load(&bad) == 0, "%ld lookups returned a name the stub never had", atomic_load(&bad));
    CHECK(atomic_load(&during) >= 10000, "%ld lookups overlapped the writes", atomic_load(&during));
    for (int r = 0; r < ROUNDS; r++) {
        int i = (r * 37) % STUBS;
        int last = -1;
        for (int q = 0; q < ROUNDS; q++)
            last = (q * 37) % STUBS == i ? q : last;
        char want[48];
        snprintf(want, sizeof want, last & 1 ? "k%04d(float)" : "k%04d(int)", i);
        CHECK(strcmp(sp_kern_name(&stubs[i], 0), want) == 0 && strcmp(sp_kern_name(&handles[i], 1), want) == 0,
              "after the threads, stub %d: %s", i, sp_kern_name(&stubs[i], 0));
    }
    printf("test_kernels: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
