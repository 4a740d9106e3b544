/* exporters/jsonw.c — see jsonw.h. Writes go through write(2) directly so an
 * error (ENOSPC, EFBIG, EIO) is seen at the call that caused it. */
#define _GNU_SOURCE
#include "jsonw.h"

#include "gz.h"
#include "json_escape.h"
#include "writeback.h"

#include <errno.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void sp_jw_init(sp_jw_t *w, int fd, struct sp_gz *gz, uint64_t expect)
{
    size_t cap = expect / 128 < SP_JW_MAX_BUF ? (size_t)(expect / 128) : SP_JW_MAX_BUF;
    cap = cap > SP_JW_MIN_BUF ? cap : SP_JW_MIN_BUF;
    w->fd = fd;
    w->gz = gz;
    w->n = 0;
    w->written = 0;
    w->synced = 0;
    w->buf = malloc(cap);
    w->cap = w->buf ? cap : 0;
    w->err = w->buf ? 0 : ENOMEM;
}

int sp_jw_flush(sp_jw_t *w)
{
    if (w->gz) {
        if (!w->err && w->n)
            w->err = sp_gz_write(w->gz, w->buf, w->n);
        w->written += w->n;
        w->n = 0;
        return w->err ? -1 : 0;
    }
    size_t off = 0;
    while (!w->err && off < w->n) {
        ssize_t k = write(w->fd, w->buf + off, w->n - off);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            w->err = errno;
        } else if (k == 0) {
            w->err = EIO;
        } else {
            off += (size_t)k;
        }
    }
    w->written += off;
    w->n = 0;
    if (!w->err)
        sp_writeback(w->fd, w->written, &w->synced);
    return w->err ? -1 : 0;
}

void sp_jw_raw_slow(sp_jw_t *w, const char *s, size_t len)
{
    while (len) {
        if (w->n == w->cap && (sp_jw_flush(w) != 0 || !w->cap))
            return;
        size_t room = w->cap - w->n;
        size_t k = len < room ? len : room;
        memcpy(w->buf + w->n, s, k);
        w->n += k;
        s += k;
        len -= k;
    }
}

/* Decimal digits of v at the end of out[20]; returns the first. */
/* Two digits per division: traces are mostly numbers. */
static char *utoa_end(uint64_t v, char *end)
{
    static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                "8081828384858687888990919293949596979899";
    while (v >= 100) {
        const char *d = &pairs[(v % 100) * 2];
        v /= 100;
        *--end = d[1];
        *--end = d[0];
    }
    if (v >= 10) {
        *--end = pairs[v * 2 + 1];
        *--end = pairs[v * 2];
    } else {
        *--end = (char)('0' + v);
    }
    return end;
}

void sp_jw_u64(sp_jw_t *w, uint64_t v)
{
    char tmp[24], *end = tmp + sizeof tmp;
    char *p = utoa_end(v, end);
    sp_jw_raw(w, p, (size_t)(end - p));
}

void sp_jw_i64(sp_jw_t *w, int64_t v)
{
    char tmp[24], *end = tmp + sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char *p = utoa_end(u, end);
    if (v < 0)
        *--p = '-';
    sp_jw_raw(w, p, (size_t)(end - p));
}

void sp_jw_puts(sp_jw_t *w, const char *s)
{
    sp_jw_raw(w, s, strlen(s));
}

/* The conversions the writers use, done without stdio: %s %c %d %i %u %x
 * with the length modifiers l and ll (so PRIu64 / PRId64), and %%. Returns 0
 * when fmt holds anything else (flags, width, precision, floating point): the
 * caller then formats with vsnprintf, which prints the same bytes. */
static int fmt_scan(const char *fmt)
{
    for (const char *f = fmt; (f = strchr(f, '%')) != NULL;) {
        f++;
        while (*f == 'l')
            f++;
        if (!strchr("sdiuxc%", *f) || !*f)
            return 0;
        f++;
    }
    return 1;
}

/* Writers pass a few literal formats millions of times: the verdict is
 * cached by the format's address, key and verdict in one atomic word (user
 * addresses fit in 63 bits), so racing threads at worst scan again. */
static int fmt_simple(const char *fmt)
{
    static _Atomic uint64_t cache[64];
    uint64_t key = (uint64_t)(uintptr_t)fmt;
    _Atomic uint64_t *c = &cache[(key >> 3 ^ key >> 9) & 63];
    uint64_t v = atomic_load_explicit(c, memory_order_relaxed);
    if (v >> 1 == key)
        return (int)(v & 1);
    int ok = fmt_scan(fmt);
    atomic_store_explicit(c, key << 1 | (uint64_t)ok, memory_order_relaxed);
    return ok;
}

