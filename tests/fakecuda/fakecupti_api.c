/*
 * fakecupti_api.c - the exported control surface of the libcupti.so.13 stand-in: version, result strings
 * and callback names, the single subscriber, activity kinds on/off (which installs and removes the
 * fakecuda observer), buffer-callback registration and flushing, dropped-record counts, the timestamp
 * clock and its callback, external correlation ids, device / context / stream ids, thread-id type,
 * latency timestamps, and cuptiFinalize.  Also the test knobs:
 *
 *   FAKECUPTI_SUBSCRIBE_ERROR=n  cuptiSubscribe returns n and subscribes nothing (39:
 *                                CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, as under nsys; 999:
 *                                CUPTI_ERROR_UNKNOWN, what NVIDIA's CUPTI returns with no driver)
 *   FAKECUPTI_ENABLE_ERROR=n     cuptiActivityEnable returns n and enables nothing
 *   FAKECUPTI_ENABLE_ERROR_KIND=k   ... only for activity kind k (as CUPTI refuses one kind a device
 *                                or configuration does not support)
 *   FAKECUPTI_RUNTIME_DRIVER_RECORDS=1   DRIVER records of the driver calls the runtime stand-in makes,
 *                                with the runtime call's id (NVIDIA's CUPTI writes none; fakecupti_records.c)
 *   FAKECUPTI_LOG=path           one appended line per control call, "<CLOCK_MONOTONIC ns> <what>":
 *                                "enable <kind>", "disable <kind>", "flush <flag>", "finalize"; a failed
 *                                enable/disable adds " error <result>"
 * The knobs are read at each call, so a test may change them between calls.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakecupti_int.h"

#define FCP_WANT_RESULTS
#define FCP_WANT_NAMES
#include "fakecupti_gen.h"

_Atomic uint64_t fcp_mask;
_Atomic int64_t fcp_offset;
_Atomic int fcp_thread_id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
_Atomic bool fcp_latency_timestamps;

/* Serializes the control calls (and so fakecuda_set_observer, which wants one caller at a time).
 * Never held while a client callback runs. */
static pthread_mutex_t control = PTHREAD_MUTEX_INITIALIZER;

struct CUpti_Subscriber_st {
  CUpti_CallbackFunc callback;
  void *userdata;
};
static struct CUpti_Subscriber_st subscriber;
static bool subscribed;

/* ---- knobs and log ---- */

/* 0 when unset or not a number: 0 is CUPTI_SUCCESS, i.e. no injected failure. */
static int env_result(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end;
  long x = strtol(v, &end, 0);
  return *end ? 0 : (int)x;
}

static void log_line(const char *fmt, long a, int rc) {
  static int fd = -2;
  static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&log_lock);
  if (fd == -2) {
    const char *path = getenv("FAKECUPTI_LOG");
    fd = path && *path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
  }
  if (fd >= 0) {
    char line[128];
    int n = snprintf(line, sizeof line, "%llu ", (unsigned long long)fcp_mono_now());
    n += snprintf(line + n, sizeof line - (size_t)n, fmt, a);
    if (rc) n += snprintf(line + n, sizeof line - (size_t)n, " error %d", rc);
    n += snprintf(line + n, sizeof line - (size_t)n, "\n");
    /* One write per line: O_APPEND keeps lines of concurrent processes whole. */
    if (write(fd, line, (size_t)n) < 0) { /* nothing useful to do: the log is only for tests */
    }
  }
  pthread_mutex_unlock(&log_lock);
}

/* ---- clock ---- */

/* Offset of a clock from CLOCK_MONOTONIC, read between two monotonic reads to halve the error. */
static int64_t offset_of(uint64_t (*clock)(void)) {
  uint64_t m0 = fcp_mono_now(), c = clock(), m1 = fcp_mono_now();
  return (int64_t)(c - (m0 + (m1 - m0) / 2));
}

