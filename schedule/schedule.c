/* schedule/schedule.c — the step state machine. Marker hits (any thread) come
 * in as boundaries; each boundary ends step s and begins s+1, whose action
 * (plan.h, torch.profiler semantics) decides the gate: closed (NONE), a warmup
 * window (timed, not stored), or a record window. When a RECORD_AND_SAVE step
 * ends, the window is closed and an export job is queued for the background
 * exporter. Each recorded step leaves a ProfilerStep#N record on the thread
 * that hit the marker, spanning boundary to boundary. One mutex guards the
 * state: boundaries are rare (once per training step). */
#define _GNU_SOURCE
#include "schedule.h"

#include "../collectors/clock.h"
#include "../collectors/cupti.h"
#include "../collectors/events.h"
#include "../collectors/memory.h"
#include "../collectors/ranges.h"
#include "../collectors/log.h"
#include "../collectors/rank.h"
#include "../collectors/stacks.h"
#include "../exporters/export.h"
#include "../exporters/memory_report.h"
#include "../exporters/outfile.h"
#include "../inject/exitpaths.h"
#include "../inject/markers.h"
#include "plan.h"

#include <fnmatch.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sp_config_t cfg;
static int active;             /* activated and enabled */
static int finished;

static sp_sched_t sched;
static long step = -1;         /* current step, -1 before the first boundary */
static sp_action_t action = SP_ACT_NONE;
static uint64_t step_t0;       /* ticks at the current step's start */
static uint32_t next_window = 1;
static uint32_t cur_window;    /* open record window, 0 when none */
static uint64_t window_t0;
static uint64_t drop_base;
static long cycle;             /* cycles written so far */
static long cycle_first_step;
static int idle_gate_count;    /* gate value while NONE: SP_WIN_COUNT if markers need calls */
static int signal_mode;        /* a signal arms one cycle at the next boundary */
static int signal_only;        /* no step marker: each signal starts or ends a window */
static long arm_step = -1;     /* step where the armed cycle began, -1 when disarmed */
static int whole_run;          /* step marker but no schedule: torch records every step, written at exit */
static int unranked_left_out;  /* left out by `ranks` as rank 0 while no launcher named a rank */
static int dormant;            /* a multiprocessing child before its first optimizer step (inject/torch.c) */

volatile sig_atomic_t sp_sched_signal_flag;
static _Atomic pthread_t lock_owner; /* thread in lock_blocked..unlock_blocked, 0: none */

/* The lock as a program thread takes it: with the terminating signals
 * blocked, so that their handler (exitpaths.c) never runs on the thread that
 * holds it while the finisher waits for it (a window close with CUPTI lasts
 * long enough to be hit). Two syscalls per boundary. */
static void lock_blocked(sigset_t *old)
{
    sigset_t term;
    sp_exit_term_sigset(&term);
    pthread_sigmask(SIG_BLOCK, &term, old);
    pthread_mutex_lock(&lock);
    atomic_store(&lock_owner, pthread_self());
}

