/*
 * cupti_selftest_checks.c - the record-level checks of `make fakecupti-check` (see cupti_selftest.c):
 *   records  one thread: every record kind's fields and correlation ids, per-stream ordering, CUPTI's
 *            clock, external correlation, kinds switched off, graphs, buffers held back until their GPU
 *            work is done, dropped records, ids, result strings, finalize, and the FAKECUPTI_LOG lines;
 *   threads  many threads and small buffers: nothing lost or duplicated, maxNumRecords honoured, a
 *            flush from inside bufferCompleted, and a client timestamp callback.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cupti_selftest.h"

#define INVALID CUPTI_SYNCHRONIZATION_INVALID_VALUE
#define KERNEL_NS 20000 /* FAKECUDA_KERNEL_NS set by the orchestrator */

static const CUpti_ActivityKind traced[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

static unsigned long long stream_id(cudaStream_t s) {
  unsigned long long id = 0;
  OK(cudaStreamGetId(s, &id));
  return id;
}

static const struct st_rec *nth_api(uint32_t cbid, int n) {
  for (size_t i = 0; i < st_count(); i++)
    if (st_at(i)->u.any.kind == CUPTI_ACTIVITY_KIND_RUNTIME && st_at(i)->u.api.cbid == cbid && n-- == 0)
      return st_at(i);
  return NULL;
}

static const struct st_rec *nth_kind(CUpti_ActivityKind kind, int n) {
  for (size_t i = 0; i < st_count(); i++)
    if (st_at(i)->u.any.kind == kind && n-- == 0) return st_at(i);
  return NULL;
}

/* GPU records on one stream must be serial: sort each stream's spans and compare neighbours. */
struct span {
  uint32_t stream;
  uint64_t start, end;
};
static int cmp_span(const void *a, const void *b) {
  const struct span *x = a, *y = b;
  if (x->stream != y->stream) return x->stream < y->stream ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}
static void check_streams_serial(void) {
  struct span sp[256];
  size_t n = 0;
  for (size_t i = 0; i < st_count() && n < 256; i++) {
    const struct st_rec *r = st_at(i);
    if (r->u.any.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
      sp[n++] = (struct span){r->u.kernel.streamId, r->u.kernel.start, r->u.kernel.end};
    else if (r->u.any.kind == CUPTI_ACTIVITY_KIND_MEMCPY)
      sp[n++] = (struct span){r->u.memcpy.streamId, r->u.memcpy.start, r->u.memcpy.end};
    else if (r->u.any.kind == CUPTI_ACTIVITY_KIND_MEMSET)
      sp[n++] = (struct span){r->u.memset.streamId, r->u.memset.start, r->u.memset.end};
  }
  qsort(sp, n, sizeof sp[0], cmp_span);
  for (size_t i = 1; i < n; i++)
    if (sp[i].stream == sp[i - 1].stream) CHECK(sp[i].start >= sp[i - 1].end);
}

static void check_kernels(const uint32_t *launch_corr, int launches, unsigned long long s1, unsigned long long s2) {
  CHECK(st_count_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == (size_t)launches);
  for (int i = 0; i < launches; i++) {
    const struct st_rec *api = st_api_by_corr(launch_corr[i]);
    const CUpti_ActivityKernel10 *k = NULL;
    for (size_t j = 0; j < st_count(); j++)
      if (st_at(j)->u.any.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
          st_at(j)->u.kernel.correlationId == launch_corr[i])
        k = &st_at(j)->u.kernel;
    CHECK(api && k);
    if (!api || !k) continue;
    CHECK(api->u.api.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    CHECK(k->start >= api->u.api.start && k->end - k->start == KERNEL_NS && k->completed == k->end);
    CHECK(k->streamId == (i % 2 ? s2 : s1));
    CHECK(!strcmp(k->name, i % 2 ? st_name_b : st_name_a));
    CHECK(k->gridX == 4 + i && k->gridY == 1 && k->blockX == 128 && k->blockZ == 1);
    CHECK(k->dynamicSharedMemory == 64 * i && k->staticSharedMemory == 0 && k->registersPerThread == 32);
    CHECK(k->deviceId == 0 && k->contextId == 1 && k->graphId == 0 && k->graphNodeId == 0);
    CHECK(k->queued == CUPTI_TIMESTAMP_UNKNOWN && k->submitted == CUPTI_TIMESTAMP_UNKNOWN);
  }
}

static void check_copies(uint32_t htod, uint32_t dtoh, uint32_t dtod, uint32_t set, unsigned long long s1,
                         unsigned long long s2, const void *dev) {
  CHECK(st_count_kind(CUPTI_ACTIVITY_KIND_MEMCPY) == 3 && st_count_kind(CUPTI_ACTIVITY_KIND_MEMSET) == 1);
  for (size_t i = 0; i < st_count(); i++) {
    const struct st_rec *r = st_at(i);
    if (r->u.any.kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const CUpti_ActivityMemcpy6 *m = &r->u.memcpy;
      const struct st_rec *api = st_api_by_corr(m->correlationId);
      CHECK(api && m->start >= api->u.api.start && m->runtimeCorrelationId == m->correlationId);
      CHECK(m->deviceId == 0 && m->contextId == 1 && m->copyCount == 1);
      if (m->correlationId == htod)
        CHECK(m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD && m->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED &&
              m->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE && m->bytes == 65536 &&
              m->flags == CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC && m->streamId == s1 &&
              m->end - m->start == 1500 + 3276); /* copy latency + bytes / 20 GB/s */
      else if (m->correlationId == dtoh)
        CHECK(m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH && m->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE &&
              m->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE && m->bytes == 4096 && m->flags == 0 &&
              m->streamId == 7 && api && api->u.api.end >= m->end); /* synchronous: waits for the copy */
      else if (m->correlationId == dtod)
        CHECK(m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD && m->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE &&
              m->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE && m->streamId == s2);
      else
        CHECK(!"memcpy record with an unexpected correlation id");
    } else if (r->u.any.kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const CUpti_ActivityMemset4 *m = &r->u.memset;
      CHECK(m->correlationId == set && m->value == 0x5a && m->bytes == 8192 && m->streamId == s2);
      CHECK(m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE && m->flags == CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC);
    } else if (r->u.any.kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
      const CUpti_ActivityMemory4 *m = &r->u.memory;
      const struct st_rec *api = st_api_by_corr(m->correlationId);
      CHECK(api && m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION);
      CHECK(m->processId == (uint32_t)getpid() && m->deviceId == 0 && m->contextId == 1 && !m->isAsync);
      if (api && api->u.api.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020)
        CHECK(m->address == (uintptr_t)dev && m->bytes == 1 << 20 &&
              m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
      else
        CHECK(api && api->u.api.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020 &&
              m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED && m->bytes == 65536);
      if (api) CHECK(m->timestamp >= api->u.api.start && m->timestamp <= api->u.api.end);
    }
  }
}

static void check_syncs(unsigned long long s1, unsigned long long s2) {
  static const struct {
    CUpti_ActivitySynchronizationType type;
    uint32_t cbid;
  } want[] = {
      {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020},
      {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020},
      {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020},
      {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020},
  };
  CHECK(st_count_kind(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) == 4);
  for (int i = 0; i < 4; i++) {
    const struct st_rec *r = nth_kind(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, i);
    if (!r) continue;
    const CUpti_ActivitySynchronization2 *s = &r->u.sync;
    const struct st_rec *api = st_api_by_corr(s->correlationId);
    CHECK(s->type == want[i].type && api && api->u.api.cbid == want[i].cbid);
    if (api) CHECK(s->start == api->u.api.start && s->end == api->u.api.end); /* spans the call */
    CHECK(s->contextId == 1 && s->returnValue == 0);
    bool stream = i == 0 || i == 2, event = i < 2;
    CHECK(s->streamId == (stream ? (i == 0 ? s2 : s1) : INVALID));
    CHECK(event ? s->cudaEventId != INVALID && s->cudaEventId != 0 : s->cudaEventId == INVALID);
  }
}

static void check_log(void) {
  FILE *f = fopen(getenv("FAKECUPTI_LOG"), "r");
  CHECK(f != NULL);
  if (!f) return;
  char line[256], what[64];
  unsigned long long t, prev = 0;
  long arg;
  bool on_kernel = false, off_kernel = false, flush0 = false, flush1 = false, fin = false, bad_enable = false;
  while (fgets(line, sizeof line, f)) {
    int n = sscanf(line, "%llu %63s %ld", &t, what, &arg);
    CHECK(n >= 2 && t >= prev && t <= st_mono());
    prev = t;
    on_kernel |=
        n == 3 && !strcmp(what, "enable") && arg == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && !strstr(line, "error");
    bad_enable |=
        n == 3 && !strcmp(what, "enable") && arg == CUPTI_ACTIVITY_KIND_PC_SAMPLING && strstr(line, " error 14");
    off_kernel |= n == 3 && !strcmp(what, "disable") && arg == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    flush0 |= n == 3 && !strcmp(what, "flush") && arg == 0;
    flush1 |= n == 3 && !strcmp(what, "flush") && arg == CUPTI_ACTIVITY_FLAG_FLUSH_FORCED;
    fin |= !strcmp(what, "finalize");
  }
  fclose(f);
  CHECK(on_kernel && off_kernel && flush0 && flush1 && fin && bad_enable);
}

static uint32_t corr_of(uint32_t cbid, int n) {
  const struct st_rec *r = nth_api(cbid, n);
  return r ? r->u.api.correlationId : 0;
}

static void api_and_misc(void) {
  uint32_t v;
  const char *s;
  CUPTI_OK(cu.cuptiGetVersion(&v));
  CHECK(v == CUPTI_API_VERSION);
  CUPTI_OK(cu.cuptiGetResultString(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, &s));
  CHECK(!strcmp(s, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"));
  CHECK(cu.cuptiGetResultString((CUptiResult)12345, &s) == CUPTI_ERROR_INVALID_PARAMETER);
  CUPTI_OK(
      cu.cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, &s));
  CHECK(!strcmp(s, "__cudaLaunchKernel_v13000"));
  CUPTI_OK(cu.cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuInit, &s));
  CHECK(!strcmp(s, "cuInit"));
  CHECK(cu.cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, 99999, &s) == CUPTI_ERROR_INVALID_PARAMETER);
  CHECK(cu.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_PC_SAMPLING) == CUPTI_ERROR_NOT_COMPATIBLE);
  CHECK(cu.cuptiActivityEnable((CUpti_ActivityKind)200) == CUPTI_ERROR_INVALID_KIND);
  uint8_t junk[64] = {0};
  CUpti_Activity *r = NULL;
  CHECK(cu.cuptiActivityGetNextRecord(NULL, 0, &r) == CUPTI_ERROR_INVALID_PARAMETER);
  CHECK(cu.cuptiActivityGetNextRecord(junk, 0, &r) == CUPTI_ERROR_MAX_LIMIT_REACHED);
  CHECK(cu.cuptiActivityGetNextRecord(junk, sizeof junk, &r) == CUPTI_ERROR_INVALID_KIND); /* kind 0 */
  uint64_t id;
  CHECK(cu.cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id) ==
        CUPTI_ERROR_QUEUE_EMPTY);
  CHECK(cu.cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_INVALID, 1) ==
        CUPTI_ERROR_INVALID_PARAMETER);
}

