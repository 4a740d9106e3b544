/* exporters/outfile.c — see outfile.h. */
#define _GNU_SOURCE
#include "outfile.h"

#include "../collectors/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    if (snprintf(f->final, sizeof f->final, "%s/%s%s", dir, stem, suffix) >= (int)sizeof f->final) {
        sp_log(SP_LOG_ERROR, "output path too long in %s; this cycle's files are dropped", dir);
        return -1;
    }
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp.%d", f->final, (int)getpid());
    if (mkdir_p(dir) != 0) {
        sp_log(SP_LOG_ERROR, "cannot create output directory %s: %s; this cycle's files are dropped", dir,
               strerror(errno));
        return -1;
    }
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        sp_log(SP_LOG_ERROR, "cannot create %s: %s; this cycle's files are dropped", f->tmp, strerror(errno));
        return -1;
    }
    return 0;
}

int sp_outfile_commit(sp_outfile_t *f)
{
    int rc = close(f->fd);
    f->fd = -1;
    if (rc != 0 || rename(f->tmp, f->final) != 0) {
        sp_log(SP_LOG_ERROR, "cannot write %s: %s; this cycle's file is dropped", f->final, strerror(errno));
        unlink(f->tmp);
        return -1;
    }
    return 0;
}

void sp_outfile_abort(sp_outfile_t *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    unlink(f->tmp);
}