static void unlock_blocked(const sigset_t *old)
{
    atomic_store(&lock_owner, 0);
    pthread_mutex_unlock(&lock);
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

static uint32_t idle_gate(void)
{
    return idle_gate_count ? SP_WIN_COUNT : 0;
}

static void worker_name(char *out, size_t len)
{
    if (cfg.worker_name[0]) {
        snprintf(out, len, "%s", cfg.worker_name);
        return;
    }
    char host[256] = "host";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    /* rank<R>_<host>_<pid>: names sort by rank (R zero-padded to the width of
     * the largest rank), TensorBoard still splits node / process at the last
     * _<digits>, and every process of a shared directory has its own name. */
    const sp_rank_t *r = sp_rank();
    if (r->rank >= 0) {
        int width = snprintf(NULL, 0, "%ld", r->world > 0 ? r->world - 1 : r->rank);
        snprintf(out, len, "rank%0*ld_%s_%d", width, r->rank, host, (int)getpid());
        return;
    }
    snprintf(out, len, "%s_%d", host, (int)getpid());
}

/* `ranks` leaves out every rank it does not list; a process that is no rank
 * of a job counts as rank 0. The list was checked when the config loaded. */
static int rank_selected(const char *ranks)
{
    char why[256];
    long rank = sp_rank()->rank;
    return !ranks[0] || sp_rank_in_list(ranks, rank < 0 ? 0 : rank, why, sizeof why) == 1;
}

static void open_record_window(uint64_t now)
{
    cur_window = next_window++ & ~(SP_WIN_WARMUP | SP_WIN_COUNT);
    window_t0 = now;
    drop_base = sp_ev_dropped_total();
    cycle_first_step = step;
    sp_mem_window_open(cur_window, step);
    sp_export_start(sp_cupti_active());
    sp_ev_set_gate(cur_window);
}

static void close_record_window(uint64_t now, int truncated)
{
    /* A handful of stores here: the device sync, the CUPTI flush and take and
     * the memory merge run on the exporter's side (sp_cupti_collect,
     * sp_mem_cycle_take). At exit the runtime may be torn down already, so
     * the exporter only forces a flush there. */
    int device;
    sp_cupti_window_close(&device);
    sp_mem_window_close(cur_window, finished);
    sp_export_job_t job;
    memset(&job, 0, sizeof job);
    job.window = cur_window;
    job.t_begin = window_t0;
    job.t_end = now;
    job.cycle = cycle++;
    job.first_step = cycle_first_step;
    job.last_step = cycle_first_step < 0 ? -1 : step;
    job.dropped = sp_ev_dropped_total() - drop_base;
    job.truncated = truncated;
    job.use_gzip = cfg.use_gzip;
    job.gzip_lib = cfg.gzip_lib == SP_GZIP_LIB_ISAL   ? SP_JOB_GZIP_ISAL
                   : cfg.gzip_lib == SP_GZIP_LIB_ZLIB ? SP_JOB_GZIP_ZLIB
                                                      : SP_JOB_GZIP_AUTO;
    job.record_shapes = cfg.record_shapes;
    job.with_stack = cfg.with_stack;
    snprintf(job.table.sort_by, sizeof job.table.sort_by, "%s", cfg.table.sort_by);
    job.table.row_limit = cfg.table.row_limit;
    job.table.group_by_input_shape = cfg.table.group_by_input_shape;
    job.table.group_by_stack_n = cfg.table.group_by_stack_n;
    job.table.print = (cfg.table.print & SP_TABLE_PRINT_STDERR ? SP_JOB_TABLE_STDERR : 0) |
                      (cfg.table.print & SP_TABLE_PRINT_FILE ? SP_JOB_TABLE_FILE : 0);
    job.cupti = sp_cupti_active();
    job.gpu_collect = job.cupti;
    job.gpu_sync = !finished;
    job.gpu_device = device;
    snprintf(job.output_dir, sizeof job.output_dir, "%s", cfg.output_dir);
    worker_name(job.worker, sizeof job.worker);
    cur_window = 0;
    sp_ev_set_gate(idle_gate());
    sp_export_submit(&job);
}

/* The ProfilerStep#N record of the step that just ended. */
static void emit_step(uint64_t now)
{
    sp_thread_t *t = sp_ev_thread();
    sp_event_t *e = t ? sp_ev_reserve(t, cur_window) : NULL;
    if (!e)
        return;
    memset(e, 0, sizeof *e);
    e->t0 = step_t0;
    e->t1 = now;
    e->kind = SP_EV_STEP;
    e->window = cur_window;
    e->a[0] = (uint64_t)step;
    sp_ev_commit(t);
}

/* With a signal marker the schedule runs one cycle, counted from the step
 * where it was armed; otherwise it is the configured schedule over all steps. */
static sp_action_t action_for(long s)
{
    if (whole_run)
        return SP_ACT_RECORD;
    if (!signal_mode)
        return sp_sched_action(&sched, s);
    if (arm_step < 0 && sp_sched_signal_flag) {
        sp_sched_signal_flag = 0;
        arm_step = s;
        sp_log(SP_LOG_INFO, "signal received: recording one cycle from step %ld", s);
    }
    if (arm_step < 0)
        return SP_ACT_NONE;
    sp_sched_t one = sched;
    one.skip_first = 0;
    one.skip_first_wait = 0;
    one.repeat = 1;
    sp_action_t a = sp_sched_action(&one, s - arm_step);
    if (a == SP_ACT_NONE && s - arm_step >= sched.wait + sched.warmup + sched.active)
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
        sp_ev_set_gate(idle_gate());
    }
    action = next;
}

