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

void sp_sched_activate(void);         /* first intercepted CUDA call */
void sp_sched_boundary(void);         /* a step marker fired on this thread */
void sp_sched_begin_steps(void);      /* an end-of-step marker attached: step 0 begins now */
void sp_sched_begin_steps_at_1(void); /* the same in a child woken at its first step: step 1 begins */
void sp_sched_learn_dist(long rank, long world, const char *backend); /* torch.distributed's (torch.c) */
void sp_sched_set_dormant(void);      /* a multiprocessing child imports torch: activation defers (torch.c) */
int sp_sched_dormant(void);           /* 1 until sp_sched_wake */
void sp_sched_wake(void);             /* its first optimizer step: the deferred part now */
void sp_sched_profiler_api(int start);/* cudaProfilerStart (1) / Stop (0) */
void sp_sched_finish(int truncated);  /* process end: close and write the open cycle */
/* The same from stepprof's finisher thread (inject/exitpaths.c) when a
 * signal or _exit ends the process; never blocks longer than timeout_s in all
 * (the schedule lock is only tried). EXIT closes the open cycle as exit()
 * would, SIGNAL marks it truncated, DRAIN leaves it (a fault: its state is
 * not trusted) and only waits for traces already queued. 0 when done. */
enum { SP_FINISH_EXIT = 'E', SP_FINISH_SIGNAL = 'S', SP_FINISH_DRAIN = 'D' };
int sp_sched_finish_bounded(int how, double timeout_s);
void sp_sched_after_fork_child(void);
void sp_sched_exit_handler(void);    /* atexit */
void sp_sched_before_exec(void);     /* exec: the image's recording written first */
const sp_config_t *sp_sched_config(void); /* NULL before activation */
/* 1 when `ranks` left this process out as rank 0 because no launcher named a
 * rank: a child it forks may learn its own (inject/torch.c). */
int sp_sched_unranked_left_out(void);

#endif
