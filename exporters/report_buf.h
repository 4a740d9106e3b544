/* exporters/report_buf.h — a growable text buffer for the reports (table,
 * summary, collapsed stacks): printf-style appends, JSON string quoting, and
 * a sticky out-of-memory flag so callers check once at the end instead of
 * after every append. Shared by the preloaded library and the offline tool. */
#ifndef SP_REPORT_BUF_H
#define SP_REPORT_BUF_H

#include <stddef.h>

typedef struct sp_rb {
    char *s;      /* NUL-terminated while !oom */
    size_t n, cap;
    int oom;
} sp_rb_t;

void sp_rb_init(sp_rb_t *b);
void sp_rb_free(sp_rb_t *b);
void sp_rb_add(sp_rb_t *b, const char *s, size_t len);
void sp_rb_puts(sp_rb_t *b, const char *s);
void sp_rb_printf(sp_rb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sp_rb_pad(sp_rb_t *b, char c, size_t count);
/* A quoted JSON string, valid for any bytes (json_escape.h). */
void sp_rb_json_str(sp_rb_t *b, const char *s);

/* Writes the whole buffer to fd; 0 or -1 (errno set). */
int sp_rb_write_fd(const sp_rb_t *b, int fd);

#endif