static void boundary_locked(void);

void sp_sched_boundary(void)
{
    sigset_t old;
    lock_blocked(&old);
    if (active && !finished)
        boundary_locked();
    unlock_blocked(&old);
}

/* A marker that ends steps (torch: prof.step() sits after optimizer.step())
 * begins step 0 when it attaches, as torch.profiler's start() does, so its
 * first hit ends step 0 rather than beginning it. No-op once steps count. */
void sp_sched_begin_steps(void)
{
    sigset_t old;
    lock_blocked(&old);
    if (active && !finished && step < 0)
        boundary_locked();
    unlock_blocked(&old);
}

static void start_step(long s, uint64_t now);

static void boundary_locked(void)
{
    uint64_t now = sp_clock_ticks();
    if (cur_window && step >= 0)
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
    lock_blocked(&old);
    int lost = 0;
    if (active && !finished && step < 0) {
        lost = !whole_run && !signal_mode && action_for(0) != SP_ACT_NONE;
        start_step(1, sp_clock_ticks());
    }
    unlock_blocked(&old);
    if (lost)
        sp_log(SP_LOG_WARN, "step 0 ran before this process's first optimizer step, where a multiprocessing child "
                            "starts profiling: it is not recorded (set PROF_WAIT=1 or more)");
}

/* No marker and no schedule, or a step marker without one: one window from
 * activation to exit. */
static int records_from_start(void)
{
    return (cfg.marker.kind == SP_MARK_NONE && !cfg.has_schedule && !signal_only) || whole_run;
}

static void open_whole_run(void)
{
    sp_cupti_enable(1);
    open_record_window(sp_clock_ticks());
    sp_range_adopt_early(cur_window);
    action = SP_ACT_RECORD;
}

static void say_plan(void)
{
    char plan[sizeof cfg.output_dir + sizeof cfg.marker_spec + 512]; /* sp_log shortens it */
    if (sp_plan_format(&cfg, plan, sizeof plan) > 0)
        sp_log(SP_LOG_INFO, "%s", plan);
}

/* Activated while dormant with torch's marker: its plan line, `ranks` and a
 * whole-run window wait for the wake. Caller holds the lock. */
static int deferring(void)
{
    return dormant && active && cfg.marker.kind == SP_MARK_TORCH;
}

/* Caller holds the lock: `ranks` leaves this process out after activation. */
static void leave_out_locked(void)
{
    active = 0;
    sp_ev_set_gate(0);
}

/* After leave_out_locked, the lock released. */
static void left_out(void)
{
    sp_cupti_release();   /* unsubscribes: the rank left out pays nothing for CUPTI */
    sp_log(SP_LOG_DEBUG, "rank %ld is not in ranks \"%s\"; not profiled", sp_rank()->rank, cfg.ranks);
}

/* torch.distributed's rank and backend, told at a process's first optimizer
 * step (inject/torch.c). Taken only while no cycle has gone to the exporter,
 * which reads them (file names, distributedInfo): never a torn read. The rank
 * only when no launcher variable names one; then `ranks` applies now (at the
 * wake, for a dormant child) if no window is open, else it is said why not. */
void sp_sched_learn_dist(long rank, long world, const char *backend)
{
    sigset_t old;
    lock_blocked(&old);
    int off = 0, late = 0;
    if (cycle == 0) {
        sp_rank_tell_backend(backend);
        if (sp_rank_learn(rank, world, "torch.distributed") && active && !finished && !deferring() &&
            !rank_selected(cfg.ranks)) {
            off = !cur_window;
            late = !off;
            if (off)
                leave_out_locked();
        }
    }
    unlock_blocked(&old);
    if (off) {
        left_out();
    } else if (late) {
        sp_log(SP_LOG_WARN, "rank %ld (from torch.distributed) is not in ranks \"%s\", but recording began "
                            "before the rank was known: it is recorded", rank, cfg.ranks);
    }
}

