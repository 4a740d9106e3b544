/*
 * rel_exitrace.c — a normal exit that has a large recording to write, for
 * tests/test_reliability_exit.py. Run without a schedule (the whole run is one window, written at
 * exit).
 *
 * Usage: rel_exitrace MODE LAUNCHES [MS]
 * main makes LAUNCHES cudaLaunchKernel(race_kernel) calls and prints "launched LAUNCHES" (flushed),
 * then, by MODE:
 *   return       returns 0 from main
 *   exit-thread  starts a thread that calls exit(5) at once, while main goes on for MS ms
 *                (default 300) launching one kernel per millisecond, then prints "main done" and
 *                returns 0. Bare, the process ends with status 5 and never prints "main done".
 *   exit-status  exit(7) from main
 *   quick-exit   quick_exit(8) from main
 *   pthread-exit starts a thread that makes MS launches, prints "thread done" and returns, then
 *                main calls pthread_exit: bare, the process ends with status 0 when that thread
 *                ends
 *   timer-exit   (PROF_MARKER=nvtx:step) a SIGPROF handler calls exit(3) after MS ms of CPU time
 *                (ITIMER_PROF), while main loops over nvtxRangePushA("step"), one launch,
 *                nvtxRangePop() (each push a step boundary, taken under the schedule lock the
 *                handler may interrupt)
 *   sigpipe      (PROF_MARKER=cudaProfilerApi) one cycle of LAUNCHES launches; once its trace's
 *                temporary is in PROF_OUTPUT_DIR, writes to a pipe whose reader is gone: SIGPIPE
 *                (default action) ends the process; "trace already written" first when no
 *                temporary was left by then
 *   malloc-threads  starts MS threads that allocate and free without pause (most of their time
 *                inside malloc, holding an arena's lock), lets them run 100 ms, then exit(9)
 *   exec         MS is a depth: while it is above 0 the program execs itself with depth - 1
 *                (depth 3 by execv, 2 by execvp, 1 by execl, others by execve), so each image
 *                makes LAUNCHES launches; prints "image DEPTH pid PID" before
 *   cycles       (PROF_MARKER=cudaProfilerApi) up to 10000 cycles, each cudaProfilerStart, LAUNCHES
 *                launches, "in cycle N" (flushed), a sleep of MS ms, LAUNCHES launches,
 *                cudaProfilerStop; a signal from the test ends it. LAUNCHES launches happen first,
 *                outside any cycle, as in every mode. REL_CYCLES (env) limits the cycles (then
 *                returns 0); REL_ALTERNATE=K (env) makes every odd cycle's first half K x LAUNCHES.
 *   fork-abandon (PROF_MARKER=cudaProfilerApi) one cycle of LAUNCHES launches; once its trace's
 *                temporary is in PROF_OUTPUT_DIR (being written), a fork child records 1000
 *                launches in a cycle of its own and raises SIGTERM (with finalize_timeout_s: 0 its
 *                unfinished trace is abandoned), printing "parent's trace already written" first
 *                when no temporary is left; the parent prints "child signal N" and returns 0
 *   reraise      installs its own SIGTERM handler before the first CUDA call (so stepprof installs
 *                none), then raise(SIGTERM) after the launches: the handler prints "cleaned up",
 *                restores SIG_DFL and sends the signal again, by raise (MS 0), kill of its own pid
 *                (1) or pthread_kill of its own thread (2); the process ends by SIGTERM as the
 *                handler returns
 * Exit codes: as above; 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#define PROG "rel_exitrace"
#include "cuda_check.h"

volatile int race_kernel_mark;
void race_kernel(void) { race_kernel_mark = 1; }

static void launches(long n)
{
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    for (long i = 0; i < n; i++)
        CHECK(cudaLaunchKernel((const void *)race_kernel, g, b, NULL, 0, 0));
}

/* Whether a file whose name contains part is in dir now. */
static int file_in(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    int found = 0;
    struct dirent *e;
    while (d && !found && (e = readdir(d)))
        found = strstr(e->d_name, part) != NULL;
    if (d)
        closedir(d);
    return found;
}

static void *allocate(void *arg)
{
    (void)arg;
    for (;;) {
        void *p[64];
        for (int i = 0; i < 64; i++)
            p[i] = malloc(100 + (size_t)i * 37);
        for (int i = 0; i < 64; i++)
            free(p[i]);
    }
    return NULL;
}

static long thread_launches;

static void *launch_and_return(void *arg)
{
    (void)arg;
    launches(thread_launches);
    printf("thread done\n");
    fflush(stdout);
    return NULL;
}

static void exit_on_timer(int sig)
{
    (void)sig;
    exit(3);
}

static long reraise_how;

static void cleanup_and_reraise(int sig)
{
    static const char msg[] = "cleaned up\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w;
    signal(sig, SIG_DFL);
    if (reraise_how == 1)
        kill(getpid(), sig);
    else if (reraise_how == 2)
        pthread_kill(pthread_self(), sig);
    else
        raise(sig);
}

