/* exporters/outfile.c — see outfile.h. Failures are reported once: a cycle
 * writes several files (trace, table, summary, stacks) and a run may have
 * hundreds of cycles, so the same problem (same directory, same errno) is
 * said in one line, repeats are only counted, and the first success
 * afterwards says how many files were lost meanwhile. Once the disk is full
 * (ENOSPC, EDQUOT) no more files are written in the run.
 *
 * Every temporary file open is also listed in a small lock-free table, so
 * that an end of the process that cannot wait for a write to finish (a bound
 * reached at exit, a signal's finalize_timeout_s) removes it with
 * sp_outfile_abandon, which is async-signal-safe: no `.tmp` file outlives the
 * process, whatever way it ends but SIGKILL. A fork child starts with an
 * empty table: the temporaries listed at the fork are the parent's, still
 * being written by its exporter, and not the child's to remove. */
#define _GNU_SOURCE
#include "outfile.h"

#include "../collectors/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Temporaries being written: state 0 free, 1 being filled, 2 listed, 3
 * being committed (renamed: no longer the abandon's), 4 removed by the
 * abandon (its commit fails). Commit and abandon claim a listed file by
 * compare-and-swap, so a file said lost is never renamed afterwards, and one
 * renamed is never said lost. */
#define NLIVE 16
static struct {
    _Atomic int state;
    char path[sizeof ((sp_outfile_t *)0)->tmp];
} live[NLIVE];
static _Atomic int abandoned;

static int live_add(const char *tmp)
{
    for (int i = 0; i < NLIVE; i++) {
        int free_ = 0;
        if (atomic_compare_exchange_strong(&live[i].state, &free_, 1)) {
            snprintf(live[i].path, sizeof live[i].path, "%s", tmp);
            atomic_store(&live[i].state, 2);
            return i;
        }
    }
    return -1; /* more than NLIVE files at once: written unlisted */
}

/* Frees the slot, unless the abandon claimed it (4): the abandon reads the
 * path after its claim, so a slot it holds is never reused for another file. */
static void live_drop(int slot)
{
    if (slot < 0)
        return;
    int s = atomic_load(&live[slot].state);
    while (s != 4 && !atomic_compare_exchange_weak(&live[slot].state, &s, 0))
        ;
}

int sp_outfile_abandon(void)
{
    atomic_store(&abandoned, 1);
    int removed = 0;
    for (int i = 0; i < NLIVE; i++) {
        int listed = 2;
        if (atomic_compare_exchange_strong(&live[i].state, &listed, 4)) {
            unlink(live[i].path);
            removed++;
        }
    }
    return removed;
}

int sp_outfile_committing(void)
{
    for (int i = 0; i < NLIVE; i++)
        if (atomic_load(&live[i].state) == 3)
            return 1;
    return 0;
}

int sp_outfile_abandoned(void)
{
    return atomic_load(&abandoned);
}

static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
/* Problems said so far in this run, by (directory, errno): each is one line
 * for the whole run, however often it recurs. */
#define NPROB 16
static struct {
    char dir[4096];
    int err;
    int open;              /* failing now */
    int recovered_said;
    unsigned long dropped; /* files dropped while open */
} probs[NPROB];
static int nprob;
/* The disk refused (full, quota, file size limit): no more files this run. */
static int refused;
static unsigned long refused_dropped;

void sp_outfile_after_fork_child(void)
{
    for (int i = 0; i < NLIVE; i++)
        atomic_store(&live[i].state, 0);
    atomic_store(&abandoned, 0);
    pthread_mutex_init(&fail_lock, NULL);
}

/* EFBIG (RLIMIT_FSIZE) is per file: a smaller trace still fits, so it is
 * an ordinary problem, said once. */
static int disk_refusal(int err)
{
    return err == ENOSPC || err == EDQUOT;
}

/* One line for a new problem, a debug line for a repeat. The message names
 * the file and says what happens to this cycle's files and the next ones. */
static void failed(const char *dir, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void failed(const char *dir, int err, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&fail_lock);
    int said = 0, stop = disk_refusal(err) && !refused;
    if (disk_refusal(err)) {
        said = refused != 0;
        refused = err;
        refused_dropped++;
    } else {
        int i = 0;
        while (i < nprob && !(probs[i].err == err && strcmp(probs[i].dir, dir) == 0))
            i++;
        said = i < nprob;
        if (!said && nprob < NPROB) {
            snprintf(probs[i].dir, sizeof probs[i].dir, "%s", dir);
            probs[i].err = err;
            nprob++;
        }
        if (i < NPROB) {
            probs[i].open = 1;
            probs[i].dropped++;
        }
    }
    pthread_mutex_unlock(&fail_lock);
    if (stop)
        sp_log(SP_LOG_ERROR, "%s: %s; stepprof writes no more files in this run (later cycles are dropped)", msg,
               strerror(err));
    else
        sp_log(said ? SP_LOG_DEBUG : SP_LOG_ERROR, "%s: %s; this cycle's files are dropped (later cycles retry)",
               msg, strerror(err));
}

static void succeeded(const char *dir)
{
    unsigned long lost = 0;
    pthread_mutex_lock(&fail_lock);
    for (int i = 0; i < nprob; i++)
        if (probs[i].open && strcmp(probs[i].dir, dir) == 0) {
            probs[i].open = 0;
            if (!probs[i].recovered_said) {
                probs[i].recovered_said = 1;
                lost += probs[i].dropped;
            }
            probs[i].dropped = 0;
        }
    pthread_mutex_unlock(&fail_lock);
    if (lost)
        sp_log(SP_LOG_INFO, "writing to %s works again; %lu files were dropped before", dir, lost);
}

int sp_outfile_check_dir(const char *dir)
{
    /* The nearest existing ancestor must be a directory we can write in;
     * nothing is created until there is a file to write. */
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        failed(dir, ENAMETOOLONG, "output path too long in %s", dir);
        return -1;
    }
    for (;;) {
        struct stat st;
        if (stat(path, &st) == 0) {
            int err = !S_ISDIR(st.st_mode) ? ENOTDIR : access(path, W_OK | X_OK) != 0 ? errno : 0;
            if (err == 0)
                return 0;
            failed(dir, err, "cannot create output directory %s (checked at start: cycles are dropped until it "
                   "works)", dir);
            return -1;
        }
        if (errno == ENOTDIR) {
            failed(dir, ENOTDIR, "cannot create output directory %s (checked at start: cycles are dropped until "
                   "it works)", dir);
            return -1;
        }
        char *slash = strrchr(path, '/');
        if (!slash)
            return 0; /* relative: the working directory is checked at write time */
        if (slash == path) {
            path[1] = 0;
            if (strcmp(path, "/") == 0 && stat(path, &st) == 0)
                return 0;
        }
        *slash = 0;
        if (!path[0])
            return 0;
    }
}

