/* schedule/schedule_int.h — what the step state machine (schedule.c) and
 * activation (activation.c) share, and nothing else may include: the state
 * both read and write under the schedule lock, and the few helpers each calls
 * in the other. The state is defined in schedule.c; it is extern only because
 * the machine is split over two files, so it and the helpers carry an
 * sp_sched_ prefix to stay apart from the rest of the library, and
 * -fvisibility=hidden keeps them out of libstepprof.so's exports. */
#ifndef SP_SCHEDULE_INT_H
#define SP_SCHEDULE_INT_H

#include "config.h"
#include "plan.h"

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* Defined in schedule/schedule.c. */
typedef struct {
    pthread_mutex_t lock;   /* the schedule lock: this state and schedule.c's own */
    sp_config_t cfg;
    int active;             /* activated and enabled */
    int finished;
    sp_sched_t sched;
    uint32_t cur_window;    /* open record window, 0 when none */
    long cycle;             /* cycles written so far */
    int idle_gate_count;    /* gate value while NONE: SP_WIN_COUNT if markers need calls */
    int signal_mode;        /* a signal arms one cycle at the next boundary */
    int signal_only;        /* no step marker: each signal starts or ends a window */
    int whole_run;          /* step marker but no schedule: torch records every step, written at exit */
    int unranked_left_out;  /* left out by `ranks` as rank 0 while no launcher named a rank */
} sp_sched_shared_t;

extern sp_sched_shared_t sp_sched_shared;

/* ---- schedule.c ------------------------------------------------------------- */

/* The lock as a program thread takes it (terminating signals blocked), and
 * its release with the thread's mask restored from old. */
void sp_sched_lock_blocked(sigset_t *old);
void sp_sched_unlock_blocked(const sigset_t *old);
/* The gate's value while no window is open. */
uint32_t sp_sched_idle_gate(void);
/* Whether one window records from activation to exit; caller holds the lock. */
int sp_sched_records_from_start(void);
/* Opens that window; caller holds the lock. */
void sp_sched_open_whole_run(void);

/* ---- activation.c ----------------------------------------------------------- */

/* worker_name, or rank<R>_<host>_<pid> / <host>_<pid>: the stem of every file. */
void sp_sched_worker_name(char *out, size_t len);

#endif
