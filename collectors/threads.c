/* collectors/threads.c — see threads.h. The creating thread's mask is
 * blocked around pthread_create because the new thread inherits it. */
#define _GNU_SOURCE
#include "threads.h"

#include <signal.h>

int sp_thread_spawn(void *(*fn)(void *), void *arg, const char *name, pthread_t *out)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) {
        if (name)
            pthread_setname_np(th, name);
        if (out)
            *out = th;
    }
    return rc;
}
