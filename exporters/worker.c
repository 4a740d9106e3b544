/* exporters/worker.c — the background exporter thread, so the training
 * thread that ends a cycle does not wait for its files, and before it the
 * collecting thread, which gathers a closed window's CUPTI records (device
 * sync, flush, take) right after the close. Jobs queue in linked lists under
 * one mutex; each thread is created on the first job that needs it, with
 * every signal blocked (the program's signals must reach its own threads).
 * A third thread, started with the exporter, computes an export's reports
 * beside it (sp_export_beside). The collecting thread, idle while an export
 * runs, also warms CUPTI buffers a collect gave back when recording goes on
 * (ask_rewarm), after any collect queued. Draining at exit waits with a
 * deadline: a stuck write must not hang the program's exit. A write past
 * RLIMIT_FSIZE raises SIGXFSZ on the writing thread, whose default action
 * kills the whole program: the exporter thread has it blocked with
 * everything else (the write then fails with EFBIG and that cycle is
 * dropped), and a job run on a program thread blocks it for the duration and
 * discards the one it caused. */
#define _GNU_SOURCE
#include "export.h"

#include "../collectors/cupti.h"
#include "../collectors/threads.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct node {
    sp_export_job_t job;
    struct node *next;
} node_t;

/* A job queue and the thread that works it, under the one `lock`. */
typedef struct queue {
    node_t *head, *tail;
    int busy;      /* the thread is working on a job it popped */
    int started;   /* 0 not yet, 1 running, -1 could not start */
    pthread_cond_t wake;
    sem_t *posts;  /* instead of `wake`: a post per job (the collecting thread's, see collector_wake) */
} queue_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;   /* broadcast when a queue empties */

/* Nodes for a job whose malloc failed, so that every export still runs on
 * the exporter's thread, one at a time: running it on the program's thread
 * instead, while the exporter may be exporting, put two exports on the same
 * collect cursors. When both are in use, the closing thread waits for one
 * (an export never waits for the program's thread). */
#define SPARE_NODES 2
static node_t spare[SPARE_NODES];
static int spare_used[SPARE_NODES];
static pthread_cond_t spare_freed = PTHREAD_COND_INITIALIZER;
/* Exports, in order. Jobs whose CUPTI records are still to be collected go
 * first to `collects`, worked by a second thread in the order their windows
 * closed: the device sync and the flush then follow the close at once, even
 * while a long export runs (and the exit waits only for those, not for the
 * exports, before it holds the program's threads: sp_export_wait_collects). */
static queue_t exports = {.wake = PTHREAD_COND_INITIALIZER};
/* The collecting thread waits on one semaphore for both of its kinds of
 * work: a post per collect queued, and one per rewarm request that found none
 * pending (ask_rewarm: sem_post neither blocks nor takes a lock, so a
 * program's thread may post). Initialized at load and in a fork child, where
 * nothing else runs yet: never while a request may post. */
static sem_t collector_wake;

__attribute__((constructor)) static void collector_wake_init(void)
{
    sem_init(&collector_wake, 0, 0);
}
static queue_t collects = {.wake = PTHREAD_COND_INITIALIZER, .posts = &collector_wake};

/* The helper that computes an export's reports while the exporter writes its
 * trace (sp_export_beside): started with the exporter, so an export never
 * creates a thread (at exit or in a signal's wait, a program thread held
 * while it owned a lock pthread_create needs would stall it). One task at a
 * time; `ticket` numbers them, `finished` is the last one done. */
static struct {
    void (*fn)(void *);
    void *arg;
    int started;
    unsigned long ticket, finished;
    pthread_cond_t wake, done;
} beside = {.wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

/* Called with `lock` held. */
static void push(queue_t *q, node_t *n)
{
    n->next = NULL;
    if (q->tail)
        q->tail->next = n;
    else
        q->head = n;
    q->tail = n;
    if (q->posts)
        sem_post(q->posts);
    else
        pthread_cond_signal(&q->wake);
}

/* Called with `lock` held: takes the first job (the queue is busy), NULL if none. */
static node_t *pop(queue_t *q)
{
    node_t *n = q->head;
    if (!n)
        return NULL;
    q->head = n->next;
    if (!q->head)
        q->tail = NULL;
    q->busy = 1;
    return n;
}

/* Called with `lock` held: waits for a job and takes it. */
static node_t *pop_wait(queue_t *q)
{
    while (!q->head)
        pthread_cond_wait(&q->wake, &lock);
    return pop(q);
}

/* Called with `lock` held, the job done. */
static void done(queue_t *q)
{
    q->busy = 0;
    if (!q->head)
        pthread_cond_broadcast(&idle);
}

static int queue_empty(const queue_t *q)
{
    return !q->head && !q->busy;
}

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

/* stepprof's threads run as SCHED_BATCH: a batch thread woken by a window's
 * close never preempts the program's thread that closed it. Two export
 * threads beside the program on a 2-core machine otherwise took its core
 * for a scheduler slice now and then: close stalls of 1-3.9 ms in 5 of 24
 * export bench rows against <= 0.12 ms. Their share of the CPU is unchanged. */
static void background(void)
{
    struct sched_param p = {0};
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &p);
}

