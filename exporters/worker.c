/* exporters/worker.c — the background exporter thread, so the training
 * thread that ends a cycle does not wait for its files. Jobs queue in a
 * linked list under a mutex; the thread is created on the first job with
 * every signal blocked (the program's signals must reach its own threads).
 * Draining at exit waits with a deadline: a stuck write must not hang the
 * program's exit. A write past RLIMIT_FSIZE raises SIGXFSZ on the writing
 * thread, whose default action kills the whole program: the exporter thread
 * has it blocked with everything else (the write then fails with EFBIG and
 * that cycle is dropped), and a job run on a program thread blocks it for the
 * duration and discards the one it caused. */
#include "export.h"

#include "../collectors/cupti.h"
#include "../collectors/threads.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct node {
    sp_export_job_t job;
    struct node *next;
} node_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;
static node_t *head, *tail;
static int busy;
static int started;
/* Jobs whose CUPTI records are still to be collected go first to a second
 * thread, in the order their windows closed: the device sync and the flush
 * then follow the close at once, even while a long export runs (and the exit
 * waits only for those, not for the exports, before it holds the program's
 * threads: sp_export_wait_collects). */
static node_t *chead, *ctail;
static int cbusy, cstarted;
static pthread_cond_t cwake = PTHREAD_COND_INITIALIZER;

static void deadline_in(struct timespec *dl, double timeout_s)
{
    if (timeout_s < 0)
        timeout_s = 0;
    clock_gettime(CLOCK_REALTIME, dl);
    dl->tv_sec += (time_t)timeout_s;
    dl->tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
    if (dl->tv_nsec >= 1000000000L) {
        dl->tv_sec++;
        dl->tv_nsec -= 1000000000L;
    }
}

/* sp_export_run on the caller's thread, shielded from SIGXFSZ. */
static void run_here(const sp_export_job_t *job)
{
    sigset_t xfsz, old, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &old);
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGXFSZ);
    sp_export_run(job);
    sigpending(&pending);
    if (!was_pending && sigismember(&pending, SIGXFSZ)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&xfsz, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void *worker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!head)
            pthread_cond_wait(&wake, &lock);
        node_t *n = head;
        head = n->next;
        if (!head)
            tail = NULL;
        busy = 1;
        pthread_mutex_unlock(&lock);
        sp_export_run(&n->job);
        free(n);
        pthread_mutex_lock(&lock);
        busy = 0;
        if (!head)
            pthread_cond_broadcast(&idle);
    }
    return NULL;
}

static int start_worker(void)
{
    int rc = sp_thread_spawn(worker_main, NULL, "stepprof-export", NULL);
    return rc;
}

/* Called with `lock` held. */
static void enqueue_export(node_t *n)
{
    n->next = NULL;
    if (tail)
        tail->next = n;
    else
        head = n;
    tail = n;
    pthread_cond_signal(&wake);
}

static void *collector_main(void *arg)
{
    (void)arg;
    sp_cupti_collector_thread();
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!chead)
            pthread_cond_wait(&cwake, &lock);
        node_t *n = chead;
        chead = n->next;
        if (!chead)
            ctail = NULL;
        cbusy = 1;
        pthread_mutex_unlock(&lock);
        sp_export_collect_gpu(&n->job);
        pthread_mutex_lock(&lock);
        cbusy = 0;
        if (started > 0) {
            enqueue_export(n);
        } else {
            pthread_mutex_unlock(&lock);
            run_here(&n->job);
            free(n);
            pthread_mutex_lock(&lock);
        }
        if (!chead)
            pthread_cond_broadcast(&idle);
    }
    return NULL;
}

void sp_export_submit(const sp_export_job_t *job)
{
    node_t *n = malloc(sizeof *n);
    if (!n) {
        run_here(job);
        return;
    }
    n->job = *job;
    n->next = NULL;
    pthread_mutex_lock(&lock);
    if (!started)
        started = start_worker() == 0 ? 1 : -1;
    if (started > 0 && job->gpu_collect && !cstarted)
        cstarted = sp_thread_spawn(collector_main, NULL, "stepprof-collect", NULL) == 0 ? 1 : -1;
    if (started > 0 && job->gpu_collect && cstarted > 0) {
        if (ctail)
            ctail->next = n;
        else
            chead = n;
        ctail = n;
        pthread_cond_signal(&cwake);
        pthread_mutex_unlock(&lock);
        return;
    }
    if (started < 0) {   /* sp_export_run collects on this thread too */
        pthread_mutex_unlock(&lock);
        run_here(job);
        free(n);
        return;
    }
    enqueue_export(n);
    pthread_mutex_unlock(&lock);
}

int sp_export_wait_collects(double timeout_s)
{
    struct timespec dl;
    deadline_in(&dl, timeout_s);
    int rc = 0;
    pthread_mutex_lock(&lock);
    while ((chead || cbusy) && rc == 0)
        rc = pthread_cond_timedwait(&idle, &lock, &dl);
    int done = !chead && !cbusy;
    pthread_mutex_unlock(&lock);
    return done ? 0 : -1;
}

int sp_export_drain(double timeout_s)
{
    struct timespec dl;
    deadline_in(&dl, timeout_s);
    int rc = 0;
    pthread_mutex_lock(&lock);
    while ((head || busy || chead || cbusy) && rc == 0)
        rc = pthread_cond_timedwait(&idle, &lock, &dl);
    int drained = !head && !busy && !chead && !cbusy;
    pthread_mutex_unlock(&lock);
    return drained ? 0 : -1;
}

unsigned sp_export_pending(uint64_t *events)
{
    unsigned k = 0;
    pthread_mutex_lock(&lock);
    for (node_t *n = head; n; n = n->next)
        k++;
    for (node_t *n = chead; n; n = n->next)
        k++;
    k += (busy ? 1u : 0u) + (cbusy ? 1u : 0u);
    pthread_mutex_unlock(&lock);
    if (events)
        *events = sp_export_running_events();
    return k;
}

void sp_export_after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&wake, NULL);
    pthread_cond_init(&idle, NULL);
    pthread_cond_init(&cwake, NULL);
    head = tail = NULL;
    chead = ctail = NULL;
    busy = cbusy = 0;
    started = cstarted = 0;
}
