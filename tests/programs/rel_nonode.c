/*
 * rel_nonode.c — a preloadable shim for tests/test_reliability.py: every malloc of exactly the size
 * of the exporter's queue node (exporters/worker.c: an sp_export_job_t and a next pointer) fails,
 * so each window's export takes the path for a failed allocation of its job. Preloaded in front of
 * libstepprof.so, whose calls to malloc and rename it then answers; everything else goes to glibc.
 * At exit it prints to stderr the failures it caused ("rel_nonode: N") and which threads renamed a
 * trace into place ("rel_nonode-renames: EXPORTER OTHER FIRST-OTHER-NAME"): the exports' thread is
 * "stepprof-export", and any other is an export run on a program's thread.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

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

static unsigned long by_exporter, by_other;
static char other_name[17];

int rename(const char *from, const char *to)
{
    static int (*real)(const char *, const char *);
    if (!real)
        real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    if (strstr(to, ".pt.trace.json")) {
        char name[17] = {0};
        prctl(PR_GET_NAME, name);
        if (strcmp(name, "stepprof-export") == 0) {
            __atomic_add_fetch(&by_exporter, 1, __ATOMIC_RELAXED);
        } else if (__atomic_add_fetch(&by_other, 1, __ATOMIC_RELAXED) == 1) {
            memcpy(other_name, name, sizeof other_name);
        }
    }
    return real(from, to);
}

__attribute__((destructor)) static void report(void)
{
    fprintf(stderr, "rel_nonode: %lu\n", __atomic_load_n(&failed, __ATOMIC_RELAXED));
    fprintf(stderr, "rel_nonode-renames: %lu %lu %s\n", by_exporter, by_other, other_name[0] ? other_name : "-");
}