void mode_records(void) {
  if (!st_load_cupti()) return;
  uint64_t t0 = st_realtime();
  CUpti_SubscriberHandle sub, other;
  CUPTI_OK(cu.cuptiSubscribe(&sub, NULL, NULL));
  CHECK(cu.cuptiSubscribe(&other, NULL, NULL) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  CUPTI_OK(cu.cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API));
  CHECK(cu.cuptiActivityFlushAll(0) == CUPTI_ERROR_INVALID_OPERATION); /* no callbacks yet */
  st_register_buffers();
  st_register_kernels();
  api_and_misc();

  /* CUPTI's default thread id is pthread_self(); SYSTEM gives the kernel's thread id. */
  int ndev = 0;
  CUPTI_OK(cu.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
  OK(cudaGetDeviceCount(&ndev));
  CUPTI_OK(cu.cuptiActivityFlushAll(0));
  const struct st_rec *first = nth_api(CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020, 0);
  CHECK(first && first->u.api.threadId == (uint32_t)pthread_self() && first->u.api.processId == (uint32_t)getpid());
  CUPTI_OK(cu.cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM));
  CHECK(cu.cuptiActivityRegisterTimestampCallback(st_mono) == CUPTI_ERROR_INVALID_OPERATION); /* kinds on */

  for (size_t i = 0; i < sizeof traced / sizeof traced[0]; i++)
    CUPTI_OK(cu.cuptiActivityEnable(traced[i]));
  CHECK(cu.enabled_mask() == (1ull << CUPTI_ACTIVITY_KIND_RUNTIME | 1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL |
                              1ull << CUPTI_ACTIVITY_KIND_MEMCPY | 1ull << CUPTI_ACTIVITY_KIND_MEMSET |
                              1ull << CUPTI_ACTIVITY_KIND_SYNCHRONIZATION | 1ull << CUPTI_ACTIVITY_KIND_MEMORY2 |
                              1ull << CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
  st_clear();
  cudaStream_t s1, s2;
  OK(cudaStreamCreate(&s1));
  OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  unsigned long long id1 = stream_id(s1), id2 = stream_id(s2);
  float *dev;
  char *pinned;
  static char pageable[4096];
  OK(cudaMalloc((void **)&dev, 1 << 20));
  OK(cudaMallocHost((void **)&pinned, 65536));

  /* Eight launches over two streams, inside an external correlation range. */
  enum { LAUNCHES = 8 };
  uint32_t launch_corr[LAUNCHES];
  uint64_t last = 0;
  CUPTI_OK(cu.cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 77));
  for (int i = 0; i < LAUNCHES; i++)
    OK(st_launch(i % 2 ? st_kern_b : st_kern_a, 4 + (unsigned)i, 64 * (size_t)i, i % 2 ? s2 : s1));
  CUPTI_OK(cu.cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &last));
  CHECK(last == 77);
  OK(cudaMemcpyAsync(dev, pinned, 65536, cudaMemcpyHostToDevice, s1));
  OK(cudaMemcpy(pageable, dev, 4096, cudaMemcpyDeviceToHost));
  OK(cudaMemcpyAsync(dev + 8192, dev, 4096, cudaMemcpyDeviceToDevice, s2));
  OK(cudaMemsetAsync(dev, 0x5a, 8192, s2));
  cudaEvent_t ev;
  OK(cudaEventCreate(&ev));
  OK(cudaEventRecord(ev, s1));
  OK(cudaStreamWaitEvent(s2, ev, 0));
  OK(cudaEventSynchronize(ev));
  OK(cudaStreamSynchronize(s1));
  OK(cudaDeviceSynchronize());
  uint64_t now_cupti;
  CUPTI_OK(cu.cuptiGetTimestamp(&now_cupti));
  CUPTI_OK(cu.cuptiActivityFlushAll(0));

  for (int i = 0; i < LAUNCHES; i++) {
    const struct st_rec *r = nth_api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, i);
    launch_corr[i] = r ? r->u.api.correlationId : 0;
    if (i) CHECK(launch_corr[i] > launch_corr[i - 1]);
  }
  check_kernels(launch_corr, LAUNCHES, id1, id2);
  check_streams_serial();
  check_copies(corr_of(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 0),
               corr_of(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 0),
               corr_of(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 1),
               corr_of(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, 0), id1, id2, dev);
  check_syncs(id1, id2);
  /* One external record per API call inside the range, just before that call's API record. */
  CHECK(st_count_kind(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) == LAUNCHES);
  for (size_t i = 0; i + 1 < st_count(); i++) {
    const struct st_rec *r = st_at(i);
    if (r->u.any.kind != CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) continue;
    CHECK(r->u.ext.externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 && r->u.ext.externalId == 77);
    CHECK(st_at(i + 1)->u.any.kind == CUPTI_ACTIVITY_KIND_RUNTIME &&
          st_at(i + 1)->u.api.correlationId == r->u.ext.correlationId &&
          st_at(i + 1)->u.api.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
  }
  /* API records: this thread, CUPTI's clock (CLOCK_REALTIME), ordered by correlation id. */
  uint32_t prev_corr = 0;
  for (size_t i = 0; i < st_count(); i++) {
    const CUpti_ActivityAPI *a = &st_at(i)->u.api;
    if (a->kind != CUPTI_ACTIVITY_KIND_RUNTIME) continue;
    CHECK(a->threadId == (uint32_t)gettid() && a->start >= t0 && a->end >= a->start && a->end <= now_cupti);
    CHECK(a->correlationId > prev_corr && a->returnValue == 0);
    prev_corr = a->correlationId;
  }
  CHECK(now_cupti >= st_realtime() - 1000000000ull && now_cupti <= st_realtime());

  /* A kind switched off stops its records; the others go on. */
  CUPTI_OK(cu.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(!(cu.enabled_mask() & 1ull << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  st_clear();
  for (int i = 0; i < 3; i++)
    OK(st_launch(st_kern_a, 1, 0, s1));
  OK(cudaDeviceSynchronize());
  CUPTI_OK(cu.cuptiActivityFlushAll(0));
  CHECK(st_count_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == 0 &&
        nth_api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 2));
  CUPTI_OK(cu.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));

  /* Graph kernels: the cudaGraphLaunch call's correlation id, graph and node ids set. */
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  OK(st_launch(st_kern_a, 2, 0, s1));
  OK(st_launch(st_kern_b, 3, 0, s1));
  OK(cudaStreamEndCapture(s1, &graph));
  OK(cudaGraphInstantiate(&exec, graph, 0));
  st_clear();
  OK(cudaGraphLaunch(exec, s1));
  OK(cudaStreamSynchronize(s1));
  CUPTI_OK(cu.cuptiActivityFlushAll(0));
  const struct st_rec *gl = nth_api(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 0);
  const struct st_rec *g0 = nth_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 0),
                      *g1 = nth_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 1);
  CHECK(gl && g0 && g1 && st_count_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == 2);
  if (gl && g0 && g1) {
    CHECK(g0->u.kernel.correlationId == gl->u.api.correlationId &&
          g1->u.kernel.correlationId == gl->u.api.correlationId);
    CHECK(g0->u.kernel.graphId != 0 && g0->u.kernel.graphId == g1->u.kernel.graphId);
    CHECK(g0->u.kernel.graphNodeId && g1->u.kernel.graphNodeId &&
          g0->u.kernel.graphNodeId != g1->u.kernel.graphNodeId);
    CHECK(g1->u.kernel.start >= g0->u.kernel.end);
  }

  /* A default flush holds back a buffer while its GPU work runs; a forced one does not. */
  st_clear();
  CUPTI_OK(cu.cuptiActivityEnableLatencyTimestamps(1));
  OK(st_launch(st_kern_slow, 1, 0, s1)); /* 100 ms: FAKECUDA_KERNEL_NS_slow */
  CUPTI_OK(cu.cuptiActivityFlushAll(0));
  CHECK(st_count_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == 0);
  OK(cudaStreamSynchronize(s1));
  CUPTI_OK(cu.cuptiActivityFlushAll(0));
  const struct st_rec *slow = nth_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 0);
  CHECK(slow && !strcmp(slow->u.kernel.name, st_name_slow) && slow->u.kernel.end - slow->u.kernel.start == 100000000);
  CHECK(slow && slow->u.kernel.queued && slow->u.kernel.queued <= slow->u.kernel.submitted &&
        slow->u.kernel.submitted <= slow->u.kernel.start);
  st_clear();
  OK(st_launch(st_kern_slow, 1, 0, s1));
  CUPTI_OK(cu.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  CHECK(st_count_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == 1);
  OK(cudaDeviceSynchronize());

  /* No buffer from the client: records dropped and counted; the count resets when read. */
  size_t dropped = 99;
  CUPTI_OK(cu.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
  CHECK(dropped == 0);
  CUPTI_OK(cu.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  atomic_store(&st_decline, true);
  OK(st_launch(st_kern_a, 1, 0, s1)); /* a kernel record and an API record */
  atomic_store(&st_decline, false);
  CUPTI_OK(cu.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
  CHECK(dropped == 2);
  CUPTI_OK(cu.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
  CHECK(dropped == 0);

  /* Ids. */
  uint32_t sid = 0, did = 99, cid;
  CUPTI_OK(cu.cuptiGetStreamIdEx(NULL, (CUstream)s1, 0, &sid));
  CHECK(sid == id1);
  CUPTI_OK(cu.cuptiGetStreamIdEx(NULL, NULL, 0, &sid));
  CHECK(sid == 7);
  CUPTI_OK(cu.cuptiGetDeviceId(NULL, &did));
  CHECK(did == 0);
  CHECK(cu.cuptiGetContextId(NULL, &cid) == CUPTI_ERROR_INVALID_CONTEXT);

  /* Finalize: the release record of cudaFree is delivered, every kind is off, a new session may start. */
  OK(cudaGraphExecDestroy(exec));
  OK(cudaGraphDestroy(graph));
  OK(cudaEventDestroy(ev));
  OK(cudaStreamDestroy(s1));
  OK(cudaStreamDestroy(s2));
  OK(cudaFreeHost(pinned));
  st_clear();
  OK(cudaFree(dev));
  CUPTI_OK(cu.cuptiFinalize());
  const struct st_rec *rel = NULL; /* cudaFreeHost's release comes first, from the buffer still open */
  for (int i = 0; nth_kind(CUPTI_ACTIVITY_KIND_MEMORY2, i); i++)
    if (nth_kind(CUPTI_ACTIVITY_KIND_MEMORY2, i)->u.memory.address == (uintptr_t)dev)
      rel = nth_kind(CUPTI_ACTIVITY_KIND_MEMORY2, i);
  CHECK(rel && rel->u.memory.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE &&
        rel->u.memory.bytes == 1 << 20 && rel->u.memory.memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  CHECK(cu.enabled_mask() == 0);
  CUPTI_OK(cu.cuptiSubscribe(&sub, NULL, NULL));
  check_log();
}

/* ---- threads ---- */

enum { THREADS = 4, PER_THREAD = 250 };
static uint32_t tids[THREADS];

static void *launcher(void *arg) {
  int i = (int)(intptr_t)arg;
  tids[i] = (uint32_t)gettid();
  cudaStream_t s;
  OK(cudaStreamCreate(&s));
  for (int n = 0; n < PER_THREAD; n++)
    OK(st_launch(n % 2 ? st_kern_a : st_kern_b, 1, 0, s));
  OK(cudaStreamSynchronize(s));
  OK(cudaStreamDestroy(s));
  return NULL;
}

static uint64_t shifted_clock(void) {
  return st_mono() + 1000000000000000ull; /* far from any real clock: its use is unmistakable */
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

void mode_threads(void) {
  if (!st_load_cupti()) return;
  st_buf_size = 2048; /* about ten records per buffer: many buffers, filled from all threads */
  st_register_buffers();
  st_register_kernels();
  CUPTI_OK(cu.cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM));
  CUPTI_OK(cu.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
  CUPTI_OK(cu.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  atomic_store(&st_max_records, 7);
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, launcher, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  CUPTI_OK(cu.cuptiActivityFlushAll(0));
  CHECK(atomic_load(&st_deliveries) >= THREADS * PER_THREAD * 2 / 7 && atomic_load(&st_over_max) == 0);

  static uint32_t corr[THREADS * PER_THREAD];
  size_t nk = 0;
  for (size_t i = 0; i < st_count(); i++) {
    const struct st_rec *r = st_at(i);
    if (r->u.any.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && nk < THREADS * PER_THREAD) {
      corr[nk++] = r->u.kernel.correlationId;
      const struct st_rec *api = st_api_by_corr(r->u.kernel.correlationId);
      CHECK(api && api->u.api.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 &&
            r->u.kernel.start >= api->u.api.start);
      bool known = false;
      for (int t = 0; api && t < THREADS; t++)
        known |= api->u.api.threadId == tids[t];
      CHECK(known);
    }
  }
  CHECK(nk == THREADS * PER_THREAD && st_count_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == nk);
  qsort(corr, nk, sizeof corr[0], cmp_u32);
  for (size_t i = 1; i < nk; i++)
    CHECK(corr[i] != corr[i - 1]);
  check_streams_serial();
  size_t dropped = 1;
  CUPTI_OK(cu.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped));
  CHECK(dropped == 0);

  /* A flush from inside bufferCompleted must not deadlock (alarm() in main turns a hang into a failure). */
  atomic_store(&st_flush_inside, true);
  for (int n = 0; n < 20; n++)
    OK(st_launch(st_kern_a, 1, 0, NULL));
  OK(cudaDeviceSynchronize());
  CUPTI_OK(cu.cuptiActivityFlushAll(0));
  atomic_store(&st_flush_inside, false);

  /* The client's clock, registered while no kind is on, times every record. */
  CUPTI_OK(cu.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME));
  CUPTI_OK(cu.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CUPTI_OK(cu.cuptiActivityRegisterTimestampCallback(shifted_clock));
  CUPTI_OK(cu.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  st_clear();
  uint64_t before = shifted_clock();
  OK(st_launch(st_kern_a, 1, 0, NULL));
  OK(cudaDeviceSynchronize());
  uint64_t after = shifted_clock(), ts = 0;
  CUPTI_OK(cu.cuptiGetTimestamp(&ts));
  CUPTI_OK(cu.cuptiActivityFlushAll(0));
  const struct st_rec *k = nth_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 0);
  /* The offset is sampled once, so allow a few microseconds of sampling error. */
  CHECK(k && k->u.kernel.start + 5000 >= before && k->u.kernel.end <= after + 5000);
  CHECK(ts + 5000 >= after && ts <= shifted_clock() + 5000);
  CUPTI_OK(cu.cuptiFinalize());
}
