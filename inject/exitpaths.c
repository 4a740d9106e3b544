/* inject/exitpaths.c — the ends of a profiled process that atexit does not
 * see: terminating signals, faults and _exit. It owns the handlers stepprof
 * installs for them, the finisher thread that does the work those handlers
 * cannot do, the _exit/_Exit interposers and the at_quick_exit handler
 * (quick_exit reaches _exit inside libc, where no interposer sees it), and
 * pthread_exit on the main thread: bare, the process ends with exit(0) when
 * its last thread ends, but stepprof's own threads never end, so once main
 * has left, a watcher thread ends the process the same way when only
 * stepprof's threads are left. (A program that ends itself by raise or kill
 * of a signal at SIG_DFL: inject/selfsignal.c, through the finisher here.)
 *
 * Writing a trace is not async-signal-safe (malloc, locks, stdio-free but
 * lock-taking code), and the interrupted thread may hold any lock. So a
 * handler does only async-signal-safe things: it posts a semaphore to wake
 * the finisher thread (started at activation with every signal blocked),
 * then sleeps in short nanosleeps until that thread reports done or
 * finalize_timeout_s has passed. The finisher closes the cycle in progress as
 * truncated (the schedule lock is only tried, see schedule.c) and waits for
 * the exporter. Then the handler restores the disposition it found (always
 * SIG_DFL) and re-raises, so the exit status is what it would have been.
 *
 * Rules: a handler is installed only where the disposition is SIG_DFL at
 * activation; a program that installs its own later simply replaces it. A
 * kernel-generated fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL with si_code > 0)
 * does not close the cycle in progress — the faulting thread may have
 * corrupted it or hold the schedule lock — it only waits for traces already
 * complete, then returns with SIG_DFL restored so the faulting instruction
 * runs again and the core shows the real fault. In a fork child, and in a
 * vfork child sharing our memory, the pid differs from the owner's and the
 * handlers and _exit act as if stepprof were not there.
 *
 * It also owns the wait of a normal exit (return from main, exit() on any
 * thread: the schedule's atexit handler calls sp_exit_wait_exports): the
 * other program threads are held (exithold.c), the exporter is waited for
 * up to exit_timeout_s with a progress line every few seconds, and a
 * terminating signal that comes meanwhile does not end the process by that
 * signal: it only shortens the wait to finalize_timeout_s, and the exit
 * status stays the one the program chose. Before an exec (same wait) such a
 * signal ends the process once the wait is over, as it would have bare,
 * instead of letting the new image run. An exit (or exec) on a thread that
 * a signal interrupted inside stepprof, where it may hold the schedule's
 * lock, is finished by the finisher thread instead, as _exit is
 * (sp_exit_finish_elsewhere). Whenever a bound is reached the
 * temporary files are removed and one line says what was lost. */
#define _GNU_SOURCE
#include "exitpaths.h"

#include "../collectors/events.h"
#include "../collectors/log.h"
#include "../exporters/export.h"
#include "../exporters/outfile.h"
#include "../schedule/schedule.h"
#include "exithold.h"
#include "hook.h"

#include "../collectors/threads.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* Every signal whose default action ends the process and that a program
 * commonly dies of: SIGPIPE is `./train | head`, SIGALRM an alarm() without
 * a handler. The schedule blocks the same ones under its lock (schedule.c,
 * through sp_exit_term_sigset). */
static const int term_sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2};
static const int fault_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
#define NTERM (sizeof term_sigs / sizeof term_sigs[0])
#define NFAULT (sizeof fault_sigs / sizeof fault_sigs[0])

static struct sigaction original[NSIG]; /* what we found where we installed */

