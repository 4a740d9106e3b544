/* inject/exitpaths.h — what stepprof does when the profiled process ends by
 * a terminating signal, a fault or _exit: see exitpaths.c. Return from main
 * and exit() are the schedule's atexit handler (schedule/schedule.c). */
#ifndef SP_EXITPATHS_H
#define SP_EXITPATHS_H

/* Constructor: resolves the real _exit while that is still safe. */
void sp_exit_preinit(void);

/* Activation (once per process): starts the finisher thread and installs the
 * end-of-process handlers on the signals whose disposition is SIG_DFL now.
 * timeout_s bounds how long an ending process waits for its files. */
void sp_exit_install(double timeout_s);

/* After fork() in the child: there is no finisher thread there, so the
 * inherited handlers act exactly as the default action until the child
 * activates itself. */
void sp_exit_after_fork_child(void);

#endif
