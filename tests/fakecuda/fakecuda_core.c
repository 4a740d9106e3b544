/*
 * fakecuda_core.c - process-wide state of the fakecuda runtime: the environment knobs (parsed once at
 * load), the observer and the slow path every exported call takes while one is set, failure injection
 * (FAKECUDA_FAIL), the driver's tool injection (CUDA_INJECTION64_PATH, run at the first runtime call),
 * the per-thread sticky error, and the error-name / version / profiler entry points.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda_int.h"

#define FC_MAX_RULES 32

struct fc_config fc_cfg;
__thread struct fc_thread fc_tls;
_Atomic int fc_hooks_on;
const fakecuda_observer_t *_Atomic fc_observer;

/* Two slots so a reader that loaded the old pointer keeps a stable copy while a new one is set. */
static fakecuda_observer_t observer_slot[2];
static unsigned observer_next;
static bool fail_any;
static _Atomic bool injection_done;

/* The slow path is needed while anything could act on a call: an observer, failure rules, or the
 * injection that the first call still has to run. */
static void update_hooks(void) {
  atomic_store(&fc_hooks_on, atomic_load(&fc_observer) != NULL || fail_any || !atomic_load(&injection_done));
}

static struct fc_rule {
  char name[64];
  long long value; /* FAKECUDA_FAIL: error code; FAKECUDA_KERNEL_NS_<sub>: ns */
} fail_rules[FC_MAX_RULES], kernel_rules[FC_MAX_RULES];
static int n_fail_rules, n_kernel_rules;

static unsigned long long env_u64(const char *name, unsigned long long def) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 0);
  if (errno || *end) {
    fprintf(stderr, "fakecuda: ignoring %s=%s (not a number)\n", name, v);
    return def;
  }
  return x;
}

static double env_positive(const char *name, double def) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  char *end;
  double x = strtod(v, &end);
  if (*end || !(x > 0)) {
    fprintf(stderr, "fakecuda: ignoring %s=%s (not a positive number)\n", name, v);
    return def;
  }
  return x;
}

static void add_rule(struct fc_rule *rules, int *n, const char *name, size_t len, long long value) {
  if (*n == FC_MAX_RULES || len == 0 || len >= sizeof rules->name) {
    fprintf(stderr, "fakecuda: ignoring rule '%.*s'\n", (int)len, name);
    return;
  }
  memcpy(rules[*n].name, name, len);
  rules[*n].name[len] = '\0';
  rules[*n].value = value;
  ++*n;
}

static void parse_fail_list(const char *list) {
  while (list && *list) {
    size_t len = strcspn(list, ",");
    const char *colon = memchr(list, ':', len);
    size_t name_len = colon ? (size_t)(colon - list) : len;
    long long code = colon ? strtoll(colon + 1, NULL, 0) : (long long)cudaErrorUnknown;
    add_rule(fail_rules, &n_fail_rules, list, name_len, code);
    list += len + (list[len] == ',');
  }
}

static void parse_kernel_rules(void) {
  extern char **environ;
  static const char prefix[] = "FAKECUDA_KERNEL_NS_";
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, prefix, sizeof prefix - 1) != 0) continue;
    const char *sub = *e + sizeof prefix - 1, *eq = strchr(sub, '=');
    if (eq) add_rule(kernel_rules, &n_kernel_rules, sub, (size_t)(eq - sub), strtoll(eq + 1, NULL, 0));
  }
}

__attribute__((constructor)) static void fc_init(void) {
  fc_cfg.kernel_ns = env_u64("FAKECUDA_KERNEL_NS", 20000);
  fc_cfg.copy_ns_per_byte = 1.0 / env_positive("FAKECUDA_COPY_GBPS", 20.0); /* 1 GB/s = 1 byte/ns */
  fc_cfg.set_ns_per_byte = 1.0 / env_positive("FAKECUDA_SET_GBPS", 200.0);
  /* What a GPU shows for tiny work: a kernel lasts a few microseconds at least, a copy or memset pays
   * its DMA / launch latency before the bytes move (README: simulated durations). */
  fc_cfg.kernel_min_ns = env_u64("FAKECUDA_KERNEL_MIN_NS", 2000);
  fc_cfg.copy_latency_ns = env_u64("FAKECUDA_COPY_LATENCY_NS", 1500);
  fc_cfg.launch_latency_ns = env_u64("FAKECUDA_LAUNCH_LATENCY_NS", 300);
  fc_cfg.set_latency_ns = env_u64("FAKECUDA_SET_LATENCY_NS", 1000);
  fc_cfg.mem_limit = env_u64("FAKECUDA_MEM_LIMIT", 80ull << 30);
  unsigned long long ndev = env_u64("FAKECUDA_DEVICES", 1);
  fc_cfg.ndev = ndev > FAKECUDA_MAX_DEVICES ? FAKECUDA_MAX_DEVICES : (int)ndev;
  parse_fail_list(getenv("FAKECUDA_FAIL"));
  parse_kernel_rules();
  fail_any = n_fail_rules > 0;
  update_hooks();
}