static uint64_t realtime_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

__attribute__((constructor)) static void api_init(void) {
  atomic_store(&fcp_offset, offset_of(realtime_now));
}

/* Read once: CUPTI's own read is one clock_gettime, and a getenv inside the read
 * would put the clock read at one end of a client's bracket, not its middle. */
static int64_t clock_skew(void) {
  static _Atomic int read;
  static _Atomic int64_t skew;
  if (!atomic_load_explicit(&read, memory_order_acquire)) {
    const char *e = getenv("FAKECUPTI_CLOCK_SKEW_NS");
    atomic_store_explicit(&skew, e ? strtoll(e, NULL, 10) : 0, memory_order_relaxed);
    atomic_store_explicit(&read, 1, memory_order_release);
  }
  return atomic_load_explicit(&skew, memory_order_relaxed);
}

FCP_EXPORT CUptiResult cuptiGetTimestamp(uint64_t *timestamp) {
  if (!timestamp) return CUPTI_ERROR_INVALID_PARAMETER;
  /* FAKECUPTI_CLOCK_SKEW_NS: this clock runs that far behind the records', so a
   * client calibrating against it is off by as much (tests of pairing by order). */
  *timestamp = fcp_ts(fcp_mono_now()) - (uint64_t)clock_skew();
  return CUPTI_SUCCESS;
}

/* The callback's clock is sampled once here and applied as an offset to every later timestamp,
 * GPU-side ones included, which is what CUPTI's interpolation amounts to for a clock that runs at
 * CLOCK_MONOTONIC's rate. */
FCP_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp) {
  if (!funcTimestamp) return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&control);
  bool busy = atomic_load(&fcp_mask) != 0;
  pthread_mutex_unlock(&control);
  if (busy) return CUPTI_ERROR_INVALID_OPERATION; /* CUPTI: register "before any ... kinds are enabled" */
  atomic_store(&fcp_offset, offset_of(funcTimestamp));
  return CUPTI_SUCCESS;
}

/* ---- version, results ---- */

FCP_EXPORT CUptiResult cuptiGetVersion(uint32_t *version) {
  if (!version) return CUPTI_ERROR_INVALID_PARAMETER;
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

FCP_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **str) {
  if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
  for (size_t i = 0; i < sizeof fcp_results / sizeof fcp_results[0]; i++) {
    if (fcp_results[i].code == (int)result) {
      *str = fcp_results[i].name;
      return CUPTI_SUCCESS;
    }
  }
  *str = "<unknown>"; /* what NVIDIA's library answers */
  return CUPTI_ERROR_INVALID_PARAMETER;
}

/* Works without a driver in NVIDIA's library too; clients use it to name API records. */
FCP_EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name) {
  if (!name) return CUPTI_ERROR_INVALID_PARAMETER;
  *name = NULL;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < sizeof fcp_runtime_names / sizeof fcp_runtime_names[0])
    *name = fcp_runtime_names[cbid];
  else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < sizeof fcp_driver_names / sizeof fcp_driver_names[0])
    *name = fcp_driver_names[cbid];
  return *name ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

/* ---- subscriber (no callbacks are ever made; the activity API is what is modelled) ---- */

FCP_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *handle, CUpti_CallbackFunc callback, void *userdata) {
  int injected = env_result("FAKECUPTI_SUBSCRIBE_ERROR");
  if (injected) return (CUptiResult)injected;
  if (!handle) return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&control);
  CUptiResult r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  if (!subscribed) {
    subscriber = (struct CUpti_Subscriber_st){callback, userdata};
    subscribed = true;
    *handle = &subscriber;
    r = CUPTI_SUCCESS;
  }
  pthread_mutex_unlock(&control);
  return r;
}

static bool is_subscriber(CUpti_SubscriberHandle h) {
  pthread_mutex_lock(&control);
  bool ok = subscribed && h == &subscriber;
  pthread_mutex_unlock(&control);
  return ok;
}

