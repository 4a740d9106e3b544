/* tests/fuzz/fuzz_trace_reader.c — libFuzzer target for the offline tool's
 * trace reader (exporters/report_main.c: the streaming top-level scanner,
 * cJSON per event, zlib for .gz): each input is written to a memfd and read
 * as `stepprof-report /proc/self/fd/N --summary-json`, plus the default table
 * on odd sizes. Any exit code is fine; a crash or sanitizer report is not.
 *
 * report_main.c is compiled into this file with its main renamed. Its
 * reader state is a function-local static that keeps "end of file" from one
 * call to the next (harmless in a one-shot tool), so each call is made to
 * start clean by resetting it where main opens the file: gzopen is wrapped
 * by a macro that sees that static under its name `s`. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#undef gzopen
#define gzopen(path, mode) (memset(&s, 0, sizeof s), s.path = (path), (gzopen)(path, mode))
#define main sp_report_main
#include "../../exporters/report_main.c"
#undef main

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* The reader's messages are expected output, not findings. */
    FILE *null = freopen("/dev/null", "w", stdout);
    (void)null;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("trace.json", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    char *json[] = {"stepprof-report", path, "--summary-json", NULL};
    char *table[] = {"stepprof-report", path, NULL};
    if (size & 1)
        sp_report_main(2, table);
    else
        sp_report_main(3, json);
    close(fd);
    return 0;
}
