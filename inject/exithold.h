/* inject/exithold.h — the program's other threads held still while the exit
 * waits for stepprof's files (see exithold.c). */
#ifndef SP_EXITHOLD_H
#define SP_EXITHOLD_H

#include <stdint.h>
#include <sys/types.h>

/* Parks every other thread of the process (but skip, 0: none) that can take
 * a signal, once it is out of stepprof, waiting at most 200 ms for them, and
 * no longer once done (when not NULL) says the wait they are held for is
 * over: a thread that keeps the signal blocked (a library's worker) must not
 * keep a finished exit waiting. */
void sp_exit_hold_others(pid_t skip, int (*done)(void));

/* Called now and then (now_ns: CLOCK_MONOTONIC) by the thread that waits
 * while others are held: lets them go once stepprof's own threads have used
 * no CPU time for a second (the exporter waits for a lock a held thread has,
 * malloc's). */
void sp_exit_hold_check(int64_t now_ns);

/* /proc/self/task/<tid>/stat read into buf without malloc: the fields from
 * the thread's state on, NULL once it has ended; *ours: its name is
 * stepprof's ("stepprof-*", sp_thread_spawn). */
const char *sp_task_stat(pid_t tid, char *buf, size_t len, int *ours);

/* Lets them go. */
void sp_exit_release_others(void);

#endif
