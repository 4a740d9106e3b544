/* collectors/log.c — formats a message into a stack buffer and writes it with a
 * single write(2) to fd 2. No stdio: stderr's FILE lock could be held by the
 * host program (or by a thread that died in fork), and stdio buffering would
 * reorder our lines against the program's own. A message longer than the line
 * (one quoting a long path) loses its middle, not its end. A message is one line whatever
 * it quotes: a control character in the formatted text (a newline in a path,
 * a YAML key or an environment value) is written as '?'. errno is preserved
 * because log calls happen inside interposers. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A message longer than the line buffer keeps its first part and its last
 * SP_LOG_TAIL bytes; past SP_LOG_MAX_ELIDED (stack for the full text) it is
 * cut at the end. */
#define SP_LOG_TAIL 400
#define SP_LOG_MAX_ELIDED 16384

int sp_log_level = SP_LOG_INFO;

void sp_log(int level, const char *fmt, ...)
{
    if (level > sp_log_level && level != SP_LOG_ERROR)
        return;
    int saved = errno;
    char buf[1024];
    static const char prefix[] = "stepprof: ";
    size_t n = sizeof prefix - 1;
    for (size_t i = 0; i < n; i++)
        buf[i] = prefix[i];
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    size_t room = sizeof buf - n - 1; /* for the text and its NUL; '\n' takes the last byte */
    int m = vsnprintf(buf + n, room, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    if ((size_t)m >= room && (size_t)m < SP_LOG_MAX_ELIDED) {
        /* Too long for one line: the middle (inside a long path) goes, the
         * end stays, since it says what went wrong and what stepprof does. */
        char full[m + 1];
        vsnprintf(full, sizeof full, fmt, again);
        size_t tail = SP_LOG_TAIL, head = room - 1 - tail - 3;
        memcpy(buf + n + head, "...", 3);
        memcpy(buf + n + head + 3, full + m - tail, tail);
    }
    va_end(again);
    n += (size_t)m < room ? (size_t)m : room - 1;
    for (size_t i = sizeof prefix - 1; i < n; i++)
        if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
            buf[i] = '?';
    buf[n++] = '\n';
    ssize_t w = write(2, buf, n);
    (void)w;
    errno = saved;
}
