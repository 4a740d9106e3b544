/* tests/unit/test_jsonw.c — the streaming JSON writer writes what it is given:
 * output longer than sp_jw_printf's stack buffer arrives whole (it used to be
 * cut at 511 bytes, breaking the JSON), and strings are escaped, whatever the
 * offset of the byte that needs it. */
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
    sp_jw_init(&w, fds[1], NULL, 0);
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

/* 40 KB through the smallest buffer (sp_jw_init sizes it from the expected
 * output: 0 gives SP_JW_MIN_BUF, 16 KiB): pieces that straddle its end, and
 * one longer than it, arrive whole and in order. */
static char big_out[50000];

static void write_past_buffer(void)
{
    static char chunk[20000];
    memset(chunk, 'x', sizeof chunk - 1);
    for (int i = 0; i < 1000; i++)
        sp_jw_printf(&w, "%d,", i % 10);
    sp_jw_raw(&w, "|", 1);
    sp_jw_raw(&w, chunk, sizeof chunk - 1);
    sp_jw_puts(&w, "|end");
}

static void write_long(void)
{
    sp_jw_printf(&w, "[%s]", long_arg);
}

static void write_escaped(void)
{
    sp_jw_str(&w, "a\"b\\c\nd\x01\xff", 0);
    sp_jw_str(&w, "a\\b\nc", 1);
}

/* The stdio-free paths (integers, %s/%d/%u/%x with l/ll, microseconds) must print the bytes
 * vsnprintf prints. */
static void write_formats(void)
{
    sp_jw_printf(&w, "a%sb%dc%ud%lde%luf%lldg%llux%xy%%z%c|", "str", -42, 4000000000u, -9000000000000000000L,
                 18446744073709551615UL, (long long)INT64_MIN, 0ULL, 0xbeefu, 'Q');
    sp_jw_printf(&w, "%d %d %u %s|", 0, INT32_MIN, 0u, "");
    int64_t us[] = {0, 1, 999, 1000, 1001, 123456789, -1, -1000, -123456789, INT64_MAX};
    for (size_t i = 0; i < sizeof us / sizeof us[0]; i++) {
        sp_jw_us(&w, us[i]);
        sp_jw_raw(&w, " ", 1);
    }
    sp_jw_printf(&w, "%.3f %5d", 1.5, 7); /* not the fast path: vsnprintf */
}

/* Values of the kind kernels and copies carry (blocks and warps per SM, GB/s); none on a tie. */
static const double fix6[] = {0, 64.0 / 132, 8 * 64.0 / 132, 1.0 / 3, 2.4e-7, 123.4567894, -0.25, 4096.0 / 7, 1e12, -3e15};

static void write_fix6(void)
{
    for (size_t i = 0; i < sizeof fix6 / sizeof fix6[0]; i++) {
        sp_jw_fix6(&w, fix6[i]);
        sp_jw_raw(&w, " ", 1);
    }
}

static void write_plain_runs(void)
{
    sp_jw_str(&w, "void kernel_0001<float, 4>(float*, int)", 1);
    sp_jw_str(&w, "caf\xc3\xa9 \xe2\x82\xac\x7f", 0);
}

/* A byte that needs escaping at every offset of a string longer than a word:
 * the word-at-a-time scan must stop for it wherever it sits. */
static const char special[] = {'"', '\\', '\n', 0x01, 0x1f, 0x7f};
static const char *const escaped[] = {"\\\"", "\\\\", "\\u000a", "\\u0001", "\\u001f", "\\u007f"};
static char probe[32];

static void write_probe(void)
{
    sp_jw_str(&w, probe, 0);
}

static void check_every_offset(char *out, size_t cap)
{
    int bad = 0;
    for (size_t c = 0; c < sizeof special; c++) {
        for (size_t at = 0; at < 24; at++) {
            memset(probe, 'a', 24);
            probe[24] = 0;
            probe[at] = special[c];
            capture(write_probe, out, cap);
            char want[64];
            snprintf(want, sizeof want, "\"%.*s%s%s\"", (int)at, probe, escaped[c], probe + at + 1);
            bad += strcmp(out, want) != 0;
        }
    }
    CHECK(bad == 0, "%d escapes at some offset came out wrong", bad);
}

int main(void)
{
    static char out[8192];
    memset(long_arg, 'x', sizeof long_arg - 1);
    size_t n = capture(write_long, out, sizeof out);
    CHECK(n == sizeof long_arg + 1 && out[0] == '[' && out[n - 1] == ']', "long printf: %zu bytes", n);
    capture(write_escaped, out, sizeof out);
    CHECK(strcmp(out, "\"a\\\"b\\\\c\\u000ad\\u0001\\ufffd\"\"a/bc\"") == 0, "escaped: %s", out);
    capture(write_formats, out, sizeof out);
    char want[1024];
    int k = snprintf(want, sizeof want, "a%sb%dc%ud%lde%luf%lldg%llux%xy%%z%c|", "str", -42, 4000000000u,
                     -9000000000000000000L, 18446744073709551615UL, (long long)INT64_MIN, 0ULL, 0xbeefu, 'Q');
    k += snprintf(want + k, sizeof want - (size_t)k, "%d %d %u %s|", 0, INT32_MIN, 0u, "");
    snprintf(want + k, sizeof want - (size_t)k, "%s",
             "0.000 0.001 0.999 1.000 1.001 123456.789 -0.001 -1.000 -123456.789 9223372036854775.807 1.500     7");
    CHECK(strcmp(out, want) == 0, "formats:\n  got  %s\n  want %s", out, want);
    capture(write_fix6, out, sizeof out);
    k = 0;
    for (size_t i = 0; i < sizeof fix6 / sizeof fix6[0]; i++)
        k += snprintf(want + k, sizeof want - (size_t)k, "%.6f ", fix6[i]);
    CHECK(strcmp(out, want) == 0, "six decimals:\n  got  %s\n  want %s", out, want);
    capture(write_plain_runs, out, sizeof out);
    CHECK(strcmp(out, "\"void kernel_0001<float, 4>(float*, int)\"\"caf\xc3\xa9 \xe2\x82\xac\\u007f\"") == 0,
          "plain runs: %s", out);
    check_every_offset(out, sizeof out);
    n = capture(write_past_buffer, big_out, sizeof big_out);
    int in_order = n == 2000 + 1 + 19999 + 4 && big_out[1998] == '9' && big_out[2000] == '|' &&
                   big_out[2001] == 'x' && big_out[2000 + 19999] == 'x' && strcmp(big_out + n - 4, "|end") == 0;
    for (int i = 0; in_order && i < 1000; i++)
        in_order = big_out[2 * i] == '0' + i % 10 && big_out[2 * i + 1] == ',';
    CHECK(in_order, "past the buffer: %zu bytes", n);
    printf("test_jsonw: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