FCP_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle h) {
  pthread_mutex_lock(&control);
  bool ok = subscribed && h == &subscriber;
  if (ok) subscribed = false;
  pthread_mutex_unlock(&control);
  return ok ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

FCP_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle h, CUpti_CallbackDomain domain) {
  (void)enable;
  if (!is_subscriber(h) || domain <= CUPTI_CB_DOMAIN_INVALID || domain >= CUPTI_CB_DOMAIN_SIZE)
    return CUPTI_ERROR_INVALID_PARAMETER;
  return CUPTI_SUCCESS;
}

FCP_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle h, CUpti_CallbackDomain domain,
                                           CUpti_CallbackId cbid) {
  (void)enable, (void)cbid;
  if (!is_subscriber(h) || domain <= CUPTI_CB_DOMAIN_INVALID || domain >= CUPTI_CB_DOMAIN_SIZE)
    return CUPTI_ERROR_INVALID_PARAMETER;
  return CUPTI_SUCCESS;
}

/* ---- activity kinds ---- */

/* The kinds this stand-in models (records) or accepts (no records: DRIVER, MEMCPY2, OVERHEAD). */
static bool modelled(CUpti_ActivityKind k) {
  switch (k) {
  case CUPTI_ACTIVITY_KIND_RUNTIME:
  case CUPTI_ACTIVITY_KIND_DRIVER:
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
  case CUPTI_ACTIVITY_KIND_MEMCPY:
  case CUPTI_ACTIVITY_KIND_MEMCPY2:
  case CUPTI_ACTIVITY_KIND_MEMSET:
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
  case CUPTI_ACTIVITY_KIND_OVERHEAD:
  case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
  case CUPTI_ACTIVITY_KIND_MEMORY2: return true;
  default: return false;
  }
}

static bool valid_kind(CUpti_ActivityKind k) {
  return k > CUPTI_ACTIVITY_KIND_INVALID && k < CUPTI_ACTIVITY_KIND_COUNT;
}

/* The observer is installed only while some kind is on, so the runtime is back on its fast path
 * outside recording windows, as a real application is once CUPTI's kinds are off. */
static CUptiResult set_kind(CUpti_ActivityKind kind, bool on) {
  pthread_mutex_lock(&control);
  uint64_t old = atomic_load(&fcp_mask), bit = 1ull << kind;
  uint64_t mask = on ? old | bit : old & ~bit;
  if (on && !old) fcp_observe(true);
  atomic_store(&fcp_mask, mask);
  if (old && !mask) fcp_observe(false);
  pthread_mutex_unlock(&control);
  return CUPTI_SUCCESS;
}

FCP_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  CUptiResult r = (CUptiResult)env_result("FAKECUPTI_ENABLE_ERROR");
  const char *only = getenv("FAKECUPTI_ENABLE_ERROR_KIND");
  if (only && *only && atol(only) != (long)kind) r = CUPTI_SUCCESS;
  if (r == CUPTI_SUCCESS) {
    if (!valid_kind(kind))
      r = CUPTI_ERROR_INVALID_KIND;
    else if (!modelled(kind))
      r = CUPTI_ERROR_NOT_COMPATIBLE;
    else if (!fcp_runtime_find())
      r = CUPTI_ERROR_UNKNOWN; /* NVIDIA's answer when there is no driver */
    else
      r = set_kind(kind, true);
  }
  log_line("enable %ld", (long)kind, (int)r);
  return r;
}

FCP_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  CUptiResult r = !valid_kind(kind)                      ? CUPTI_ERROR_INVALID_KIND
                  : modelled(kind) && fcp_runtime_find() ? set_kind(kind, false)
                                                         : CUPTI_SUCCESS; /* was never on */
  log_line("disable %ld", (long)kind, (int)r);
  return r;
}