void sp_sched_set_dormant(void)
{
    sigset_t old;
    lock_blocked(&old);
    dormant = 1;
    unlock_blocked(&old);
}

int sp_sched_dormant(void)
{
    return __atomic_load_n(&dormant, __ATOMIC_RELAXED);
}

/* A dormant child's first optimizer step (inject/torch.c, before
 * sp_sched_begin_steps_at_1): what an activation while dormant (its CUDA
 * calls) left for now, when its rank may be known. */
void sp_sched_wake(void)
{
    sigset_t old;
    lock_blocked(&old);
    int off = 0, plan = 0;
    int was_deferring = deferring() && !finished;
    __atomic_store_n(&dormant, 0, __ATOMIC_RELAXED);
    if (was_deferring) {
        if (!rank_selected(cfg.ranks)) {
            leave_out_locked();
            off = 1;
        } else {
            plan = 1;
            if (records_from_start())
                open_whole_run();
        }
    }
    unlock_blocked(&old);
    if (off)
        left_out();
    if (plan)
        say_plan();
}

static void start_step(long s, uint64_t now)
{
    step = s;
    step_t0 = now;
    sp_mem_step(step);
    /* A closed window followed directly by another record step starts a new
     * cycle: force the transition through NONE so a new window opens. */
    if (!cur_window && (action == SP_ACT_RECORD || action == SP_ACT_RECORD_AND_SAVE))
        action = SP_ACT_NONE;
    enter_action(action_for(step), now);
}

void sp_sched_profiler_api(int start)
{
    sigset_t old;
    lock_blocked(&old);
    if (active && !finished) {
        uint64_t now = sp_clock_ticks();
        if (start && !cur_window && (cfg.repeat == 0 || cycle < cfg.repeat)) {
            step++;
            sp_cupti_enable(1);
            sp_cupti_window_open();
            open_record_window(now);
        } else if (!start && cur_window) {
            close_record_window(now, 0);
            sp_cupti_enable(0);
        }
    }
    unlock_blocked(&old);
}

void sp_sched_poll_signal(void)
{
    if (!signal_only)
        return; /* with a step marker the flag waits for the next boundary */
    sigset_t old;
    lock_blocked(&old);
    if (active && !finished && signal_only && sp_sched_signal_flag) {
        sp_sched_signal_flag = 0;
        uint64_t now = sp_clock_ticks();
        if (!cur_window && (cfg.repeat == 0 || cycle < cfg.repeat || !cfg.has_schedule)) {
            sp_log(SP_LOG_INFO, "signal received: recording until the next one");
            sp_cupti_enable(1);
            sp_cupti_window_open();
            open_record_window(now);
        } else if (cur_window) {
            sp_log(SP_LOG_INFO, "signal received: writing the trace");
            close_record_window(now, 0);
            sp_cupti_enable(0);
        }
    }
    unlock_blocked(&old);
}

/* The program name as a user would write it: the executable's basename and
 * argv[0]'s (they differ for symlinked interpreters such as python3 ->
 * python3.11). Either matching one of the comma-separated globs selects the
 * process. Read from /proc so it works before main has argv. */
