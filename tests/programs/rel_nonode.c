/*
 * rel_nonode.c — a preloadable shim for tests/test_reliability.py: every malloc of exactly the size
 * of the exporter's queue node (exporters/worker.c: an sp_export_job_t and a next pointer) fails,
 * so each window's export takes the path for a failed allocation of its job. Preloaded in front of
 * libstepprof.so, whose calls to malloc it then answers; everything else goes to glibc. Counts the
 * failures it caused and prints them to stderr at exit ("rel_nonode: N").
 */
#include <stddef.h>
#include <stdio.h>

#include "../../exporters/export.h"

struct node_like {   /* exporters/worker.c's node_t */
    sp_export_job_t job;
    void *next;
};

extern void *__libc_malloc(size_t n);

static unsigned long failed;

void *malloc(size_t n)
{
    if (n == sizeof(struct node_like)) {
        __atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    return __libc_malloc(n);
}

__attribute__((destructor)) static void report(void)
{
    fprintf(stderr, "rel_nonode: %lu\n", __atomic_load_n(&failed, __ATOMIC_RELAXED));
}
