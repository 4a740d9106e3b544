/* tests/fuzz/fuzz_jsonw.c — libFuzzer target for the trace writer's string
 * escaping (exporters/jsonw.c, sp_jw_str): any bytes must come out as one
 * valid JSON string (RFC 8259: quotes, no raw control characters, only the
 * defined escapes, well-formed UTF-8). Without as_name, a valid UTF-8 input
 * must also decode back to itself. The first input byte picks as_name. */
#define _GNU_SOURCE
#include "../../exporters/jsonw.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static sp_jw_t w;

/* Length of the well-formed UTF-8 sequence at s (within n), 0 if none. */
static size_t utf8(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!len || len > n)
        return 0;
    uint32_t v = len == 1 ? c : c & (0x7fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3fu);
    }
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

static int hex4(const unsigned char *s, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        int c = s[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                        : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* Validates one JSON string spanning all of out[0..n); decodes it into dec. */
static int check_string(const unsigned char *out, size_t n, unsigned char *dec, size_t *dn)
{
    if (n < 2 || out[0] != '"' || out[n - 1] != '"')
        return -1;
    size_t i = 1, k = 0;
    while (i < n - 1) {
        unsigned c = out[i];
        uint32_t cp;
        if (c == '"' || c < 0x20)
            return -1;
        if (c == '\\') {
            if (i + 1 >= n - 1)
                return -1;
            unsigned e = out[i + 1];
            const char *simple = strchr("\"\\/bfnrt", (int)e);
            if (e && simple) {
                static const char map[] = "\"\\/\b\f\n\r\t";
                dec[k++] = (unsigned char)map[simple - "\"\\/bfnrt"];
                i += 2;
                continue;
            }
            if (e != 'u' || i + 6 > n - 1 || hex4(out + i + 2, &cp) != 0)
                return -1;
            if (cp >= 0xd800 && cp <= 0xdfff)
                return -1; /* the writer never emits surrogates */
            i += 6;
        } else {
            size_t len = utf8(out + i, n - 1 - i, &cp);
            if (!len)
                return -1;
            i += len;
        }
        if (cp < 0x80) {
            dec[k++] = (unsigned char)cp;
        } else if (cp < 0x800) {
            dec[k++] = (unsigned char)(0xc0 | cp >> 6);
            dec[k++] = (unsigned char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            dec[k++] = (unsigned char)(0xe0 | cp >> 12);
            dec[k++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
            dec[k++] = (unsigned char)(0x80 | (cp & 0x3f));
        } else {
            dec[k++] = (unsigned char)(0xf0 | cp >> 18);
            dec[k++] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
            dec[k++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
            dec[k++] = (unsigned char)(0x80 | (cp & 0x3f));
        }
    }
    *dn = k;
    return 0;
}

static int all_utf8(const unsigned char *s, size_t n)
{
    uint32_t cp;
    for (size_t i = 0, len; i < n; i += len)
        if (!(len = utf8(s + i, n - i, &cp)))
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    int as_name = data[0] & 1;
    char *str = malloc(size);
    memcpy(str, data + 1, size - 1);
    str[size - 1] = 0;
    size_t len = strlen(str);
    int fd = memfd_create("jsonw", MFD_CLOEXEC);
    if (fd < 0) {
        free(str);
        return 0;
    }
    sp_jw_init(&w, fd, NULL, 0);
    sp_jw_str(&w, str, as_name);
    if (sp_jw_finish(&w) != 0)
        abort();
    off_t n = lseek(fd, 0, SEEK_END);
    unsigned char *out = malloc((size_t)n + 1), *dec = malloc((size_t)n * 4 + 4);
    if (pread(fd, out, (size_t)n, 0) != n)
        abort();
    size_t dn = 0;
    if (check_string(out, (size_t)n, dec, &dn) != 0)
        abort(); /* not one valid JSON string */
    if (!as_name && all_utf8((const unsigned char *)str, len) && (dn != len || memcmp(dec, str, len) != 0))
        abort(); /* valid text must survive unchanged */
    if (as_name && (memchr(dec, '\n', dn) || memchr(dec, '\\', dn)))
        abort(); /* names: backslash -> '/', newlines dropped (formats.md) */
    free(out);
    free(dec);
    free(str);
    close(fd);
    return 0;
}
