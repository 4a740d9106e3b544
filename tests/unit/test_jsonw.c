/* tests/unit/test_jsonw.c — the streaming JSON writer writes what it is given:
 * output longer than sp_jw_printf's stack buffer arrives whole (it used to be
 * cut at 511 bytes, breaking the JSON), and strings are escaped. */
#define _GNU_SOURCE
#include "../../exporters/jsonw.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sp_jw_t w;

/* Everything the writer produced for one call of fn, read back from a pipe. */
static size_t capture(void (*fn)(void), char *out, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0)
        return 0;
    sp_jw_init(&w, fds[1], NULL);
    fn();
    sp_jw_finish(&w);
    close(fds[1]);
    size_t n = 0;
    ssize_t k;
    while (n < cap - 1 && (k = read(fds[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)k;
    out[n] = 0;
    close(fds[0]);
    return n;
}

static char long_arg[3001];

static void write_long(void)
{
    sp_jw_printf(&w, "[%s]", long_arg);
}

static void write_escaped(void)
{
    sp_jw_str(&w, "a\"b\\c\nd\x01\xff", 0);
    sp_jw_str(&w, "a\\b\nc", 1);
}

int main(void)
{
    static char out[8192];
    memset(long_arg, 'x', sizeof long_arg - 1);
    size_t n = capture(write_long, out, sizeof out);
    CHECK(n == sizeof long_arg + 1 && out[0] == '[' && out[n - 1] == ']', "long printf: %zu bytes", n);
    capture(write_escaped, out, sizeof out);
    CHECK(strcmp(out, "\"a\\\"b\\\\c\\u000ad\\u0001\\ufffd\"\"a/bc\"") == 0, "escaped: %s", out);
    printf("test_jsonw: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
