/* inject/exithold.c — holding the program's other threads while the exit
 * waits for stepprof's files. Bare, a process whose thread calls exit() ends
 * within microseconds; waiting seconds for a trace must not let the other
 * threads run on meanwhile (print, return from main with another status,
 * call exit again): "no thread runs user code it would not have run bare".
 *
 * sp_exit_hold_others sends a real-time signal to each other thread of the
 * program (not stepprof's own: the exporter runs on). Its handler parks the thread in a futex wait
 * with every signal blocked, unless the thread is inside one of stepprof's
 * interposers (it may hold a lock the exporter needs): then it returns and
 * the signal is sent again a millisecond later, by when it has left. Threads
 * that are not parked within HOLD_WAIT_MS, or by the time the exports are
 * written, are left running (a line at debug level). A held thread may have
 * been stopped inside malloc, holding its arena's lock, which the exporter
 * then waits for: so while threads are held, the exit's wait checks that
 * stepprof's own threads still use CPU time, and when they have used none for
 * STALL_NS, it lets the held threads go (sp_exit_hold_check), the export
 * finishing as if they had never been held. sp_exit_release_others lets them all go; the exit then goes on as
 * it would have bare. The handler stays installed (a no-op once released):
 * a signal still queued for a thread must not meet SIG_DFL, which for a
 * real-time signal ends the process. */
#define _GNU_SOURCE
#include "exithold.h"

#include "../collectors/events.h"
#include "../collectors/log.h"
#include "exitpaths.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define HOLD_WAIT_MS 200
#define MAX_HELD 4096
#define STALL_NS 1000000000LL      /* stepprof's threads used no CPU for this long: release */

static _Atomic int hold;           /* futex word: 1 while threads must stay parked */
static _Atomic int parked;         /* threads in the handler now */
static _Atomic int nheld;          /* entries of held[] */
static _Atomic pid_t held[MAX_HELD]; /* threads that have parked */
static int hold_sig;               /* 0: not holding */
static unsigned long long last_ticks; /* stepprof's threads' CPU time at the last check */
static int64_t last_change_ns;     /* when it last changed; 0: not checked yet */

static void on_hold(int sig)
{
    (void)sig;
    int saved = errno;
    sp_thread_t *t = sp_ev_self;
    if (t && t->in_hook) { /* inside stepprof: asked again once it is out */
        errno = saved;
        return;
    }
    atomic_fetch_add(&parked, 1);
    int k = atomic_fetch_add(&nheld, 1);
    if (k < MAX_HELD)
        atomic_store(&held[k], (pid_t)syscall(SYS_gettid));
    while (atomic_load(&hold)) {
        struct timespec ts = {0, 100000000};
        syscall(SYS_futex, &hold, FUTEX_WAIT_PRIVATE, 1, &ts, NULL, 0);
        sp_exit_check_deadline();
    }
    atomic_fetch_sub(&parked, 1);
    errno = saved;
}

/* The highest real-time signal the program leaves at its default. */
static int pick_signal(void)
{
    for (int s = SIGRTMAX; s >= SIGRTMIN; s--) {
        struct sigaction cur;
        if (sigaction(s, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL)
            return s;
    }
    return 0;
}

/* stepprof's own threads (named "stepprof-*" by sp_thread_spawn, every
 * signal blocked for good) are not held: the exporter must run on. A program
 * thread that blocks the signal now may unblock it soon (it may be inside
 * pthread_create, which blocks everything for a moment): it is waited for
 * like the others, up to HOLD_WAIT_MS. */
const char *sp_task_stat(pid_t tid, char *buf, size_t len, int *ours)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t k = read(fd, buf, len - 1);
    close(fd);
    buf[k > 0 ? k : 0] = 0;
    /* "tid (name) state ...": the name may hold spaces and parentheses. */
    char *open_ = strchr(buf, '('), *close_ = strrchr(buf, ')');
    if (!open_ || !close_ || close_[1] != ' ')
        return NULL;
    *ours = strncmp(open_ + 1, "stepprof-", 9) == 0;
    return close_ + 2;
}

static int ours(pid_t tid)
{
    char stat[512];
    int o = 1;
    return sp_task_stat(tid, stat, sizeof stat, &o) ? o : 1; /* ended meanwhile: not to hold */
}

