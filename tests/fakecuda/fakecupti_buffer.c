/*
 * fakecupti_buffer.c - the client's activity buffers, handled as CUPTI does: buffers come from the
 * client's bufferRequested callback, records are packed 8-byte aligned, a buffer that cannot take the
 * next record is completed, and bufferCompleted(NULL, 0, buffer, size, validSize) hands it back.
 * Records the client gives no room for are dropped and counted.  Also cuptiActivityGetNextRecord's
 * walk over a delivered buffer and the record size of every kind written here.
 *
 * Differences that matter to a client, and why: delivery happens synchronously on the thread that
 * filled the buffer or flushed (real CUPTI uses a worker thread for full buffers; a synchronous model
 * keeps tests deterministic).  Like CUPTI, a non-forced flush holds back a buffer while any of its GPU
 * records is still in flight on the simulated timeline, so a client that flushes without synchronizing
 * first misses records, as it would on a GPU.
 *
 * One mutex guards everything; it is never held while a client callback runs, so callbacks may call
 * back into CUPTI (a flush from bufferCompleted, a timestamp query from bufferRequested).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fakecupti_int.h"

#define FCP_ALIGN 8 /* ACTIVITY_RECORD_ALIGNMENT in cupti_common.h */
#define FCP_MAX_REQUESTS 2 /* per record: another thread may take the buffer we just got */

struct buf {
  uint8_t *base;
  size_t size; /* as the client gave it */
  size_t used; /* offset just past the last record; starts at the first aligned byte */
  size_t max_records; /* 0: no limit */
  size_t records;
  uint64_t complete; /* CLOCK_MONOTONIC time from which every record in it is final */
  struct buf *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc request_cb;
static CUpti_BuffersCallbackCompleteFunc complete_cb;
static struct buf *cur; /* being filled */
static struct buf *spare; /* received from the client, not yet used */
static struct buf *pending; /* completed, waiting for their records to be final; FIFO */
static struct buf **pending_tail = &pending;
static size_t dropped;

size_t fcp_record_size(CUpti_ActivityKind kind) {
  switch (kind) {
  case CUPTI_ACTIVITY_KIND_RUNTIME:
  case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
  case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
  case CUPTI_ACTIVITY_KIND_MEMCPY2: return sizeof(CUpti_ActivityMemcpyPtoP4);
  case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
  case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
  case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
  default: return 0;
  }
}

static size_t align_skip(const uint8_t *p) {
  return (size_t)(-(uintptr_t)p & (FCP_ALIGN - 1));
}

static bool fits(const struct buf *b, size_t size) {
  return b->used + size <= b->size && (b->max_records == 0 || b->records < b->max_records);
}

/* Caller holds lock. */
static void complete(struct buf *b) {
  b->next = NULL;
  *pending_tail = b;
  pending_tail = &b->next;
}

/* Unlinks the pending buffers that may go to the client now: those whose records are final, or all
 * of them when forced.  Caller holds lock. */
static struct buf *take_pending(bool forced) {
  if (!pending) return NULL;
  uint64_t now = forced ? 0 : fcp_mono_now();
  struct buf *out = NULL, **out_tail = &out;
  struct buf **pp = &pending;
  while (*pp) {
    struct buf *b = *pp;
    if (forced || b->complete <= now) {
      *pp = b->next;
      b->next = NULL;
      *out_tail = b;
      out_tail = &b->next;
    } else {
      pp = &b->next;
    }
  }
  pending_tail = pp;
  return out;
}

/* Runs without the lock: the client may re-enter. */
static void deliver(struct buf *list, CUpti_BuffersCallbackCompleteFunc done) {
  while (list) {
    struct buf *next = list->next;
    if (done) done(NULL, 0, list->base, list->size, list->used);
    free(list);
    list = next;
  }
}

/* Asks the client for a buffer, without the lock.  NULL when it declines. */
static struct buf *request(CUpti_BuffersCallbackRequestFunc req) {
  uint8_t *base = NULL;
  size_t size = 0, max_records = 0;
  req(&base, &size, &max_records);
  if (!base) return NULL;
  struct buf *b = calloc(1, sizeof *b);
  if (!b) return NULL; /* the client's buffer is lost with the record: only under memory exhaustion */
  b->base = base;
  b->size = size;
  b->used = align_skip(base) < size ? align_skip(base) : size;
  b->max_records = max_records;
  return b;
}

void fcp_record(const void *rec, size_t size, uint64_t complete_at) {
  struct buf *unusable = NULL;
  int requests = 0;
  pthread_mutex_lock(&lock);
  for (;;) {
    if (cur && fits(cur, size)) {
      memcpy(cur->base + cur->used, rec, size);
      cur->used += size;
      cur->records++;
      if (complete_at > cur->complete) cur->complete = complete_at;
      break;
    }
    if (cur) {
      complete(cur);
      cur = NULL;
    }
    if (spare) {
      cur = spare;
      spare = spare->next;
      continue;
    }
    CUpti_BuffersCallbackRequestFunc req = request_cb;
    if (!req || requests++ == FCP_MAX_REQUESTS) {
      dropped++;
      break;
    }
    pthread_mutex_unlock(&lock);
    struct buf *b = request(req);
    pthread_mutex_lock(&lock);
    if (!b) {
      dropped++;
      break;
    }
    if (b->used + size > b->size) {
      /* Too small to hold even this record: give it straight back (empty) rather than leak it. */
      dropped++;
      b->next = unusable;
      unusable = b;
      break;
    }
    b->next = spare;
    spare = b;
  }
  struct buf *ready = take_pending(false);
  CUpti_BuffersCallbackCompleteFunc done = complete_cb;
  pthread_mutex_unlock(&lock);
  deliver(unusable, done);
  deliver(ready, done);
}

CUptiResult fcp_register_buffers(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc done) {
  if (!req || !done) return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&lock);
  request_cb = req;
  complete_cb = done;
  pthread_mutex_unlock(&lock);
  return CUPTI_SUCCESS;
}

