/*
 * rel_exec.c — exec and posix_spawn children under the preload, for tests/test_reliability.py.
 *
 * Usage: rel_exec [LAUNCHES (default 100)]
 *   parent (any argv[0]): LAUNCHES launches of exec_kernel, then starts, with the unchanged
 *   environment, (1) posix_spawn of itself with argv[0] "worker-spawned" and argument "child",
 *   (2) fork + execv of itself with argv[0] "worker-execed" and "child", (3) posix_spawn of itself
 *   with argv[0] "cpu-only" and "nocuda"; waits for them; prints "parent PID", then "done".
 *   "child": LAUNCHES launches of exec_kernel, prints "child NAME PID". "nocuda": prints
 *   "nocuda PID", no CUDA call.
 * Exit 0 when every child exited 0, else 1.
 */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#define PROG "rel_exec"
#include "cuda_check.h"

extern char **environ;

volatile int rel_exec_mark;
void exec_kernel(void) { rel_exec_mark = 1; }

static void launch(long n)
{
    dim3 g = {1, 1, 1}, b = {32, 1, 1};
    for (long i = 0; i < n; i++)
        CHECK(cudaLaunchKernel((const void *)exec_kernel, g, b, NULL, 0, 0));
    CHECK(cudaDeviceSynchronize());
}

static int wait_ok(pid_t p)
{
    int st = 0;
    return p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    long n = 100;
    const char *role = argc > 1 ? argv[1] : "";
    if (!strcmp(role, "child")) {
        launch(n);
        printf("child %s %d\n", argv[0], (int)getpid());
        return 0;
    }
    if (!strcmp(role, "nocuda")) {
        printf("nocuda %d\n", (int)getpid());
        return 0;
    }
    if (argc > 1)
        n = atol(argv[1]);
    launch(n);
    char self[4096];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0)
        return 1;
    self[k] = 0;
    int ok = 1;
    pid_t p;
    char *spawned[] = {"worker-spawned", "child", NULL};
    ok &= posix_spawn(&p, self, NULL, NULL, spawned, environ) == 0 && wait_ok(p);
    p = fork();
    if (p == 0) {
        char *execed[] = {"worker-execed", "child", NULL};
        execv(self, execed);
        _exit(127);
    }
    ok &= wait_ok(p);
    char *cpu[] = {"cpu-only", "nocuda", NULL};
    ok &= posix_spawn(&p, self, NULL, NULL, cpu, environ) == 0 && wait_ok(p);
    check_summary();
    printf("parent %d\n", (int)getpid());
    printf("done\n");
    return ok ? 0 : 1;
}
