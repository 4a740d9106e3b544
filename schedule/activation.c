/* schedule/activation.c — whether this process is profiled, and the start of
 * the step state machine (schedule.c) when it is. The first CUDA call
 * activates: the configuration is loaded, `processes` and `ranks` select the
 * process, the collectors are set up and the marker's mode is chosen. A
 * multiprocessing child (an mp.spawn rank) is dormant until its first
 * optimizer step; with torch's marker, what needs its rank waits for that
 * wake, and torch.distributed's rank, told then, can still leave the process
 * out. Also the worker name its files carry. What it shares with schedule.c is
 * in schedule_int.h, under the schedule lock. */
#define _GNU_SOURCE
#include "schedule.h"
#include "schedule_int.h"

#include "../collectors/clock.h"
#include "../collectors/cupti.h"
#include "../collectors/events.h"
#include "../collectors/memory.h"
#include "../collectors/log.h"
#include "../collectors/rank.h"
#include "../collectors/stacks.h"
#include "../exporters/export.h"
#include "../exporters/outfile.h"
#include "../inject/markers.h"
#include "plan.h"

#include <fnmatch.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int dormant;            /* a multiprocessing child before its first optimizer step (inject/torch.c) */

void sp_sched_worker_name(char *out, size_t len)
{
    if (sp_sched_shared.cfg.worker_name[0]) {
        snprintf(out, len, "%s", sp_sched_shared.cfg.worker_name);
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

static void say_plan(void)
{
    /* the plan line; sp_log shortens it */
    char plan[sizeof sp_sched_shared.cfg.output_dir + sizeof sp_sched_shared.cfg.marker_spec + 512];
    if (sp_plan_format(&sp_sched_shared.cfg, plan, sizeof plan) > 0)
        sp_log(SP_LOG_INFO, "%s", plan);
}

/* Activated while dormant with torch's marker: its plan line, `ranks` and a
 * whole-run window wait for the wake. Caller holds the lock. */
static int deferring(void)
{
    return dormant && sp_sched_shared.active && sp_sched_shared.cfg.marker.kind == SP_MARK_TORCH;
}

/* Caller holds the lock: `ranks` leaves this process out after activation. */
static void leave_out_locked(void)
{
    sp_sched_shared.active = 0;
    sp_ev_set_gate(0);
}

/* After leave_out_locked, the lock released. */
static void left_out(void)
{
    sp_cupti_release();   /* unsubscribes: the rank left out pays nothing for CUPTI */
    sp_log(SP_LOG_DEBUG, "rank %ld is not in ranks \"%s\"; not profiled", sp_rank()->rank, sp_sched_shared.cfg.ranks);
}

/* torch.distributed's rank and backend, told at a process's first optimizer
 * step (inject/torch.c). Taken only while no cycle has gone to the exporter,
 * which reads them (file names, distributedInfo): never a torn read. The rank
 * only when no launcher variable names one; then `ranks` applies now (at the
 * wake, for a dormant child) if no window is open, else it is said why not. */
void sp_sched_learn_dist(long rank, long world, const char *backend)
{
    sigset_t old;
    sp_sched_lock_blocked(&old);
    int off = 0, late = 0;
    if (sp_sched_shared.cycle == 0) {
        sp_rank_tell_backend(backend);
        if (sp_rank_learn(rank, world, "torch.distributed") && sp_sched_shared.active && !sp_sched_shared.finished &&
            !deferring() && !rank_selected(sp_sched_shared.cfg.ranks)) {
            off = !sp_sched_shared.cur_window;
            late = !off;
            if (off)
                leave_out_locked();
        }
    }
    sp_sched_unlock_blocked(&old);
    if (off) {
        left_out();
    } else if (late) {
        sp_log(SP_LOG_WARN, "rank %ld (from torch.distributed) is not in ranks \"%s\", but recording began "
                            "before the rank was known: it is recorded", rank, sp_sched_shared.cfg.ranks);
    }
}

void sp_sched_set_dormant(void)
{
    sigset_t old;
    sp_sched_lock_blocked(&old);
    dormant = 1;
    sp_sched_unlock_blocked(&old);
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
    sp_sched_lock_blocked(&old);
    int off = 0, plan = 0;
    int was_deferring = deferring() && !sp_sched_shared.finished;
    __atomic_store_n(&dormant, 0, __ATOMIC_RELAXED);
    if (was_deferring) {
        if (!rank_selected(sp_sched_shared.cfg.ranks)) {
            leave_out_locked();
            off = 1;
        } else {
            plan = 1;
            if (sp_sched_records_from_start())
                sp_sched_open_whole_run();
        }
    }
    sp_sched_unlock_blocked(&old);
    if (off)
        left_out();
    if (plan)
        say_plan();
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
    char list[sizeof sp_sched_shared.cfg.processes];
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
    pthread_mutex_lock(&sp_sched_shared.lock);
    /* A process left out by `processes` must stay silent, so the first load
     * only prints errors; a selected process loads again with warnings. */
    int level = sp_log_level;
    sp_log_level = SP_LOG_ERROR;
    int rc = sp_config_load(&sp_sched_shared.cfg);
    sp_log_level = level;
    char name[256];
    sp_rank_init();
    /* A dormant child (an mp.spawn rank touching CUDA before its first
     * optimizer step) whose marker is torch's: its plan line, a `ranks`
     * decision its unknown rank cannot make, and a whole-run window wait for
     * the wake (sp_sched_wake). */
    int defer = rc == 0 && dormant && sp_sched_shared.cfg.marker.kind == SP_MARK_TORCH;
    if (rc == 0 && sp_sched_shared.cfg.enabled && !process_selected(sp_sched_shared.cfg.processes, name, sizeof name)) {
        sp_log_level = sp_sched_shared.cfg.log_level;
        sp_log(SP_LOG_DEBUG, "process %d (%s) does not match processes \"%s\"; not profiled", (int)getpid(), name,
               sp_sched_shared.cfg.processes);
        sp_sched_shared.cfg.enabled = 0;
    } else if (rc == 0 && sp_sched_shared.cfg.enabled && !rank_selected(sp_sched_shared.cfg.ranks) &&
               !(defer && sp_rank()->rank < 0)) {
        sp_log_level = sp_sched_shared.cfg.log_level;
        sp_log(SP_LOG_DEBUG, "rank %ld is not in ranks \"%s\"; not profiled", sp_rank()->rank,
               sp_sched_shared.cfg.ranks);
        sp_sched_shared.cfg.enabled = 0;
        sp_sched_shared.unranked_left_out = sp_rank()->rank < 0;
    } else if (rc == 0 && sp_sched_shared.cfg.enabled) {
        rc = sp_config_load(&sp_sched_shared.cfg);
        sp_rank_warn();
    }
    if (rc != 0 || !sp_sched_shared.cfg.enabled) {
        sp_ev_set_gate(0);
        pthread_mutex_unlock(&sp_sched_shared.lock);
        return;
    }
    sp_log_level = sp_sched_shared.cfg.log_level;
    sp_clock_init();
    sp_cupti_set_launch_durations(sp_sched_shared.cfg.launch_durations);
    if (sp_sched_shared.cfg.cupti)
        sp_cupti_init(sp_sched_shared.cfg.profile_memory, sp_sched_shared.cfg.cupti_buffer_mb);
    {
        /* A byte budget becomes an event budget: export can then stop at an
         * exact count, and recording stops before memory grows past it. The
         * cap holds for each source: host events and CUPTI's records; with
         * CUPTI on, the two share max_trace_mb's bytes half and half. */
        uint64_t max_ev = (uint64_t)sp_sched_shared.cfg.max_events_per_cycle;
        uint64_t by_size = (uint64_t)sp_sched_shared.cfg.max_trace_mb * (1u << 20) / SP_EXPORT_EVENT_BYTES;
        if (sp_cupti_active())
            by_size = (by_size + 1) / 2;
        if (by_size && (!max_ev || by_size < max_ev))
            max_ev = by_size;
        sp_ev_set_cycle_cap(max_ev);
        sp_export_set_limit(max_ev);
        sp_cupti_set_cycle_cap(max_ev);
        sp_cupti_set_query_filter(sp_sched_shared.cfg.cupti_api_filter == SP_CUPTI_API_FILTER_QUERIES);
    }
    if (sp_sched_shared.cfg.with_stack)
        sp_stack_init(sp_sched_shared.cfg.stack_depth, sp_sched_shared.cfg.unwinder);
    if (sp_ev_pool_init(sp_sched_shared.cfg.buffer_mb) != 0) {
        sp_ev_set_gate(0);
        pthread_mutex_unlock(&sp_sched_shared.lock);
        return;
    }
    sp_mem_init(sp_sched_shared.cfg.profile_memory);
    sp_sched_shared.sched = (sp_sched_t){sp_sched_shared.cfg.skip_first, sp_sched_shared.cfg.skip_first_wait,
                                         sp_sched_shared.cfg.wait,       sp_sched_shared.cfg.warmup,
                                         sp_sched_shared.cfg.active,     sp_sched_shared.cfg.repeat};
    if (!defer)
        say_plan();
    sp_outfile_check_dir(sp_sched_shared.cfg.output_dir); /* an unwritable directory said now, not after the run */
    sp_sched_shared.active = 1;
    switch (sp_sched_shared.cfg.marker.kind) {
    case SP_MARK_KERNEL:
        sp_marker_flags |= SP_MF_KERNEL;
        sp_sched_shared.idle_gate_count = 1;
        break;
    case SP_MARK_PROFILER_API:
        sp_marker_flags |= SP_MF_PROFILER;
        sp_sched_shared.idle_gate_count = 1;
        break;
    default:
        break;
    }
    sp_sched_shared.signal_mode =
        sp_sched_shared.cfg.marker.has_signal && sp_sched_shared.cfg.marker.kind != SP_MARK_NONE;
    sp_sched_shared.signal_only =
        sp_sched_shared.cfg.marker.has_signal && sp_sched_shared.cfg.marker.kind == SP_MARK_NONE;
    if (sp_sched_shared.signal_only)
        sp_sched_shared.idle_gate_count = 1;
    sp_sched_shared.whole_run = !sp_sched_shared.cfg.has_schedule && !sp_sched_shared.signal_mode &&
                                sp_sched_shared.cfg.marker.kind != SP_MARK_NONE &&
                                sp_sched_shared.cfg.marker.kind != SP_MARK_PROFILER_API;
    if (sp_sched_records_from_start() && !defer)
        sp_sched_open_whole_run();
    else
        sp_ev_set_gate(sp_sched_idle_gate());
    pthread_mutex_unlock(&sp_sched_shared.lock);
    if (!exit_handler_registered) {
        exit_handler_registered = 1;
        atexit(sp_sched_exit_handler);
    }
}

int sp_sched_unranked_left_out(void)
{
    return sp_sched_shared.unranked_left_out;
}

const sp_config_t *sp_sched_config(void)
{
    return sp_sched_shared.active ? &sp_sched_shared.cfg : NULL;
}