static sem_t wake;                       /* handler -> finisher */
static _Atomic pid_t owner;              /* process whose finisher runs; 0: none */
static _Atomic int64_t deadline_ns;      /* CLOCK_MONOTONIC; 0: no request yet */
static _Atomic int request;              /* SP_FINISH_* asked for */
static _Atomic int done;
static double timeout_s = 10.0;
static _Atomic pid_t asker;              /* thread waiting in finish_and_wait, 0: none */
static _Atomic int deferred;             /* signal the finisher re-raises itself, 0: none */
static _Atomic int exit_waiting;         /* sp_exit_wait_exports is waiting */
static _Atomic int64_t hurry_ns;         /* a signal came meanwhile: wait until then */
static _Atomic int hurry_sig;            /* and which */
#define PROGRESS_NS 5000000000LL         /* a line every 5 s of a long exit wait */

typedef void (*exit_fn)(int);
static exit_fn real_exit;
typedef void (*pthread_exit_fn)(void *);
static pthread_exit_fn real_pthread_exit;
static _Atomic int main_gone;            /* the main thread called pthread_exit */
static _Atomic int watching;             /* the watcher of the last thread runs */

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The finisher overran the deadline: its temporaries go, one line says so
 * (async-signal-safe: a fixed message, unlink, write). */
static void give_up(void)
{
    if (sp_outfile_abandoned())
        return;
    static const char msg[] = "stepprof: finalize_timeout_s reached: the traces being written are lost, "
                              "their temporary files removed\n";
    sp_outfile_abandon();
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
}

/* raise(sig) without stepprof's own raise (selfsignal.c), which would ask
 * for the finish under way again. Async-signal-safe. */
static void raise_real(int sig)
{
    syscall(SYS_tgkill, (long)getpid(), (long)syscall(SYS_gettid), (long)sig);
}

/* Ends the process by sig with its original disposition, from the calling
 * thread (which unblocks it). Async-signal-safe. */