/* Called with `lock` held. */
static node_t *take_spare(void)
{
    for (;;) {
        for (int i = 0; i < SPARE_NODES; i++)
            if (!spare_used[i]) {
                spare_used[i] = 1;
                return &spare[i];
            }
        pthread_cond_wait(&spare_freed, &lock);
    }
}

/* Called with `lock` held. */
static void release(node_t *n)
{
    if (n >= spare && n < spare + SPARE_NODES) {
        spare_used[n - spare] = 0;
        pthread_cond_broadcast(&spare_freed);
    } else {
        free(n);
    }
}

static void *worker_main(void *arg)
{
    (void)arg;
    background();
    pthread_mutex_lock(&lock);
    for (;;) {
        node_t *n = pop_wait(&exports);
        pthread_mutex_unlock(&lock);
        sp_export_run(&n->job);
        /* A heap node is freed outside the lock: the free may wait for a
         * malloc arena that a program thread held at exit has, and the
         * exit's wait, which may release that thread, takes this lock. */
        int heap = !(n >= spare && n < spare + SPARE_NODES);
        if (heap)
            free(n);
        pthread_mutex_lock(&lock);
        if (!heap)
            release(n);
        done(&exports);
    }
    return NULL;
}

/* The latest collect whose cold CUPTI buffers a rewarm was asked for
 * (sp_cupti_rewarm), the highest of the requests not yet served; 0: none.
 * The collecting thread, idle while an export runs, warms them once no
 * collect is queued. */
static _Atomic uint64_t rewarm_upto;

/* Often on a program's thread (CUPTI's buffer request, kinds turned on):
 * never blocks, never takes `lock` (a thread held at exit must not hold it),
 * leaves errno alone. Only the request that finds none pending posts: the
 * others raise the number it will be served with. */
static void ask_rewarm(uint64_t upto)
{
    int saved = errno;
    uint64_t was = atomic_load(&rewarm_upto);
    while (was < upto && !atomic_compare_exchange_weak(&rewarm_upto, &was, upto))
        ;
    if (was == 0 && upto)
        sem_post(&collector_wake);
    errno = saved;
}

/* A rewarm gives way between buffers: a window close's device sync must not wait behind page faults. */
static int collect_queued(void)
{
    pthread_mutex_lock(&lock);
    int queued = collects.head != NULL;
    pthread_mutex_unlock(&lock);
    return queued;
}

/* One post, one piece of work: a queued collect first, else a rewarm asked. */
static void *collector_main(void *arg)
{
    (void)arg;
    background();
    sp_cupti_collector_thread();
    for (;;) {
        while (sem_wait(&collector_wake) != 0)
            ;
        pthread_mutex_lock(&lock);
        node_t *n = pop(&collects);
        pthread_mutex_unlock(&lock);
        if (!n) {
            uint64_t upto = atomic_exchange(&rewarm_upto, 0);
            if (upto && sp_cupti_rewarm(upto, collect_queued))
                ask_rewarm(upto);   /* the rest after the collect (upto stays what was asked) */
            continue;
        }
        sp_export_collect_gpu(&n->job);
        pthread_mutex_lock(&lock);
        push(&exports, n);   /* the exporter runs (collects start only once it does) */
        done(&collects);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static void *beside_main(void *arg)
{
    (void)arg;
    background();
    free(malloc(1));   /* its malloc arena is taken now, not in an export at exit */
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!beside.fn)
            pthread_cond_wait(&beside.wake, &lock);
        void (*fn)(void *) = beside.fn;
        void *task = beside.arg;
        pthread_mutex_unlock(&lock);
        fn(task);
        pthread_mutex_lock(&lock);
        beside.fn = NULL;
        beside.finished = beside.ticket;
        pthread_cond_broadcast(&beside.done);
    }
    return NULL;
}

