/* collectors/rank.c — which rank of a multi-process job this process is.
 * Launchers say it in the environment: torchrun (RANK, WORLD_SIZE,
 * LOCAL_RANK), Open MPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK), PMI/PMIx
 * (PMI_RANK, PMIX_RANK, PMI_SIZE, MPI_LOCALRANKID) and Slurm (SLURM_PROCID,
 * SLURM_NTASKS, SLURM_LOCALID); the first launcher found wins, in that order
 * (torchrun started by srun or mpirun knows its own ranks best); a size or
 * local rank the winner lacks comes from another launcher that says the same
 * rank (srun --mpi=pmix: PMIX_RANK, SLURM_NTASKS). A process no launcher
 * names (an mp.spawn rank) may learn its rank from torch.distributed
 * (sp_rank_learn, inject/torch.c). Read once,
 * at activation, on the thread that activates; later reads take the copy, so
 * the exporter never calls getenv while the program may setenv. Also owns
 * the `ranks` selection syntax ("0,8-15") and the backend (torch.distributed's
 * when told, else nccl when libnccl is mapped). Lowest layer: schedule/ and exporters/ read it. */
#define _GNU_SOURCE
#include "rank.h"

#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sp_rank_t cached = {-1, -1, -1, ""};

static const struct source {
    const char *name, *rank, *world, *local;
} sources[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMIx", "PMIX_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

/* A non-negative decimal integer, or -1. */
static long env_num(const char *var)
{
    const char *v = var ? getenv(var) : NULL;
    if (!v || !*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 9)
        return -1;
    return strtol(v, NULL, 10);
}

static int learned;   /* the rank came from sp_rank_learn: the launcher's environment said none */

static sp_rank_t from_env(void)
{
    sp_rank_t r = {-1, -1, -1, ""};
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        long rank = env_num(sources[i].rank);
        if (rank < 0)
            continue;
        long world = env_num(sources[i].world);
        r.rank = rank;
        r.world = world > rank ? world : -1;
        r.local = env_num(sources[i].local);
        r.source = sources[i].name;
        /* A launcher layer that says the same rank describes the same job and
         * fills what this one leaves out: srun --mpi=pmix sets PMIX_RANK but
         * no PMI_SIZE, its size and local rank are SLURM_NTASKS/LOCALID. */
        for (size_t j = 0; j < sizeof sources / sizeof sources[0]; j++) {
            if (j == i || env_num(sources[j].rank) != rank)
                continue;
            long w = env_num(sources[j].world);
            if (r.world < 0 && w > rank)
                r.world = w;
            if (r.local < 0)
                r.local = env_num(sources[j].local);
        }
        break;
    }
    return r;
}

void sp_rank_init(void)
{
    if (!learned)
        cached = from_env();
}

/* A launcher variable that is set but not a number (RANK=abc, WORLD_SIZE=)
 * is skipped by sp_rank_init; said once, here, where a profiled process may
 * speak: HTA takes a trace without distributedInfo as rank 0's. */
void sp_rank_warn(void)
{
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        const char *vars[3] = {sources[i].rank, sources[i].world, sources[i].local};
        for (int k = 0; k < 3; k++) {
            const char *v = getenv(vars[k]);
            if (!v || !*v || env_num(vars[k]) >= 0 || (k > 0 && env_num(sources[i].rank) < 0))
                continue;   /* unset, a number, or a size / local rank of a launcher not in use */
            sp_log(SP_LOG_WARN, "%s=\"%s\" (%s) is not a non-negative integer; ignored%s", vars[k], v,
                   sources[i].name,
                   k == 0 && cached.rank < 0 ? " (the trace has no rank: HTA reads it as rank 0's)" : "");
        }
    }
}

/* Before or after activation, under the schedule's lock while no cycle has
 * gone to the exporter (schedule/activation.c: the exporter reads the copy). */
int sp_rank_learn(long rank, long world, const char *source)
{
    if (learned || rank < 0 || cached.rank >= 0)
        return 0;
    /* A launcher variable the program set itself since activation (DeepSpeed
     * sets RANK) is as good as the launcher's. */
    sp_rank_t env = from_env();
    cached = env.rank >= 0 ? env : (sp_rank_t){rank, world > rank ? world : -1, -1, source};
    learned = 1;
    return 1;
}

const sp_rank_t *sp_rank(void)
{
    return &cached;
}

/* One number of a ranks list; advances *p past it. */
static int spec_num(const char **p, long *out)
{
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    long v = strtol(s, &end, 10);
    if (end - s > 9)
        return -1;
    *out = v;
    *p = end;
    return 0;
}

int sp_rank_in_list(const char *spec, long rank, char *why, size_t n)
{
    const char *p = spec;
    int hit = 0, items = 0;
    for (;;) {
        p += strspn(p, " \t");
        if (!*p)
            break;
        long lo, hi;
        if (spec_num(&p, &lo) != 0) {
            snprintf(why, n, "expected a rank number at \"%s\" (e.g. 0,8-15)", p);
            return -1;
        }
        hi = lo;
        p += strspn(p, " \t");
        if (*p == '-') {
            p++;
            p += strspn(p, " \t");
            if (spec_num(&p, &hi) != 0 || hi < lo) {
                snprintf(why, n, "range %ld-... needs an end >= %ld (e.g. 8-15)", lo, lo);
                return -1;
            }
            p += strspn(p, " \t");
        }
        items++;
        hit |= rank >= lo && rank <= hi;
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p) {
            snprintf(why, n, "unexpected \"%s\" (expected a list such as 0,8-15)", p);
            return -1;
        }
    }
    if (!items) {
        snprintf(why, n, "no rank listed (e.g. 0,8-15)");
        return -1;
    }
    return hit;
}

static char told_backend[32];   /* torch.distributed's, when a process told it (as sp_rank_learn) */

void sp_rank_tell_backend(const char *backend)
{
    if (backend && *backend && strlen(backend) < sizeof told_backend)
        memcpy(told_backend, backend, strlen(backend) + 1);
}

const char *sp_rank_backend(void)
{
    if (told_backend[0])
        return told_backend;
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return NULL;
    char line[4096];
    const char *backend = NULL;
    while (!backend && fgets(line, sizeof line, f)) {
        const char *slash = strrchr(line, '/');
        if (slash && (strncmp(slash + 1, "libnccl.so", 10) == 0 || strncmp(slash + 1, "librccl.so", 10) == 0))
            backend = "nccl";
    }
    fclose(f);
    return backend;
}