static void end_by(int sig)
{
    sigaction(sig, &original[sig], NULL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise_real(sig);
}

/* Async-signal-safe: atomics, sem_post, getpid, clock_gettime, nanosleep.
 * The first caller sets the deadline and wakes the finisher; every caller
 * (two threads may be ending the process at once) waits for the same end. */
static void finish_and_wait(int how)
{
    if (atomic_load(&owner) != getpid())
        return;
    int64_t none = 0, dl = mono_ns() + (int64_t)(timeout_s * 1e9);
    if (atomic_compare_exchange_strong(&deadline_ns, &none, dl)) {
        atomic_store(&request, how);
        atomic_store(&asker, (pid_t)syscall(SYS_gettid));
        sem_post(&wake);
    }
    /* The finisher's own wait ends at the deadline and then says what was
     * lost: a moment's grace to let it. */
    while (!atomic_load(&done) && mono_ns() < atomic_load(&deadline_ns) + 500000000LL) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    if (!atomic_load(&done))
        give_up();
}

void sp_exit_finish_elsewhere(void)
{
    if (!sp_outfile_abandoned())
        finish_and_wait(SP_FINISH_EXIT);
}

void sp_exit_finish_for_signal(void)
{
    if (!sp_outfile_abandoned())
        finish_and_wait(SP_FINISH_SIGNAL);
}

/* The emergency end of a deferred signal whose finish did not end by the
 * deadline (called by a held thread, exithold.c): async-signal-safe. */
void sp_exit_check_deadline(void)
{
    int sig = atomic_load(&deferred);
    if (!sig || atomic_load(&done) || mono_ns() < atomic_load(&deadline_ns) + 500000000LL)
        return;
    give_up();
    end_by(sig);
}

static void *finisher_main(void *arg)
{
    (void)arg;
    while (sem_wait(&wake) != 0 && errno == EINTR)
        ;
    int how = atomic_load(&request);
    /* Bare, the process would be gone: its other threads stay where they are
     * (the one waiting in a handler or in _exit is already still). */
    if (how != SP_FINISH_DRAIN)
        sp_exit_hold_others(atomic_load(&asker), NULL);
    double left = (double)(atomic_load(&deadline_ns) - mono_ns()) * 1e-9;
    sp_sched_finish_bounded(how, left > 0 ? left : 0);
    atomic_store(&done, 1);
    int sig = atomic_load(&deferred);
    if (sig) {
        /* The signal hit a thread inside stepprof: it is ended here, with
         * the original disposition, so the status is still the signal's. */
        end_by(sig);
        sp_exit_release_others(); /* the program made it harmless meanwhile */
    }
    return NULL;
}

void sp_exit_term_sigset(sigset_t *set)
{
    sigemptyset(set);
    for (size_t i = 0; i < NTERM; i++)
        sigaddset(set, term_sigs[i]);
}

int sp_exit_is_term_signal(int sig)
{
    for (size_t i = 0; i < NTERM; i++)
        if (term_sigs[i] == sig)
            return 1;
    return 0;
}

static int is_fault(int sig)
{
    for (size_t i = 0; i < NFAULT; i++)
        if (fault_sigs[i] == sig)
            return 1;
    return 0;
}

static void on_end_signal(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    int saved = errno;
    int fault = is_fault(sig) && si && si->si_code > 0;
    if (!fault && atomic_load(&exit_waiting) && atomic_load(&owner) == getpid()) {
        /* The program is already exiting with a status of its own: the
         * signal only shortens the wait (async-signal-safe: atomics). */
        int64_t none = 0;
        if (atomic_compare_exchange_strong(&hurry_ns, &none, mono_ns() + (int64_t)(timeout_s * 1e9)))
            atomic_store(&hurry_sig, sig);
        errno = saved;
        return;
    }
    sp_thread_t *self = sp_ev_self;
    if (!fault && sig != SIGABRT && self && self->in_hook && atomic_load(&owner) == getpid()) {
        /* Inside stepprof (or a CUDA call under it) this thread may hold a
         * lock the finisher needs: it goes on, with the terminating signals
         * blocked, until it is out and held (exithold.c); the finisher then
         * ends the process by this signal. */
        ucontext_t *uc = uctx;
        for (size_t i = 0; i < NTERM; i++)
            sigaddset(&uc->uc_sigmask, term_sigs[i]);
        int64_t none = 0, dl = mono_ns() + (int64_t)(timeout_s * 1e9);
        if (atomic_compare_exchange_strong(&deadline_ns, &none, dl)) {
            atomic_store(&deferred, sig);
            atomic_store(&request, SP_FINISH_SIGNAL);
            sem_post(&wake);
        }
        errno = saved;
        return;
    }
    finish_and_wait(fault ? SP_FINISH_DRAIN : SP_FINISH_SIGNAL);
    sigaction(sig, &original[sig], NULL);
    /* Blocked while we run (no SA_NODEFER): delivered, now with the
     * original disposition, as soon as the handler returns. A real fault
     * needs no raise: the instruction faults again. */
    if (!fault)
        raise_real(sig);
    errno = saved;
}

static int is_ours(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_end_signal;
}

static void install(int sig, const sigset_t *mask)
{
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) != 0 || is_ours(&cur))
        return; /* an inherited handler of ours keeps its saved original */
    if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL)
        return; /* the program's handler, or SIG_IGN: not ours to touch */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_end_signal;
    sa.sa_flags = SA_SIGINFO;
    sa.sa_mask = *mask;
    original[sig] = cur;
    if (sigaction(sig, &sa, NULL) != 0)
        sp_log(SP_LOG_DEBUG, "cannot watch signal %d (%s)", sig, strerror(errno));
}

/* Whether every thread but the caller is stepprof's (named "stepprof-*")
 * or has ended (the main thread stays listed, a zombie, until the process
 * ends). */
static int only_ours_left(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    pid_t self = (pid_t)syscall(SYS_gettid);
    int only = 1;
    struct dirent *e;
    while (only && (e = readdir(d))) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid <= 0 || tid == self)
            continue;
        char stat[512];
        int ours = 0;
        const char *state = sp_task_stat(tid, stat, sizeof stat, &ours);
        if (state) /* NULL: ended meanwhile */
            only = ours || *state == 'Z' || *state == 'X';
    }
    closedir(d);
    return only;
}