/* A default flush completes the current buffer only if it holds records that are all final (CUPTI:
 * "it returns all the activity buffers which have all the activity records completed"); a forced one
 * returns every buffer with records. */
CUptiResult fcp_flush(uint32_t flag) {
  bool forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
  pthread_mutex_lock(&lock);
  CUpti_BuffersCallbackCompleteFunc done = complete_cb;
  if (!done) {
    pthread_mutex_unlock(&lock);
    return CUPTI_ERROR_INVALID_OPERATION;
  }
  if (cur && cur->records && (forced || cur->complete <= fcp_mono_now())) {
    complete(cur);
    cur = NULL;
  }
  struct buf *ready = take_pending(forced);
  pthread_mutex_unlock(&lock);
  deliver(ready, done);
  return CUPTI_SUCCESS;
}

size_t fcp_take_dropped(void) {
  pthread_mutex_lock(&lock);
  size_t n = dropped;
  dropped = 0;
  pthread_mutex_unlock(&lock);
  return n;
}

/* CUPTI relinquishes every buffer at cuptiFinalize, empty ones included, so the client can free them. */
void fcp_buffers_finalize(void) {
  pthread_mutex_lock(&lock);
  if (cur) complete(cur);
  cur = NULL;
  while (spare) {
    struct buf *b = spare;
    spare = b->next;
    complete(b);
  }
  struct buf *all = take_pending(true);
  CUpti_BuffersCallbackCompleteFunc done = complete_cb;
  request_cb = NULL;
  complete_cb = NULL;
  pthread_mutex_unlock(&lock);
  deliver(all, done);
}

/* A child forked while another thread held the lock would otherwise deadlock on its first record. */
static void before_fork(void) {
  pthread_mutex_lock(&lock);
}
static void after_fork(void) {
  pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void buffer_init(void) {
  pthread_atfork(before_fork, after_fork, after_fork);
}

/* ---- iteration over a delivered buffer ---- */

FCP_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes,
                                                  CUpti_Activity **record) {
  if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
  uint8_t *end = buffer + validBufferSizeBytes, *p;
  if (!*record) {
    p = buffer + align_skip(buffer);
  } else {
    size_t prev = fcp_record_size((*record)->kind);
    if (!prev) return CUPTI_ERROR_INVALID_KIND;
    p = (uint8_t *)*record + prev;
  }
  if (p >= end) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  CUpti_ActivityKind kind;
  if ((size_t)(end - p) < sizeof kind) return CUPTI_ERROR_INVALID_KIND;
  memcpy(&kind, p, sizeof kind);
  size_t size = fcp_record_size(kind);
  if (!size || (size_t)(end - p) < size) return CUPTI_ERROR_INVALID_KIND; /* unknown or cut short */
  *record = (CUpti_Activity *)(void *)p;
  return CUPTI_SUCCESS;
}