unsigned long sp_export_beside(void (*fn)(void *), void *arg)
{
    unsigned long t = 0;
    pthread_mutex_lock(&lock);
    if (beside.started > 0 && !beside.fn) {
        beside.fn = fn;
        beside.arg = arg;
        t = ++beside.ticket;
        pthread_cond_signal(&beside.wake);
    }
    pthread_mutex_unlock(&lock);
    return t;
}

void sp_export_beside_wait(unsigned long ticket)
{
    pthread_mutex_lock(&lock);
    while (beside.finished < ticket)
        pthread_cond_wait(&beside.done, &lock);
    pthread_mutex_unlock(&lock);
}

static int start(queue_t *q, void *(*fn)(void *), const char *name)
{
    if (!q->started)
        q->started = sp_thread_spawn(fn, NULL, name, NULL) == 0 ? 1 : -1;
    return q->started > 0;
}

/* Called with `lock` held. */
static int start_collector(void)
{
    int up = start(&collects, collector_main, "stepprof-collect");
    if (up)
        sp_cupti_set_rewarm_wake(ask_rewarm);
    return up;
}

void sp_export_start(int collect)
{
    pthread_mutex_lock(&lock);
    start(&exports, worker_main, "stepprof-export");
    if (collect)
        start_collector();
    if (!beside.started)   /* without it, the reports are computed after the trace */
        beside.started = sp_thread_spawn(beside_main, NULL, "stepprof-report", NULL) == 0 ? 1 : -1;
    pthread_mutex_unlock(&lock);
}

void sp_export_submit(const sp_export_job_t *job)
{
    node_t *n = malloc(sizeof *n);
    pthread_mutex_lock(&lock);
    if (!start(&exports, worker_main, "stepprof-export")) {
        /* No exporter thread, now or before: this thread is the only one
         * that exports (sp_export_run collects on it too). */
        pthread_mutex_unlock(&lock);
        free(n);
        run_here(job);
        return;
    }
    if (!n)
        n = take_spare();
    n->job = *job;
    /* Exports run in close order: a job with nothing to collect still queues
     * behind a pending collect (a window closed after CUPTI was handed over,
     * collectors/cupti.c, would otherwise be exported first and take the
     * host records of the windows before it). */
    int behind = job->gpu_collect ? start_collector() : !queue_empty(&collects);
    push(behind ? &collects : &exports, n);
    pthread_mutex_unlock(&lock);
}

/* Waits on `idle` until pred() holds or the deadline passes; 0 when it holds. */
static int wait_until(int (*pred)(void), double timeout_s)
{
    struct timespec dl;
    deadline_in(&dl, timeout_s);
    int rc = 0;
    pthread_mutex_lock(&lock);
    while (!pred() && rc == 0)
        rc = pthread_cond_timedwait(&idle, &lock, &dl);
    int ok = pred();
    pthread_mutex_unlock(&lock);
    return ok ? 0 : -1;
}

static int collects_done(void)
{
    return queue_empty(&collects);
}

static int all_done(void)
{
    return queue_empty(&collects) && queue_empty(&exports);
}

int sp_export_wait_collects(double timeout_s)
{
    return wait_until(collects_done, timeout_s);
}

int sp_export_drain(double timeout_s)
{
    return wait_until(all_done, timeout_s);
}

unsigned sp_export_pending(uint64_t *events)
{
    unsigned k = 0;
    pthread_mutex_lock(&lock);
    const queue_t *qs[] = {&collects, &exports};
    for (int i = 0; i < 2; i++) {
        for (node_t *n = qs[i]->head; n; n = n->next)
            k++;
        k += qs[i]->busy && !(qs[i] == &exports && sp_export_running_trace_done()) ? 1u : 0u;
    }
    pthread_mutex_unlock(&lock);
    if (events)
        *events = sp_export_running_events();
    return k;
}

void sp_export_after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&idle, NULL);
    queue_t *qs[] = {&collects, &exports};
    for (int i = 0; i < 2; i++) {
        pthread_cond_init(&qs[i]->wake, NULL);
        qs[i]->head = qs[i]->tail = NULL;
        qs[i]->busy = qs[i]->started = 0;
    }
    atomic_store(&rewarm_upto, 0);   /* with no post pending: */
    sem_init(&collector_wake, 0, 0);
    pthread_cond_init(&spare_freed, NULL);
    memset(spare_used, 0, sizeof spare_used);
    pthread_cond_init(&beside.wake, NULL);
    pthread_cond_init(&beside.done, NULL);
    beside.fn = NULL;
    beside.started = 0;
    beside.ticket = beside.finished = 0;
}