/* The program's other threads, at most max. */
static int targets(pid_t *out, int max, pid_t skip)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    pid_t self = (pid_t)syscall(SYS_gettid);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid > 0 && tid != self && tid != skip && !ours(tid))
            out[n++] = tid;
    }
    closedir(d);
    return n;
}

static int is_held(pid_t tid)
{
    int k = atomic_load(&nheld);
    for (int i = 0; i < k && i < MAX_HELD; i++)
        if (atomic_load(&held[i]) == tid)
            return 1;
    return 0;
}

void sp_exit_hold_others(pid_t skip, int (*done)(void))
{
    if (hold_sig)
        return;
    int sig = pick_signal();
    if (!sig)
        return;
    static pid_t tids[MAX_HELD];
    int n = targets(tids, MAX_HELD, skip);
    if (n == 0) {
        sp_log(SP_LOG_DEBUG, "exit: no other thread to hold");
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_hold;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask); /* a parked thread takes no other signal */
    atomic_store(&hold, 1);
    if (sigaction(sig, &sa, NULL) != 0)
        return;
    hold_sig = sig;
    last_change_ns = 0;
    pid_t pid = getpid();
    int left = n;
    for (int ms = 0; ms < HOLD_WAIT_MS && left > 0 && !(done && done()); ms++) {
        left = 0;
        for (int i = 0; i < n; i++) {
            if (!tids[i] || is_held(tids[i])) {
                tids[i] = 0;
                continue;
            }
            if (syscall(SYS_tgkill, pid, tids[i], sig) != 0)
                tids[i] = 0; /* it has ended meanwhile */
            else
                left++;
        }
        struct timespec ms1 = {0, 1000000};
        nanosleep(&ms1, NULL);
    }
    if (left && done && done())
        sp_log(SP_LOG_DEBUG, "exit: %d of %d other threads held: the files were written first", n - left, n);
    else
        sp_log(SP_LOG_DEBUG, "exit: %d of %d other threads held while the last files are written", n - left, n);
}

/* CPU time (clock ticks) used so far by stepprof's own threads. No malloc
 * (no opendir, no stdio): the caller runs while a held thread may have an
 * arena's lock. */
static unsigned long long our_cpu_ticks(void)
{
    int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    unsigned long long sum = 0;
    char ents[4096];
    long n;
    while ((n = syscall(SYS_getdents64, dfd, ents, sizeof ents)) > 0) {
        for (long off = 0; off < n;) {
            struct linux_dirent64 {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *e = (void *)(ents + off);
            off += e->reclen;
            int tid = atoi(e->name);
            if (tid <= 0)
                continue;
            char stat[512];
            int o = 0;
            const char *p = sp_task_stat(tid, stat, sizeof stat, &o);
            if (!p || !o)
                continue;
            /* From the state on: 10 more fields, then utime and stime. */
            for (int field = 0; field < 11 && p; field++)
                p = (p = strchr(p, ' ')) ? p + 1 : NULL;
            if (p) {
                char *end;
                unsigned long long ut = strtoull(p, &end, 10);
                sum += ut + strtoull(end, NULL, 10);
            }
        }
    }
    close(dfd);
    return sum;
}

void sp_exit_hold_check(int64_t now_ns)
{
    if (!hold_sig)
        return;
    unsigned long long ticks = our_cpu_ticks();
    if (ticks != last_ticks || !last_change_ns) {
        last_ticks = ticks;
        last_change_ns = now_ns;
        return;
    }
    if (now_ns - last_change_ns < STALL_NS)
        return;
    sp_log(SP_LOG_DEBUG, "exit: the files made no progress for %.0f s with the other threads held (one may hold "
           "a lock the exporter needs): they run on", (double)STALL_NS * 1e-9);
    sp_exit_release_others();
}

void sp_exit_release_others(void)
{
    if (!hold_sig)
        return;
    atomic_store(&hold, 0);
    syscall(SYS_futex, &hold, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
    hold_sig = 0;
    for (int i = 0; i < 1000 && atomic_load(&parked) > 0; i++) {
        struct timespec ms1 = {0, 1000000};
        nanosleep(&ms1, NULL);
    }
}
