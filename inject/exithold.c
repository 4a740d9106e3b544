/* inject/exithold.c — holding the program's other threads while the exit
 * waits for stepprof's files. Bare, a process whose thread calls exit() ends
 * within microseconds; waiting seconds for a trace must not let the other
 * threads run on meanwhile (print, return from main with another status,
 * call exit again): "no thread runs user code it would not have run bare".
 *
 * sp_exit_hold_others sends a real-time signal to each other thread of the
 * program (not stepprof's own: the exporter runs on). Its handler parks the thread in a futex wait
 * with every signal blocked, unless the thread is inside one of stepprof's
 * interposers, or inside the C library or the dynamic loader other than
 * blocked in a system call (malloc holding an arena's lock, dlopen holding
 * the loader's): it may hold a lock the exporter needs, and the exit would
 * wait for it forever. Then it returns and the signal is sent again a
 * millisecond later, by when it has left. Threads
 * that are not parked within HOLD_WAIT_MS, or by the time the exports are
 * written, are left running (a line at debug level). sp_exit_release_others lets them all go; the exit then goes on as
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
#include <link.h>
#include <linux/futex.h>
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

#define HOLD_WAIT_MS 200
#define MAX_HELD 4096

static _Atomic int hold;           /* futex word: 1 while threads must stay parked */
static _Atomic int parked;         /* threads in the handler now */
static _Atomic int nheld;          /* entries of held[] */
static _Atomic pid_t held[MAX_HELD]; /* threads that have parked */
static int hold_sig;               /* 0: not holding */

/* The executable segments of libc and the dynamic loader, found before the
 * first hold signal is sent (the handler only compares addresses). */
#define MAX_TEXT 8
static struct {
    uintptr_t lo, hi;
} libc_text[MAX_TEXT];
static int nlibc_text;

static int find_libc_text(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    name = name ? name + 1 : info->dlpi_name ? info->dlpi_name : "";
    if (strncmp(name, "libc.so", 7) != 0 && strncmp(name, "ld-linux", 8) != 0)
        return 0;
    for (int i = 0; i < info->dlpi_phnum && nlibc_text < MAX_TEXT; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            libc_text[nlibc_text].lo = info->dlpi_addr + ph->p_vaddr;
            libc_text[nlibc_text].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
            nlibc_text++;
        }
    }
    return 0;
}

/* Interrupted inside libc or the loader, where it may hold one of their
 * locks, and not blocked in a system call there (the kernel then leaves the
 * pc on the syscall instruction to restart it, or just after it with
 * -EINTR; a call that completed, mmap inside malloc, has neither).
 * Async-signal-safe. */
static int inside_libc(const void *uctx)
{
#if defined(__x86_64__)
    const ucontext_t *uc = uctx;
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    int in = 0;
    for (int i = 0; i < nlibc_text && !in; i++)
        in = pc >= libc_text[i].lo + 2 && pc + 2 <= libc_text[i].hi;
    if (!in)
        return 0;
    const unsigned char *ip = (const unsigned char *)pc;
    if (ip[0] == 0x0f && ip[1] == 0x05)
        return 0;
    if (ip[-2] == 0x0f && ip[-1] == 0x05 && uc->uc_mcontext.gregs[REG_RAX] == -EINTR)
        return 0;
    return 1;
#else
    (void)uctx;
    return 0;
#endif
}

static void on_hold(int sig, siginfo_t *si, void *uctx)
{
    (void)sig;
    (void)si;
    int saved = errno;
    sp_thread_t *t = sp_ev_self;
    if ((t && t->in_hook) || inside_libc(uctx)) { /* asked again once it is out */
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
static int ours(pid_t tid)
{
    char path[64], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 1; /* ended meanwhile */
    int r = fgets(name, sizeof name, f) != NULL && strncmp(name, "stepprof-", 9) == 0;
    fclose(f);
    return r;
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
    if (!nlibc_text)
        dl_iterate_phdr(find_libc_text, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_hold;
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    sigfillset(&sa.sa_mask); /* a parked thread takes no other signal */
    atomic_store(&hold, 1);
    if (sigaction(sig, &sa, NULL) != 0)
        return;
    hold_sig = sig;
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