uint64_t fc_kernel_ns_for(const char *name) {
  for (int i = 0; name && i < n_kernel_rules; i++)
    if (strstr(name, kernel_rules[i].name)) return (uint64_t)kernel_rules[i].value;
  return fc_cfg.kernel_ns;
}

FC_EXPORT void fakecuda_set_observer(const fakecuda_observer_t *obs) {
  const fakecuda_observer_t *slot = NULL;
  if (obs) {
    observer_slot[observer_next] = *obs;
    slot = &observer_slot[observer_next];
    observer_next ^= 1;
  }
  atomic_store(&fc_observer, slot);
  update_hooks();
}

FC_EXPORT int fakecuda_current_device(void) {
  return fc_tls.device;
}

/* ---- CUDA injection: what the driver does inside cuInit ---- */

static pthread_mutex_t injection_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread bool injecting; /* this thread is inside InitializeInjection */

/* CUDA_INJECTION64_PATH is read now, not at load, so a preloaded tool's constructor may still set it. */
static void run_injection(void) {
  const char *path = getenv("CUDA_INJECTION64_PATH");
  if (!path || !*path) return;
  void *h = dlopen(path, RTLD_NOW);
  if (!h) {
    fprintf(stderr, "fakecuda: injection %s not loaded: %s\n", path, dlerror());
    return;
  }
  int (*init)(void);
  *(void **)&init = dlsym(h, "InitializeInjection");
  if (init) init();
}

/* Once per process, on the thread of the first call; other threads' first calls wait for it as they
 * would for cuInit.  Runtime calls made by InitializeInjection itself pass straight through. */
static void inject_once(void) {
  if (FC_LIKELY(atomic_load_explicit(&injection_done, memory_order_acquire)) || injecting) return;
  pthread_mutex_lock(&injection_lock);
  if (!atomic_load(&injection_done)) {
    injecting = true;
    run_injection();
    injecting = false;
    atomic_store_explicit(&injection_done, true, memory_order_release);
    update_hooks();
  }
  pthread_mutex_unlock(&injection_lock);
}

/* The stream-variant suffix is ignored so that one FAKECUDA_FAIL name covers both spellings. */
static cudaError_t injected_failure(const char *api) {
  size_t n = strlen(api);
  if (n > 5 && (!strcmp(api + n - 5, "_ptsz") || !strcmp(api + n - 5, "_ptds"))) n -= 5;
  for (int i = 0; i < n_fail_rules; i++)
    if (strlen(fail_rules[i].name) == n && !strncmp(fail_rules[i].name, api, n))
      return (cudaError_t)fail_rules[i].value;
  return cudaSuccess;
}

void fc_note_enter(const char *api) {
  const fakecuda_observer_t *o = atomic_load(&fc_observer);
  if (!o) return;
  if (fc_tls.driver_api) api = fc_tls.driver_api;
  fc_tls.api_start_ns = fc_now();
  if (o->api_enter) o->api_enter(api, o->ctx);
}

void fc_note_exit(const char *api, int result) {
  const fakecuda_observer_t *o = atomic_load(&fc_observer);
  if (fc_tls.driver_api) api = fc_tls.driver_api;
  if (o && o->api_exit) o->api_exit(api, result, o->ctx);
}

/* Only cudaError_t entry points come here; the registration calls of constructors, <<<>>>'s push and the
 * error-string queries use fc_note_enter alone, so they never trigger the injection. */
cudaError_t fc_api_enter(const char *api) {
  inject_once();
  fc_note_enter(api);
  /* A driver entry point (fakedriver.c) fails under its own name, as a driver call would, not under
   * the runtime entry point the stand-in runs it on. */
  return fail_any ? injected_failure(fc_tls.driver_api ? fc_tls.driver_api : api) : cudaSuccess;
}

cudaError_t fc_api_exit(const char *api, cudaError_t r) {
  fc_result(r);
  if (fc_tls.driver_api) fc_tls.drv_inner = r; /* the driver stand-in ran this call (fakecuda_drv.c) */
  fc_note_exit(api, (int)r);
  return r;
}

void fc_emit(fakecuda_op_t *op) {
  const fakecuda_observer_t *o = atomic_load(&fc_observer);
  if (!o || !o->gpu_op) return;
  op->api_start_ns = fc_tls.api_start_ns;
  if (fc_tls.driver_api) op->api = fc_tls.driver_api;
  o->gpu_op(op, o->ctx);
}

/* The libcuda.so.1 stand-in (fakecuda_driver.c) runs each driver call on one runtime entry point,
 * reached through dlsym on this library so no interposer sees it; between fakecuda_driver_call(name)
 * and fakecuda_driver_call(NULL) the observer sees `name` (a pointer that stays the same per entry
 * point) instead of the runtime's. */
FC_EXPORT void fakecuda_driver_call(const char *api) {
  fc_tls.driver_api = api;
}

/* ---- errors ---- */

