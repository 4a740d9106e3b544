/* tests/unit/test_export_worker.c — the collecting thread of
 * exporters/worker.c, with stand-ins for the collect, the export and the
 * CUPTI buffers' rewarm (each logs what it did, and waits at a gate the test
 * opens): a rewarm request made while another thread holds the worker's lock
 * is not lost (it used to signal only if a trylock succeeded); a collect
 * queued while the thread is busy goes before a rewarm asked meanwhile, and
 * stops a rewarm between two buffers (a window close's device sync waited
 * behind up to 8 buffers' page faults); a rewarm warms up to the highest
 * collect number asked, not every cold buffer. */
#define _GNU_SOURCE
#include "../../collectors/cupti.h"
#include "../../exporters/export.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static char done_log[512];      /* "C<window>" per collect, "R<upto>" per buffer warmed */
static uint32_t gate_collect;   /* the collect of this window waits while it is set */
static int gate_run, gate_pending, gate_rewarm;
static uint32_t in_collect;
static int in_run, in_pending, in_rewarm;
static int cold_left;           /* buffers the rewarm stand-in has to warm */
static void (*wake)(uint64_t upto);

static void say(const char *fmt, unsigned long long v)
{
    size_t n = strlen(done_log);
    snprintf(done_log + n, sizeof done_log - n, fmt, v);
}

/* Under m: waits (at most 2 s) until *flag is non-zero; the flag's value. */
static int wait_set(const int *flag)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 2;
    while (!*flag && pthread_cond_timedwait(&c, &m, &dl) == 0)
        ;
    return *flag;
}

static void set(int *var, int v)
{
    pthread_mutex_lock(&m);
    *var = v;
    pthread_cond_broadcast(&c);
    pthread_mutex_unlock(&m);
}

/* The stand-ins worker.c calls. */
void sp_export_collect_gpu(sp_export_job_t *job)
{
    pthread_mutex_lock(&m);
    say("C%llu ", job->window);
    in_collect = job->window;
    pthread_cond_broadcast(&c);
    while (gate_collect == job->window)
        pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
    job->gpu_collect = 0;
}

/* Says it is in (*in) and waits while the test holds *gate. */
static void hold(int *in, const int *gate)
{
    pthread_mutex_lock(&m);
    *in = 1;
    pthread_cond_broadcast(&c);
    while (*gate)
        pthread_cond_wait(&c, &m);
    *in = 0;
    pthread_mutex_unlock(&m);
}

int sp_export_run(const sp_export_job_t *job)
{
    (void)job;
    hold(&in_run, &gate_run);
    return 0;
}

/* Called by sp_export_pending with the worker's lock held while an export runs. */
int sp_export_running_trace_done(void)
{
    hold(&in_pending, &gate_pending);
    return 0;
}

uint64_t sp_export_running_events(void)
{
    return 0;
}

void sp_cupti_collector_thread(void)
{
}

void sp_cupti_set_rewarm_wake(void (*fn)(uint64_t upto))
{
    wake = fn;
}

int sp_cupti_rewarm(uint64_t upto, int (*stop)(void))
{
    pthread_mutex_lock(&m);
    while (cold_left) {
        say("R%llu ", upto);
        cold_left--;
        in_rewarm = 1;
        pthread_cond_broadcast(&c);
        while (gate_rewarm)
            pthread_cond_wait(&c, &m);
        pthread_mutex_unlock(&m);
        if (stop && stop()) {
            pthread_mutex_lock(&m);
            break;
        }
        pthread_mutex_lock(&m);
    }
    int left = cold_left > 0;
    pthread_mutex_unlock(&m);
    return left;
}

static void submit(uint32_t window, int collect)
{
    static sp_export_job_t job;
    memset(&job, 0, sizeof job);
    job.window = window;
    job.gpu_collect = collect;
    sp_export_submit(&job);
}

static void *pending_main(void *arg)
{
    (void)arg;
    sp_export_pending(NULL);
    return NULL;
}

/* Waits until every job is done and the log stops growing; the log. */
static const char *settled(void)
{
    CHECK(sp_export_drain(5) == 0, "the jobs did not drain");
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    return done_log;
}

static void reset(int cold)
{
    pthread_mutex_lock(&m);
    done_log[0] = 0;
    cold_left = cold;
    in_collect = 0;
    in_rewarm = 0;
    pthread_mutex_unlock(&m);
}

/* A request made while another thread holds the worker's lock (here
 * sp_export_pending, stalled inside it) must still wake the collecting
 * thread, which has nothing else to do. */
static void check_request_not_lost(void)
{
    reset(1);
    set(&gate_run, 1);
    submit(1, 0);   /* an export, stalled: sp_export_pending then reads its state under the lock */
    pthread_mutex_lock(&m);
    CHECK(wait_set(&in_run), "the export did not start");
    pthread_mutex_unlock(&m);
    set(&gate_pending, 1);
    pthread_t t;
    pthread_create(&t, NULL, pending_main, NULL);
    pthread_mutex_lock(&m);
    CHECK(wait_set(&in_pending), "sp_export_pending did not reach the export's state");
    pthread_mutex_unlock(&m);
    wake(3);
    set(&gate_pending, 0);
    pthread_join(t, NULL);
    pthread_mutex_lock(&m);
    CHECK(wait_set(&in_rewarm), "a rewarm asked while the worker's lock was held was lost");
    pthread_mutex_unlock(&m);
    set(&gate_run, 0);
    CHECK(strcmp(settled(), "R3 ") == 0, "log '%s', want 'R3 '", done_log);
}

/* Asked while a collect runs, with another collect queued: both collects
 * first, then one rewarm, up to the highest number asked. */
static void check_collect_before_rewarm(void)
{
    reset(1);
    pthread_mutex_lock(&m);
    gate_collect = 10;
    pthread_mutex_unlock(&m);
    submit(10, 1);
    pthread_mutex_lock(&m);
    while (in_collect != 10)
        pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
    wake(4);
    wake(2);
    submit(11, 1);
    pthread_mutex_lock(&m);
    gate_collect = 0;
    pthread_cond_broadcast(&c);
    pthread_mutex_unlock(&m);
    CHECK(strcmp(settled(), "C10 C11 R4 ") == 0, "log '%s', want 'C10 C11 R4 '", done_log);
}

/* A collect queued while a rewarm warms its first of three buffers: it runs
 * after that buffer, the rest of the rewarm after it. */
static void check_collect_stops_rewarm(void)
{
    reset(3);
    set(&gate_rewarm, 1);
    wake(9);
    pthread_mutex_lock(&m);
    CHECK(wait_set(&in_rewarm), "the rewarm did not start");
    pthread_mutex_unlock(&m);
    submit(21, 1);
    set(&gate_rewarm, 0);
    CHECK(strcmp(settled(), "R9 C21 R9 R9 ") == 0, "log '%s', want 'R9 C21 R9 R9 '", done_log);
}

int main(void)
{
    sp_export_start(1);
    CHECK(wake != NULL, "the collecting thread did not register its wake");
    if (wake) {
        check_request_not_lost();
        check_collect_before_rewarm();
        check_collect_stops_rewarm();
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
