/* exporters/report_buf.c — see report_buf.h. Growth doubles; a failed
 * allocation sets oom and turns every later append into a no-op. */
#include "report_buf.h"

#include "json_escape.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void sp_rb_init(sp_rb_t *b)
{
    memset(b, 0, sizeof *b);
}

void sp_rb_free(sp_rb_t *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

static int reserve(sp_rb_t *b, size_t extra)
{
    if (b->oom)
        return -1;
    if (b->n + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + extra + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return -1;
    }
    b->s = s;
    b->cap = cap;
    return 0;
}

void sp_rb_add(sp_rb_t *b, const char *s, size_t len)
{
    if (reserve(b, len) != 0)
        return;
    memcpy(b->s + b->n, s, len);
    b->n += len;
    b->s[b->n] = 0;
}

void sp_rb_puts(sp_rb_t *b, const char *s)
{
    sp_rb_add(b, s, strlen(s));
}

void sp_rb_pad(sp_rb_t *b, char c, size_t count)
{
    if (reserve(b, count) != 0)
        return;
    memset(b->s + b->n, c, count);
    b->n += count;
    b->s[b->n] = 0;
}

void sp_rb_printf(sp_rb_t *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    if ((size_t)m < sizeof small) {
        sp_rb_add(b, small, (size_t)m);
        return;
    }
    if (reserve(b, (size_t)m) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)m + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)m;
}

static void rb_put(void *b, const char *p, size_t n)
{
    sp_rb_add(b, p, n);
}

void sp_rb_json_str(sp_rb_t *b, const char *s)
{
    sp_rb_add(b, "\"", 1);
    sp_json_escape(s, 0, rb_put, b);
    sp_rb_add(b, "\"", 1);
}

int sp_rb_write_fd(const sp_rb_t *b, int fd)
{
    size_t off = 0;
    while (off < b->n) {
        ssize_t w = write(fd, b->s + off, b->n - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        off += (size_t)w;
    }
    return 0;
}