/* The directory part of path (as given to sp_outfile_open). */
static const char *dir_of(const char *path, char *out, size_t n)
{
    snprintf(out, n, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash)
        *slash = 0;
    return out;
}

void sp_outfile_fail(sp_outfile_t *f, int err)
{
    char dir[4096];
    failed(dir_of(f->final, dir, sizeof dir), err ? err : EIO, "cannot write %s", f->final);
    sp_outfile_abort(f);
}

void sp_outfile_stem(char *out, size_t len, const char *worker, uint64_t unix_ns)
{
    char safe[129];
    size_t n = 0;
    for (const char *p = worker; *p && n < sizeof safe - 1; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                 c == '-' || (c == '.' && n > 0);
        safe[n++] = ok ? c : '_';
    }
    if (n == 0)
        safe[n++] = '_';
    safe[n] = 0;
    snprintf(out, len, "%s.%" PRIu64, safe, unix_ns);
}

static int mkdir_p(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

int sp_outfile_open(sp_outfile_t *f, const char *dir, const char *stem, const char *suffix)
{
    f->fd = -1;
    f->slot = -1;
    if (atomic_load(&abandoned))
        return -1; /* the process is ending without this file: said once already */
    pthread_mutex_lock(&fail_lock);
    int stop = refused != 0;
    refused_dropped += stop ? 1u : 0u;
    pthread_mutex_unlock(&fail_lock);
    if (stop)
        return -1; /* the disk refused: said once */
    if (snprintf(f->final, sizeof f->final, "%s/%s%s", dir, stem, suffix) >= (int)sizeof f->final) {
        failed(dir, ENAMETOOLONG, "output path too long in %s", dir);
        return -1;
    }
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp.%d", f->final, (int)getpid());
    if (mkdir_p(dir) != 0) {
        failed(dir, errno, "cannot create output directory %s", dir);
        return -1;
    }
    /* O_EXCL|O_NOFOLLOW: a file or symlink planted at the temporary name in
     * a shared directory makes this fail instead of writing through it. */
    f->slot = live_add(f->tmp);
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        int err = errno;
        live_drop(f->slot);
        failed(dir, err, "cannot create %s", f->tmp);
        return -1;
    }
    /* Listed before it exists, checked after: an abandon either sees it
     * listed (and removes it) or is seen here. */
    if (atomic_load(&abandoned)) {
        sp_outfile_abort(f);
        return -1;
    }
    return 0;
}

int sp_outfile_commit(sp_outfile_t *f)
{
    int listed = 2;
    if (atomic_load(&abandoned) ||
        (f->slot >= 0 && !atomic_compare_exchange_strong(&live[f->slot].state, &listed, 3))) {
        sp_outfile_abort(f); /* its loss is already reported */
        return -1;
    }
    int rc = close(f->fd);
    f->fd = -1;
    /* rename replaces whatever is at the final name, a symlink included,
     * without following it. */
    if (rc != 0 || rename(f->tmp, f->final) != 0) {
        int err = errno;
        unlink(f->tmp);
        live_drop(f->slot);
        f->slot = -1;
        char dir[4096];
        failed(dir_of(f->final, dir, sizeof dir), err, "cannot write %s", f->final);
        return -1;
    }
    live_drop(f->slot);
    f->slot = -1;
    char dir[4096];
    succeeded(dir_of(f->final, dir, sizeof dir));
    return 0;
}

void sp_outfile_abort(sp_outfile_t *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    unlink(f->tmp);
    live_drop(f->slot);
    f->slot = -1;
}
