/* exporters/jsonw.h — a streaming JSON writer onto a file descriptor: a
 * buffer sized for the output (16-256 KiB), sticky error state, and string
 * escaping that yields valid JSON for any bytes (control characters escaped,
 * invalid UTF-8 replaced by U+FFFD). Traces reach millions of events, so
 * nothing is built in memory. */
#ifndef SP_JSONW_H
#define SP_JSONW_H

#include <stddef.h>
#include <stdint.h>

struct sp_gz;

typedef struct sp_jw {
    int fd;
    struct sp_gz *gz; /* non-NULL: output is gzip-compressed */
    int err;          /* errno of the first failed write, 0 if none */
    size_t n;
    uint64_t written; /* bytes handed to write(2) so far */
    uint64_t synced;  /* where the writeback was last started (writeback.h) */
    char *buf;        /* cap bytes; freed by sp_jw_finish */
    size_t cap;
} sp_jw_t;

#define SP_JW_MIN_BUF ((size_t)16 << 10)
#define SP_JW_MAX_BUF ((size_t)256 << 10)

/* A buffer of about expect/128 bytes, within SP_JW_MIN_BUF..SP_JW_MAX_BUF, for
 * an output of about expect bytes: a trace of 10k events writes 2-3 MB and
 * needs no 256 KiB buffer (it was a fixed 23 B/event of its export memory),
 * while one of 100k events and up still writes 256 KiB per call. Out of
 * memory: w->err is ENOMEM and every write fails as a failed write would. */
void sp_jw_init(sp_jw_t *w, int fd, struct sp_gz *gz, uint64_t expect);
void sp_jw_raw_slow(sp_jw_t *w, const char *s, size_t len);

/* Appends len bytes: a memcpy while the buffer has room. */
static inline void sp_jw_raw(sp_jw_t *w, const char *s, size_t len)
{
    if (__builtin_expect(len <= w->cap - w->n, 1)) {
        __builtin_memcpy(w->buf + w->n, s, len);
        w->n += len;
        return;
    }
    sp_jw_raw_slow(w, s, len);
}

/* A string literal, its length known at compile time: the per-event writers
 * use these and the integer writers below instead of a format per field. */
#define SP_JW_LIT(w, lit) sp_jw_raw((w), "" lit, sizeof(lit) - 1)
/* A literal (the key, with its separators) and then an integer. */
#define SP_JW_KU(w, lit, v) (SP_JW_LIT(w, lit), sp_jw_u64((w), (v)))
#define SP_JW_KI(w, lit, v) (SP_JW_LIT(w, lit), sp_jw_i64((w), (v)))

void sp_jw_puts(sp_jw_t *w, const char *s);
void sp_jw_printf(sp_jw_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A quoted JSON string. as_name applies the trace's name rules: backslash
 * becomes '/', newlines are dropped. */
void sp_jw_str(sp_jw_t *w, const char *s, int as_name);
/* A "ph":"M" metadata event line (process_name, thread_name, ...) with one
 * argument, a string when sval is non-NULL, else the integer ival. */
void sp_jw_meta(sp_jw_t *w, const char *name, long pid, long tid, const char *key, const char *sval, long ival);
/* Integers in decimal, without stdio. */
void sp_jw_u64(sp_jw_t *w, uint64_t v);
void sp_jw_i64(sp_jw_t *w, int64_t v);
/* Nanoseconds as microseconds with exactly three decimals. */
void sp_jw_us(sp_jw_t *w, int64_t ns);
/* A number with six decimals, as printf's %.6f prints it (rounded to the
 * nearest millionth: a value within an ulp of a tie may round the other way;
 * printf itself for what is not finite or past 9e9). */
void sp_jw_fix6(sp_jw_t *w, double v);
int sp_jw_flush(sp_jw_t *w);
/* Flush, finish the gzip stream if any, and free the buffer (nothing is
 * written after it); 0 or -1 (w->err set). */
int sp_jw_finish(sp_jw_t *w);

#endif
