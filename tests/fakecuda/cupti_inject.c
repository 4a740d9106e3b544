/*
 * cupti_inject.c - the CUDA_INJECTION64_PATH library of `make fakecupti-check` (inject mode), shaped
 * like a profiler's: its InitializeInjection appends a line to $FAKECUPTI_TEST_MARKER (so the test can
 * count how often and when it ran), sets up CUPTI with RUNTIME records, and makes a runtime call of its
 * own (which must neither deadlock nor re-run the injection).  fakecupti_inject_seen(cbid) flushes and
 * reports how many API records with that cbid arrived, so the test can see that the program's very
 * first runtime call was recorded.
 */
#include <cupti.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static _Atomic int seen[CUPTI_RUNTIME_TRACE_CBID_SIZE];
static __typeof__(cuptiActivityGetNextRecord) *next_record;
static __typeof__(cuptiActivityFlushAll) *flush_all;

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *size = 1 << 16;
  *buffer = aligned_alloc(8, *size);
  *max_records = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity *r = NULL;
  while (next_record(buffer, valid, &r) == CUPTI_SUCCESS) {
    const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)r;
    if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME && a->cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE) seen[a->cbid]++;
  }
  free(buffer);
}

EXPORT int InitializeInjection(void) {
  const char *marker = getenv("FAKECUPTI_TEST_MARKER");
  FILE *f = marker ? fopen(marker, "a") : NULL;
  if (f) {
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
  }
  void *h = dlopen("libcupti.so.13", RTLD_NOW);
  if (!h) return 0;
  __typeof__(cuptiActivityRegisterCallbacks) *reg;
  __typeof__(cuptiActivityEnable) *enable;
  *(void **)&reg = dlsym(h, "cuptiActivityRegisterCallbacks");
  *(void **)&enable = dlsym(h, "cuptiActivityEnable");
  *(void **)&next_record = dlsym(h, "cuptiActivityGetNextRecord");
  *(void **)&flush_all = dlsym(h, "cuptiActivityFlushAll");
  if (!reg || !enable || !next_record || !flush_all) return 0;
  reg(requested, completed);
  enable(CUPTI_ACTIVITY_KIND_RUNTIME);
  int (*device_count)(int *);
  *(void **)&device_count = dlsym(RTLD_DEFAULT, "cudaGetDeviceCount");
  int n;
  if (device_count) device_count(&n);
  return 1;
}

EXPORT int fakecupti_inject_seen(uint32_t cbid) {
  if (!flush_all || cbid >= CUPTI_RUNTIME_TRACE_CBID_SIZE) return -1;
  flush_all(0);
  return seen[cbid];
}