static int process_selected(const char *globs, char *name, size_t len)
{
    char exe[4096], arg0[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[k > 0 ? k : 0] = 0;
    arg0[0] = 0;
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (f) {
        size_t m = fread(arg0, 1, sizeof arg0 - 1, f);
        arg0[m] = 0;
        fclose(f);
    }
    const char *b_exe = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    const char *b_arg = strrchr(arg0, '/') ? strrchr(arg0, '/') + 1 : arg0;
    const char *shown = b_arg[0] ? b_arg : b_exe;
    size_t k2 = strnlen(shown, len - 1);
    memcpy(name, shown, k2);
    name[k2] = 0;
    if (!globs[0])
        return 1;
    char list[sizeof cfg.processes];
    snprintf(list, sizeof list, "%s", globs);
    char *save = NULL;
    for (char *g = strtok_r(list, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
        g += strspn(g, " \t");
        g[strcspn(g, " \t")] = 0;
        if (*g && ((b_exe[0] && fnmatch(g, b_exe, 0) == 0) || (b_arg[0] && fnmatch(g, b_arg, 0) == 0)))
            return 1;
    }
    return 0;
}

void sp_sched_activate(void)
{
    static int exit_handler_registered; /* survives fork: so does the atexit list */
    pthread_mutex_lock(&lock);
    /* A process left out by `processes` must stay silent, so the first load
     * only prints errors; a selected process loads again with warnings. */
    int level = sp_log_level;
    sp_log_level = SP_LOG_ERROR;
    int rc = sp_config_load(&cfg);
    sp_log_level = level;
    char name[256];
    sp_rank_init();
    /* A dormant child (an mp.spawn rank touching CUDA before its first
     * optimizer step) whose marker is torch's: its plan line, a `ranks`
     * decision its unknown rank cannot make, and a whole-run window wait for
     * the wake (sp_sched_wake). */
    int defer = rc == 0 && dormant && cfg.marker.kind == SP_MARK_TORCH;
    if (rc == 0 && cfg.enabled && !process_selected(cfg.processes, name, sizeof name)) {
        sp_log_level = cfg.log_level;
        sp_log(SP_LOG_DEBUG, "process %d (%s) does not match processes \"%s\"; not profiled", (int)getpid(), name,
               cfg.processes);
        cfg.enabled = 0;
    } else if (rc == 0 && cfg.enabled && !rank_selected(cfg.ranks) && !(defer && sp_rank()->rank < 0)) {
        sp_log_level = cfg.log_level;
        sp_log(SP_LOG_DEBUG, "rank %ld is not in ranks \"%s\"; not profiled", sp_rank()->rank, cfg.ranks);
        cfg.enabled = 0;
        unranked_left_out = sp_rank()->rank < 0;
    } else if (rc == 0 && cfg.enabled) {
        rc = sp_config_load(&cfg);
        sp_rank_warn();
    }
    if (rc != 0 || !cfg.enabled) {
        sp_ev_set_gate(0);
        pthread_mutex_unlock(&lock);
        return;
    }
    sp_log_level = cfg.log_level;
    sp_clock_init();
    if (cfg.cupti)
        sp_cupti_init(cfg.profile_memory, cfg.cupti_buffer_mb);
    {
        /* A byte budget becomes an event budget: export can then stop at an
         * exact count, and recording stops before memory grows past it. The
         * cap holds for each source: host events and CUPTI's records; with
         * CUPTI on, the two share max_trace_mb's bytes half and half. */
        uint64_t max_ev = (uint64_t)cfg.max_events_per_cycle;
        uint64_t by_size = (uint64_t)cfg.max_trace_mb * (1u << 20) / SP_EXPORT_EVENT_BYTES;
        if (sp_cupti_active())
            by_size = (by_size + 1) / 2;
        if (by_size && (!max_ev || by_size < max_ev))
            max_ev = by_size;
        sp_ev_set_cycle_cap(max_ev);
        sp_export_set_limit(max_ev);
        sp_cupti_set_cycle_cap(max_ev);
        sp_cupti_set_query_filter(cfg.cupti_api_filter == SP_CUPTI_API_FILTER_QUERIES);
    }
    if (cfg.with_stack)
        sp_stack_init(cfg.stack_depth, cfg.unwinder);
    if (sp_ev_pool_init(cfg.buffer_mb) != 0) {
        sp_ev_set_gate(0);
        pthread_mutex_unlock(&lock);
        return;
    }
    sp_mem_init(cfg.profile_memory);
    sched = (sp_sched_t){cfg.skip_first, cfg.skip_first_wait, cfg.wait, cfg.warmup, cfg.active, cfg.repeat};
    if (!defer)
        say_plan();
    sp_outfile_check_dir(cfg.output_dir); /* an unwritable directory said now, not after the run */
    active = 1;
    switch (cfg.marker.kind) {
    case SP_MARK_KERNEL:
        sp_marker_flags |= SP_MF_KERNEL;
        idle_gate_count = 1;
        break;
    case SP_MARK_PROFILER_API:
        sp_marker_flags |= SP_MF_PROFILER;
        idle_gate_count = 1;
        break;
    default:
        break;
    }
    signal_mode = cfg.marker.has_signal && cfg.marker.kind != SP_MARK_NONE;
    signal_only = cfg.marker.has_signal && cfg.marker.kind == SP_MARK_NONE;
    if (signal_only)
        idle_gate_count = 1;
    whole_run = !cfg.has_schedule && !signal_mode && cfg.marker.kind != SP_MARK_NONE &&
                cfg.marker.kind != SP_MARK_PROFILER_API;
    if (records_from_start() && !defer)
        open_whole_run();
    else
        sp_ev_set_gate(idle_gate());
    pthread_mutex_unlock(&lock);
    if (!exit_handler_registered) {
        exit_handler_registered = 1;
        atexit(sp_sched_exit_handler);
    }
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
        pthread_mutex_lock(&lock);
        locked = 1;
    } else {
        for (;;) {
            if (pthread_mutex_trylock(&lock) == 0) {
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
        if (active && !finished) {
            finished = 1;
            int whole = whole_run || (cfg.marker.kind == SP_MARK_NONE && !cfg.has_schedule && !signal_only);
            uint64_t now = sp_clock_ticks();
            if (cur_window) {
                if (step >= 0)
                    emit_step(now);
                close_record_window(now, truncated || !whole ? SP_TRUNC_END : 0);
            } else if (cfg.profile_memory && cycle > 0 && !truncated) {
                /* The last cycle's report could not list what is still allocated at exit. */
                char worker[256];
                worker_name(worker, sizeof worker);
                sp_memrep_write_exit(cfg.output_dir, worker);
            }
            sp_ev_set_gate(0);
            /* A marker that never matched leaves no file: say why, once. The
             * function marker says so when its hook fails; a torch step
             * counts from attach. */
            int waits_for_marker = cfg.marker.kind == SP_MARK_NVTX || cfg.marker.kind == SP_MARK_KERNEL ||
                                   cfg.marker.kind == SP_MARK_PROFILER_API;
            if (waits_for_marker && step < 0 && cycle == 0 && !cur_window)
                sp_log(SP_LOG_WARN, "marker %s never fired in this run: no step began and no trace was written",
                       cfg.marker_spec);
        }
        pthread_mutex_unlock(&lock);
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
        rc = sp_exit_wait_exports(active ? (double)cfg.exit_timeout_s : timeout_s);
    } else if ((rc = sp_export_drain(left > 0 ? left : 0)) != 0) {
        sp_exit_report_lost("finalize_timeout_s", timeout_s);
    }
    if (at_exit)
        sp_cupti_shutdown();
    return locked && rc == 0 ? 0 : -1;
}

void sp_sched_finish(int truncated)
{
    finish(truncated, active ? (double)cfg.finalize_timeout_s : 10.0, 0, 1, 1);
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
    if (active && interrupted_inside_stepprof())
        sp_exit_finish_elsewhere();
    else if (active)
        finish(0, (double)cfg.finalize_timeout_s, 0, 1, 1);
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
    pthread_mutex_init(&lock, NULL);
    active = finished = 0;
    step = -1;
    action = SP_ACT_NONE;
    cur_window = 0;
    cycle = 0;
    arm_step = -1;
    idle_gate_count = signal_mode = signal_only = whole_run = unranked_left_out = 0;
    sp_ev_after_fork_child();
    sp_export_after_fork_child();
    sp_outfile_after_fork_child();
    sp_cupti_after_fork_child();
    sp_mem_after_fork_child();
    sp_stack_after_fork_child();
    sp_ev_set_gate(SP_GATE_UNINIT);
}

int sp_sched_unranked_left_out(void)
{
    return unranked_left_out;
}

const sp_config_t *sp_sched_config(void)
{
    return active ? &cfg : NULL;
}
