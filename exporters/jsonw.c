/* exporters/jsonw.c — see jsonw.h. Writes go through write(2) directly so an
 * error (ENOSPC, EFBIG, EIO) is seen at the call that caused it. */
#include "jsonw.h"

#include "gz.h"
#include "json_escape.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void sp_jw_init(sp_jw_t *w, int fd, struct sp_gz *gz)
{
    w->fd = fd;
    w->gz = gz;
    w->err = 0;
    w->n = 0;
    w->written = 0;
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
    return w->err ? -1 : 0;
}

void sp_jw_raw(sp_jw_t *w, const char *s, size_t len)
{
    while (len) {
        if (w->n == sizeof w->buf && sp_jw_flush(w) != 0)
            return;
        size_t room = sizeof w->buf - w->n;
        size_t k = len < room ? len : room;
        memcpy(w->buf + w->n, s, k);
        w->n += k;
        s += k;
        len -= k;
    }
}

void sp_jw_puts(sp_jw_t *w, const char *s)
{
    sp_jw_raw(w, s, strlen(s));
}

/* Output longer than the stack buffer is formatted again into a heap one:
 * cutting it would break the JSON. */
void sp_jw_printf(sp_jw_t *w, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
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

void sp_jw_str(sp_jw_t *w, const char *str, int as_name)
{
    sp_jw_raw(w, "\"", 1);
    sp_json_escape(str, as_name, jw_put, w);
    sp_jw_raw(w, "\"", 1);
}

void sp_jw_us(sp_jw_t *w, int64_t ns)
{
    const char *sign = "";
    if (ns < 0) {
        sign = "-";
        ns = -ns;
    }
    sp_jw_printf(w, "%s%" PRId64 ".%03" PRId64, sign, ns / 1000, ns % 1000);
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
    return w->err ? -1 : 0;
}

void sp_jw_meta(sp_jw_t *w, const char *name, long pid, long tid, const char *key, const char *sval, long ival)
{
    sp_jw_printf(w, "{\"name\": \"%s\", \"ph\": \"M\", \"ts\": 0, \"pid\": %ld, \"tid\": %ld, \"args\": {\"%s\": ",
                 name, pid, tid, key);
    if (sval)
        sp_jw_str(w, sval, 1);
    else
        sp_jw_printf(w, "%ld", ival);
    sp_jw_puts(w, "}},\n");
}
