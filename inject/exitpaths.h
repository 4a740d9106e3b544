/* inject/exitpaths.h — what stepprof does when the profiled process ends by
 * a terminating signal, a fault or _exit: see exitpaths.c. Return from main
 * and exit() are the schedule's atexit handler (schedule/schedule.c). */
#ifndef SP_EXITPATHS_H
#define SP_EXITPATHS_H

#include <signal.h>

/* Constructor: resolves the real _exit and exec functions while that is
 * still safe. */
void sp_exit_preinit(void);
void sp_exec_preinit(void);   /* exec_hooks.c */
void sp_selfsignal_preinit(void);   /* selfsignal.c */

/* This process is the one stepprof activated in (not a fork or vfork child). */
int sp_exit_is_owner(void);

/* Activation (once per process): starts the finisher thread and installs the
 * end-of-process handlers on the signals whose disposition is SIG_DFL now.
 * timeout_s bounds how long an ending process waits for its files. */
void sp_exit_install(double timeout_s);

/* After fork() in the child: there is no finisher thread there, so the
 * inherited handlers act exactly as the default action until the child
 * activates itself. */
void sp_exit_after_fork_child(void);

/* The exit's wait (schedule's atexit handler, after closing the window):
 * holds the other program threads, waits for every queued trace at most
 * limit_s (exit_timeout_s) with a progress line every 5 s, finalize_timeout_s
 * once a terminating signal comes meanwhile (the exit status stays the
 * program's). 0 when everything was written; else the loss is reported. */
int sp_exit_wait_exports(double limit_s);

/* After the wait before an exec (exec_hooks.c): a terminating signal that
 * came during it, and only shortened it, ends the process now by that
 * signal, as it would have bare, rather than letting the exec go on. */
void sp_exit_signal_after_exec_wait(void);

/* An exit or exec on a thread that a signal interrupted inside stepprof (its
 * handler called exit): that thread may hold any of stepprof's locks, so the
 * finisher thread does the work, within finalize_timeout_s, as for _exit. */
void sp_exit_finish_elsewhere(void);

/* sig is one of the terminating signals stepprof handles (not a fault). */
int sp_exit_is_term_signal(int sig);
/* All of them (the schedule blocks them while it holds its lock). */
void sp_exit_term_sigset(sigset_t *set);

/* The program is about to end itself by such a signal at SIG_DFL
 * (selfsignal.c): the finisher closes the cycle in progress, truncated, and
 * writes every queued trace, within finalize_timeout_s, as for a signal. */
void sp_exit_finish_for_signal(void);

/* A bound (named by its key) was reached with traces still being written:
 * removes their temporary files and says in one line what was lost. */
void sp_exit_report_lost(const char *key, double limit_s);

/* Called by held threads while they wait: ends the process by a deferred
 * signal whose finish overran finalize_timeout_s. Async-signal-safe. */
void sp_exit_check_deadline(void);

#endif
