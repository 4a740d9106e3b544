/* schedule/schedule.c — the step state machine. Marker hits (any thread) come
 * in as boundaries; each boundary ends step s and begins s+1, whose action
 * (plan.h, torch.profiler semantics) decides the gate: closed (NONE), a warmup
 * window (timed, not stored), or a record window. When a RECORD_AND_SAVE step
 * ends, the window is closed and an export job is queued for the background
 * exporter. Each recorded step leaves a ProfilerStep#N record on the thread
 * that hit the marker, spanning boundary to boundary. The machine also ends
 * here with the process (exit, exec, the finisher's bounded finish) and is
 * reset in a fork's child. Whether the process is profiled at all, and the
 * setup that starts the machine, are activation.c's. One mutex guards the
 * state, this file's and what schedule_int.h shares: boundaries are rare
 * (once per training step). */
#define _GNU_SOURCE
#include "schedule.h"
#include "schedule_int.h"

#include "../collectors/clock.h"
#include "../collectors/cupti.h"
#include "../collectors/events.h"
#include "../collectors/memory.h"
#include "../collectors/ranges.h"
#include "../collectors/log.h"
#include "../collectors/stacks.h"
#include "../exporters/export.h"
#include "../exporters/memory_report.h"
#include "../exporters/outfile.h"
#include "../inject/exitpaths.h"
#include "plan.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

sp_sched_shared_t sp_sched_shared = {.lock = PTHREAD_MUTEX_INITIALIZER};

static long step = -1;         /* current step, -1 before the first boundary */
static sp_action_t action = SP_ACT_NONE;
static uint64_t step_t0;       /* ticks at the current step's start */
static uint32_t next_window = 1;
static uint64_t window_t0;
static uint64_t drop_base;
static long cycle_first_step;
static long arm_step = -1;     /* step where the armed cycle began, -1 when disarmed */

volatile sig_atomic_t sp_sched_signal_flag;
static _Atomic pthread_t lock_owner; /* thread in sp_sched_lock_blocked..unlock, 0: none */

/* The lock as a program thread takes it: with the terminating signals
 * blocked, so that their handler (exitpaths.c) never runs on the thread that
 * holds it while the finisher waits for it (a window close with CUPTI lasts
 * long enough to be hit). Two syscalls per boundary. */
void sp_sched_lock_blocked(sigset_t *old)
{
    sigset_t term;
    sp_exit_term_sigset(&term);
    pthread_sigmask(SIG_BLOCK, &term, old);
    pthread_mutex_lock(&sp_sched_shared.lock);
    atomic_store(&lock_owner, pthread_self());
}