static void *last_thread_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec ms10 = {0, 10000000};
        nanosleep(&ms10, NULL);
        if (only_ours_left())
            exit(0); /* what glibc does when the last thread ends */
    }
    return NULL;
}

/* Once main has left in an activated process: the first call starts the
 * watcher. */
static void watch_last_thread(void)
{
    int no = 0;
    if (atomic_load(&main_gone) && atomic_load(&owner) == getpid() &&
        atomic_compare_exchange_strong(&watching, &no, 1) &&
        sp_thread_spawn(last_thread_main, NULL, "stepprof-last", NULL) != 0)
        sp_log(SP_LOG_WARN, "the main thread has ended and no thread watches for the last one: the process "
                            "will not end by itself when its other threads have");
}

void sp_exit_install(double timeout)
{
    timeout_s = timeout;
    atomic_store(&deadline_ns, 0);
    atomic_store(&done, 0);
    if (sem_init(&wake, 0, 0) != 0) {
        sp_log(SP_LOG_WARN, "no finisher thread (%s): a signal that ends the program loses the cycle in progress",
               strerror(errno));
        return;
    }
    pthread_t th;
    int rc = sp_thread_spawn(finisher_main, NULL, "stepprof-fin", &th);
    if (rc != 0) {
        sp_log(SP_LOG_WARN, "no finisher thread (%s): a signal that ends the program loses the cycle in progress",
               strerror(rc));
        return;
    }
    atomic_store(&owner, getpid());
    /* quick_exit: the same as _exit. Registered now, like the schedule's
     * atexit handler, so the program's handlers registered later run first,
     * as they do before an interposed _exit. */
    static int quick_exit_registered; /* survives fork: so does the at_quick_exit list */
    if (!quick_exit_registered)
        quick_exit_registered = at_quick_exit(sp_exit_finish_elsewhere) == 0;
    /* A second terminating signal waits until the first is handled. */
    sigset_t mask;
    sigemptyset(&mask);
    for (size_t i = 0; i < NTERM; i++)
        sigaddset(&mask, term_sigs[i]);
    for (size_t i = 0; i < NTERM; i++)
        install(term_sigs[i], &mask);
    for (size_t i = 0; i < NFAULT; i++)
        install(fault_sigs[i], &mask);
    watch_last_thread(); /* main may have left before the first CUDA call */
}

void sp_exit_after_fork_child(void)
{
    atomic_store(&owner, 0);
    atomic_store(&main_gone, 0); /* the child's only thread is alive */
    atomic_store(&watching, 0);
}

void sp_exit_preinit(void)
{
    real_exit = (exit_fn)dlsym(RTLD_NEXT, "_exit");
    real_pthread_exit = (pthread_exit_fn)dlsym(RTLD_NEXT, "pthread_exit");
    sp_exec_preinit();
    sp_selfsignal_preinit();
}

int sp_exit_is_owner(void)
{
    return atomic_load(&owner) == getpid();
}

/* _exit skips atexit, but a process that used CUDA and ends this way (a
 * worker finishing with os._exit) should still leave its trace; _exit is
 * also what signal handlers call, hence the same signal-safe path. */
static _Noreturn void end_now(int status)
{
    if (!sp_outfile_abandoned()) /* an exit that gave up waiting does not wait again */
        finish_and_wait(SP_FINISH_EXIT);
    if (real_exit)
        real_exit(status);
    for (;;)
        syscall(SYS_exit_group, status);
}

SP_EXPORT void pthread_exit(void *retval)
{
    if ((pid_t)syscall(SYS_gettid) == getpid()) {
        int saved = errno;
        atomic_store(&main_gone, 1);
        watch_last_thread();
        errno = saved;
    }
    if (!real_pthread_exit)
        real_pthread_exit = (pthread_exit_fn)dlsym(RTLD_NEXT, "pthread_exit");
    real_pthread_exit(retval);
    __builtin_unreachable();
}

