/* tests/fuzz/fuzz_config.c — libFuzzer target for the configuration loader
 * (schedule/config*.c, marker.c): one input is a YAML file and PROF_*
 * environment values, separated by a line "--env--"; each following line
 * KEY=VALUE sets PROF_KEY=VALUE. The file is handed over as PROF_CONFIG
 * through a memfd, so nothing touches the disk. Beyond "no crash, no
 * sanitizer report" it checks the loader's contract (config.h): 0 or -1,
 * disabled on -1, NUL-terminated strings and in-range numbers on 0. */
#define _GNU_SOURCE
#include "../../schedule/config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern char **environ;

/* Removes every PROF_* variable (this target only sets names shorter than
 * 128 bytes, so each one is removed whole). */
static void clear_prof_env(void)
{
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; e && *e; e++) {
            size_t n = strcspn(*e, "=");
            if (strncmp(*e, "PROF_", 5) == 0 && n < 128) {
                char name[128];
                memcpy(name, *e, n);
                name[n] = 0;
                unsetenv(name);
                again = 1;
                break;
            }
        }
    }
}

static int terminated(const char *s, size_t size)
{
    return memchr(s, 0, size) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char sep[] = "\n--env--\n";
    const uint8_t *env = memmem(data, size, sep, sizeof sep - 1);
    size_t yaml_len = env ? (size_t)(env - data) : size;
    clear_prof_env();
    int fd = memfd_create("profiling.yaml", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (write(fd, data, yaml_len) != (ssize_t)yaml_len) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    setenv("PROF_CONFIG", path, 1);
    if (env) {
        const uint8_t *p = env + sizeof sep - 1, *end = data + size;
        while (p < end) {
            const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
            char line[1024];
            if (len < sizeof line - 5 && !memchr(p, 0, len)) {
                memcpy(line, "PROF_", 5);
                memcpy(line + 5, p, len);
                line[5 + len] = 0;
                char *eq = strchr(line, '=');
                if (eq && eq > line + 5 && eq - line < 128) {
                    *eq = 0;
                    setenv(line, eq + 1, 1);
                }
            }
            p += len + 1;
        }
    }
    sp_config_t c;
    int rc = sp_config_load(&c);
    close(fd);
    if (rc != 0 && rc != -1)
        abort();
    if (rc == -1 && c.enabled)
        abort();
    if (rc == 0) {
        if (!terminated(c.output_dir, sizeof c.output_dir) || !terminated(c.worker_name, sizeof c.worker_name) ||
            !terminated(c.marker_spec, sizeof c.marker_spec) || !terminated(c.processes, sizeof c.processes) ||
            !terminated(c.marker.name, sizeof c.marker.name) || !terminated(c.marker.scope, sizeof c.marker.scope))
            abort();
        if (c.active < 1 || c.buffer_mb < 1 || c.buffer_mb > 65536 || c.warmup < 0 || c.wait < 0 ||
            c.repeat < 0 || c.skip_first < 0 || c.finalize_timeout_s < 0 || c.max_events_per_cycle < 0 ||
            c.max_trace_mb < 0 || c.table.row_limit < -1 || c.marker.every_n < 1)
            abort();
        if (c.has_schedule && c.marker.kind == SP_MARK_NONE && !c.marker.has_signal)
            abort(); /* a schedule needs a marker (config.h) */
    }
    return 0;
}