void sp_sched_unlock_blocked(const sigset_t *old)
{
    atomic_store(&lock_owner, 0);
    pthread_mutex_unlock(&sp_sched_shared.lock);
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

uint32_t sp_sched_idle_gate(void)
{
    return sp_sched_shared.idle_gate_count ? SP_WIN_COUNT : 0;
}

static void open_record_window(uint64_t now)
{
    sp_sched_shared.cur_window = next_window++ & ~(SP_WIN_WARMUP | SP_WIN_COUNT);
    window_t0 = now;
    drop_base = sp_ev_dropped_total();
    cycle_first_step = step;
    sp_mem_window_open(sp_sched_shared.cur_window, step);
    sp_export_start(sp_cupti_active());
    sp_ev_set_gate(sp_sched_shared.cur_window);
}

static void close_record_window(uint64_t now, int truncated)
{
    /* A handful of stores here: the device sync, the CUPTI flush and take and
     * the memory merge run on the exporter's side (sp_cupti_collect,
     * sp_mem_cycle_take). At exit the runtime may be torn down already, so
     * the exporter only forces a flush there. */
    int device;
    sp_cupti_window_close(&device);
    sp_mem_window_close(sp_sched_shared.cur_window, sp_sched_shared.finished);
    sp_export_job_t job;
    memset(&job, 0, sizeof job);
    job.window = sp_sched_shared.cur_window;
    job.t_begin = window_t0;
    job.t_end = now;
    job.cycle = sp_sched_shared.cycle++;
    job.first_step = cycle_first_step;
    job.last_step = cycle_first_step < 0 ? -1 : step;
    job.dropped = sp_ev_dropped_total() - drop_base;
    job.truncated = truncated;
    job.use_gzip = sp_sched_shared.cfg.use_gzip;
    job.gzip_lib = sp_sched_shared.cfg.gzip_lib == SP_GZIP_LIB_ISAL   ? SP_JOB_GZIP_ISAL
                   : sp_sched_shared.cfg.gzip_lib == SP_GZIP_LIB_ZLIB ? SP_JOB_GZIP_ZLIB
                                                      : SP_JOB_GZIP_AUTO;
    job.record_shapes = sp_sched_shared.cfg.record_shapes;
    job.with_stack = sp_sched_shared.cfg.with_stack;
    snprintf(job.table.sort_by, sizeof job.table.sort_by, "%s", sp_sched_shared.cfg.table.sort_by);
    job.table.row_limit = sp_sched_shared.cfg.table.row_limit;
    job.table.group_by_input_shape = sp_sched_shared.cfg.table.group_by_input_shape;
    job.table.group_by_stack_n = sp_sched_shared.cfg.table.group_by_stack_n;
    job.table.print = (sp_sched_shared.cfg.table.print & SP_TABLE_PRINT_STDERR ? SP_JOB_TABLE_STDERR : 0) |
                      (sp_sched_shared.cfg.table.print & SP_TABLE_PRINT_FILE ? SP_JOB_TABLE_FILE : 0);
    job.cupti = sp_cupti_active();
    job.gpu_collect = job.cupti;
    job.gpu_sync = !sp_sched_shared.finished;
    job.gpu_device = device;
    snprintf(job.output_dir, sizeof job.output_dir, "%s", sp_sched_shared.cfg.output_dir);
    sp_sched_worker_name(job.worker, sizeof job.worker);
    sp_sched_shared.cur_window = 0;
    sp_ev_set_gate(sp_sched_idle_gate());
    sp_export_submit(&job);
}

/* The ProfilerStep#N record of the step that just ended. */
static void emit_step(uint64_t now)
{
    sp_thread_t *t = sp_ev_thread();
    sp_event_t *e = t ? sp_ev_reserve(t, sp_sched_shared.cur_window) : NULL;
    if (!e)
        return;
    memset(e, 0, sizeof *e);
    e->t0 = step_t0;
    e->t1 = now;
    e->kind = SP_EV_STEP;
    e->window = sp_sched_shared.cur_window;
    e->a[0] = (uint64_t)step;
    sp_ev_commit(t);
}

/* With a signal marker the schedule runs one cycle, counted from the step
 * where it was armed; otherwise it is the configured schedule over all steps. */
static sp_action_t action_for(long s)
{
    if (sp_sched_shared.whole_run)
        return SP_ACT_RECORD;
    if (!sp_sched_shared.signal_mode)
        return sp_sched_action(&sp_sched_shared.sched, s);
    if (arm_step < 0 && sp_sched_signal_flag) {
        sp_sched_signal_flag = 0;
        arm_step = s;
        sp_log(SP_LOG_INFO, "signal received: recording one cycle from step %ld", s);
    }
    if (arm_step < 0)
        return SP_ACT_NONE;
    sp_sched_t one = sp_sched_shared.sched;
    one.skip_first = 0;
    one.skip_first_wait = 0;
    one.repeat = 1;
    sp_action_t a = sp_sched_action(&one, s - arm_step);
    if (a == SP_ACT_NONE &&
        s - arm_step >= sp_sched_shared.sched.wait + sp_sched_shared.sched.warmup + sp_sched_shared.sched.active)
        arm_step = -1;
    return a;
}

static void enter_action(sp_action_t next, uint64_t now)
{
    int was_rec = action == SP_ACT_RECORD || action == SP_ACT_RECORD_AND_SAVE;
    int is_rec = next == SP_ACT_RECORD || next == SP_ACT_RECORD_AND_SAVE;
    if (is_rec && !was_rec) {
        sp_cupti_enable(1);
        sp_cupti_window_open();
        open_record_window(now);
    } else if (next == SP_ACT_WARMUP && action != SP_ACT_WARMUP) {
        sp_cupti_enable(1);
        sp_ev_set_gate((next_window++ & ~SP_WIN_COUNT) | SP_WIN_WARMUP);
    } else if (next == SP_ACT_NONE && action != SP_ACT_NONE) {
        sp_cupti_enable(0);
        sp_ev_set_gate(sp_sched_idle_gate());
    }
    action = next;
}

static void boundary_locked(void);

void sp_sched_boundary(void)
{
    sigset_t old;
    sp_sched_lock_blocked(&old);
    if (sp_sched_shared.active && !sp_sched_shared.finished)
        boundary_locked();
    sp_sched_unlock_blocked(&old);
}

/* A marker that ends steps (torch: prof.step() sits after optimizer.step())
 * begins step 0 when it attaches, as torch.profiler's start() does, so its
 * first hit ends step 0 rather than beginning it. No-op once steps count. */
void sp_sched_begin_steps(void)
{
    sigset_t old;
    sp_sched_lock_blocked(&old);
    if (sp_sched_shared.active && !sp_sched_shared.finished && step < 0)
        boundary_locked();
    sp_sched_unlock_blocked(&old);
}

static void start_step(long s, uint64_t now);

static void boundary_locked(void)
{
    uint64_t now = sp_clock_ticks();
    if (sp_sched_shared.cur_window && step >= 0)
        emit_step(now);
    if (action == SP_ACT_RECORD_AND_SAVE)
        close_record_window(now, 0);
    start_step(step + 1, now);
}

/* A multiprocessing child (an mp.spawn rank) wakes at its first optimizer
 * step (inject/python/): that step ended step 0, which ran before, unseen;
 * step 1 begins now, so ProfilerStep numbers stay torch.profiler's. No-op
 * once steps count. */
void sp_sched_begin_steps_at_1(void)
{
    sigset_t old;
    sp_sched_lock_blocked(&old);
    int lost = 0;
    if (sp_sched_shared.active && !sp_sched_shared.finished && step < 0) {
        lost = !sp_sched_shared.whole_run && !sp_sched_shared.signal_mode && action_for(0) != SP_ACT_NONE;
        start_step(1, sp_clock_ticks());
    }
    sp_sched_unlock_blocked(&old);
    if (lost)
        sp_log(SP_LOG_WARN, "step 0 ran before this process's first optimizer step, where a multiprocessing child "
                            "starts profiling: it is not recorded (set PROF_WAIT=1 or more)");
}

/* No marker and no schedule, or a step marker without one: one window from
 * activation to exit. */
int sp_sched_records_from_start(void)
{
    return (sp_sched_shared.cfg.marker.kind == SP_MARK_NONE && !sp_sched_shared.cfg.has_schedule &&
            !sp_sched_shared.signal_only) ||
           sp_sched_shared.whole_run;
}

void sp_sched_open_whole_run(void)
{
    sp_cupti_enable(1);
    open_record_window(sp_clock_ticks());
    sp_range_adopt_early(sp_sched_shared.cur_window);
    action = SP_ACT_RECORD;
}

static void start_step(long s, uint64_t now)
{
    step = s;
    step_t0 = now;
    sp_mem_step(step);
    /* A window closed at this boundary ends its cycle: the transition to NONE
     * (CUPTI's kinds off, the idle gate), then the step's own action, so a
     * record step opens a new window and a wait step or the schedule's end
     * records nothing. Only setting the action to NONE left CUPTI on from the
     * first warmup to the exit (H200: a transformer's steps after its window
     * took x1.4-1.7). Off then on again costs no CUPTI call: the closed
     * window's collect is pending, and sp_cupti_enable only notes the wish. */
    if (!sp_sched_shared.cur_window && (action == SP_ACT_RECORD || action == SP_ACT_RECORD_AND_SAVE))
        enter_action(SP_ACT_NONE, now);
    enter_action(action_for(step), now);
}

void sp_sched_profiler_api(int start)
{
    sigset_t old;
    sp_sched_lock_blocked(&old);
    if (sp_sched_shared.active && !sp_sched_shared.finished) {
        uint64_t now = sp_clock_ticks();
        if (start && !sp_sched_shared.cur_window &&
            (sp_sched_shared.cfg.repeat == 0 || sp_sched_shared.cycle < sp_sched_shared.cfg.repeat)) {
            step++;
            sp_cupti_enable(1);
            sp_cupti_window_open();
            open_record_window(now);
        } else if (!start && sp_sched_shared.cur_window) {
            close_record_window(now, 0);
            sp_cupti_enable(0);
        }
    }
    sp_sched_unlock_blocked(&old);
}

void sp_sched_poll_signal(void)
{
    if (!sp_sched_shared.signal_only)
        return; /* with a step marker the flag waits for the next boundary */
    sigset_t old;
    sp_sched_lock_blocked(&old);
    if (sp_sched_shared.active && !sp_sched_shared.finished && sp_sched_shared.signal_only && sp_sched_signal_flag) {
        sp_sched_signal_flag = 0;
        uint64_t now = sp_clock_ticks();
        if (!sp_sched_shared.cur_window && (sp_sched_shared.cfg.repeat == 0 ||
                                            sp_sched_shared.cycle < sp_sched_shared.cfg.repeat ||
                                            !sp_sched_shared.cfg.has_schedule)) {
            sp_log(SP_LOG_INFO, "signal received: recording until the next one");
            sp_cupti_enable(1);
            sp_cupti_window_open();
            open_record_window(now);
        } else if (sp_sched_shared.cur_window) {
            sp_log(SP_LOG_INFO, "signal received: writing the trace");
            close_record_window(now, 0);
            sp_cupti_enable(0);
        }
    }
    sp_sched_unlock_blocked(&old);
}

/* Closes the open window and waits for the exporter. The window counts as
 * cut short unless it is the whole-run window, whose natural end is the
 * process's end. With try_lock the schedule lock is only tried until the
 * deadline: on the signal path the interrupted thread may be the one holding
 * it, and it cannot run again before we give up. at_exit (return from main,
 * exit()): the wait is the exit's own (exitpaths.c, exit_timeout_s), and
 * CUPTI is shut down after it. */
/* At exit, how long the collects of windows closed earlier may take (one device
 * sync and one flush each, right after their close): past it, they only take. */
#define COLLECT_WAIT_S 10.0

static int finish(int truncated, double timeout_s, int try_lock, int close_window, int at_exit)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (at_exit)   /* before the last window closes, so that its trace names the devices */
        sp_cupti_query_devices_again();
    int locked = 0;
    if (!close_window) {
        locked = 1; /* nothing to close: only the drain below */
    } else if (!try_lock) {
        pthread_mutex_lock(&sp_sched_shared.lock);
        locked = 1;
    } else {
        for (;;) {
            if (pthread_mutex_trylock(&sp_sched_shared.lock) == 0) {
                locked = 1;
                break;
            }
            struct timespec now, pause = {0, 1000000};
            clock_gettime(CLOCK_MONOTONIC, &now);
            if ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9 >= timeout_s)
                break;
            nanosleep(&pause, NULL);
        }
    }
    if (locked && close_window) {
        if (sp_sched_shared.active && !sp_sched_shared.finished) {
            sp_sched_shared.finished = 1;
            int whole = sp_sched_shared.whole_run ||
                        (sp_sched_shared.cfg.marker.kind == SP_MARK_NONE && !sp_sched_shared.cfg.has_schedule &&
                         !sp_sched_shared.signal_only);
            uint64_t now = sp_clock_ticks();
            if (sp_sched_shared.cur_window) {
                if (step >= 0)
                    emit_step(now);
                close_record_window(now, truncated || !whole ? SP_TRUNC_END : 0);
            } else if (sp_sched_shared.cfg.profile_memory && sp_sched_shared.cycle > 0 && !truncated) {
                /* The last cycle's report could not list what is still allocated at exit. */
                char worker[256];
                sp_sched_worker_name(worker, sizeof worker);
                sp_memrep_write_exit(sp_sched_shared.cfg.output_dir, worker);
            }
            sp_ev_set_gate(0);
            /* A marker that never matched leaves no file: say why, once. The
             * function marker says so when its hook fails; a torch step
             * counts from attach. */
            int waits_for_marker = sp_sched_shared.cfg.marker.kind == SP_MARK_NVTX ||
                                   sp_sched_shared.cfg.marker.kind == SP_MARK_KERNEL ||
                                   sp_sched_shared.cfg.marker.kind == SP_MARK_PROFILER_API;
            if (waits_for_marker && step < 0 && sp_sched_shared.cycle == 0 && !sp_sched_shared.cur_window)
                sp_log(SP_LOG_WARN, "marker %s never fired in this run: no step began and no trace was written",
                       sp_sched_shared.cfg.marker_spec);
        }
        pthread_mutex_unlock(&sp_sched_shared.lock);
    } else if (!locked) {
        sp_log(SP_LOG_ERROR, "the cycle in progress is lost: the schedule stayed busy for %.0f s at the end of "
                             "the process (finalize_timeout_s)", timeout_s);
    }
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double left = timeout_s - ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    int rc;
    if (at_exit) {
        /* Before the wait holds the program's threads (CUPTI's worker among them): the
         * windows closed before the exit are collected (each with its own sync, which
         * fixes CUPTI's clock offset), then one forced flush; later collects only take. */
        sp_export_wait_collects(COLLECT_WAIT_S);
        sp_cupti_exit_flush();
        rc = sp_exit_wait_exports(sp_sched_shared.active ? (double)sp_sched_shared.cfg.exit_timeout_s : timeout_s);
    } else if ((rc = sp_export_drain(left > 0 ? left : 0)) != 0) {
        sp_exit_report_lost("finalize_timeout_s", timeout_s);
    }
    if (at_exit)
        sp_cupti_shutdown();
    return locked && rc == 0 ? 0 : -1;
}

