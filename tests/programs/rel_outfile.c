/*
 * rel_outfile.c — checks exporters/outfile.c directly (linked with it and collectors/log.c, no
 * CUDA), for tests/test_reliability.py: the cases that need a chosen file name, which a profiled
 * program cannot give (its names carry a nanosecond time stamp).
 *
 * Usage: rel_outfile DIR (an empty directory). Checks:
 *   mode      files are 0644 under umask 022 and 0600 under umask 077
 *   tmp-link  a symlink planted at the temporary name: open fails, its target is untouched
 *   final-link a symlink planted at the final name: replaced by the file, its target untouched
 *   names     worker names with '/', '..', spaces, 300 characters, empty: the file lands in DIR
 *   messages  three identical failures print one stepprof: line; the next success one more
 * Prints "ok NAME" or "FAIL NAME: why" per check, then "N passed, N failed"; exit 1 on failure.
 */
#define _GNU_SOURCE
#include "../../exporters/outfile.h"

#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int passed, failed;

static void check(int ok, const char *name, const char *why)
{
    if (ok) {
        passed++;
        printf("ok %s\n", name);
    } else {
        failed++;
        printf("FAIL %s: %s\n", name, why);
    }
}

static int write_file(const char *dir, const char *stem)
{
    sp_outfile_t f;
    if (sp_outfile_open(&f, dir, stem, ".pt.trace.json") != 0)
        return -1;
    if (write(f.fd, "{}\n", 3) != 3) {
        sp_outfile_abort(&f);
        return -1;
    }
    return sp_outfile_commit(&f);
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_mode : 0;
}

static int read_is(const char *path, const char *want)
{
    char buf[64] = {0};
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strcmp(buf, want) == 0;
}

/* Runs fn with fd 2 sent to a file; returns the number of stepprof: lines it printed. */
static int count_lines(const char *dir, void (*fn)(const char *), const char *arg)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/stderr.txt", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600), saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    char buf[8192];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    unlink(path);
    buf[n > 0 ? n : 0] = 0;
    int lines = 0;
    for (char *p = buf; (p = strstr(p, "stepprof:")); p++)
        lines++;
    return lines;
}

static void three_failures(const char *bad_dir)
{
    for (int i = 0; i < 3; i++)
        write_file(bad_dir, "w.1");
}

static void one_success(const char *dir)
{
    write_file(dir, "w.2");
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    const char *dir = argv[1];
    char path[4096], target[4096], link[4096];

    umask(022);
    snprintf(path, sizeof path, "%s/m022.pt.trace.json", dir);
    check(write_file(dir, "m022") == 0 && (mode_of(path) & 0777) == 0644, "mode", "0644 under umask 022");
    umask(077);
    snprintf(path, sizeof path, "%s/m077.pt.trace.json", dir);
    check(write_file(dir, "m077") == 0 && (mode_of(path) & 0777) == 0600, "mode", "0600 under umask 077");
    umask(022);

    snprintf(target, sizeof target, "%s/victim.txt", dir);
    FILE *v = fopen(target, "w");
    fputs("precious", v);
    fclose(v);
    snprintf(link, sizeof link, "%s/planted.pt.trace.json.tmp.%d", dir, (int)getpid());
    symlink(target, link);
    check(write_file(dir, "planted") != 0 && read_is(target, "precious") && S_ISLNK(mode_of(link)), "tmp-link",
          "write went through a symlink at the temporary name");
    snprintf(link, sizeof link, "%s/final.pt.trace.json", dir);
    symlink(target, link);
    check(write_file(dir, "final") == 0 && read_is(target, "precious") && S_ISREG(mode_of(link)) &&
              read_is(link, "{}\n"),
          "final-link", "a symlink at the final name was followed or kept");

    static const char *const names[] = {"../../escape", "a/b/c", "..", ".", "/etc/passwd", "rank 0 host",
                                        "", "host.name_7-x", "\n\t\x01", NULL};
    char subdir[2048];
    snprintf(subdir, sizeof subdir, "%.2000s/names", dir);
    for (int i = 0; names[i]; i++) {
        char stem[512];
        sp_outfile_stem(stem, sizeof stem, names[i], 1234);
        int ok = strchr(stem, '/') == NULL && stem[0] != '.' && write_file(subdir, stem) == 0;
        snprintf(path, sizeof path, "%s/%.1000s.pt.trace.json", subdir, stem);
        ok = ok && S_ISREG(mode_of(path));
        char why[600];
        snprintf(why, sizeof why, "worker name #%d gave stem '%s'", i, stem);
        check(ok, "names", why);
    }
    char longname[301];
    memset(longname, 'x', 300);
    longname[300] = 0;
    char stem[512];
    sp_outfile_stem(stem, sizeof stem, longname, 1234);
    check(strlen(stem) <= 128 + 5 && write_file(subdir, stem) == 0, "names", "300-character worker name");

    snprintf(path, sizeof path, "%s/a-file", dir);
    v = fopen(path, "w");
    fclose(v);
    char bad[4096];
    snprintf(bad, sizeof bad, "%s/a-file/traces", dir);
    int first = count_lines(dir, three_failures, bad);
    check(first == 1, "messages", "three identical failures should print one line");
    /* The same directory becomes writable: one line says so. */
    unlink(path);
    int again = count_lines(dir, one_success, bad);
    check(again == 1, "messages", "a success after failures should print one line");

    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
