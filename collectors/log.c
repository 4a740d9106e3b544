/* collectors/log.c — formats a message into a stack buffer and writes it with a
 * single write(2) to fd 2. No stdio: stderr's FILE lock could be held by the
 * host program (or by a thread that died in fork), and stdio buffering would
 * reorder our lines against the program's own. A message is one line whatever
 * it quotes: a control character in the formatted text (a newline in a path,
 * a YAML key or an environment value) is written as '?'. errno is preserved
 * because log calls happen inside interposers. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

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
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += (size_t)m < sizeof buf - n - 1 ? (size_t)m : sizeof buf - n - 2;
    for (size_t i = sizeof prefix - 1; i < n; i++)
        if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
            buf[i] = '?';
    buf[n++] = '\n';
    ssize_t w = write(2, buf, n);
    (void)w;
    errno = saved;
}