static void *exit_now(void *arg)
{
    (void)arg;
    exit(5);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const char *mode = argv[1];
    long n = atol(argv[2]), ms = argc > 3 ? atol(argv[3]) : 300;
    if (!strcmp(mode, "reraise")) {
        reraise_how = ms;
        signal(SIGTERM, cleanup_and_reraise);
    }
    launches(n);
    printf("launched %ld\n", n);
    fflush(stdout);
    if (!strcmp(mode, "return"))
        return 0;
    if (!strcmp(mode, "exit-status"))
        exit(7);
    if (!strcmp(mode, "quick-exit"))
        quick_exit(8);
    if (!strcmp(mode, "reraise")) {
        raise(SIGTERM);
        return 1; /* not reached */
    }
    if (!strcmp(mode, "pthread-exit")) {
        thread_launches = ms;
        pthread_t th;
        pthread_create(&th, NULL, launch_and_return, NULL);
        pthread_exit(NULL);
    }
    if (!strcmp(mode, "sigpipe")) {
        const char *dir = getenv("PROF_OUTPUT_DIR");
        dir = dir ? dir : ".";
        CHECK(cudaProfilerStart());
        launches(n);
        CHECK(cudaProfilerStop());
        while (!file_in(dir, ".tmp.") && !file_in(dir, ".pt.trace.json"))
            sched_yield();
        int fds[2];
        if (pipe(fds) != 0)
            return 2;
        close(fds[0]);
        if (!file_in(dir, ".tmp."))
            printf("trace already written\n");
        fflush(stdout);
        ssize_t w = write(fds[1], "x", 1);
        (void)w;
        return 4;
    }
    if (!strcmp(mode, "timer-exit")) {
        signal(SIGPROF, exit_on_timer);
        struct itimerval it = {{0, 0}, {ms / 1000, (ms % 1000) * 1000}};
        setitimer(ITIMER_PROF, &it, NULL);
        for (;;) {
            nvtxRangePushA("step");
            launches(1);
            nvtxRangePop();
        }
    }
    if (!strcmp(mode, "malloc-threads")) {
        for (long i = 0; i < ms; i++) {
            pthread_t th;
            pthread_create(&th, NULL, allocate, NULL);
        }
        struct timespec t = {0, 100000000};
        nanosleep(&t, NULL);
        exit(9);
    }
    if (!strcmp(mode, "exec")) {
        printf("image %ld pid %d\n", ms, (int)getpid());
        fflush(stdout);
        if (ms <= 0)
            return 0;
        char depth[32], self[4096];
        snprintf(depth, sizeof depth, "%ld", ms - 1);
        ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
        if (k <= 0)
            return 2;
        self[k] = 0;
        char *args[] = {self, "exec", argv[2], depth, NULL};
        extern char **environ;
        if (ms == 3)
            execv(self, args);
        else if (ms == 2)
            execvp(self, args);
        else if (ms == 1)
            execl(self, self, "exec", argv[2], depth, (char *)NULL);
        else
            execve(self, args, environ);
        perror("exec");
        return 3;
    }
    if (!strcmp(mode, "cycles")) {
        const char *lim = getenv("REL_CYCLES"), *alt = getenv("REL_ALTERNATE");
        long ncycles = lim ? atol(lim) : 10000, k = alt ? atol(alt) : 1;
        for (long c = 0; c < ncycles; c++) {
            CHECK(cudaProfilerStart());
            launches(c % 2 ? n * k : n);
            printf("in cycle %ld\n", c);
            fflush(stdout);
            struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
            nanosleep(&t, NULL);
            launches(n);
            CHECK(cudaProfilerStop());
        }
        return 0;
    }
    if (!strcmp(mode, "fork-abandon")) {
        const char *dir = getenv("PROF_OUTPUT_DIR");
        CHECK(cudaProfilerStart());
        launches(n);
        CHECK(cudaProfilerStop());
        dir = dir ? dir : ".";
        while (!file_in(dir, ".tmp.") && !file_in(dir, ".pt.trace.json"))
            sched_yield();
        pid_t c = fork();
        if (c < 0)
            return 2;
        if (c == 0) {
            CHECK(cudaProfilerStart());
            launches(1000);
            if (!file_in(dir, ".tmp."))
                printf("parent's trace already written\n");
            fflush(stdout);
            raise(SIGTERM);
            _exit(3);
        }
        int st = 0;
        waitpid(c, &st, 0);
        printf("child signal %d\n", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        return 0;
    }
    if (strcmp(mode, "exit-thread"))
        return 2;
    pthread_t th;
    pthread_create(&th, NULL, exit_now, NULL);
    for (long i = 0; i < ms; i++) {
        struct timespec t = {0, 1000000};
        launches(1);
        nanosleep(&t, NULL);
    }
    printf("main done\n");
    return 0;
}
