/* inject/signals.c — the signal step marker's handler: it only sets a flag
 * (the schedule acts on it at the next step boundary or intercepted call), and
 * chains to a handler the program had installed before us, so the program's
 * own handling still runs. A program that installs its handler after us
 * replaces ours, which is its right. */
#define _GNU_SOURCE
#include "signals.h"

#include "../collectors/log.h"
#include "../schedule/schedule.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static struct sigaction previous;

static void on_signal(int sig, siginfo_t *info, void *uctx)
{
    sp_sched_signal_flag = 1;
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction)
            previous.sa_sigaction(sig, info, uctx);
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler) {
        previous.sa_handler(sig);
    }
}

int sp_signal_install(int signo)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(signo, &sa, &previous) != 0) {
        sp_log(SP_LOG_ERROR, "cannot install the handler for signal %d (%s); the signal marker is off", signo,
               strsignal(signo));
        return -1;
    }
    sp_log(SP_LOG_INFO, "send signal %d (%s) to process %d to record a cycle", signo, strsignal(signo),
           (int)getpid());
    return 0;
}