/* Not a CUPTI call: which kinds are on, bit per CUpti_ActivityKind, for tests. */
FCP_EXPORT unsigned long long fakecupti_enabled_mask(void) {
  return atomic_load(&fcp_mask);
}

/* ---- buffers ---- */

FCP_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                                                      CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
  return fcp_register_buffers(funcBufferRequested, funcBufferCompleted);
}

FCP_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  log_line("flush %ld", (long)flag, 0);
  return fcp_flush(flag);
}

FCP_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId, size_t *dropped) {
  (void)context, (void)streamId; /* all records share one global queue, as since CUDA 6.0 */
  if (!dropped) return CUPTI_ERROR_INVALID_PARAMETER;
  *dropped = fcp_take_dropped(); /* "reset to zero when this function is called" */
  return CUPTI_SUCCESS;
}

/* Kinds off, observer gone, every buffer back to the client, subscription and clock reset: the
 * process runs as if CUPTI had never been attached, and may attach again. */
FCP_EXPORT CUptiResult cuptiFinalize(void) {
  log_line("finalize", 0, 0);
  pthread_mutex_lock(&control);
  if (atomic_load(&fcp_mask)) fcp_observe(false);
  atomic_store(&fcp_mask, 0);
  subscribed = false;
  atomic_store(&fcp_offset, offset_of(realtime_now));
  pthread_mutex_unlock(&control);
  fcp_buffers_finalize();
  return CUPTI_SUCCESS;
}

/* ---- external correlation ---- */

FCP_EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  return fcp_ext_push(kind, id);
}

FCP_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *lastId) {
  return fcp_ext_pop(kind, lastId);
}

/* ---- ids ---- */

/* fakecuda has no driver contexts, so no CUcontext can name one: NULL means the current device (as
 * CUPTI's NULL context means the current context); anything else is not a context of ours. */
FCP_EXPORT CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t *deviceId) {
  if (!deviceId) return CUPTI_ERROR_INVALID_PARAMETER;
  if (context) return CUPTI_ERROR_INVALID_CONTEXT;
  if (!fcp_runtime_find()) return CUPTI_ERROR_UNKNOWN;
  *deviceId = (uint32_t)fcp_rt.current_device();
  return CUPTI_SUCCESS;
}

/* Records use contextId = device + 1; without contexts there is nothing valid to pass here. */
FCP_EXPORT CUptiResult cuptiGetContextId(CUcontext context, uint32_t *contextId) {
  if (!contextId) return CUPTI_ERROR_INVALID_PARAMETER;
  (void)context;
  return CUPTI_ERROR_INVALID_CONTEXT;
}

FCP_EXPORT CUptiResult cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t perThreadStream,
                                          uint32_t *streamId) {
  (void)context;
  if (!streamId) return CUPTI_ERROR_INVALID_PARAMETER;
  if (!fcp_runtime_find()) return CUPTI_ERROR_UNKNOWN;
  /* In a per-thread build the NULL stream is the thread's default stream. */
  void *s = !stream && perThreadStream ? (void *)CU_STREAM_PER_THREAD : (void *)stream;
  *streamId = (uint32_t)fcp_rt.stream_id(s);
  return CUPTI_SUCCESS;
}

/* ---- record options ---- */

FCP_EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
    return CUPTI_ERROR_INVALID_PARAMETER;
  atomic_store(&fcp_thread_id_type, type);
  return CUPTI_SUCCESS;
}

FCP_EXPORT CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType *type) {
  if (!type) return CUPTI_ERROR_INVALID_PARAMETER;
  *type = (CUpti_ActivityThreadIdType)atomic_load(&fcp_thread_id_type);
  return CUPTI_SUCCESS;
}

FCP_EXPORT CUptiResult cuptiActivityEnableLatencyTimestamps(uint8_t enable) {
  atomic_store(&fcp_latency_timestamps, enable != 0);
  return CUPTI_SUCCESS;
}
