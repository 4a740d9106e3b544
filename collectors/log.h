/* collectors/log.h — the one way stepprof talks to the user: single-line
 * "stepprof: ..." messages on stderr, each emitted with one write(2) so lines
 * from several threads or processes never interleave. Lowest layer: every
 * folder may use it. */
#ifndef SP_LOG_H
#define SP_LOG_H

enum { SP_LOG_ERROR = 0, SP_LOG_WARN = 1, SP_LOG_INFO = 2, SP_LOG_DEBUG = 3 };

/* Messages above this level are dropped; errors always print. */
extern int sp_log_level;

void sp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
