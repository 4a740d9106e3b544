/* inject/exec_hooks.c — the exec family: a successful exec replaces the
 * image without running atexit, so the image's recording would be lost. Each
 * interposer first closes the cycle in progress and waits for every queued
 * trace like a normal exit (schedule.c sp_sched_before_exec: exit_timeout_s,
 * the loss said in one line; a terminating signal that comes meanwhile
 * shortens the wait and then ends the process, as it would have bare), then
 * calls the real function. The new image,
 * which keeps LD_PRELOAD, profiles itself under the same pid with new file
 * stems. If the exec fails the program goes on unprofiled (said at debug
 * level). glibc's exec functions call execve internally, so each entry point
 * is interposed; posix_spawn and a vfork child (not the process that owns
 * stepprof's state) are left alone. The real functions are resolved in the
 * constructor: exec may be called where dlsym is not safe (a fork child). */
#define _GNU_SOURCE
#include "exitpaths.h"
#include "hook.h"

#include "../collectors/log.h"
#include "../schedule/schedule.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

static execve_fn real_execve, real_execvpe;
static execv_fn real_execv, real_execvp;
static fexecve_fn real_fexecve;

void sp_exec_preinit(void)
{
    real_execve = (execve_fn)dlsym(RTLD_NEXT, "execve");
    real_execvpe = (execve_fn)dlsym(RTLD_NEXT, "execvpe");
    real_execv = (execv_fn)dlsym(RTLD_NEXT, "execv");
    real_execvp = (execv_fn)dlsym(RTLD_NEXT, "execvp");
    real_fexecve = (fexecve_fn)dlsym(RTLD_NEXT, "fexecve");
}

static void before_exec(void)
{
    int saved = errno;
    if (sp_exit_is_owner()) {
        sp_sched_before_exec();
        sp_exit_signal_after_exec_wait();
    }
    errno = saved;
}

static int after_failure(int rc)
{
    int saved = errno;
    if (sp_exit_is_owner())
        sp_log(SP_LOG_DEBUG, "exec failed (%s): the rest of this image is not profiled", strerror(saved));
    errno = saved;
    return rc;
}

#define NO_REAL(fn) \
    if (!(fn)) {    \
        errno = ENOSYS; \
        return -1;  \
    }

SP_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    NO_REAL(real_execve);
    before_exec();
    return after_failure(real_execve(path, argv, envp));
}

SP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    NO_REAL(real_execvpe);
    before_exec();
    return after_failure(real_execvpe(file, argv, envp));
}

SP_EXPORT int execv(const char *path, char *const argv[])
{
    NO_REAL(real_execv);
    before_exec();
    return after_failure(real_execv(path, argv));
}

SP_EXPORT int execvp(const char *file, char *const argv[])
{
    NO_REAL(real_execvp);
    before_exec();
    return after_failure(real_execvp(file, argv));
}

SP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    NO_REAL(real_fexecve);
    before_exec();
    return after_failure(real_fexecve(fd, argv, envp));
}

/* The list forms: argv gathered on the stack (a failing exec returns). */
#define GATHER(arg0, ap, argv, envp_out)                            \
    size_t n_ = 1;                                                  \
    va_start(ap, arg0);                                             \
    while (va_arg(ap, const char *))                                \
        n_++;                                                       \
    va_end(ap);                                                     \
    char **argv = __builtin_alloca((n_ + 1) * sizeof *argv);        \
    va_start(ap, arg0);                                             \
    argv[0] = (char *)arg0;                                         \
    for (size_t i_ = 1; i_ <= n_; i_++)                             \
        argv[i_] = va_arg(ap, char *);                              \
    envp_out;                                                       \
    va_end(ap)

SP_EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv, (void)0);
    return execv(path, argv);
}

SP_EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv, (void)0);
    return execvp(file, argv);
}

SP_EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    char *const *envp;
    GATHER(arg, ap, argv, envp = va_arg(ap, char *const *));
    return execve(path, argv, envp);
}
