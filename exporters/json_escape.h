/* exporters/json_escape.h — the one JSON string escaper, shared by the trace
 * writer (jsonw.c) and the report buffer (report_buf.c, summary.json): any
 * bytes become a valid JSON string body (quotes and backslashes escaped,
 * control characters as \u00XX, invalid UTF-8 replaced by U+FFFD). Plain
 * runs are handed to put() whole. Header-only (static inline), so each writer
 * keeps its own output path and the build needs no new object. */
#ifndef SP_JSON_ESCAPE_H
#define SP_JSON_ESCAPE_H

#include <stddef.h>

typedef void (*sp_json_put_fn)(void *ctx, const char *p, size_t n);

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static inline int sp_utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    int n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    unsigned cp = c & (0x3fu >> (n - 1));
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* Writes the body of a JSON string for str (NULL as ""), without the quotes.
 * as_name applies the trace's name rules: backslash becomes '/', newlines
 * are dropped. */
static inline void sp_json_escape(const char *str, int as_name, sp_json_put_fn put, void *ctx)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    const unsigned char *run = s;
    while (*s) {
        unsigned c = *s;
        int n = c >= 0x20 && c != 0x7f && c != '"' && c != '\\' ? sp_utf8_len(s) : 0;
        if (n) {
            s += n;
            continue;
        }
        if (s > run)
            put(ctx, (const char *)run, (size_t)(s - run));
        if (c == '\n' && as_name) {
            /* dropped */
        } else if (c == '\\') {
            put(ctx, as_name ? "/" : "\\\\", as_name ? 1 : 2);
        } else if (c == '"') {
            put(ctx, "\\\"", 2);
        } else if (c < 0x20 || c == 0x7f) {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(ctx, esc, 6);
        } else {
            put(ctx, "\\ufffd", 6);
        }
        run = ++s;
    }
    if (s > run)
        put(ctx, (const char *)run, (size_t)(s - run));
}

#endif
