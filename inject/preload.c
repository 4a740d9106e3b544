/* inject/preload.c — what runs because the process loaded us: the
 * constructor (cheap checks only: a process that never calls CUDA must pay
 * nothing and write nothing), activation at the first intercepted CUDA call,
 * the statically-linked-cudart
 * warning, and the fork handler. The ends of the process that atexit does not
 * see are exitpaths.c's. */
#define _GNU_SOURCE
#include "hook.h"

#include "../collectors/kernels.h"
#include "../collectors/log.h"
#include "../collectors/strings.h"
#include "../schedule/schedule.h"
#include "cudacopies.h"
#include "exitpaths.h"
#include "funchook.h"
#include "markers.h"
#include "signals.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int InitializeInjectionNvtx2(const void *get_table); /* inject/nvtx.c */
void sp_torch_bootstrap_env(void);                   /* inject/torch.c */

static pthread_once_t activate_once = PTHREAD_ONCE_INIT;
static _Atomic int activation_started;

static void activate(void)
{
    int saved = errno;
    atomic_store(&activation_started, 1);
    /* A process that imported torch (inject/torch.c) without a driver uses
     * no CUPTI (schedule/config.c) and says nothing about it: a CPU-only
     * torch run is no degradation. (Every other process checks for the driver
     * before CUPTI subscribes: collectors/cupti.c.) */
    if (sp_config_torch_default && !sp_cupti_driver_present())
        sp_config_no_driver = 1;
    sp_sched_activate();
    const sp_config_t *cfg = sp_sched_config();
    /* On failure it has said why in one line; the run goes on without steps. */
    if (cfg && cfg->marker.kind == SP_MARK_FUNCTION)
        sp_funchook_install(cfg->marker.name, cfg->marker.scope, sp_sched_boundary);
    if (cfg && cfg->marker.has_signal)
        sp_signal_install(cfg->marker.signo);
    /* After the marker's handler, so a marker signal that also terminates
     * by default (SIGHUP) stays the marker's. */
    if (cfg)
        sp_exit_install((double)cfg->finalize_timeout_s);
    /* Plugins with their own CUDA copy loaded before now (later ones are
     * seen when they register kernels, and once a second copy is known, as
     * every object loads: cudacopies.c). */
    sp_copies_check();
    errno = saved;
}

sp_thread_t *sp_hook_enter(uint32_t *window)
{
    if (SP_UNLIKELY(*window == SP_GATE_UNINIT)) {
        pthread_once(&activate_once, activate);
        *window = sp_ev_gate_load();
        if (*window == 0 || *window == SP_GATE_UNINIT)
            return NULL;
    }
    sp_thread_t *t = sp_ev_thread();
    if (!t || t->in_hook)
        return NULL;
    t->in_hook = 1;
    /* Only with the guard taken: a program's signal handler that calls CUDA
     * while this thread is inside an interposer must not reach the schedule
     * lock from signal context. */
    if (SP_UNLIKELY(sp_sched_signal_flag)) {
        sp_sched_poll_signal();
        *window = sp_ev_gate_load(); /* the call that noticed the signal belongs to the new state */
        if (*window == 0) {
            t->in_hook = 0; /* the guard goes with the NULL: this thread records again later */
            return NULL;
        }
    }
    return t;
}

static int find_cudart(struct dl_phdr_info *info, size_t size, void *found)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcudart.so"))
        *(int *)found = 1;
    return *(int *)found;
}

/* Does the executable carry device code (an .nv_fatbin section)? Only the
 * section headers are read, so the cost is a few small reads. */
static int exe_has_fatbin(void)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int found = 0;
    Elf64_Ehdr eh;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shnum > 0 &&
        eh.e_shnum < 4096 && eh.e_shstrndx < eh.e_shnum) {
        size_t n = eh.e_shnum;
        Elf64_Shdr *sh = malloc(n * sizeof *sh);
        if (sh && pread(fd, sh, n * sizeof *sh, (off_t)eh.e_shoff) == (ssize_t)(n * sizeof *sh)) {
            Elf64_Shdr *str = &sh[eh.e_shstrndx];
            char *names = str->sh_size < (1u << 20) ? malloc(str->sh_size + 1) : NULL;
            if (names && pread(fd, names, str->sh_size, (off_t)str->sh_offset) == (ssize_t)str->sh_size) {
                names[str->sh_size] = 0;
                for (size_t i = 0; i < n && !found; i++)
                    found = sh[i].sh_name < str->sh_size && strcmp(names + sh[i].sh_name, ".nv_fatbin") == 0;
            }
            free(names);
        }
        free(sh);
    }
    close(fd);
    return found;
}

static void warn_static_cudart(void)
{
    int found = 0;
    dl_iterate_phdr(find_cudart, &found);
    if (!found && exe_has_fatbin())
        sp_log(SP_LOG_WARN,
               "this program links the CUDA runtime statically (nvcc's default -cudart static): its runtime calls "
               "never pass through a shared libcudart, so stepprof cannot intercept them (it sees the driver calls "
               "they make, and on a GPU machine CUPTI records the GPU work); rebuild with 'nvcc -cudart shared' "
               "to see them");
}

/* The driver calls this inside cuInit when CUDA_INJECTION64_PATH names us:
 * the moment CUPTI may be set up, and the only entry for programs whose
 * runtime calls we cannot see (static cudart). Activation may itself be what
 * triggered cuInit (CUPTI calls into the driver), hence the flag rather than
 * a nested pthread_once on the same control, which would deadlock. */
SP_EXPORT int InitializeInjection(void)
{
    if (!atomic_load(&activation_started))
        pthread_once(&activate_once, activate);
    return 1;
}

/* Sets `var` to the realpath of this library (found through `symbol`) so
 * NVTX or the driver loads us as its injection library, unless another tool
 * (nsys) already owns the variable. */
void sp_claim_injection_env(const char *var, void *symbol)
{
    if (getenv(var))
        return;
    Dl_info info;
    char path[PATH_MAX];
    if (dladdr(symbol, &info) && info.dli_fname && realpath(info.dli_fname, path))
        setenv(var, path, 0);
}

static void after_fork_child(void)
{
    sp_str_after_fork_child();
    sp_kern_after_fork_child();
    activate_once = (pthread_once_t)PTHREAD_ONCE_INIT;
    atomic_store(&activation_started, 0);
    sp_sched_after_fork_child();
    sp_exit_after_fork_child();
}

__attribute__((constructor)) static void stepprof_init(void)
{
    int saved = errno;
    sp_claim_injection_env("NVTX_INJECTION64_PATH", (void *)InitializeInjectionNvtx2);
    sp_claim_injection_env("CUDA_INJECTION64_PATH", (void *)InitializeInjection);
    warn_static_cudart();
    sp_torch_bootstrap_env();
    sp_exit_preinit();
    pthread_atfork(NULL, NULL, after_fork_child);
    errno = saved;
}
