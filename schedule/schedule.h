/* schedule/schedule.h — the step state machine: turns marker hits into step
 * numbers, step numbers into actions (plan.h), and actions into gate windows
 * and export jobs. All entry points are cold paths (once per step or less). */
#ifndef SP_SCHEDULE_H
#define SP_SCHEDULE_H

#include "config.h"

#include <signal.h>

/* Set by the signal marker's handler (inject/), consumed at the next step
 * boundary, or by sp_sched_poll_signal when there is no step marker. */
extern volatile sig_atomic_t sp_sched_signal_flag;
void sp_sched_poll_signal(void);

void sp_sched_preinit(void);          /* constructor: nothing costly */
void sp_sched_activate(void);         /* first intercepted CUDA call */
void sp_sched_boundary(void);         /* a step marker fired on this thread */
void sp_sched_profiler_api(int start);/* cudaProfilerStart (1) / Stop (0) */
void sp_sched_finish(int truncated);  /* process end: close and write the open cycle */
void sp_sched_after_fork_child(void);
void sp_sched_exit_handler(void);    /* atexit */
const sp_config_t *sp_sched_config(void); /* NULL before activation */

#endif
