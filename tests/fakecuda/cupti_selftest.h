/*
 * cupti_selftest.h - what the two halves of the CUPTI stand-in's self-test share: the CHECK macro, the
 * CUPTI entry points (dlsym'ed from libcupti.so.13, as profilers reach CUPTI), the store of delivered
 * records with its buffer-callback switches, and the registered fake kernels.
 */
#ifndef CUPTI_SELFTEST_H
#define CUPTI_SELFTEST_H

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

extern int st_failures;
extern const char *st_mode;

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      printf("FAIL [%s] %s:%d: %s\n", st_mode, __FILE__, __LINE__, #cond);           \
      fflush(stdout);                                                                \
      st_failures++;                                                                 \
    }                                                                                \
  } while (0)
#define OK(call) CHECK((call) == cudaSuccess)
#define CUPTI_OK(call) CHECK((call) == CUPTI_SUCCESS)

/* Every CUPTI call the test makes, resolved by name: a missing export fails the load. */
#define ST_CUPTI_FUNCS(X)                                                                             \
  X(cuptiGetVersion) X(cuptiGetResultString) X(cuptiSubscribe) X(cuptiUnsubscribe) X(cuptiEnableDomain) \
  X(cuptiEnableCallback) X(cuptiActivityRegisterCallbacks) X(cuptiActivityEnable) X(cuptiActivityDisable) \
  X(cuptiActivityFlushAll) X(cuptiActivityGetNextRecord) X(cuptiActivityGetNumDroppedRecords)            \
  X(cuptiActivityRegisterTimestampCallback) X(cuptiActivityPushExternalCorrelationId)                   \
  X(cuptiActivityPopExternalCorrelationId) X(cuptiGetTimestamp) X(cuptiFinalize) X(cuptiGetDeviceId)     \
  X(cuptiGetContextId) X(cuptiGetStreamIdEx) X(cuptiSetThreadIdType) X(cuptiGetThreadIdType)             \
  X(cuptiActivityEnableLatencyTimestamps) X(cuptiGetCallbackName)

struct st_cupti {
#define ST_MEMBER(f) __typeof__(f) *f;
  ST_CUPTI_FUNCS(ST_MEMBER)
#undef ST_MEMBER
  unsigned long long (*enabled_mask)(void); /* fakecupti_enabled_mask */
};
extern struct st_cupti cu;

/* Loads the stand-in from the directory of this executable (never NVIDIA's, whatever the library
 * path says).  False, after a FAIL line, if it or one of its entry points is missing. */
bool st_load_cupti(void);
const char *st_dir(void); /* directory of this executable */

/* ---- delivered records ---- */

/* Registers the test's buffer callbacks.  Buffers are st_buf_size bytes; knobs below alter them. */
void st_register_buffers(void);
extern size_t st_buf_size;
extern _Atomic bool st_decline;         /* bufferRequested hands out no buffer */
extern _Atomic size_t st_max_records;   /* bufferRequested's maxNumRecords */
extern _Atomic bool st_flush_inside;    /* bufferCompleted calls cuptiActivityFlushAll (re-entry) */
extern _Atomic int st_deliveries;       /* bufferCompleted calls */
extern _Atomic int st_over_max;         /* buffers that held more records than maxNumRecords */

#define ST_REC_BYTES 256 /* larger than any record kind the stand-in writes */
struct st_rec {
  union {
    CUpti_Activity any;
    CUpti_ActivityAPI api;
    CUpti_ActivityKernel10 kernel;
    CUpti_ActivityMemcpy6 memcpy;
    CUpti_ActivityMemset4 memset;
    CUpti_ActivitySynchronization2 sync;
    CUpti_ActivityMemory4 memory;
    CUpti_ActivityExternalCorrelation ext;
    unsigned char bytes[ST_REC_BYTES];
  } u;
};

void st_clear(void);                 /* forgets the records delivered so far */
size_t st_count(void);
const struct st_rec *st_at(size_t i); /* in delivery order; valid until st_clear */
size_t st_count_kind(CUpti_ActivityKind kind);
const struct st_rec *st_api_by_corr(uint32_t corr); /* the RUNTIME record with that correlation id */

/* ---- fake kernels: host stubs registered the way nvcc's constructors do ---- */

extern const char *const st_name_a, *const st_name_b, *const st_name_slow;
void st_kern_a(void);
void st_kern_b(void);
void st_kern_slow(void);
void st_register_kernels(void);
cudaError_t st_launch(void (*kern)(void), unsigned grid, size_t shmem, cudaStream_t s);

/* ---- clocks ---- */
uint64_t st_mono(void);
uint64_t st_realtime(void);

/* ---- modes run by cupti_selftest_checks.c ---- */
void mode_records(void);
void mode_threads(void);

#endif /* CUPTI_SELFTEST_H */