void sp_sched_finish(int truncated)
{
    finish(truncated, sp_sched_shared.active ? (double)sp_sched_shared.cfg.finalize_timeout_s : 10.0, 0, 1, 1);
}

/* CUPTI is left alone here: other threads may be inside CUDA, and the
 * process is about to end anyway. */
int sp_sched_finish_bounded(int how, double timeout_s)
{
    return finish(how == SP_FINISH_SIGNAL, timeout_s, 1, how != SP_FINISH_DRAIN, 0);
}

/* exit() (or exec) from a signal handler that interrupted this thread
 * inside stepprof, a program's SIGALRM handler say (only the terminating
 * signals are blocked under the lock): the thread may hold the schedule lock
 * (an NVTX marker's boundary) or the exporter's, and taking them again here
 * would wait forever. exitpaths.c hands the work to its finisher thread
 * instead. */
static int interrupted_inside_stepprof(void)
{
    sp_thread_t *t = sp_ev_self;
    return (t && t->in_hook) || pthread_equal(atomic_load(&lock_owner), pthread_self());
}

/* A successful exec would replace the image without atexit: its recording
 * is written now, as at exit. */
void sp_sched_before_exec(void)
{
    if (sp_sched_shared.active && interrupted_inside_stepprof())
        sp_exit_finish_elsewhere();
    else if (sp_sched_shared.active)
        finish(0, (double)sp_sched_shared.cfg.finalize_timeout_s, 0, 1, 1);
}

void sp_sched_exit_handler(void)
{
    if (interrupted_inside_stepprof())
        sp_exit_finish_elsewhere();
    else
        sp_sched_finish(0);
}

void sp_sched_after_fork_child(void)
{
    pthread_mutex_init(&sp_sched_shared.lock, NULL);
    sp_sched_shared.active = sp_sched_shared.finished = 0;
    step = -1;
    action = SP_ACT_NONE;
    sp_sched_shared.cur_window = 0;
    sp_sched_shared.cycle = 0;
    arm_step = -1;
    sp_sched_shared.idle_gate_count = sp_sched_shared.signal_mode = sp_sched_shared.signal_only =
        sp_sched_shared.whole_run = sp_sched_shared.unranked_left_out = 0;
    sp_ev_after_fork_child();
    sp_export_after_fork_child();
    sp_outfile_after_fork_child();
    sp_cupti_after_fork_child();
    sp_mem_after_fork_child();
    sp_stack_after_fork_child();
    sp_ev_set_gate(SP_GATE_UNINIT);
}