SP_EXPORT void _exit(int status)
{
    end_now(status);
}

SP_EXPORT void _Exit(int status)
{
    end_now(status);
}

static int exports_written(void)
{
    return sp_export_drain(0) == 0;
}

void sp_exit_report_lost(const char *key, double limit_s)
{
    uint64_t events = 0;
    unsigned jobs = sp_export_pending(&events);
    /* The job may still be collecting its records: its count comes within
     * moments, and the line is worth it. */
    for (int i = 0; i < 100 && jobs && !events; i++) {
        struct timespec ms10 = {0, 10000000};
        nanosleep(&ms10, NULL);
        jobs = sp_export_pending(&events);
    }
    /* Abandoned first, counted after: a trace whose rename won over the
     * abandon is whole, and not said lost (outfile.c). */
    int removed = sp_outfile_abandon();
    jobs = sp_export_pending(NULL);
    if (!jobs) {
        if (removed)
            sp_log(SP_LOG_ERROR,
                   "%s (%.0f s) reached at the end of the process: the last trace is whole; %d of its report "
                   "files being written lost, temporary files removed; a larger %s would have kept them",
                   key, limit_s, removed, key);
        else if (!exports_written()) /* a report not begun yet: it dies with the process */
            sp_log(SP_LOG_ERROR,
                   "%s (%.0f s) reached at the end of the process: the last trace is whole; its report files "
                   "not written yet are lost; a larger %s would have kept them",
                   key, limit_s, key);
        return;
    }
    char more[96] = "";
    if (jobs > 1)
        snprintf(more, sizeof more, " and %u queued trace%s", jobs - 1, jobs > 2 ? "s" : "");
    sp_log(SP_LOG_ERROR,
           "%s (%.0f s) reached at the end of the process: the trace being written (%" PRIu64 " events)%s%s "
           "lost, temporary files removed; a larger %s would have kept them",
           key, limit_s, events, more, jobs > 1 ? " are" : " is", key);
}

int sp_exit_wait_exports(double limit_s)
{
    int64_t t0 = mono_ns(), note = t0 + PROGRESS_NS;
    atomic_store(&hurry_sig, 0);
    atomic_store(&hurry_ns, 0);
    atomic_store(&exit_waiting, 1);
    sp_exit_hold_others(0, exports_written);
    int rc = 0;
    for (;;) {
        double left = limit_s - (double)(mono_ns() - t0) * 1e-9;
        if (sp_export_drain(left < 0.1 ? (left > 0 ? left : 0) : 0.1) == 0)
            break;
        int64_t now = mono_ns(), hurry = atomic_load(&hurry_ns);
        sp_exit_hold_check(now);
        if (hurry && now >= hurry) {
            sp_exit_report_lost("finalize_timeout_s", timeout_s);
            rc = -1;
            break;
        }
        if ((double)(now - t0) >= limit_s * 1e9) {
            sp_exit_report_lost("exit_timeout_s", limit_s);
            rc = -1;
            break;
        }
        if (now >= note) {
            uint64_t events = 0;
            unsigned jobs = sp_export_pending(&events);
            sp_log(SP_LOG_WARN, "still writing traces at exit: %.0f s so far, %u left, %" PRIu64
                   " events in the current one (exit_timeout_s: %.0f)", (double)(now - t0) * 1e-9, jobs, events,
                   limit_s);
            note += PROGRESS_NS;
        }
    }
    atomic_store(&exit_waiting, 0);
    sp_exit_release_others();
    return rc;
}

void sp_exit_signal_after_exec_wait(void)
{
    int sig = atomic_load(&hurry_sig);
    if (sig && atomic_load(&owner) == getpid())
        end_by(sig);
}
