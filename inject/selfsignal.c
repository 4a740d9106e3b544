/* inject/selfsignal.c — a program that ends itself by a terminating signal at
 * its default disposition: Python after an uncaught KeyboardInterrupt (once
 * finalized it restores SIG_DFL and kill()s itself by SIGINT), or a C/C++
 * program whose own handler cleans up, restores SIG_DFL and re-raises (the
 * usual idiom: glog's and absl's handlers for SIGTERM and SIGABRT). stepprof's
 * handler is never installed over the program's (exitpaths.c) and no atexit
 * runs, so the cycle in progress and every queued trace were lost, and a
 * `.tmp.<pid>` file could be left behind. The interposers of raise, kill (of
 * the caller's own process) and pthread_kill (of the calling thread) have the
 * finisher write them first, within finalize_timeout_s as for _exit
 * (exitpaths.c), then send the signal: the status is still the signal's.
 *
 * Only where the signal ends the process: one of exitpaths.c's terminating
 * signals, its disposition SIG_DFL, in the process stepprof activated in. A
 * handler re-raising its own signal has it blocked (it arrives as the handler
 * returns); the threads held meanwhile are let go then, in case the program
 * unblocks it only later, or never. Faults (SIGSEGV & co.)
 * re-raised by a crash handler are left alone, as exitpaths.c decides for
 * faults. Every other call is the real one, after one compare. */
#define _GNU_SOURCE
#include "exithold.h"
#include "exitpaths.h"
#include "hook.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

typedef int (*raise_fn)(int);
typedef int (*kill_fn)(pid_t, int);
typedef int (*pthread_kill_fn)(pthread_t, int);
/* Resolved by the constructor: raise is called from signal handlers, where
 * dlsym is not safe. */
static raise_fn real_raise;
static kill_fn real_kill;
static pthread_kill_fn real_pthread_kill;

void sp_selfsignal_preinit(void)
{
    real_raise = (raise_fn)dlsym(RTLD_NEXT, "raise");
    real_kill = (kill_fn)dlsym(RTLD_NEXT, "kill");
    real_pthread_kill = (pthread_kill_fn)dlsym(RTLD_NEXT, "pthread_kill");
}

static void before_own_end(int sig)
{
    int saved = errno;
    struct sigaction now;
    sigset_t blocked;
    if (sp_exit_is_owner() && sp_exit_is_term_signal(sig) && sigaction(sig, NULL, &now) == 0 &&
        !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL && pthread_sigmask(SIG_BLOCK, NULL, &blocked) == 0) {
        sp_exit_finish_for_signal();
        /* Blocked: the program's handler of this very signal re-raising it (the process ends as the
         * handler returns). Should it not end, its other threads must not stay held. */
        if (sigismember(&blocked, sig))
            sp_exit_release_others();
    }
    errno = saved;
}

SP_EXPORT int raise(int sig)
{
    if (!real_raise)   /* called before the constructor ran */
        sp_selfsignal_preinit();
    before_own_end(sig);
    return real_raise(sig);
}

SP_EXPORT int kill(pid_t pid, int sig)
{
    if (!real_kill)
        sp_selfsignal_preinit();
    if (pid == 0 || pid == getpid())   /* 0: the caller's process group, the caller included */
        before_own_end(sig);
    return real_kill(pid, sig);
}

SP_EXPORT int pthread_kill(pthread_t thread, int sig)
{
    if (!real_pthread_kill)
        sp_selfsignal_preinit();
    if (pthread_equal(thread, pthread_self()))
        before_own_end(sig);
    return real_pthread_kill(thread, sig);
}