static const struct fc_error {
  cudaError_t code;
  const char *name, *text;
} errors[] = {
#define E(code, text) {code, #code, text}
    E(cudaSuccess, "no error"),
    E(cudaErrorInvalidValue, "invalid argument"),
    E(cudaErrorMemoryAllocation, "out of memory"),
    E(cudaErrorInitializationError, "initialization error"),
    E(cudaErrorCudartUnloading, "driver shutting down"),
    E(cudaErrorProfilerDisabled, "profiler disabled while using external profiling tool"),
    E(cudaErrorInvalidConfiguration, "invalid configuration argument"),
    E(cudaErrorInvalidPitchValue, "invalid pitch argument"),
    E(cudaErrorInvalidSymbol, "invalid device symbol"),
    E(cudaErrorInvalidHostPointer, "invalid host pointer"),
    E(cudaErrorInvalidDevicePointer, "invalid device pointer"),
    E(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
    E(cudaErrorStubLibrary, "CUDA driver is a stub library"),
    E(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"),
    E(cudaErrorCallRequiresNewerDriver, "API call is not supported in the installed CUDA driver"),
    E(cudaErrorDevicesUnavailable, "CUDA-capable device(s) is/are busy or unavailable"),
    E(cudaErrorMissingConfiguration, "__global__ function call is not configured"),
    E(cudaErrorInvalidDeviceFunction, "invalid device function"),
    E(cudaErrorNoDevice, "no CUDA-capable device is detected"),
    E(cudaErrorInvalidDevice, "invalid device ordinal"),
    E(cudaErrorStartupFailure, "startup failure in cuda runtime"),
    E(cudaErrorInvalidKernelImage, "device kernel image is invalid"),
    E(cudaErrorNoKernelImageForDevice, "no kernel image is available for execution on the device"),
    E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    E(cudaErrorIllegalState, "the operation cannot be performed in the present state"),
    E(cudaErrorSymbolNotFound, "named symbol not found"),
    E(cudaErrorNotReady, "device not ready"),
    E(cudaErrorIllegalAddress, "an illegal memory access was encountered"),
    E(cudaErrorLaunchOutOfResources, "too many resources requested for launch"),
    E(cudaErrorLaunchTimeout, "the launch timed out and was terminated"),
    E(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled"),
    E(cudaErrorPeerAccessNotEnabled, "peer access has not been enabled"),
    E(cudaErrorSetOnActiveProcess, "cannot set while device is active in this process"),
    E(cudaErrorAssert, "device-side assert triggered"),
    E(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped"),
    E(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region"),
    E(cudaErrorLaunchFailure, "unspecified launch failure"),
    E(cudaErrorCooperativeLaunchTooLarge, "too many blocks in cooperative launch"),
    E(cudaErrorNotPermitted, "operation not permitted"),
    E(cudaErrorNotSupported, "operation not supported"),
    E(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing"),
    E(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture"),
    E(cudaErrorStreamCaptureUnmatched, "capture was not ended in the same stream as it began"),
    E(cudaErrorTimeout, "wait operation timed out"),
    E(cudaErrorUnknown, "unknown error"),
#undef E
};

static const struct fc_error *find_error(cudaError_t code) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == code) return &errors[i];
  return NULL;
}

FC_EXPORT const char *cudaGetErrorName(cudaError_t error) {
  fc_note_enter(__func__);
  const struct fc_error *e = find_error(error);
  fc_note_exit(__func__, 0);
  return e ? e->name : "unrecognized error code";
}

FC_EXPORT const char *cudaGetErrorString(cudaError_t error) {
  fc_note_enter(__func__);
  const struct fc_error *e = find_error(error);
  fc_note_exit(__func__, 0);
  return e ? e->text : "unrecognized error code";
}

/* Neither goes through FC_RETURN: returning the sticky error must not record it again. */
FC_EXPORT cudaError_t cudaGetLastError(void) {
  fc_note_enter(__func__);
  cudaError_t r = fc_tls.last_error;
  fc_tls.last_error = cudaSuccess;
  fc_note_exit(__func__, (int)r);
  return r;
}

FC_EXPORT cudaError_t cudaPeekAtLastError(void) {
  fc_note_enter(__func__);
  cudaError_t r = fc_tls.last_error;
  fc_note_exit(__func__, (int)r);
  return r;
}

/* ---- versions and profiler control ---- */

static cudaError_t put_int(int *out, int value) {
  if (!out) return cudaErrorInvalidValue;
  *out = value;
  return cudaSuccess;
}

FC_API(cudaRuntimeGetVersion, (int *runtimeVersion), put_int(runtimeVersion, CUDART_VERSION))
FC_API(cudaDriverGetVersion, (int *driverVersion), put_int(driverVersion, CUDART_VERSION))
/* Observers see these calls through api_enter; the runtime itself has nothing to start. */
FC_API(cudaProfilerStart, (void), cudaSuccess)
FC_API(cudaProfilerStop, (void), cudaSuccess)
