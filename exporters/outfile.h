/* exporters/outfile.h — output files that readers never see half-written:
 * created as "<final>.tmp.<pid>" with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0644
 * (umask applies), and renamed into place only when complete. A failure is
 * one stepprof: line per distinct problem for the whole run, not per file
 * or cycle; once the disk refuses (full, quota, RLIMIT_FSIZE) no further
 * file is written. Also owns the
 * file stem "<worker>.<unix_ns>" with the worker name made safe for a path. */
#ifndef SP_OUTFILE_H
#define SP_OUTFILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sp_outfile {
    char final[4096];
    char tmp[4200];
    int fd;
    int slot;        /* entry in the table of live temporaries, -1: none */
} sp_outfile_t;

/* "<worker>.<unix_ns>", worker reduced to [A-Za-z0-9._-] (others -> '_', no
 * leading '.', at most 128 bytes) so it cannot leave the output directory. */
void sp_outfile_stem(char *out, size_t len, const char *worker, uint64_t unix_ns);

/* At activation: whether files can be created in dir (its nearest existing
 * ancestor is a writable directory); says so in the same line a failing
 * write would, so a later failure is not said again. 0 when it can. */
int sp_outfile_check_dir(const char *dir);

/* Creates dir (and parents) if needed and opens the temporary file for
 * dir/stem+suffix. 0 on success; on failure prints one stepprof: line. */
int sp_outfile_open(sp_outfile_t *f, const char *dir, const char *stem, const char *suffix);
int sp_outfile_commit(sp_outfile_t *f);  /* close + rename; 0 on success */
/* A write to f failed with err: report it (once per problem, see
 * outfile.c) and remove the temporary. Writers use this rather than their
 * own message so that a full disk is one line, not one per file. */
void sp_outfile_fail(sp_outfile_t *f, int err);
void sp_outfile_abort(sp_outfile_t *f);  /* close + unlink the temporary */

/* The process ends without waiting for the files being written: removes
 * every temporary open now (their count returned; one being renamed is left
 * to its commit), and makes later opens and commits fail quietly (their loss
 * is the caller's one line). Async-signal-safe. */
int sp_outfile_abandon(void);
int sp_outfile_abandoned(void);
/* A file is being renamed to its final name (its commit won over any abandon). */
int sp_outfile_committing(void);
/* In a fork child: the temporaries listed are the parent's, still being
 * written by its exporter; the child's abandon must not remove them. */
void sp_outfile_after_fork_child(void);

#endif