static void fmt_fast(sp_jw_t *w, const char *fmt, va_list ap)
{
    for (;;) {
        const char *pct = strchr(fmt, '%');
        if (!pct) {
            sp_jw_raw(w, fmt, strlen(fmt));
            return;
        }
        sp_jw_raw(w, fmt, (size_t)(pct - fmt));
        const char *f = pct + 1;
        int longs = 0;
        while (*f == 'l') {
            longs++;
            f++;
        }
        switch (*f) {
        case 's': {
            const char *a = va_arg(ap, const char *);
            sp_jw_puts(w, a ? a : "(null)");
            break;
        }
        case 'c': {
            char c = (char)va_arg(ap, int);
            sp_jw_raw(w, &c, 1);
            break;
        }
        case 'd':
        case 'i':
            sp_jw_i64(w, longs ? (longs == 1 ? (int64_t)va_arg(ap, long) : (int64_t)va_arg(ap, long long))
                               : (int64_t)va_arg(ap, int));
            break;
        case 'u':
            sp_jw_u64(w, longs ? (longs == 1 ? (uint64_t)va_arg(ap, unsigned long)
                                             : (uint64_t)va_arg(ap, unsigned long long))
                               : (uint64_t)va_arg(ap, unsigned));
            break;
        case 'x': {
            uint64_t v = longs ? (longs == 1 ? (uint64_t)va_arg(ap, unsigned long)
                                             : (uint64_t)va_arg(ap, unsigned long long))
                               : (uint64_t)va_arg(ap, unsigned);
            char tmp[24], *end = tmp + sizeof tmp, *p = end;
            do {
                *--p = "0123456789abcdef"[v & 15];
                v >>= 4;
            } while (v);
            sp_jw_raw(w, p, (size_t)(end - p));
            break;
        }
        default: /* '%' */
            sp_jw_raw(w, "%", 1);
            break;
        }
        fmt = f + 1;
    }
}

/* Output longer than the stack buffer is formatted again into a heap one:
 * cutting it would break the JSON. */
void sp_jw_printf(sp_jw_t *w, const char *fmt, ...)
{
    va_list ap;
    if (fmt_simple(fmt)) {
        va_start(ap, fmt);
        fmt_fast(w, fmt, ap);
        va_end(ap);
        return;
    }
    char tmp[512];
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k <= 0)
        return;
    if ((size_t)k < sizeof tmp) {
        sp_jw_raw(w, tmp, (size_t)k);
        return;
    }
    char *big = malloc((size_t)k + 1);
    if (!big) {
        w->err = ENOMEM;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)k + 1, fmt, ap);
    va_end(ap);
    sp_jw_raw(w, big, (size_t)k);
    free(big);
}

static void jw_put(void *w, const char *p, size_t n)
{
    sp_jw_raw(w, p, n);
}

/* Most names need no escaping: the printable ASCII run before the first byte
 * that might is copied whole, the escaper sees only the rest. */
/* How many leading bytes of s[0..n) need no escape (printable ASCII but '"'
 * and '\\'): eight at a time, each test exact about whether some byte of the
 * word matches; the word that holds one is finished byte by byte. */
static size_t plain_prefix(const unsigned char *s, size_t n)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        uint64_t x, q, b;
        memcpy(&x, s + k, 8);
        q = x ^ (ones * '"');
        b = x ^ (ones * '\\');
        uint64_t special = ((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) | (x + ones) | x;
        if (special & high)   /* below 0x20, '"', '\\', 0x7f (x + 1 carries into the top bit) or >= 0x80 */
            break;
    }
    while (k < n && s[k] >= 0x20 && s[k] < 0x7f && s[k] != '"' && s[k] != '\\')
        k++;
    return k;
}

void sp_jw_str(sp_jw_t *w, const char *str, int as_name)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    size_t k = plain_prefix(s, strlen((const char *)s));
    sp_jw_raw(w, "\"", 1);
    sp_jw_raw(w, (const char *)s, k);
    if (s[k])
        sp_json_escape((const char *)s + k, as_name, jw_put, w);
    sp_jw_raw(w, "\"", 1);
}

void sp_jw_us(sp_jw_t *w, int64_t ns)
{
    char tmp[32], *end = tmp + sizeof tmp;
    uint64_t u = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    uint64_t frac = u % 1000;
    end[-1] = (char)('0' + frac % 10);
    end[-2] = (char)('0' + frac / 10 % 10);
    end[-3] = (char)('0' + frac / 100);
    end[-4] = '.';
    char *p = utoa_end(u / 1000, end - 4);
    if (ns < 0)
        *--p = '-';
    sp_jw_raw(w, p, (size_t)(end - p));
}

void sp_jw_fix6(sp_jw_t *w, double v)
{
    double m = v < 0 ? -v : v;
    if (!(m < 9e9)) {   /* also NaN */
        sp_jw_printf(w, "%.6f", v);
        return;
    }
    uint64_t u = (uint64_t)(m * 1e6 + 0.5);
    char tmp[32], *end = tmp + sizeof tmp, *p = end - 7;
    uint64_t frac = u % 1000000;
    for (int i = 1; i <= 6; i++, frac /= 10)
        end[-i] = (char)('0' + frac % 10);
    *p = '.';
    p = utoa_end(u / 1000000, p);
    if (v < 0 && u)
        *--p = '-';
    sp_jw_raw(w, p, (size_t)(end - p));
}

int sp_jw_finish(sp_jw_t *w)
{
    sp_jw_flush(w);
    if (w->gz) {
        int e = sp_gz_close(w->gz);
        w->gz = NULL;
        if (!w->err)
            w->err = e;
    }
    free(w->buf);
    w->buf = NULL;
    w->cap = 0;
    return w->err ? -1 : 0;
}

void sp_jw_meta(sp_jw_t *w, const char *name, long pid, long tid, const char *key, const char *sval, long ival)
{
    sp_jw_printf(w, "{\"name\":\"%s\",\"ph\":\"M\",\"ts\":0,\"pid\":%ld,\"tid\":%ld,\"args\":{\"%s\":", name, pid,
                 tid, key);
    if (sval)
        sp_jw_str(w, sval, 1);
    else
        sp_jw_printf(w, "%ld", ival);
    sp_jw_puts(w, "}},\n");
}
